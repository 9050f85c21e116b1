/* SPDX-License-Identifier: MIT */
/*
 * aggring/io.h - asynchronous I/O on the ring of the calling worker.
 *
 * Every call takes the worker it runs on (agr_worker_current(), or
 * agr_exchange_worker() inside a dispatcher function), prepares one
 * operation on that worker's ring and returns at once. The kernel sees
 * it with the worker's next submit: at the end of the loop's turn, or
 * earlier, when the call finds AGR_SUBMIT_BATCH operations (default 4;
 * 0: never earlier) already waiting, so that the first of many
 * operations prepared in one turn does not wait for the last while the
 * device idles, and a few still share one system call. cb(res, arg)
 * then runs on the same worker thread with the CQE's result: >= 0 on
 * success (bytes, a file descriptor, ...), or a negative errno.
 *
 * Rules:
 * - Call only from the worker itself: from any other thread every call
 *   returns -EINVAL and touches no ring.
 * - Buffers, iovecs, paths and addresses belong to the kernel until cb
 *   runs: keep them alive and unchanged until then.
 * - If a call returns an error, cb is never called. If it returns 0, cb
 *   runs exactly once (for a multishot accept, once per connection and
 *   a last time without more to come), also when the worker is
 *   disposed: an immediate dispose cancels in-flight operations and
 *   their callbacks see -ECANCELED (or their real result if they had
 *   finished), before the worker thread ends.
 * - A full submission queue is flushed to the kernel and the call
 *   retried, up to four times; only a queue still full after that is
 *   reported, as -EBUSY.
 *
 * Errors of every call: -EINVAL (NULL worker or cb, or not called on
 * that worker; the log hook is told which, and from what thread),
 * -ESHUTDOWN (the worker is tearing down), -ECANCELED (called from the
 * callback of an operation that a dispatcher's force stop cancelled:
 * the message it serves is being stopped), -ENOMEM, -EBUSY (the
 * submission queue stayed full).
 */
#ifndef AGGRING_IO_H
#define AGGRING_IO_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <aggring/common.h>
#include <aggring/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring_sqe;
struct agr_buf_ring;

/* Completion of one operation, on the worker that submitted it. */
typedef void (*agr_io_cb)(int res, void *arg);

/*
 * The same with the CQE's flags (IORING_CQE_F_MORE: more CQEs of this
 * operation follow; IORING_CQE_F_BUFFER: a provided buffer was used,
 * its id in flags >> IORING_CQE_BUFFER_SHIFT; IORING_CQE_F_NOTIF: the
 * notification of a zero-copy send). A multishot operation keeps its
 * registration, and its `arg` must stay valid, until a CQE without
 * IORING_CQE_F_MORE.
 */
typedef void (*agr_io_cqe_cb)(int res, unsigned flags, void *arg);

/*
 * Names one operation for agr_io_cancel_op(): unique on its worker for
 * the life of the process, never 0.
 */
typedef uint64_t agr_io_id;

/* agr_io_params.flags */
#define AGR_IO_FIXED_FILE 0x1u /* fd is an index into the files
				* registered on the worker's ring */
#define AGR_IO_FIXED_BUF 0x2u  /* buf lies in registered buffer
				* buf_index (read, write, send_zc) */

/*
 * What the next agr_io_* call on this worker gets, set just before it
 * with agr_io_next(). Initialise with AGR_IO_PARAMS_INIT.
 */
typedef struct agr_io_params {
	size_t size;	     /* sizeof(agr_io_params) */
	unsigned flags;	     /* AGR_IO_* */
	unsigned buf_index;  /* with AGR_IO_FIXED_BUF */
	/*
	 * > 0: a linked timeout (IORING_OP_LINK_TIMEOUT): if the operation
	 * has not completed after timeout_ns, the kernel cancels it and
	 * its callback gets -ECANCELED (the kernel's report), or -EINTR for
	 * some operations. Not inside agr_io_chain().
	 */
	uint64_t timeout_ns;
	agr_io_cqe_cb cqe_cb; /* called instead of the call's cb, which may
			       * then be NULL */
	agr_io_id *id;	      /* out: the operation's id */
	uint64_t reserved[4];
} agr_io_params;

#define AGR_IO_PARAMS_INIT { .size = sizeof(agr_io_params) }

/*
 * Applies `p` to the next agr_io_* call made on `w` (only that one,
 * whether it succeeds or fails; or, for agr_io_sqe(), its SQE's flags
 * at agr_io_sqe_commit()). Returns 0 or -EINVAL (not on `w`, a bad
 * size, an unknown flag, a non-zero reserved word; logged).
 */
AGR_API int agr_io_next(agr_worker *w, const agr_io_params *p);

/*
 * Links the next `n` operations on `w` into one chain
 * (IOSQE_IO_LINK): each starts when the one before it has completed
 * successfully, and a failure cancels the rest (-ECANCELED). Room for
 * all `n` is made now, so a full SQ is flushed before the chain, never
 * inside it. Make the `n` calls at once, from the same handler or
 * callback, with nothing else submitted between them (no sends to a
 * dispatcher either); a chain left short at the callback's end ends at
 * its last operation (logged). A linked timeout (agr_io_next) cannot be
 * part of a chain (-EINVAL). Returns 0, -EINVAL (not on `w`, n < 2),
 * -EALREADY (a chain is open), -EBUSY (n exceeds the SQ).
 */
AGR_API int agr_io_chain(agr_worker *w, unsigned n);

/*
 * Cancels the one in-flight operation `id` (agr_io_params.id). Its
 * callback still runs, with -ECANCELED or its real result. Returns 0,
 * -ENOENT (not in flight: it completed already, or never was), -EINVAL
 * (not on `w`), -EBUSY (no SQE for the request).
 */
AGR_API int agr_io_cancel_op(agr_worker *w, agr_io_id id);

/*
 * A raw SQE for any other operation: prepare it with liburing's
 * io_uring_prep_*() but do not set its user_data. cb(res, arg) runs
 * with the CQE's result. The SQE is the worker's own copy, not yet in
 * the ring: it joins the ring when agr_io_sqe_commit() is called or the
 * handler, task or callback that took it returns, so the library never
 * submits it before it is prepared, and a full SQ is flushed without
 * it. Its place in the ring is therefore after the operations of later
 * agr_io_* calls made before the commit: to link it (IOSQE_IO_LINK) to
 * the next operation, set the flag, commit it, then make that call; the
 * two go to the kernel together. Prepare each raw SQE before taking the
 * next one is good practice, though each stays valid until it is
 * committed.
 */
AGR_API int agr_io_sqe(agr_worker *w, agr_io_cb cb, void *arg,
		       struct io_uring_sqe **sqe);

/*
 * Tells the worker that the raw SQEs handed out by agr_io_sqe() are
 * prepared: they join the ring now. Returns 0, -EINVAL (not on `w`),
 * -EALREADY (none waits).
 */
AGR_API int agr_io_sqe_commit(agr_worker *w);

/*
 * pread(2)/pwrite(2) at `offset` (-1: the file position). Short counts
 * reach cb as they are (end of file, a pipe or socket, a full disk, a
 * signal): res may be less than `len`, and aggring does not resubmit
 * the rest. The same holds for the vectored forms and agr_io_send().
 */
AGR_API int agr_io_read(agr_worker *w, int fd, void *buf, unsigned len,
			uint64_t offset, agr_io_cb cb, void *arg);
AGR_API int agr_io_write(agr_worker *w, int fd, const void *buf,
			 unsigned len, uint64_t offset, agr_io_cb cb,
			 void *arg);
AGR_API int agr_io_readv(agr_worker *w, int fd, const struct iovec *iov,
			 unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			 void *arg);
AGR_API int agr_io_writev(agr_worker *w, int fd, const struct iovec *iov,
			  unsigned iovcnt, uint64_t offset, agr_io_cb cb,
			  void *arg);

/* fsync(2); with AGR_IO_DATASYNC, fdatasync(2). */
#define AGR_IO_DATASYNC 1u
AGR_API int agr_io_fsync(agr_worker *w, int fd, unsigned flags,
			 agr_io_cb cb, void *arg);

/* openat(2): res is the new file descriptor. */
AGR_API int agr_io_openat(agr_worker *w, int dirfd, const char *path,
			  int flags, mode_t mode, agr_io_cb cb, void *arg);
AGR_API int agr_io_close(agr_worker *w, int fd, agr_io_cb cb, void *arg);

/* accept4(2): res is the connected socket. addr/addrlen may be NULL. */
AGR_API int agr_io_accept(agr_worker *w, int fd, struct sockaddr *addr,
			  socklen_t *addrlen, int flags, agr_io_cb cb,
			  void *arg);
/*
 * Multishot accept (Linux 5.19): cb runs once per accepted socket while
 * the operation stays armed. Like every multishot operation it ends on
 * the first CQE without IORING_CQE_F_MORE, whatever its res: an error
 * (-ECANCELED after agr_io_cancel(), for instance) or a new socket,
 * when the kernel could not post the next completion (the completion
 * queue was full) and ended the operation. agr_io_cb does not see the
 * flags, so this form cannot tell that last success from the others:
 * use agr_io_accept_multishot_cqe(), or pass a cqe_cb through
 * agr_io_next(), and arm again when a success comes without
 * IORING_CQE_F_MORE.
 */
AGR_API int agr_io_accept_multishot(agr_worker *w, int fd, int flags,
				    agr_io_cb cb, void *arg);
/*
 * agr_io_accept_multishot() whose cb sees the CQE's flags: res a new
 * socket with IORING_CQE_F_MORE while the operation stays armed; the
 * last call is the one without IORING_CQE_F_MORE, res a socket (the
 * kernel ended it, the completion queue being full: take the socket
 * and arm again) or an error (-ECANCELED after a cancel or a stop,
 * -EINVAL before Linux 5.19, -EMFILE and friends). Its errors are
 * those of every call, and -EINVAL for a NULL cb or AGR_IO_FIXED_BUF.
 */
AGR_API int agr_io_accept_multishot_cqe(agr_worker *w, int fd, int flags,
					agr_io_cqe_cb cb, void *arg);
AGR_API int agr_io_connect(agr_worker *w, int fd,
			   const struct sockaddr *addr, socklen_t addrlen,
			   agr_io_cb cb, void *arg);
/*
 * recv(2)/send(2); `flags` go to the kernel as they are. aggring adds
 * no MSG_NOSIGNAL: a send to a peer that has closed may raise SIGPIPE,
 * which kills the process by default. Pass MSG_NOSIGNAL or ignore
 * SIGPIPE.
 */
AGR_API int agr_io_recv(agr_worker *w, int fd, void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg);
AGR_API int agr_io_send(agr_worker *w, int fd, const void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg);

/*
 * Multishot receive (Linux 6.0) into buffers of the provided buffer
 * ring `br` (aggring/buf_ring.h) of this worker: cb runs once per
 * receive, res the byte count and the buffer's id in flags (see
 * agr_buf_ring_bid()), with IORING_CQE_F_MORE while it stays armed.
 * It ends with the first CQE without IORING_CQE_F_MORE, whatever its
 * res: 0 (the peer closed), -ENOBUFS (the ring ran out of buffers:
 * recycle, then arm again), -ECANCELED (agr_io_cancel_op(), a stop),
 * another error, or a byte count (the kernel ended it, the completion
 * queue being full, say: take the data and arm again).
 */
AGR_API int agr_io_recv_multishot(agr_worker *w, int fd,
				  struct agr_buf_ring *br, int flags,
				  agr_io_cqe_cb cb, void *arg);

/*
 * Zero-copy send (Linux 6.0): cb runs first with the byte count (or an
 * error) and, when the kernel will notify, IORING_CQE_F_MORE; then once
 * more with IORING_CQE_F_NOTIF when the kernel no longer reads `buf`.
 * Keep `buf` unchanged until that notification. Not every socket
 * supports it (-EOPNOTSUPP in the first call).
 */
AGR_API int agr_io_send_zc(agr_worker *w, int fd, const void *buf,
			   size_t len, int flags, agr_io_cqe_cb cb,
			   void *arg);

/*
 * A timer: res is -ETIME when `timeout_ns` has passed, -ECANCELED when
 * it was cancelled first.
 */
AGR_API int agr_io_timeout(agr_worker *w, uint64_t timeout_ns,
			   agr_io_cb cb, void *arg);

/*
 * Asks the kernel to cancel every in-flight operation of `w` whose
 * callback argument is `arg`. Their callbacks still run, with
 * -ECANCELED or, if they finished first, their real result. Returns the
 * number of operations asked to cancel (0 if none), -EINVAL (NULL `w`,
 * or not on that worker), or -EBUSY (the SQ stayed full before the
 * first cancel could be prepared).
 */
AGR_API int agr_io_cancel(agr_worker *w, void *arg);

/*
 * Operations of `w` prepared or submitted and not yet completed; from
 * another thread, a recent value. -EINVAL if NULL.
 */
AGR_API int agr_io_inflight(const agr_worker *w);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_IO_H */
