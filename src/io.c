/* SPDX-License-Identifier: MIT */
/*
 * io.c - asynchronous file, socket and timer operations on the calling
 * worker's ring. Each call prepares one SQE through agr__worker_sqe(),
 * which checks the thread, tracks the operation and routes its CQE.
 */
#include "vg.h"
#include "worker.h"

/* Logs why `fn` refuses its worker or callback: -EINVAL. */
static int bad_call(const char *fn, const struct agr_worker *w,
		    bool no_cb)
{
	if (!w)
		agr__log(AGR_LOG_ERROR, "%s: the worker is NULL; -EINVAL", fn);
	else if (w != agr__current_worker)
		agr__log(AGR_LOG_ERROR,
			 "%s: not on worker %s, whose ring it is (called from "
			 "%s); -EINVAL",
			 fn, w->thread_name,
			 agr__current_worker ? agr__current_worker->thread_name :
					       "a thread that is no worker");
	else if (no_cb)
		agr__log(AGR_LOG_ERROR, "%s: the callback is NULL; -EINVAL",
			 fn);
	return -EINVAL;
}

/* agr__worker_sqe(), with its -EINVAL explained. */
static int io_sqe(const char *fn, struct agr_worker *w, agr_io_cb cb,
		  void *arg, struct io_uring_sqe **sqe, struct agr__op **op)
{
	if (agr__unlikely(!w || w != agr__current_worker || !cb))
		return bad_call(fn, w, !cb);
	return agr__worker_sqe(w, cb, arg, sqe, op);
}

/* A NULL pointer argument `what` of `fn`: -EINVAL. */
static int null_argument(const char *fn, const char *what)
{
	agr__log(AGR_LOG_ERROR, "%s: %s is NULL; -EINVAL", fn, what);
	return -EINVAL;
}

AGR_API int agr_io_sqe(agr_worker *w, agr_io_cb cb, void *arg,
		       struct io_uring_sqe **sqe)
{
	int ret = sqe ? io_sqe(__func__, w, cb, arg, sqe, NULL) :
			null_argument(__func__, "sqe");

	if (ret == 0)
		w->raw_sqe_open = true; /* the caller prepares it later */
	return ret;
}

AGR_API int agr_io_read(agr_worker *w, int fd, void *buf, unsigned len,
			uint64_t offset, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0) {
		io_uring_prep_read(sqe, fd, buf, len, offset);
		agr__vg_kernel_writes(buf, len);
	}
	return ret;
}

AGR_API int agr_io_write(agr_worker *w, int fd, const void *buf,
			 unsigned len, uint64_t offset, agr_io_cb cb,
			 void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_write(sqe, fd, buf, len, offset);
	return ret;
}

AGR_API int agr_io_readv(agr_worker *w, int fd, const struct iovec *iov,
			 unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			 void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0) {
		io_uring_prep_readv(sqe, fd, iov, iovcnt, offset);
		agr__vg_kernel_writes_iov(iov, iovcnt);
	}
	return ret;
}

AGR_API int agr_io_writev(agr_worker *w, int fd, const struct iovec *iov,
			  unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			  void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_writev(sqe, fd, iov, iovcnt, offset);
	return ret;
}

AGR_API int agr_io_fsync(agr_worker *w, int fd, unsigned flags,
			 agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_fsync(sqe, fd,
				    (flags & AGR_IO_DATASYNC) ?
					    IORING_FSYNC_DATASYNC : 0);
	return ret;
}

AGR_API int agr_io_openat(agr_worker *w, int dirfd, const char *path,
			  int flags, mode_t mode, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (!path)
		return null_argument(__func__, "path");
	ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);
	if (ret == 0)
		io_uring_prep_openat(sqe, dirfd, path, flags, mode);
	return ret;
}

AGR_API int agr_io_close(agr_worker *w, int fd, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_close(sqe, fd);
	return ret;
}

AGR_API int agr_io_accept(agr_worker *w, int fd, struct sockaddr *addr,
			  socklen_t *addrlen, int flags, agr_io_cb cb,
			  void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0) {
		io_uring_prep_accept(sqe, fd, addr, addrlen, flags);
		if (addrlen)
			agr__vg_kernel_writes(addr, *addrlen);
	}
	return ret;
}

AGR_API int agr_io_accept_multishot(agr_worker *w, int fd, int flags,
				    agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, flags);
	return ret;
}

AGR_API int agr_io_connect(agr_worker *w, int fd,
			   const struct sockaddr *addr, socklen_t addrlen,
			   agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (!addr)
		return null_argument(__func__, "addr");
	ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);
	if (ret == 0)
		io_uring_prep_connect(sqe, fd, addr, addrlen);
	return ret;
}

AGR_API int agr_io_recv(agr_worker *w, int fd, void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0) {
		io_uring_prep_recv(sqe, fd, buf, len, flags);
		agr__vg_kernel_writes(buf, len);
	}
	return ret;
}

AGR_API int agr_io_send(agr_worker *w, int fd, const void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, NULL);

	if (ret == 0)
		io_uring_prep_send(sqe, fd, buf, len, flags);
	return ret;
}

AGR_API int agr_io_timeout(agr_worker *w, uint64_t timeout_ns,
			   agr_io_cb cb, void *arg)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = io_sqe(__func__, w, cb, arg, &sqe, &op);

	if (ret)
		return ret;
	/* The timespec lives in the op: the kernel reads it until the CQE. */
	op->ts.tv_sec = (long long)(timeout_ns / 1000000000u);
	op->ts.tv_nsec = (long long)(timeout_ns % 1000000000u);
	io_uring_prep_timeout(sqe, &op->ts, 0, 0);
	return 0;
}

AGR_API int agr_io_cancel(agr_worker *w, void *arg)
{
	if (!w || w != agr__current_worker)
		return bad_call(__func__, w, false);
	return agr__worker_cancel_ops(w, arg, AGR__MATCH_ARG);
}

AGR_API int agr_io_inflight(const agr_worker *w)
{
	/* The atomic copy: callable from any thread. */
	return w ? (int)atomic_load_explicit(&w->inflight_now,
					     memory_order_relaxed) :
		   -EINVAL;
}
