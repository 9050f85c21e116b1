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
 * -ESHUTDOWN (the worker is tearing down), -ENOMEM, -EBUSY (the
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

/* Completion of one operation, on the worker that submitted it. */
typedef void (*agr_io_cb)(int res, void *arg);

/*
 * A raw SQE for any other operation: prepare it with liburing's
 * io_uring_prep_*() but do not set its user_data. cb(res, arg) runs
 * with the CQE's result. The SQE must be prepared before the caller
 * returns to the worker's loop; until then nothing is submitted early.
 */
AGR_API int agr_io_sqe(agr_worker *w, agr_io_cb cb, void *arg,
		       struct io_uring_sqe **sqe);

/* pread(2)/pwrite(2) at `offset` (-1: the file position). */
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
 * the operation stays armed; it ends with a last call whose res is an
 * error (-ECANCELED after agr_io_cancel(), for instance).
 */
AGR_API int agr_io_accept_multishot(agr_worker *w, int fd, int flags,
				    agr_io_cb cb, void *arg);
AGR_API int agr_io_connect(agr_worker *w, int fd,
			   const struct sockaddr *addr, socklen_t addrlen,
			   agr_io_cb cb, void *arg);
AGR_API int agr_io_recv(agr_worker *w, int fd, void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg);
AGR_API int agr_io_send(agr_worker *w, int fd, const void *buf, size_t len,
			int flags, agr_io_cb cb, void *arg);

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
 * number of operations asked to cancel (0 if none), or an error.
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
