/* SPDX-License-Identifier: MIT */
/*
 * io.c - asynchronous file, socket and timer operations on the calling
 * worker's ring. Each call takes one SQE through agr__worker_sqe(),
 * which checks the thread, tracks the operation and routes its CQE,
 * prepares it, and hands it back through agr__worker_finish(), which
 * applies what agr_io_next() and agr_io_chain() asked for.
 */
#include "vg.h"
#include "worker.h"

#include <aggring/buf_ring.h>

/* The flags agr_io_next() takes. */
#define NEXT_FLAGS (AGR_IO_FIXED_FILE | AGR_IO_FIXED_BUF)

/* Logs why `fn` refuses its worker or callback: -EINVAL. */
static int bad_call(const char *fn, const agr_worker *w, bool no_cb)
{
	if (!w)
		agr__log(AGR_LOG_ERROR, "%s: the worker is NULL; -EINVAL", fn);
	else if (w != agr__current_worker)
		agr__log(AGR_LOG_ERROR,
			 "%s: not on worker %s, whose ring it is (called from "
			 "%s); -EINVAL",
			 fn, agr__worker_name(w),
			 agr__current_worker ?
				 agr__worker_name(agr__current_worker) :
				 "a thread that is no worker");
	else if (no_cb)
		agr__log(AGR_LOG_ERROR, "%s: the callback is NULL; -EINVAL",
			 fn);
	return -EINVAL;
}

static bool on_worker(const agr_worker *w, const char *fn)
{
	if (w && w == agr__current_worker)
		return true;
	bad_call(fn, w, false);
	return false;
}

/* A NULL pointer argument `what` of `fn`: -EINVAL. */
static int null_argument(agr_worker *w, const char *fn, const char *what)
{
	agr__log(AGR_LOG_ERROR, "%s: %s is NULL; -EINVAL", fn, what);
	if (w && w == agr__current_worker)
		agr__worker_abandon(w);
	return -EINVAL;
}

/* agr__worker_sqe(), with its -EINVAL explained. */
static int io_sqe(const char *fn, struct agr_worker *w, agr_io_cb cb,
		  void *arg, struct io_uring_sqe **sqe, struct agr__op **op)
{
	if (agr__unlikely(!w || w != agr__current_worker ||
			  (!cb && !agr__worker_next(w)->cqe_cb))) {
		if (w && w == agr__current_worker)
			agr__worker_abandon(w);
		return bad_call(fn, w, !cb);
	}
	return agr__worker_sqe(w, cb, arg, sqe, op);
}

AGR_API int agr_io_next(agr_worker *w, const agr_io_params *p)
{
	struct agr__io_next n = { 0 };
	size_t i;

	if (!on_worker(w, "agr_io_next"))
		return -EINVAL;
	if (!p || p->size < offsetof(agr_io_params, reserved) ||
	    (p->flags & ~NEXT_FLAGS)) {
		agr__log(AGR_LOG_ERROR, "agr_io_next: %s",
			 !p ? "params is NULL" :
			 p->size < offsetof(agr_io_params, reserved) ?
			      "params.size is too small: use "
			      "AGR_IO_PARAMS_INIT" :
			      "params.flags has a flag aggring does not know");
		return -EINVAL;
	}
	for (i = 0; p->size >= sizeof(*p) && i < 4; i++)
		if (p->reserved[i]) {
			agr__log(AGR_LOG_ERROR, "agr_io_next: params.reserved "
				 "must be zero");
			return -EINVAL;
		}
	n.flags = p->flags;
	n.buf_index = p->buf_index;
	n.timeout_ns = p->timeout_ns;
	n.cqe_cb = p->cqe_cb;
	n.id = p->id;
	agr__worker_set_next(w, &n);
	return 0;
}

AGR_API int agr_io_chain(agr_worker *w, unsigned n)
{
	if (!on_worker(w, "agr_io_chain"))
		return -EINVAL;
	if (n < 2) {
		agr__log(AGR_LOG_ERROR, "agr_io_chain: n=%u; a chain links "
			 "two operations or more", n);
		return -EINVAL;
	}
	return agr__worker_chain(w, n);
}

AGR_API int agr_io_cancel_op(agr_worker *w, agr_io_id id)
{
	if (!on_worker(w, "agr_io_cancel_op"))
		return -EINVAL;
	return agr__worker_cancel_id(w, id);
}

static int with_cqe_cb(agr_worker *w, const char *call, agr_io_cqe_cb cb);

/* Refuses what agr_io_next() asked that this call cannot do. */
static int refuse_next(agr_worker *w, const char *call, unsigned unsupported)
{
	const struct agr__io_next *n;

	if (w != agr__current_worker)
		return 0; /* agr__worker_sqe() refuses it */
	n = agr__worker_next(w);
	if (!(n->flags & unsupported))
		return 0;
	agr__log(AGR_LOG_ERROR, "%s: agr_io_next() asked for %s, which this "
		 "call does not support", call,
		 (n->flags & unsupported & AGR_IO_FIXED_BUF) ?
			 "AGR_IO_FIXED_BUF" : "AGR_IO_FIXED_FILE");
	agr__worker_abandon(w);
	return -EINVAL;
}

static bool fixed_buf(agr_worker *w, unsigned *index)
{
	const struct agr__io_next *n = agr__worker_next(w);

	*index = n->buf_index;
	return n->flags & AGR_IO_FIXED_BUF;
}

AGR_API int agr_io_sqe(agr_worker *w, agr_io_cb cb, void *arg,
		       struct io_uring_sqe **sqe)
{
	int ret = w ? refuse_next(w, "agr_io_sqe", AGR_IO_FIXED_BUF) : 0;

	if (!ret && w && w == agr__current_worker &&
	    (agr__worker_next(w)->timeout_ns || agr__worker_in_chain(w))) {
		agr__log(AGR_LOG_ERROR, "agr_io_sqe: a raw SQE cannot take a "
			 "linked timeout or be part of agr_io_chain(); set "
			 "IOSQE_IO_LINK and prepare the timeout yourself");
		agr__worker_abandon(w);
		ret = -EINVAL;
	}
	if (ret)
		return ret;
	if (!sqe)
		return null_argument(w, __func__, "sqe");
	if (!w || w != agr__current_worker ||
	    (!cb && !agr__worker_next(w)->cqe_cb))
		return bad_call(__func__, w, !cb);
	return agr__worker_raw_sqe(w, cb, arg, sqe);
}

AGR_API int agr_io_sqe_commit(agr_worker *w)
{
	if (!on_worker(w, "agr_io_sqe_commit"))
		return -EINVAL;
	return agr__worker_commit_raw(w);
}

AGR_API int agr_io_read(agr_worker *w, int fd, void *buf, unsigned len,
			uint64_t offset, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	unsigned index;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, &op);

	if (ret)
		return ret;
	if (fixed_buf(w, &index))
		io_uring_prep_read_fixed(sqe, fd, buf, len, offset,
					 (int)index);
	else
		io_uring_prep_read(sqe, fd, buf, len, offset);
	agr__vg_kernel_writes(buf, len);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_write(agr_worker *w, int fd, const void *buf,
			 unsigned len, uint64_t offset, agr_io_cb cb,
			 void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	unsigned index;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, &op);

	if (ret)
		return ret;
	if (fixed_buf(w, &index))
		io_uring_prep_write_fixed(sqe, fd, buf, len, offset,
					  (int)index);
	else
		io_uring_prep_write(sqe, fd, buf, len, offset);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_readv(agr_worker *w, int fd, const struct iovec *iov,
			 unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			 void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_readv", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_readv(sqe, fd, iov, iovcnt, offset);
	agr__vg_kernel_writes_iov(iov, iovcnt);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_writev(agr_worker *w, int fd, const struct iovec *iov,
			  unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			  void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_writev", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_writev(sqe, fd, iov, iovcnt, offset);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_fsync(agr_worker *w, int fd, unsigned flags,
			 agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_fsync", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_fsync(sqe, fd,
			    (flags & AGR_IO_DATASYNC) ? IORING_FSYNC_DATASYNC :
							0);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_openat(agr_worker *w, int dirfd, const char *path,
			  int flags, mode_t mode, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret;

	if (!path)
		return null_argument(w, __func__, "path");
	ret = w ? refuse_next(w, "agr_io_openat",
			      AGR_IO_FIXED_BUF | AGR_IO_FIXED_FILE) :
		  0;
	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_openat(sqe, dirfd, path, flags, mode);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_close(agr_worker *w, int fd, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_close",
				  AGR_IO_FIXED_BUF | AGR_IO_FIXED_FILE) :
		      0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_close(sqe, fd);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_accept(agr_worker *w, int fd, struct sockaddr *addr,
			  socklen_t *addrlen, int flags, agr_io_cb cb,
			  void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_accept", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_accept(sqe, fd, addr, addrlen, flags);
	if (addrlen)
		agr__vg_kernel_writes(addr, *addrlen);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_accept_multishot(agr_worker *w, int fd, int flags,
				    agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_accept_multishot",
				  AGR_IO_FIXED_BUF) :
		      0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, flags);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_accept_multishot_cqe(agr_worker *w, int fd, int flags,
					agr_io_cqe_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = with_cqe_cb(w, "agr_io_accept_multishot_cqe", cb);

	if (ret || (ret = refuse_next(w, "agr_io_accept_multishot_cqe",
				      AGR_IO_FIXED_BUF)) ||
	    (ret = io_sqe(__func__, w, NULL, arg, &sqe, &op)))
		return ret;
	io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, flags);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_connect(agr_worker *w, int fd,
			   const struct sockaddr *addr, socklen_t addrlen,
			   agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret;

	if (!addr)
		return null_argument(w, __func__, "addr");
	ret = w ? refuse_next(w, "agr_io_connect", AGR_IO_FIXED_BUF) : 0;
	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_connect(sqe, fd, addr, addrlen);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_recv(agr_worker *w, int fd, void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_recv", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_recv(sqe, fd, buf, len, flags);
	agr__vg_kernel_writes(buf, len);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_send(agr_worker *w, int fd, const void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_send", AGR_IO_FIXED_BUF) : 0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	io_uring_prep_send(sqe, fd, buf, len, flags);
	return agr__worker_finish(w, op, sqe);
}

/* Multishot and zero-copy forms report CQE flags: they need cqe_cb. */
static int with_cqe_cb(agr_worker *w, const char *call, agr_io_cqe_cb cb)
{
	agr_io_params p = AGR_IO_PARAMS_INIT;
	const struct agr__io_next *n;

	if (!on_worker(w, call))
		return -EINVAL;
	if (!cb) {
		agr__worker_abandon(w);
		return bad_call(call, w, true);
	}
	n = agr__worker_next(w);
	p.flags = n->flags;
	p.buf_index = n->buf_index;
	p.timeout_ns = n->timeout_ns;
	p.id = n->id;
	p.cqe_cb = cb;
	return agr_io_next(w, &p);
}

AGR_API int agr_io_recv_multishot(agr_worker *w, int fd,
				  struct agr_buf_ring *br, int flags,
				  agr_io_cqe_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret;

	if (w && !br)
		return null_argument(w, __func__, "br"); /* forgets next */
	if (br && agr_buf_ring_worker(br) != w) {
		agr__log(AGR_LOG_ERROR, "agr_io_recv_multishot: the buffer "
			 "ring belongs to another worker");
		if (w && w == agr__current_worker)
			agr__worker_abandon(w);
		return -EINVAL;
	}
	ret = with_cqe_cb(w, "agr_io_recv_multishot", cb);
	if (ret || (ret = refuse_next(w, "agr_io_recv_multishot",
				      AGR_IO_FIXED_BUF)) ||
	    (ret = io_sqe(__func__, w, NULL, arg, &sqe, &op)))
		return ret;
	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, flags);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = agr_buf_ring_group(br);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_send_zc(agr_worker *w, int fd, const void *buf,
			   size_t len, int flags, agr_io_cqe_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	unsigned index;
	int ret = with_cqe_cb(w, "agr_io_send_zc", cb);

	if (ret || (ret = io_sqe(__func__, w, NULL, arg, &sqe, &op)))
		return ret;
	if (fixed_buf(w, &index))
		io_uring_prep_send_zc_fixed(sqe, fd, buf, len, flags, 0,
					    index);
	else
		io_uring_prep_send_zc(sqe, fd, buf, len, flags, 0);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_timeout(agr_worker *w, uint64_t timeout_ns,
			   agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct __kernel_timespec *ts;
	struct agr__op *op;
	int ret = w ? refuse_next(w, "agr_io_timeout",
				  AGR_IO_FIXED_BUF | AGR_IO_FIXED_FILE) :
		      0;

	if (ret || (ret = io_sqe(__func__, w, cb, arg, &sqe, &op)))
		return ret;
	/* The timespec lives in the op: the kernel reads it until the CQE. */
	ts = agr__op_timespec(op);
	ts->tv_sec = (long long)(timeout_ns / 1000000000u);
	ts->tv_nsec = (long long)(timeout_ns % 1000000000u);
	io_uring_prep_timeout(sqe, ts, 0, 0);
	return agr__worker_finish(w, op, sqe);
}

AGR_API int agr_io_cancel(agr_worker *w, void *arg)
{
	if (!on_worker(w, "agr_io_cancel"))
		return -EINVAL;
	return agr__worker_cancel_ops(w, arg, AGR__MATCH_ARG);
}

AGR_API int agr_io_inflight(const agr_worker *w)
{
	/* The atomic copy: callable from any thread. */
	return w ? agr__worker_inflight(w) : -EINVAL;
}
