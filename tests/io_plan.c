/* SPDX-License-Identifier: MIT */
/*
 * io_plan.c - check_io's plans: a list of operations issued step by
 * step on one worker, each step's result and buffers kept for the test
 * thread, which waits for the whole plan on a latch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* struct statx */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring.h>

#include "io_test.h"
#include "testutil.h"

/* ---- a plan: operations issued step by step on one worker ---- */

static const char *const op_names[] = {
	[OP_READ] = "read",	  [OP_WRITE] = "write",
	[OP_READV] = "readv",	  [OP_WRITEV] = "writev",
	[OP_FSYNC] = "fsync",	  [OP_OPENAT] = "openat",
	[OP_CLOSE] = "close",	  [OP_ACCEPT] = "accept",
	[OP_CONNECT] = "connect", [OP_RECV] = "recv",
	[OP_SEND] = "send",	  [OP_TIMEOUT] = "timeout",
	[OP_NOP] = "raw nop",	  [OP_STATX] = "raw statx",
	[OP_FALLOCATE] = "raw fallocate",
};

#define NOT_RUN INT_MIN

struct op op_read(int *fd, void *dst, unsigned len, uint64_t off,
		  int want)
{
	return (struct op){ .kind = OP_READ, .fd = fd, .dst = dst,
			    .len = len, .off = off, .want = want };
}

struct op op_write(int *fd, const char *text, uint64_t off)
{
	unsigned len = (unsigned)strlen(text);

	return (struct op){ .kind = OP_WRITE, .fd = fd, .src = text,
			    .len = len, .off = off, .want = (int)len };
}

struct op op_readv(int *fd, const struct iovec *iov, unsigned n,
		   uint64_t off, int want)
{
	return (struct op){ .kind = OP_READV, .fd = fd, .iov = iov,
			    .iovcnt = n, .off = off, .want = want };
}

struct op op_writev(int *fd, const struct iovec *iov, unsigned n,
		    uint64_t off, int want)
{
	return (struct op){ .kind = OP_WRITEV, .fd = fd, .iov = iov,
			    .iovcnt = n, .off = off, .want = want };
}

struct op op_fsync(int *fd, unsigned flags, int want)
{
	return (struct op){ .kind = OP_FSYNC, .fd = fd, .flags = (int)flags,
			    .want = want };
}

struct op op_openat(int *dir, const char *path, int flags,
		    int *save, int want)
{
	return (struct op){ .kind = OP_OPENAT, .fd = dir, .path = path,
			    .flags = flags, .save = save, .want = want };
}

struct op op_close(int *fd, int want)
{
	return (struct op){ .kind = OP_CLOSE, .fd = fd, .want = want };
}

struct op op_accept(int *fd, struct sockaddr *addr, socklen_t *len,
		    int *save)
{
	return (struct op){ .kind = OP_ACCEPT, .fd = fd, .addr = addr,
			    .addrlen = len, .flags = SOCK_CLOEXEC,
			    .save = save, .want = WANT_FD };
}

struct op op_connect(int *fd, struct sockaddr *addr, socklen_t *len,
		     int want)
{
	return (struct op){ .kind = OP_CONNECT, .fd = fd, .addr = addr,
			    .addrlen = len, .want = want };
}

struct op op_recv(int *fd, void *dst, unsigned len, int want)
{
	return (struct op){ .kind = OP_RECV, .fd = fd, .dst = dst,
			    .len = len, .want = want };
}

/* MSG_NOSIGNAL: a reset peer must not kill the test with SIGPIPE. */
struct op op_send(int *fd, const char *text, int want)
{
	return (struct op){ .kind = OP_SEND, .fd = fd, .src = text,
			    .len = (unsigned)strlen(text),
			    .flags = MSG_NOSIGNAL, .want = want };
}

struct op op_timeout(uint64_t ns, int want)
{
	return (struct op){ .kind = OP_TIMEOUT, .off = ns, .want = want };
}

struct op op_nop(void)
{
	return (struct op){ .kind = OP_NOP, .want = 0 };
}

struct op op_statx(int *dir, const char *path, struct statx *stx)
{
	return (struct op){ .kind = OP_STATX, .fd = dir, .path = path,
			    .dst = stx, .want = 0 };
}

struct op op_fallocate(int *fd, uint64_t off, unsigned len)
{
	return (struct op){ .kind = OP_FALLOCATE, .fd = fd, .off = off,
			    .len = len, .want = 0 };
}

struct op with_next(struct op o)
{
	o.with_next = true;
	return o;
}

struct run;

static void op_done(int res, void *arg);

/* The ops that agr_io has no function for: OP_NOP, OP_STATX, OP_FALLOCATE. */
static void prep_raw(struct io_uring_sqe *sqe, const struct op *op, int fd)
{
	if (op->kind == OP_STATX)
		io_uring_prep_statx(sqe, fd, op->path, 0, STATX_SIZE, op->dst);
	else if (op->kind == OP_FALLOCATE)
		io_uring_prep_fallocate(sqe, fd, 0, (off_t)op->off,
					(off_t)op->len);
	else
		io_uring_prep_nop(sqe);
}

static int issue(agr_worker *w, const struct op *op, void *arg)
{
	struct io_uring_sqe *sqe = NULL;
	int fd = op->fd ? *op->fd : -1;
	int ret;

	switch (op->kind) {
	case OP_READ:
		return agr_io_read(w, fd, op->dst, op->len, op->off, op_done,
				   arg);
	case OP_WRITE:
		return agr_io_write(w, fd, op->src, op->len, op->off, op_done,
				    arg);
	case OP_READV:
		return agr_io_readv(w, fd, op->iov, op->iovcnt, op->off,
				    op_done, arg);
	case OP_WRITEV:
		return agr_io_writev(w, fd, op->iov, op->iovcnt, op->off,
				     op_done, arg);
	case OP_FSYNC:
		return agr_io_fsync(w, fd, (unsigned)op->flags, op_done, arg);
	case OP_OPENAT:
		return agr_io_openat(w, fd, op->path, op->flags, 0600, op_done,
				     arg);
	case OP_CLOSE:
		return agr_io_close(w, fd, op_done, arg);
	case OP_ACCEPT:
		return agr_io_accept(w, fd, op->addr, op->addrlen, op->flags,
				     op_done, arg);
	case OP_CONNECT:
		return agr_io_connect(w, fd, op->addr, *op->addrlen, op_done,
				      arg);
	case OP_RECV:
		return agr_io_recv(w, fd, op->dst, op->len, op->flags, op_done,
				   arg);
	case OP_SEND:
		return agr_io_send(w, fd, op->src, op->len, op->flags, op_done,
				   arg);
	case OP_TIMEOUT:
		return agr_io_timeout(w, op->off, op_done, arg);
	case OP_NOP:
	case OP_STATX:
	case OP_FALLOCATE:
		break;
	}
	ret = agr_io_sqe(w, op_done, arg, &sqe);
	if (ret == 0)
		prep_raw(sqe, op, fd);
	return ret;
}

static void run_end(struct run *r)
{
	if (r->on_end)
		r->on_end(r);
	else
		tu_latch_count_down(&r->ended);
}

/* Issues the next step: one op, or a run of ops marked with_next. */
void run_next(struct run *r)
{
	int i, ret;

	if (r->failed || r->next >= r->nops) {
		run_end(r);
		return;
	}
	r->first = r->next;
	r->last = r->first;
	while (r->ops[r->last].with_next && r->last + 1 < r->nops)
		r->last++;
	r->next = r->last + 1;
	r->pending = r->last - r->first + 1;
	for (i = r->first; i <= r->last; i++) {
		ret = issue(r->w, &r->ops[i], &r->slots[i]);
		if (ret) {
			r->failed = true;
			r->submit_err = ret;
			r->submit_op = i;
			r->pending -= r->last - i + 1;
			break;
		}
	}
	/* Prepared, not yet handed over: the loop submits them together. */
	r->queued[r->first] = io_uring_sq_ready(agr_worker_ring(r->w));
	if (r->pending == 0)
		run_end(r);
}

static void op_done(int res, void *arg)
{
	struct op_slot *s = arg;
	struct run *r = s->r;
	const struct op *op = &r->ops[s->i];

	TU_EXPECT(agr_worker_current() == r->w);
	TU_EXPECT(s->i >= r->first && s->i <= r->last);
	r->res[s->i] = res;
	r->calls[s->i]++;
	r->inflight_seen[s->i] = agr_io_inflight(r->w);
	if (op->save)
		*op->save = res;
	TU_EXPECT(r->pending > 0);
	if (--r->pending > 0)
		return;
	if (r->on_step)
		r->on_step(r);
	run_next(r);
}

void run_init(struct run *r, const struct op *ops, int nops)
{
	int i;

	ck_assert_int_le(nops, MAX_OPS);
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->nops = nops;
	for (i = 0; i < MAX_OPS; i++) {
		r->slots[i] = (struct op_slot){ r, i };
		r->res[i] = NOT_RUN;
	}
}

static void run_task(void *arg)
{
	struct run *r = arg;

	r->w = agr_worker_current();
	run_next(r);
}

/* Starts the plan on worker `hint`; run_wait() waits for its end. */
void run_start(agr_scheduler *s, unsigned hint, struct run *r,
	       const struct op *ops, int nops)
{
	run_init(r, ops, nops);
	tu_latch_init(&r->ended, 1);
	run_on(s, hint, run_task, r);
}

void run_wait(struct run *r)
{
	ck_assert_msg(tu_latch_wait(&r->ended, TU_LONG_NS),
		      "the plan did not end");
	tu_latch_destroy(&r->ended);
}

void run_plan(agr_scheduler *s, unsigned hint, struct run *r,
	      const struct op *ops, int nops)
{
	run_start(s, hint, r, ops, nops);
	run_wait(r);
}

const char *res_str(int res)
{
	if (res == NOT_RUN)
		return "not run";
	return res < 0 ? strerror(-res) : "ok";
}

/* The first error of an ended plan, or 0. */
int run_status(const struct run *r)
{
	int i;

	if (r->failed)
		return r->submit_err;
	for (i = 0; i < r->nops; i++)
		if (r->res[i] < 0)
			return r->res[i];
	return 0;
}

/* Every op ran once, on its worker, with the result it wants. */
void assert_plan(const struct run *r)
{
	const struct op *op;
	int i;

	ck_assert_msg(!r->failed, "op %d (%s) was refused: %d (%s)",
		      r->submit_op, op_names[r->ops[r->submit_op].kind],
		      r->submit_err, res_str(r->submit_err));
	for (i = 0; i < r->nops; i++) {
		op = &r->ops[i];
		ck_assert_msg(r->calls[i] == 1, "op %d (%s): %d callbacks",
			      i, op_names[op->kind], r->calls[i]);
		if (op->want == WANT_ANY)
			continue;
		if (op->want == WANT_FD)
			ck_assert_msg(r->res[i] >= 0,
				      "op %d (%s): %d (%s), want a descriptor",
				      i, op_names[op->kind], r->res[i],
				      res_str(r->res[i]));
		else
			ck_assert_msg(r->res[i] == op->want,
				      "op %d (%s): %d (%s), want %d (%s)", i,
				      op_names[op->kind], r->res[i],
				      res_str(r->res[i]), op->want,
				      res_str(op->want));
	}
	tu_assert_no_worker_failure();
}
