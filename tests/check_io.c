/* SPDX-License-Identifier: MIT */
/*
 * check_io.c - asynchronous I/O on a worker's ring (aggring/io.h): every
 * operation against real files and loopback sockets, raw SQEs, misuse,
 * a submission queue that overflows, batching and early submits
 * (AGR_SUBMIT_BATCH), dispatcher functions
 * that chain I/O, and teardown with I/O in flight.
 *
 * Callbacks run on worker threads: what they see is recorded there and
 * asserted on the test thread, since a failed ck_assert on a worker
 * would end the child abruptly. Everything waits on latches with
 * generous deadlines; no sleep orders anything.
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

#include "testutil.h"

#define MS 1000000ull
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- files ---- */

static const char *tmp_root(void)
{
	const char *dir = getenv("TMPDIR");

	return dir && *dir ? dir : "/tmp";
}

/* A new empty file, open for reading and writing; its name in `path`. */
static int tmp_file(char *path, size_t size)
{
	int n = snprintf(path, size, "%s/aggring-io-XXXXXX", tmp_root());
	int fd;

	ck_assert(n > 0 && (size_t)n < size);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void tmp_dir(char *path, size_t size)
{
	int n = snprintf(path, size, "%s/aggring-io-XXXXXX", tmp_root());

	ck_assert(n > 0 && (size_t)n < size);
	ck_assert_ptr_nonnull(mkdtemp(path));
}

/* The file holds exactly `text`, read back from the test thread. */
static void assert_file_holds(const char *path, const char *text)
{
	char buf[256] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf) - 1, 0),
			 (int)strlen(text));
	ck_assert_str_eq(buf, text);
	close(fd);
}

/* A descriptor number that is not open, for -EBADF. */
static int unused_fd(void)
{
	int fd = 1000;

	while (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
		fd++;
	return fd;
}

/* ---- loopback sockets, made on the test thread ---- */

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* A TCP socket bound to 127.0.0.1 on an ephemeral port. */
static int tcp_bound(bool listening, struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = tcp_socket();

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	if (listening)
		ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)addr, &len), 0);
	return fd;
}

/* Two connected TCP sockets. */
static void tcp_pair(int fds[2])
{
	struct sockaddr_in addr;
	int listener = tcp_bound(true, &addr);

	fds[0] = tcp_socket();
	ck_assert_int_eq(connect(fds[0], (struct sockaddr *)&addr,
				 sizeof(addr)), 0);
	fds[1] = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fds[1], 0);
	close(listener);
}

static in_port_t port_of(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	ck_assert_int_eq(peer ? getpeername(fd, (struct sockaddr *)&a, &len) :
				getsockname(fd, (struct sockaddr *)&a, &len),
			 0);
	return a.sin_port;
}

/* ---- one supplier, one scheduler ---- */

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
};

static agr_supplier *new_supplier(int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("io", workers, &sup), 0);
	ck_assert_ptr_nonnull(sup);
	return sup;
}

static void rig_up(struct rig *g, int workers)
{
	agr_named_aggregate named = { "sales", "Order" };

	g->sup = new_supplier(workers);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &named, &g->s), 0);
}

/* Nothing may be left in flight, so the graceful stop ends at once. */
static void rig_down(struct rig *g)
{
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
}

static void run_on(agr_scheduler *s, unsigned hint, agr_task_fn fn,
		   void *arg)
{
	ck_assert_int_eq(agr_scheduler_schedule(s, hint, fn, arg), 0);
}

struct look {
	agr_worker *w;
	struct tu_latch done;
};

static void look_task(void *arg)
{
	struct look *l = arg;

	l->w = agr_worker_current();
	tu_latch_count_down(&l->done);
}

static agr_worker *worker_at(struct rig *g, unsigned hint)
{
	struct look l = { .w = NULL };

	tu_latch_init(&l.done, 1);
	run_on(g->s, hint, look_task, &l);
	ck_assert(tu_latch_wait(&l.done, TU_LONG_NS));
	tu_latch_destroy(&l.done);
	ck_assert_ptr_nonnull(l.w);
	return l.w;
}

/* ---- a plan: operations issued step by step on one worker ---- */

enum op_kind {
	OP_READ, OP_WRITE, OP_READV, OP_WRITEV, OP_FSYNC, OP_OPENAT,
	OP_CLOSE, OP_ACCEPT, OP_CONNECT, OP_RECV, OP_SEND, OP_TIMEOUT,
	OP_NOP, OP_STATX, OP_FALLOCATE,
};

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
#define WANT_FD (INT_MIN + 1)  /* a new descriptor: res >= 0 */
#define WANT_ANY (INT_MIN + 2) /* the test checks the result itself */

/*
 * One operation. Descriptors are read through pointers when the op is
 * issued, so an op can use what an earlier one opened (`save`).
 */
struct op {
	enum op_kind kind;
	int *fd; /* file, socket, or the directory of openat/statx */
	void *dst;
	const void *src;
	unsigned len;
	uint64_t off; /* file offset; timeout in ns */
	const struct iovec *iov;
	unsigned iovcnt;
	int flags;
	const char *path;
	struct sockaddr *addr;
	socklen_t *addrlen;
	int *save;	/* receives the result: a new descriptor */
	bool with_next; /* issued in the same turn as the next op */
	int want;
};

static struct op op_read(int *fd, void *dst, unsigned len, uint64_t off,
			 int want)
{
	return (struct op){ .kind = OP_READ, .fd = fd, .dst = dst,
			    .len = len, .off = off, .want = want };
}

static struct op op_write(int *fd, const char *text, uint64_t off)
{
	unsigned len = (unsigned)strlen(text);

	return (struct op){ .kind = OP_WRITE, .fd = fd, .src = text,
			    .len = len, .off = off, .want = (int)len };
}

static struct op op_readv(int *fd, const struct iovec *iov, unsigned n,
			  uint64_t off, int want)
{
	return (struct op){ .kind = OP_READV, .fd = fd, .iov = iov,
			    .iovcnt = n, .off = off, .want = want };
}

static struct op op_writev(int *fd, const struct iovec *iov, unsigned n,
			   uint64_t off, int want)
{
	return (struct op){ .kind = OP_WRITEV, .fd = fd, .iov = iov,
			    .iovcnt = n, .off = off, .want = want };
}

static struct op op_fsync(int *fd, unsigned flags, int want)
{
	return (struct op){ .kind = OP_FSYNC, .fd = fd, .flags = (int)flags,
			    .want = want };
}

static struct op op_openat(int *dir, const char *path, int flags,
			   int *save, int want)
{
	return (struct op){ .kind = OP_OPENAT, .fd = dir, .path = path,
			    .flags = flags, .save = save, .want = want };
}

static struct op op_close(int *fd, int want)
{
	return (struct op){ .kind = OP_CLOSE, .fd = fd, .want = want };
}

static struct op op_accept(int *fd, struct sockaddr *addr, socklen_t *len,
			   int *save)
{
	return (struct op){ .kind = OP_ACCEPT, .fd = fd, .addr = addr,
			    .addrlen = len, .flags = SOCK_CLOEXEC,
			    .save = save, .want = WANT_FD };
}

static struct op op_connect(int *fd, struct sockaddr *addr, socklen_t *len,
			    int want)
{
	return (struct op){ .kind = OP_CONNECT, .fd = fd, .addr = addr,
			    .addrlen = len, .want = want };
}

static struct op op_recv(int *fd, void *dst, unsigned len, int want)
{
	return (struct op){ .kind = OP_RECV, .fd = fd, .dst = dst,
			    .len = len, .want = want };
}

/* MSG_NOSIGNAL: a reset peer must not kill the test with SIGPIPE. */
static struct op op_send(int *fd, const char *text, int want)
{
	return (struct op){ .kind = OP_SEND, .fd = fd, .src = text,
			    .len = (unsigned)strlen(text),
			    .flags = MSG_NOSIGNAL, .want = want };
}

static struct op op_timeout(uint64_t ns, int want)
{
	return (struct op){ .kind = OP_TIMEOUT, .off = ns, .want = want };
}

static struct op op_nop(void)
{
	return (struct op){ .kind = OP_NOP, .want = 0 };
}

static struct op op_statx(int *dir, const char *path, struct statx *stx)
{
	return (struct op){ .kind = OP_STATX, .fd = dir, .path = path,
			    .dst = stx, .want = 0 };
}

static struct op op_fallocate(int *fd, uint64_t off, unsigned len)
{
	return (struct op){ .kind = OP_FALLOCATE, .fd = fd, .off = off,
			    .len = len, .want = 0 };
}

static struct op with_next(struct op o)
{
	o.with_next = true;
	return o;
}

#define MAX_OPS 16

struct run;

struct op_slot {
	struct run *r;
	int i;
};

struct run {
	const struct op *ops;
	int nops;
	int next;	 /* first op not yet issued */
	int first, last; /* the step in flight */
	int pending;	 /* its ops not yet completed */
	bool failed;	 /* an op could not be issued */
	int submit_err, submit_op;
	int res[MAX_OPS];
	int calls[MAX_OPS];
	int inflight_seen[MAX_OPS]; /* agr_io_inflight() in each callback */
	unsigned queued[MAX_OPS];   /* SQEs not yet submitted, per step */
	agr_worker *w;
	struct op_slot slots[MAX_OPS];
	void (*on_step)(struct run *r); /* optional: a step completed */
	void (*on_end)(struct run *r);	/* default: counts `ended` down */
	void *ctx;
	struct tu_latch ended;
};

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
static void run_next(struct run *r)
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

static void run_init(struct run *r, const struct op *ops, int nops)
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
static void run_start(agr_scheduler *s, unsigned hint, struct run *r,
		      const struct op *ops, int nops)
{
	run_init(r, ops, nops);
	tu_latch_init(&r->ended, 1);
	run_on(s, hint, run_task, r);
}

static void run_wait(struct run *r)
{
	ck_assert_msg(tu_latch_wait(&r->ended, TU_LONG_NS),
		      "the plan did not end");
	tu_latch_destroy(&r->ended);
}

static void run_plan(agr_scheduler *s, unsigned hint, struct run *r,
		     const struct op *ops, int nops)
{
	run_start(s, hint, r, ops, nops);
	run_wait(r);
}

static const char *res_str(int res)
{
	if (res == NOT_RUN)
		return "not run";
	return res < 0 ? strerror(-res) : "ok";
}

/* The first error of an ended plan, or 0. */
static int run_status(const struct run *r)
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
static void assert_plan(const struct run *r)
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

/* ==== files ==== */

START_TEST(read_write_short_reads_and_eof)
{
	const uint64_t here = (uint64_t)-1; /* the file position */
	char path[PATH_MAX], whole[64] = "", tail[64] = "", rest[64] = "";
	char past[8], later[8], check[64] = "";
	int fd = tmp_file(path, sizeof(path));
	struct op plan[] = {
		op_write(&fd, "hello, world", 0),
		/* Short reads: 64 bytes asked, what is there returned. */
		op_read(&fd, whole, sizeof(whole), 0, 12),
		op_read(&fd, tail, sizeof(tail), 7, 5),
		/* At and past the end of the file: 0, not an error. */
		op_read(&fd, past, sizeof(past), 12, 0),
		op_read(&fd, later, sizeof(later), 4096, 0),
		/* Offset -1 uses and moves the file position (still 0). */
		op_write(&fd, "HELLO", here),
		op_write(&fd, ";", here),
		op_read(&fd, rest, sizeof(rest), here, 6),
		op_read(&fd, past, sizeof(past), here, 0),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert_str_eq(whole, "hello, world");
	ck_assert_str_eq(tail, "world");
	ck_assert_str_eq(rest, " world");
	ck_assert_int_eq(pread(fd, check, sizeof(check) - 1, 0), 12);
	ck_assert_str_eq(check, "HELLO; world");
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 12);
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(readv_and_writev_scatter_and_gather)
{
	char path[PATH_MAX], a[] = "abc", b[] = "defg", c[] = "hi";
	char x[2], y[3], z[16] = "", e[4], p[1], q[8];
	struct iovec out[] = { { a, 3 }, { b, 4 }, { c, 2 } };
	struct iovec in[] = { { x, sizeof(x) }, { y, sizeof(y) },
			      { z, sizeof(z) } };
	struct iovec at_end[] = { { e, sizeof(e) } };
	struct iovec split[] = { { p, sizeof(p) }, { q, sizeof(q) } };
	int fd = tmp_file(path, sizeof(path));
	struct op plan[] = {
		op_writev(&fd, out, 3, 0, 9),
		/* Short: 21 bytes of room, 8 after offset 1. */
		op_readv(&fd, in, 3, 1, 8),
		op_readv(&fd, at_end, 1, 9, 0),
		op_readv(&fd, split, 2, 7, 2),
	};
	char check[16] = "";
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert_mem_eq(x, "bc", 2);
	ck_assert_mem_eq(y, "def", 3);
	ck_assert_str_eq(z, "ghi");
	ck_assert_mem_eq(p, "h", 1);
	ck_assert_mem_eq(q, "i", 1);
	ck_assert_int_eq(pread(fd, check, sizeof(check) - 1, 0), 9);
	ck_assert_str_eq(check, "abcdefghi");
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(write_fsync_then_reread)
{
	char path[PATH_MAX], back[16] = "", check[16] = "";
	int fd = tmp_file(path, sizeof(path)), bad = unused_fd(), fd2;
	struct op plan[] = {
		op_write(&fd, "first", 0),
		op_fsync(&fd, 0, 0),
		op_write(&fd, "second", 8192),
		op_fsync(&fd, AGR_IO_DATASYNC, 0),
		op_read(&fd, back, sizeof(back), 8192, 6),
		op_fsync(&bad, 0, -EBADF),
	};
	struct stat st;
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert_str_eq(back, "second");
	/* Through a descriptor of its own: the bytes are in the file. */
	fd2 = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(fstat(fd2, &st), 0);
	ck_assert_int_eq(st.st_size, 8192 + 6);
	ck_assert_int_eq(pread(fd2, check, 5, 0), 5);
	ck_assert_str_eq(check, "first");
	memset(check, 0, sizeof(check));
	ck_assert_int_eq(pread(fd2, check, sizeof(check) - 1, 8192), 6);
	ck_assert_str_eq(check, "second");
	close(fd2);
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

/*
 * openat relative to a directory descriptor and to the working
 * directory (moved into a fresh directory for the test, then back),
 * close, and their errors in the callback.
 */
START_TEST(openat_and_close)
{
	char dir[PATH_MAX], back[32] = "";
	int cwd = AT_FDCWD, bad = unused_fd(), first = -1, second = -1;
	int dir_fd, saved;
	struct op plan[] = {
		op_openat(&dir_fd, "data",
			  O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, &first,
			  WANT_FD),
		op_write(&first, "through a dir fd", 0),
		op_close(&first, 0),
		op_openat(&cwd, "data", O_RDONLY | O_CLOEXEC, &second,
			  WANT_FD),
		op_read(&second, back, sizeof(back), 0, 16),
		op_close(&second, 0),
		op_openat(&dir_fd, "missing", O_RDONLY, NULL, -ENOENT),
		op_openat(&dir_fd, "data", O_RDONLY | O_DIRECTORY, NULL,
			  -ENOTDIR),
		op_openat(&cwd, "data", O_RDWR | O_CREAT | O_EXCL, NULL,
			  -EEXIST),
		op_close(&bad, -EBADF),
	};
	struct run r;
	struct rig g;

	tmp_dir(dir, sizeof(dir));
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dir_fd, 0);
	saved = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(chdir(dir), 0);

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	ck_assert_int_eq(fchdir(saved), 0);
	close(saved);
	assert_plan(&r);
	ck_assert_str_eq(back, "through a dir fd");
	/* The descriptors closed on the ring are really closed. */
	ck_assert_int_eq(fcntl(first, F_GETFD), -1);
	ck_assert_int_eq(fcntl(second, F_GETFD), -1);
	rig_down(&g);
	ck_assert_int_eq(unlinkat(dir_fd, "data", 0), 0);
	close(dir_fd);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ==== sockets ==== */

/*
 * Accept and connect in flight together, then a ping-pong, then an
 * orderly close that the other side reads as EOF.
 */
START_TEST(accept_connect_send_recv_on_loopback)
{
	struct sockaddr_in addr, caddr, peer;
	socklen_t addrlen = sizeof(addr), peerlen = sizeof(peer);
	int listener = tcp_bound(true, &addr);
	int client = tcp_bound(false, &caddr), server = -1;
	char ping[16] = "", pong[16] = "", eof[8];
	struct op plan[] = {
		with_next(op_accept(&listener, (struct sockaddr *)&peer,
				    &peerlen, &server)),
		op_connect(&client, (struct sockaddr *)&addr, &addrlen, 0),
		op_send(&client, "ping", 4),
		op_recv(&server, ping, sizeof(ping), 4),
		op_send(&server, "pong!", 5),
		op_recv(&client, pong, sizeof(pong), 5),
		op_close(&client, 0),
		op_recv(&server, eof, sizeof(eof), 0),
		op_close(&server, 0),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	/* Accept and connect went to the kernel in one batch. */
	ck_assert_uint_eq(r.queued[0], 2);
	ck_assert_int_eq(r.inflight_seen[0] + r.inflight_seen[1], 1);
	ck_assert_str_eq(ping, "ping");
	ck_assert_str_eq(pong, "pong!");
	ck_assert_uint_eq(peerlen, sizeof(peer));
	ck_assert_uint_eq(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	ck_assert_uint_eq(peer.sin_port, caddr.sin_port);
	rig_down(&g);
	close(listener);
}
END_TEST

START_TEST(connect_to_a_closed_port_is_refused)
{
	struct sockaddr_in addr;
	socklen_t addrlen = sizeof(addr);
	/* Bound but never listening: the port stays ours, and refuses. */
	int holder = tcp_bound(false, &addr), client = tcp_socket();
	struct op plan[] = {
		op_connect(&client, (struct sockaddr *)&addr, &addrlen,
			   -ECONNREFUSED),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	rig_down(&g);
	close(client);
	close(holder);
}
END_TEST

/*
 * The peer closes with SO_LINGER 0, which sends a reset. The recv is
 * in flight or about to be: either way it sees the reset. Linux reports
 * -ECONNRESET on an established socket (tcp_reset()), -EPIPE if a FIN
 * came first, and 0 (EOF) once the error has been read; a send after
 * that fails with -EPIPE or -ECONNRESET.
 */
START_TEST(peer_reset_fails_recv_and_send)
{
	struct linger hard = { .l_onoff = 1, .l_linger = 0 };
	char buf[8];
	int fds[2];
	struct op plan[] = {
		op_recv(&fds[0], buf, sizeof(buf), WANT_ANY),
		op_send(&fds[0], "late", WANT_ANY),
		op_close(&fds[0], 0),
	};
	struct run r;
	struct rig g;
	int res;

	tcp_pair(fds);
	rig_up(&g, 1);
	run_start(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	ck_assert_int_eq(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &hard,
				    sizeof(hard)), 0);
	close(fds[1]);
	run_wait(&r);
	assert_plan(&r);
	res = r.res[0];
	ck_assert_msg(res == -ECONNRESET || res == -EPIPE || res == 0,
		      "recv after a reset: %d (%s)", res, res_str(res));
	res = r.res[1];
	ck_assert_msg(res == -EPIPE || res == -ECONNRESET,
		      "send after a reset: %d (%s)", res, res_str(res));
	rig_down(&g);
}
END_TEST

/* ---- multishot accept ---- */

#define MULTI_CONNS 3

struct multi {
	int listener;
	agr_worker *w;
	int submit_ret;
	int fds[MULTI_CONNS + 1];
	int nfds, calls, extra;
	int cancel_ret, final_res, inflight_at_end;
	struct tu_latch armed, ended;
};

static void multi_accepted(int res, void *arg)
{
	struct multi *m = arg;

	TU_EXPECT(agr_worker_current() == m->w);
	m->calls++;
	if (res < 0) {
		/* The last call: the operation is no longer armed. */
		m->final_res = res;
		m->inflight_at_end = agr_io_inflight(m->w);
		tu_latch_count_down(&m->ended);
		return;
	}
	if (m->nfds == MULTI_CONNS) {
		m->extra++; /* more connections than the test made */
		close(res);
		return;
	}
	m->fds[m->nfds++] = res;
	if (m->nfds == MULTI_CONNS)
		m->cancel_ret = agr_io_cancel(m->w, m);
}

static void arm_multishot(void *arg)
{
	struct multi *m = arg;

	m->w = agr_worker_current();
	m->submit_ret = agr_io_accept_multishot(m->w, m->listener,
						SOCK_CLOEXEC, multi_accepted,
						m);
	if (m->submit_ret)
		tu_latch_count_down(&m->ended);
	tu_latch_count_down(&m->armed);
}

START_TEST(multishot_accept_until_cancelled)
{
	struct sockaddr_in addr, caddr[MULTI_CONNS];
	int clients[MULTI_CONNS], i, j, matched;
	struct multi m = { .final_res = 1, .cancel_ret = -1 };
	struct rig g;

	m.listener = tcp_bound(true, &addr);
	tu_latch_init(&m.armed, 1);
	tu_latch_init(&m.ended, 1);
	rig_up(&g, 1);
	run_on(g.s, 0, arm_multishot, &m);
	ck_assert(tu_latch_wait(&m.armed, TU_LONG_NS));
	ck_assert_int_eq(m.submit_ret, 0);
	for (i = 0; i < MULTI_CONNS; i++) {
		clients[i] = tcp_bound(false, &caddr[i]);
		ck_assert_int_eq(connect(clients[i], (struct sockaddr *)&addr,
					 sizeof(addr)), 0);
	}
	ck_assert(tu_latch_wait(&m.ended, TU_LONG_NS));
	ck_assert_int_eq(m.nfds, MULTI_CONNS);
	ck_assert_int_eq(m.extra, 0);
	ck_assert_int_eq(m.cancel_ret, 1);
	ck_assert_int_eq(m.final_res, -ECANCELED);
	ck_assert_int_eq(m.calls, MULTI_CONNS + 1);
	ck_assert_int_eq(m.inflight_at_end, 0);
	/* Each accepted socket is one of our clients, with the flags. */
	for (i = 0; i < MULTI_CONNS; i++) {
		ck_assert(fcntl(m.fds[i], F_GETFD) & FD_CLOEXEC);
		matched = 0;
		for (j = 0; j < MULTI_CONNS; j++)
			matched += port_of(m.fds[i], true) == caddr[j].sin_port;
		ck_assert_int_eq(matched, 1);
		for (j = 0; j < i; j++)
			ck_assert_int_ne(port_of(m.fds[i], true),
					 port_of(m.fds[j], true));
	}
	rig_down(&g);
	ck_assert_int_eq(m.calls, MULTI_CONNS + 1);
	tu_assert_no_worker_failure();
	for (i = 0; i < MULTI_CONNS; i++) {
		close(m.fds[i]);
		close(clients[i]);
	}
	close(m.listener);
	tu_latch_destroy(&m.armed);
	tu_latch_destroy(&m.ended);
}
END_TEST

/* ==== timers ==== */

struct timers;

/* A callback argument that leads back to the test's state. */
struct timer_key {
	struct timers *t;
};

struct timers {
	agr_worker *w;
	struct timer_key long_key, short_key, nobody;
	int long_ret, short_ret;
	int long_res, short_res, long_calls, short_calls;
	int cancel_ret, cancel_none_ret;
	uint64_t start, fired;
	struct tu_latch done;
};

static void long_fired(int res, void *arg)
{
	struct timers *t = ((struct timer_key *)arg)->t;

	TU_EXPECT(agr_worker_current() == t->w);
	t->long_res = res;
	t->long_calls++;
	tu_latch_count_down(&t->done);
}

/* The long timer is certainly in the kernel by now: cancel it. */
static void short_fired(int res, void *arg)
{
	struct timers *t = ((struct timer_key *)arg)->t;

	TU_EXPECT(agr_worker_current() == t->w);
	t->fired = tu_now_ns();
	t->short_res = res;
	t->short_calls++;
	t->cancel_none_ret = agr_io_cancel(t->w, &t->nobody);
	t->cancel_ret = agr_io_cancel(t->w, &t->long_key);
	tu_latch_count_down(&t->done);
}

static void start_timers(void *arg)
{
	struct timers *t = arg;

	t->w = agr_worker_current();
	t->start = tu_now_ns();
	t->long_ret = agr_io_timeout(t->w, 60000 * MS, long_fired,
				     &t->long_key);
	t->short_ret = agr_io_timeout(t->w, 5 * MS, short_fired,
				      &t->short_key);
	if (t->long_ret)
		tu_latch_count_down(&t->done);
	if (t->short_ret)
		tu_latch_count_down(&t->done);
}

START_TEST(timeout_fires_and_another_is_cancelled)
{
	struct timers t = { .long_res = 1, .short_res = 1, .cancel_ret = -1,
			    .cancel_none_ret = -1 };
	struct rig g;

	t.long_key.t = t.short_key.t = t.nobody.t = &t;
	tu_latch_init(&t.done, 2);
	rig_up(&g, 1);
	run_on(g.s, 0, start_timers, &t);
	ck_assert(tu_latch_wait(&t.done, TU_LONG_NS));
	ck_assert_int_eq(t.long_ret, 0);
	ck_assert_int_eq(t.short_ret, 0);
	ck_assert_int_eq(t.short_res, -ETIME);
	/* Late is possible on a loaded machine; early is not. */
	ck_assert_uint_ge(t.fired - t.start, 5 * MS);
	ck_assert_int_eq(t.cancel_none_ret, 0);
	ck_assert_int_eq(t.cancel_ret, 1);
	ck_assert_int_eq(t.long_res, -ECANCELED);
	rig_down(&g);
	ck_assert_int_eq(t.short_calls, 1);
	ck_assert_int_eq(t.long_calls, 1);
	tu_assert_no_worker_failure();
	tu_latch_destroy(&t.done);
}
END_TEST

/* ==== raw SQEs ==== */

START_TEST(raw_sqe_nop_statx_and_fallocate)
{
	char path[PATH_MAX];
	int fd = tmp_file(path, sizeof(path)), cwd = AT_FDCWD;
	struct statx stx;
	struct op plan[] = {
		op_nop(),
		op_statx(&cwd, path, &stx),
		op_fallocate(&fd, 0, 8192),
	};
	struct stat st;
	struct run r;
	struct rig g;

	memset(&stx, 0, sizeof(stx));
	ck_assert_int_eq(write(fd, "12345", 5), 5);
	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert(stx.stx_mask & STATX_SIZE);
	ck_assert_uint_eq(stx.stx_size, 5);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 8192);
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

/* ==== misuse ==== */

#define NCALLS 15

static const char *const call_names[NCALLS] = {
	"agr_io_sqe",	 "agr_io_read",		    "agr_io_write",
	"agr_io_readv",	 "agr_io_writev",	    "agr_io_fsync",
	"agr_io_openat", "agr_io_close",	    "agr_io_accept",
	"agr_io_accept_multishot", "agr_io_connect", "agr_io_recv",
	"agr_io_send",	 "agr_io_timeout",	    "agr_io_cancel",
};

static void count_call(int res, void *arg)
{
	(void)res;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/*
 * Calls every function of aggring/io.h with arguments that are valid
 * but for `w` and `cb`. Static buffers: if a call wrongly went through,
 * the kernel would still have live memory to use.
 */
static void call_every_op(agr_worker *w, agr_io_cb cb, void *arg,
			  int ret[NCALLS])
{
	static char buf[8];
	static struct iovec iov = { buf, sizeof(buf) };
	static struct sockaddr_in addr = { .sin_family = AF_INET };
	struct io_uring_sqe *sqe = NULL;
	int i = 0;

	ret[i++] = agr_io_sqe(w, cb, arg, &sqe);
	if (ret[0] == 0)
		io_uring_prep_nop(sqe); /* never leave an SQE unprepared */
	ret[i++] = agr_io_read(w, -1, buf, sizeof(buf), 0, cb, arg);
	ret[i++] = agr_io_write(w, -1, buf, sizeof(buf), 0, cb, arg);
	ret[i++] = agr_io_readv(w, -1, &iov, 1, 0, cb, arg);
	ret[i++] = agr_io_writev(w, -1, &iov, 1, 0, cb, arg);
	ret[i++] = agr_io_fsync(w, -1, 0, cb, arg);
	ret[i++] = agr_io_openat(w, AT_FDCWD, "/", O_RDONLY, 0, cb, arg);
	ret[i++] = agr_io_close(w, -1, cb, arg);
	ret[i++] = agr_io_accept(w, -1, NULL, NULL, 0, cb, arg);
	ret[i++] = agr_io_accept_multishot(w, -1, 0, cb, arg);
	ret[i++] = agr_io_connect(w, -1, (struct sockaddr *)&addr,
				  sizeof(addr), cb, arg);
	ret[i++] = agr_io_recv(w, -1, buf, sizeof(buf), 0, cb, arg);
	ret[i++] = agr_io_send(w, -1, buf, sizeof(buf), 0, cb, arg);
	ret[i++] = agr_io_timeout(w, MS, cb, arg);
	ret[i++] = agr_io_cancel(w, arg);
}

static void assert_all_einval(const int ret[NCALLS], int n, const char *how)
{
	int i;

	for (i = 0; i < n; i++)
		ck_assert_msg(ret[i] == -EINVAL, "%s %s: %d, want -EINVAL",
			      call_names[i], how, ret[i]);
}

struct misuse {
	agr_worker *peer;
	atomic_int *calls;
	int null_cb[NCALLS], at_peer[NCALLS];
	int null_sqe_out, null_path, null_addr, inflight;
	struct tu_latch done;
};

static void misuse_task(void *arg)
{
	struct misuse *m = arg;
	agr_worker *w = agr_worker_current();

	call_every_op(w, NULL, m->calls, m->null_cb);
	call_every_op(m->peer, count_call, m->calls, m->at_peer);
	m->null_sqe_out = agr_io_sqe(w, count_call, m->calls, NULL);
	m->null_path = agr_io_openat(w, AT_FDCWD, NULL, O_RDONLY, 0,
				     count_call, m->calls);
	m->null_addr = agr_io_connect(w, -1, NULL, 0, count_call, m->calls);
	m->inflight = agr_io_inflight(w);
	tu_latch_count_down(&m->done);
}

/* ---- what the library logged ---- */

#define LOG_LINES 128

static struct {
	pthread_mutex_t lock;
	int n;
	char line[LOG_LINES][256];
} logbook = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void keep_log(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	pthread_mutex_lock(&logbook.lock);
	if (logbook.n < LOG_LINES)
		snprintf(logbook.line[logbook.n++], sizeof(logbook.line[0]),
			 "%s", msg);
	pthread_mutex_unlock(&logbook.lock);
}

/* Lines that start with "<call>: " and hold `why`. */
static int logged_for(const char *call, const char *why)
{
	size_t len = strlen(call);
	int i, n = 0;

	pthread_mutex_lock(&logbook.lock);
	for (i = 0; i < logbook.n; i++)
		if (!strncmp(logbook.line[i], call, len) &&
		    logbook.line[i][len] == ':' && strstr(logbook.line[i], why))
			n++;
	pthread_mutex_unlock(&logbook.lock);
	return n;
}

static void forget_log(void)
{
	pthread_mutex_lock(&logbook.lock);
	logbook.n = 0;
	pthread_mutex_unlock(&logbook.lock);
}

/* Each of the first n calls logged its -EINVAL, saying `why`. */
static void assert_each_logged(int n, const char *why)
{
	int i;

	for (i = 0; i < n; i++)
		ck_assert_msg(logged_for(call_names[i], why) == 1,
			      "%s logged \"%s\" %d times, want once",
			      call_names[i], why,
			      logged_for(call_names[i], why));
}

START_TEST(calls_refuse_other_threads_and_null_callbacks)
{
	atomic_int calls = 0;
	struct misuse m = { .calls = &calls, .inflight = -1 };
	int ret[NCALLS];
	struct rig g;

	rig_up(&g, 2);
	m.peer = worker_at(&g, 1);
	forget_log();
	agr_set_log_hook(keep_log, NULL);

	call_every_op(m.peer, count_call, &calls, ret);
	assert_all_einval(ret, NCALLS, "from the test thread");
	assert_each_logged(NCALLS, "a thread that is no worker");
	forget_log();
	call_every_op(NULL, count_call, &calls, ret);
	assert_all_einval(ret, NCALLS, "without a worker");
	assert_each_logged(NCALLS, "the worker is NULL");
	forget_log();
	ck_assert_int_eq(agr_io_inflight(NULL), -EINVAL);

	tu_latch_init(&m.done, 1);
	run_on(g.s, 0, misuse_task, &m);
	ck_assert(tu_latch_wait(&m.done, TU_LONG_NS));
	assert_all_einval(m.null_cb, NCALLS - 1, "with a NULL callback");
	/* A cancel takes no callback: it just finds nothing. */
	ck_assert_int_eq(m.null_cb[NCALLS - 1], 0);
	assert_each_logged(NCALLS - 1, "the callback is NULL");
	assert_all_einval(m.at_peer, NCALLS, "on a peer worker's ring");
	ck_assert_int_eq(m.null_sqe_out, -EINVAL);
	ck_assert_int_eq(m.null_path, -EINVAL);
	ck_assert_int_eq(m.null_addr, -EINVAL);
	ck_assert_int_eq(m.inflight, 0);
	ck_assert_int_eq(logged_for("agr_io_sqe", "sqe is NULL"), 1);
	ck_assert_int_eq(logged_for("agr_io_openat", "path is NULL"), 1);
	ck_assert_int_eq(logged_for("agr_io_connect", "addr is NULL"), 1);
	assert_each_logged(NCALLS, "(called from ");
	agr_set_log_hook(NULL, NULL);

	rig_down(&g);
	ck_assert_int_eq(atomic_load(&calls), 0);
	tu_latch_destroy(&m.done);
}
END_TEST

/* ==== a full submission queue; batching ==== */

struct flood;

struct flood_slot {
	struct flood *f;
	int calls, res;
};

struct flood {
	int nops, ntimers, n;
	struct flood_slot *slots;
	agr_worker *w;
	int issued, first_err, inflight_after, completed;
	unsigned queued_after, sq_entries, cq_entries;
	struct tu_latch done;
};

static void flood_done(int res, void *arg)
{
	struct flood_slot *s = arg;
	struct flood *f = s->f;

	TU_EXPECT(agr_worker_current() == f->w);
	s->calls++;
	s->res = res;
	/* No callback runs inside the task, so `issued` is final here. */
	if (++f->completed == f->issued)
		tu_latch_count_down(&f->done);
}

/* One task prepares far more operations than the SQ holds. */
static void flood_task(void *arg)
{
	struct flood *f = arg;
	struct io_uring *ring = agr_worker_ring(agr_worker_current());
	struct io_uring_sqe *sqe;
	int i, ret;

	f->w = agr_worker_current();
	for (i = 0; i < f->n; i++) {
		if (i < f->nops) {
			ret = agr_io_sqe(f->w, flood_done, &f->slots[i], &sqe);
			if (ret == 0)
				io_uring_prep_nop(sqe);
		} else {
			ret = agr_io_timeout(f->w, MS, flood_done,
					     &f->slots[i]);
		}
		if (ret == 0)
			f->issued++;
		else if (f->first_err == 0)
			f->first_err = ret;
	}
	f->inflight_after = agr_io_inflight(f->w);
	f->queued_after = io_uring_sq_ready(ring);
	f->sq_entries = ring->sq.ring_entries;
	f->cq_entries = ring->cq.ring_entries;
	if (f->issued == 0)
		tu_latch_count_down(&f->done);
}

/*
 * _i == 0: 2,000 NOPs and 500 timers from one task, far more than the
 * SQ holds: the SQ is flushed and the call retried. _i == 1: 6,000
 * NOPs, more completions than the CQ holds at once: the kernel keeps
 * the rest aside and the worker must still reap every one.
 */
START_TEST(full_sq_is_flushed_and_retried)
{
	struct flood f = { .nops = _i == 0 ? 2000 : 6000,
			   .ntimers = _i == 0 ? 500 : 0 };
	struct rig g;
	int i;

	f.n = f.nops + f.ntimers;
	f.slots = calloc((size_t)f.n, sizeof(*f.slots));
	ck_assert_ptr_nonnull(f.slots);
	for (i = 0; i < f.n; i++)
		f.slots[i].f = &f;
	tu_latch_init(&f.done, 1);
	rig_up(&g, 1);
	run_on(g.s, 0, flood_task, &f);
	ck_assert_msg(tu_latch_wait(&f.done, TU_LONG_NS),
		      "callbacks still missing");
	ck_assert_int_eq(f.first_err, 0);
	ck_assert_int_eq(f.issued, f.n);
	ck_assert_uint_gt(f.n, f.sq_entries); /* the premise */
	if (_i == 1)
		ck_assert_uint_gt(f.n, f.cq_entries);
	ck_assert_uint_le(f.queued_after, f.sq_entries);
	ck_assert_int_eq(f.inflight_after, f.n);
	rig_down(&g);
	for (i = 0; i < f.n; i++) {
		ck_assert_msg(f.slots[i].calls == 1, "op %d: %d callbacks", i,
			      f.slots[i].calls);
		ck_assert_int_eq(f.slots[i].res, i < f.nops ? 0 : -ETIME);
	}
	ck_assert_int_eq(f.completed, f.n);
	tu_assert_no_worker_failure();
	tu_latch_destroy(&f.done);
	free(f.slots);
}
END_TEST

/*
 * Four operations prepared by one task go to the kernel together (none
 * was submitted on its own: four is no more than the default
 * AGR_SUBMIT_BATCH): three wait in the SQ as the task ends, the raw SQE
 * that came first joins them as it returns, and all four are in flight
 * when the first callback runs: it sees the other three.
 */
START_TEST(ops_of_one_turn_go_to_the_kernel_together)
{
	char path[PATH_MAX], in[16] = "";
	int fd = tmp_file(path, sizeof(path)), i, most = 0;
	struct op plan[] = {
		with_next(op_nop()),
		with_next(op_write(&fd, "batched", 0)),
		with_next(op_read(&fd, in, sizeof(in), 0, WANT_ANY)),
		op_timeout(MS, -ETIME),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert_uint_eq(r.queued[0], 3);
	for (i = 0; i < 4; i++)
		if (r.inflight_seen[i] > most)
			most = r.inflight_seen[i];
	ck_assert_int_eq(most, 3);
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

/* ---- AGR_SUBMIT_BATCH: prepared SQEs go to the kernel early ---- */

#define EARLY_SENDS 5
#define SENDS_AFTER_RAW 3

static const struct early_case {
	const char *setting; /* AGR_SUBMIT_BATCH; NULL: unset */
	/* Bytes that arrived after each send, then after agr_io_sqe(). */
	int arrived[EARLY_SENDS + 1];
	int after_raw; /* ... and after the sends made while it is open */
	uint64_t early_submits;
	int errors; /* "not 0..256" reports, one per worker */
} early_cases[] = {
	{ NULL, { 0, 0, 0, 0, 4, 4 }, 4, 1, 0 }, /* the default, 4 */
	{ "2", { 0, 0, 2, 2, 4, 4 }, 6, 3, 0 },
	{ "1", { 0, 1, 2, 3, 4, 5 }, 7, 7, 0 },
	{ "0", { 0, 0, 0, 0, 0, 0 }, 0, 0, 0 }, /* all wait for the turn */
	{ "257", { 0, 0, 0, 0, 4, 4 }, 4, 1, 1 },
	{ "abc", { 0, 0, 0, 0, 4, 4 }, 4, 1, 1 },
};

struct early {
	int sock[2];
	int ret[EARLY_SENDS + SENDS_AFTER_RAW];
	int arrived[EARLY_SENDS + 1];
	int arrived_with_raw_open;
	int raw_ret;
	atomic_int sent, nops;
	struct tu_latch done; /* every callback ran */
};

static atomic_int submit_batch_errors;

static void count_submit_batch_errors(agr_log_level level, const char *msg,
				      void *arg)
{
	(void)arg;
	if (level == AGR_LOG_ERROR && strstr(msg, "AGR_SUBMIT_BATCH=\"") &&
	    strstr(msg, "is not an integer in 0..256"))
		atomic_fetch_add(&submit_batch_errors, 1);
}

/*
 * Bytes waiting on the socket. A send the kernel took has arrived:
 * io_uring sends on a socket with room inline, in the submit call.
 */
static int queued_bytes(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

static void early_sent(int res, void *arg)
{
	struct early *e = arg;

	TU_EXPECT(res == 1);
	atomic_fetch_add(&e->sent, 1);
	tu_latch_count_down(&e->done);
}

static void early_nop(int res, void *arg)
{
	struct early *e = arg;

	TU_EXPECT(res == 0);
	atomic_fetch_add(&e->nops, 1);
	tu_latch_count_down(&e->done);
}

static int send_byte(agr_worker *w, struct early *e)
{
	return agr_io_send(w, e->sock[1], "x", 1, MSG_NOSIGNAL, early_sent, e);
}

/*
 * One byte per send over a socket pair, looking after each call how
 * many arrived: the submitted sends. Then a raw SQE, prepared last:
 * taking it may submit what was prepared before, and sends made while
 * it is open still go early, since it is not in the ring until the task
 * returns: the kernel cannot read it unprepared.
 */
static void early_task(void *arg)
{
	struct early *e = arg;
	agr_worker *w = agr_worker_current();
	struct io_uring_sqe *sqe = NULL;
	int i;

	for (i = 0; i < EARLY_SENDS; i++) {
		e->ret[i] = send_byte(w, e);
		e->arrived[i] = queued_bytes(e->sock[0]);
	}
	e->raw_ret = agr_io_sqe(w, early_nop, e, &sqe);
	e->arrived[EARLY_SENDS] = queued_bytes(e->sock[0]);
	for (; i < EARLY_SENDS + SENDS_AFTER_RAW; i++)
		e->ret[i] = send_byte(w, e);
	e->arrived_with_raw_open = queued_bytes(e->sock[0]);
	if (e->raw_ret == 0)
		io_uring_prep_nop(sqe);
}

START_TEST(submit_batch_sends_prepared_sqes_early)
{
	const struct early_case *c = &early_cases[_i];
	struct early e = { .raw_ret = -1 };
	agr_worker_metrics m;
	struct rig g;
	int i;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    e.sock), 0);
	tu_latch_init(&e.done, EARLY_SENDS + SENDS_AFTER_RAW + 1);
	atomic_store(&submit_batch_errors, 0);
	agr_set_log_hook(count_submit_batch_errors, NULL);
	if (c->setting)
		ck_assert_int_eq(setenv("AGR_SUBMIT_BATCH", c->setting, 1), 0);
	else
		unsetenv("AGR_SUBMIT_BATCH");
	rig_up(&g, 1);
	run_on(g.s, 0, early_task, &e);
	ck_assert_msg(tu_latch_wait(&e.done, TU_LONG_NS),
		      "callbacks still missing");
	ck_assert_int_eq(agr_scheduler_worker_metrics(g.s, 0, &m), 0);
	rig_down(&g);
	unsetenv("AGR_SUBMIT_BATCH");
	agr_set_log_hook(NULL, NULL);

	for (i = 0; i < EARLY_SENDS + SENDS_AFTER_RAW; i++)
		ck_assert_int_eq(e.ret[i], 0);
	ck_assert_int_eq(e.raw_ret, 0);
	for (i = 0; i <= EARLY_SENDS; i++)
		ck_assert_msg(e.arrived[i] == c->arrived[i],
			      "AGR_SUBMIT_BATCH=%s: %d bytes after call %d, "
			      "want %d", c->setting ? c->setting : "(unset)",
			      e.arrived[i], i + 1, c->arrived[i]);
	ck_assert_int_eq(e.arrived_with_raw_open, c->after_raw);
	ck_assert_int_eq(queued_bytes(e.sock[0]),
			 EARLY_SENDS + SENDS_AFTER_RAW);
	ck_assert_int_eq(atomic_load(&e.sent),
			 EARLY_SENDS + SENDS_AFTER_RAW);
	ck_assert_int_eq(atomic_load(&e.nops), 1);
	ck_assert_uint_eq(m.early_submits, c->early_submits);
	ck_assert_int_eq(atomic_load(&submit_batch_errors), c->errors);
	tu_assert_no_worker_failure();
	close(e.sock[0]);
	close(e.sock[1]);
	tu_latch_destroy(&e.done);
}
END_TEST

/* ==== dispatcher functions that chain I/O ==== */

#define MAX_EVENTS 256

struct journal {
	pthread_mutex_t lock;
	int ev[MAX_EVENTS];
	int n;
};

static void journal_add(struct journal *j, int ev)
{
	pthread_mutex_lock(&j->lock);
	TU_EXPECT(j->n < MAX_EVENTS);
	if (j->n < MAX_EVENTS)
		j->ev[j->n++] = ev;
	pthread_mutex_unlock(&j->lock);
}

static int journal_pos(struct journal *j, int ev)
{
	int i, pos = -1;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < j->n && pos < 0; i++)
		if (j->ev[i] == ev)
			pos = i;
	pthread_mutex_unlock(&j->lock);
	return pos;
}

static void assert_before(struct journal *j, int a, int b)
{
	int pa = journal_pos(j, a), pb = journal_pos(j, b);

	ck_assert_msg(pa >= 0 && pb >= 0 && pa < pb,
		      "event %d at %d, event %d at %d: want the first before",
		      a, pa, b, pb);
}

/* Copied first: a failed check must not leave the lock held. */
static void assert_journal_is(struct journal *j, const int *want, int n)
{
	int got[MAX_EVENTS], ngot, i;

	pthread_mutex_lock(&j->lock);
	ngot = j->n;
	memcpy(got, j->ev, sizeof(got));
	pthread_mutex_unlock(&j->lock);
	ck_assert_int_eq(ngot, n);
	for (i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "event %d is %d, want %d", i,
			      got[i], want[i]);
}

/* Events: message `seq` started, its step from op k ended, completed. */
#define EV(seq, what) ((seq) * 100 + (what))
#define EV_START 0
#define EV_STEP(k) (1 + (k))
#define EV_COMPLETE 99

enum job { JOB_FILE, JOB_FILE_THEN_SIGNAL, JOB_WAIT };

struct dtest {
	struct journal j;
	struct tu_latch completed;
	struct tu_latch armed; /* a JOB_WAIT message issued its recv */
	int sv[2];	       /* JOB_WAIT reads sv[0]; the signal: sv[1] */
	int cwd;	       /* AT_FDCWD, for openat */
	char dir[PATH_MAX];
};

struct dmsg {
	agr_message m;
	struct dtest *t;
	int seq;
	enum job job;
	struct op ops[6];
	struct run run;
	char path[PATH_MAX];
	int fd;
	char out[32], in[32];
	agr_exchange *ex;
	agr_worker *ran_on;
	int status;
	atomic_int completions;
};

static void journal_step(struct run *r)
{
	struct dmsg *dm = r->ctx;

	journal_add(&dm->t->j, EV(dm->seq, EV_STEP(r->first)));
}

static void finish_job(struct run *r)
{
	struct dmsg *dm = r->ctx;

	agr_exchange_done(dm->ex, run_status(r));
}

/* open, write, fsync, read, close; then maybe wake a JOB_WAIT. */
static int file_job_ops(struct dmsg *dm, bool signal)
{
	int n = 0;

	dm->ops[n++] = op_openat(&dm->t->cwd, dm->path,
				 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
				 &dm->fd, WANT_FD);
	dm->ops[n++] = op_write(&dm->fd, dm->out, 0);
	dm->ops[n++] = op_fsync(&dm->fd, 0, 0);
	dm->ops[n++] = op_read(&dm->fd, dm->in, sizeof(dm->in), 0,
			       (int)strlen(dm->out));
	dm->ops[n++] = op_close(&dm->fd, 0);
	if (signal)
		dm->ops[n++] = op_send(&dm->t->sv[1], "!", 1);
	return n;
}

static void dmsg_init(struct dmsg *dm, struct dtest *t, const char *id,
		      int seq, enum job job)
{
	int n;

	memset(dm, 0, sizeof(*dm));
	dm->m.aggregate_id = id;
	dm->m.type = "job";
	dm->m.user = dm;
	dm->t = t;
	dm->seq = seq;
	dm->job = job;
	dm->fd = -1;
	dm->status = 1;
	snprintf(dm->out, sizeof(dm->out), "message %d", seq);
	n = snprintf(dm->path, sizeof(dm->path), "%s/m%d", t->dir, seq);
	ck_assert(n > 0 && (size_t)n < sizeof(dm->path));
	if (job == JOB_WAIT) {
		dm->ops[0] = op_recv(&t->sv[0], dm->in, 1, 1);
		n = 1;
	} else {
		n = file_job_ops(dm, job == JOB_FILE_THEN_SIGNAL);
	}
	run_init(&dm->run, dm->ops, n);
	dm->run.on_step = journal_step;
	dm->run.on_end = finish_job;
	dm->run.ctx = dm;
}

static int run_job(agr_exchange *ex, void *arg)
{
	struct dmsg *dm = agr_exchange_message(ex)->user;

	(void)arg;
	dm->ex = ex;
	dm->ran_on = agr_worker_current();
	TU_EXPECT(dm->ran_on == agr_exchange_worker(ex));
	journal_add(&dm->t->j, EV(dm->seq, EV_START));
	dm->run.w = agr_exchange_worker(ex);
	run_next(&dm->run);
	if (dm->job == JOB_WAIT)
		tu_latch_count_down(&dm->t->armed);
	return AGR_PENDING;
}

static void job_completed(agr_message *msg, int status, void *arg)
{
	struct dmsg *dm = msg->user;
	struct dtest *t = arg;

	dm->status = status;
	atomic_fetch_add(&dm->completions, 1);
	journal_add(&t->j, EV(dm->seq, EV_COMPLETE));
	tu_latch_count_down(&t->completed);
}

/* Ids starting with 'A' go to group 1, others to group 2. */
static int by_first_letter(const agr_message *msg, int parallelism,
			   void *arg)
{
	(void)parallelism;
	(void)arg;
	return msg->aggregate_id[0] == 'A' ? 1 : 2;
}

static agr_dispatcher *dtest_up(struct dtest *t, agr_supplier *sup,
				bool owns, int messages)
{
	agr_dispatcher_options o = {
		.name = "io-jobs",
		.named_aggregate = { "sales", "Order" },
		.parallelism = 4,
		.supplier = sup,
		.owns_supplier = owns,
		.on_complete = job_completed,
		.complete_arg = t,
		.group_key = by_first_letter,
	};
	agr_dispatcher *d = NULL;

	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->j.lock, NULL);
	tu_latch_init(&t->completed, messages);
	tu_latch_init(&t->armed, 1);
	t->cwd = AT_FDCWD;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    t->sv), 0);
	tmp_dir(t->dir, sizeof(t->dir));
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, "job", run_job, NULL), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

static void dtest_down(struct dtest *t)
{
	close(t->sv[0]);
	close(t->sv[1]);
	ck_assert_int_eq(rmdir(t->dir), 0);
	tu_latch_destroy(&t->armed);
	tu_latch_destroy(&t->completed);
	pthread_mutex_destroy(&t->j.lock);
}

static void send_ok(agr_dispatcher *d, struct dmsg *dm)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &dm->m), 0);
}

/* A file job ended well: its plan, its status, its file. */
static void assert_file_job(struct dmsg *dm)
{
	assert_plan(&dm->run);
	ck_assert_int_eq(dm->status, 0);
	ck_assert_int_eq(atomic_load(&dm->completions), 1);
	ck_assert_str_eq(dm->in, dm->out);
	assert_file_holds(dm->path, dm->out);
	ck_assert_int_eq(unlink(dm->path), 0);
}

#define SERIAL_MSGS 4
#define FILE_OPS 5

/*
 * Messages of one id whose function chains open -> write -> fsync ->
 * read -> close through callbacks (AGR_PENDING): each one's I/O ends
 * and it completes before the next one starts.
 */
START_TEST(chained_io_keeps_its_group_serial)
{
	struct dtest t;
	struct dmsg m[SERIAL_MSGS];
	agr_dispatcher *d = dtest_up(&t, new_supplier(1), true, SERIAL_MSGS);
	int want[SERIAL_MSGS * (FILE_OPS + 2)], i, k, n = 0;

	for (i = 0; i < SERIAL_MSGS; i++)
		dmsg_init(&m[i], &t, "A-1", i + 1, JOB_FILE);
	for (i = 0; i < SERIAL_MSGS; i++)
		send_ok(d, &m[i]);
	ck_assert(tu_latch_wait(&t.completed, TU_LONG_NS));
	for (i = 0; i < SERIAL_MSGS; i++) {
		want[n++] = EV(i + 1, EV_START);
		for (k = 0; k < FILE_OPS; k++)
			want[n++] = EV(i + 1, EV_STEP(k));
		want[n++] = EV(i + 1, EV_COMPLETE);
	}
	assert_journal_is(&t.j, want, n);
	for (i = 0; i < SERIAL_MSGS; i++) {
		assert_file_job(&m[i]);
		ck_assert_ptr_eq(m[i].ran_on, m[0].ran_on);
	}
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	agr_dispatcher_free(d);
	dtest_down(&t);
}
END_TEST

/*
 * One worker, two groups. A1 waits on a recv that only B1's last op
 * satisfies, so B1's whole chain of I/O must run while A1 is pending,
 * by construction rather than by timing; A2, queued behind A1 in the
 * same group, must not start until A1 has completed.
 */
START_TEST(two_groups_interleave_on_one_ring)
{
	struct dtest t;
	struct dmsg a1, a2, b1;
	agr_dispatcher *d = dtest_up(&t, new_supplier(1), true, 3);
	int k;

	dmsg_init(&a1, &t, "A-1", 1, JOB_WAIT);
	dmsg_init(&a2, &t, "A-1", 2, JOB_FILE);
	dmsg_init(&b1, &t, "B-1", 3, JOB_FILE_THEN_SIGNAL);
	ck_assert_int_ne(agr_dispatcher_group_of(d, &a1.m),
			 agr_dispatcher_group_of(d, &b1.m));
	send_ok(d, &a1);
	ck_assert(tu_latch_wait(&t.armed, TU_LONG_NS));
	send_ok(d, &a2);
	send_ok(d, &b1);
	ck_assert(tu_latch_wait(&t.completed, TU_LONG_NS));

	assert_before(&t.j, EV(1, EV_START), EV(3, EV_START));
	for (k = 0; k < b1.run.nops; k++)
		assert_before(&t.j, EV(3, EV_STEP(k)), EV(1, EV_STEP(0)));
	assert_before(&t.j, EV(3, EV_COMPLETE), EV(1, EV_COMPLETE));
	assert_before(&t.j, EV(1, EV_COMPLETE), EV(2, EV_START));

	assert_plan(&a1.run);
	ck_assert_int_eq(a1.status, 0);
	ck_assert_int_eq(a1.in[0], '!');
	assert_file_job(&a2);
	assert_file_job(&b1);
	ck_assert_ptr_eq(a2.ran_on, a1.ran_on);
	ck_assert_ptr_eq(b1.ran_on, a1.ran_on);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	agr_dispatcher_free(d);
	dtest_down(&t);
}
END_TEST

/* ==== teardown with I/O in flight ==== */

/* A 60 s timer of a plain task, not of any message. */
struct stray {
	int ret, res;
	atomic_int calls;
	struct tu_latch submitted;
};

static void stray_fired(int res, void *arg)
{
	struct stray *s = arg;

	s->res = res;
	atomic_fetch_add(&s->calls, 1);
}

static void start_stray(void *arg)
{
	struct stray *s = arg;

	s->ret = agr_io_timeout(agr_worker_current(), 60000 * MS, stray_fired,
				s);
	tu_latch_count_down(&s->submitted);
}

/*
 * A function waits on a recv from a silent peer. The graceful stop
 * times out; the force stop cancels the recv, whose callback finishes
 * the function with -ECANCELED, so the message completes once with
 * AGR_INTERRUPTED (it reached its function). _i == 0: the dispatcher owns the supplier; 1: it does
 * not, and a plain task's timer on the same worker must survive the
 * dispatcher's stop (it cancels its own I/O only) until the supplier's.
 */
START_TEST(force_stop_cancels_a_recv_in_a_function)
{
	agr_supplier *sup = new_supplier(1);
	bool owns = _i == 0;
	struct stray s = { .res = 1 };
	struct dtest t;
	struct dmsg m;
	agr_dispatcher *d = dtest_up(&t, sup, owns, 1);
	agr_dispatcher_stats st;

	tu_latch_init(&s.submitted, 1);
	dmsg_init(&m, &t, "A-1", 1, JOB_WAIT);
	send_ok(d, &m);
	ck_assert(tu_latch_wait(&t.armed, TU_LONG_NS));
	if (!owns) {
		run_on(agr_dispatcher_scheduler(d), 0, start_stray, &s);
		ck_assert(tu_latch_wait(&s.submitted, TU_LONG_NS));
		ck_assert_int_eq(s.ret, 0);
	}

	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 50 * MS),
			 -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&m.completions), 0);
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert(tu_latch_wait(&t.completed, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);

	ck_assert_int_eq(m.run.calls[0], 1);
	ck_assert_int_eq(m.run.res[0], -ECANCELED);
	/* It reached its function: interrupted, not discarded. */
	ck_assert_int_eq(m.status, AGR_INTERRUPTED);
	ck_assert_int_ne(m.status, AGR_DISCARDED);
	ck_assert_int_eq(atomic_load(&m.completions), 1);
	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	ck_assert_uint_eq(st.admitted, 1);
	ck_assert_uint_eq(st.handled, 0);
	ck_assert_uint_eq(st.failed, 0);
	ck_assert_uint_eq(st.discarded, 0);
	ck_assert_uint_eq(st.interrupted, 1);
	if (!owns) {
		ck_assert_int_eq(atomic_load(&s.calls), 0);
		ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
		ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS),
				 0);
		ck_assert_int_eq(atomic_load(&s.calls), 1);
		ck_assert_int_eq(s.res, -ECANCELED);
	}
	agr_dispatcher_free(d);
	if (!owns)
		agr_supplier_free(sup);
	ck_assert_int_eq(atomic_load(&m.completions), 1);
	tu_assert_no_worker_failure();
	dtest_down(&t);
	tu_latch_destroy(&s.submitted);
}
END_TEST

struct pending_io {
	int sv[2];
	char *buf; /* the kernel's until the recv's callback */
	agr_worker *w;
	int recv_ret, timer_ret, resubmit_ret;
	int recv_res, timer_res;
	bool recv_on_worker;
	atomic_int recv_calls, timer_calls, late_calls;
	struct tu_latch submitted;
};

static void late_op_done(int res, void *arg)
{
	struct pending_io *p = arg;

	(void)res;
	atomic_fetch_add(&p->late_calls, 1);
}

static void pending_recv_done(int res, void *arg)
{
	struct pending_io *p = arg;

	p->recv_res = res;
	p->recv_on_worker = agr_worker_current() == p->w;
	free(p->buf); /* the CQE is reaped: the buffer is ours again */
	p->buf = NULL;
	/* The worker is tearing down: no new operation is taken. */
	p->resubmit_ret = agr_io_timeout(p->w, MS, late_op_done, p);
	atomic_fetch_add(&p->recv_calls, 1);
}

static void pending_timer_done(int res, void *arg)
{
	struct pending_io *p = arg;

	p->timer_res = res;
	atomic_fetch_add(&p->timer_calls, 1);
}

static void submit_pending_io(void *arg)
{
	struct pending_io *p = arg;

	p->w = agr_worker_current();
	p->recv_ret = agr_io_recv(p->w, p->sv[0], p->buf, 64, 0,
				  pending_recv_done, p);
	p->timer_ret = agr_io_timeout(p->w, 60000 * MS, pending_timer_done,
				      p);
	tu_latch_count_down(&p->submitted);
}

/*
 * The scheduler-level variant: in-flight I/O holds a graceful stop;
 * the force stop cancels it, every callback has run when the stop
 * returns, and none runs after agr_supplier_free().
 */
START_TEST(supplier_force_stop_cancels_pending_io)
{
	struct pending_io p = { .recv_res = 1, .timer_res = 1,
				.resubmit_ret = 1 };
	struct rig g;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    p.sv), 0);
	p.buf = malloc(64);
	ck_assert_ptr_nonnull(p.buf);
	tu_latch_init(&p.submitted, 1);
	rig_up(&g, 2);
	run_on(g.s, 1, submit_pending_io, &p);
	ck_assert(tu_latch_wait(&p.submitted, TU_LONG_NS));
	ck_assert_int_eq(p.recv_ret, 0);
	ck_assert_int_eq(p.timer_ret, 0);

	ck_assert_int_eq(agr_supplier_stop_gracefully(g.sup, 50 * MS),
			 -ETIMEDOUT);
	ck_assert(!agr_scheduler_is_terminated(g.s));
	ck_assert_int_eq(atomic_load(&p.recv_calls), 0);
	ck_assert_int_eq(atomic_load(&p.timer_calls), 0);

	ck_assert_int_eq(agr_supplier_force_stop(g.sup), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(g.sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(g.s));
	ck_assert_int_eq(atomic_load(&p.recv_calls), 1);
	ck_assert_int_eq(atomic_load(&p.timer_calls), 1);
	ck_assert_int_eq(p.recv_res, -ECANCELED);
	ck_assert_int_eq(p.timer_res, -ECANCELED);
	ck_assert(p.recv_on_worker);
	ck_assert_int_eq(p.resubmit_ret, -ESHUTDOWN);
	ck_assert_ptr_null(p.buf);

	agr_supplier_free(g.sup);
	ck_assert_int_eq(atomic_load(&p.recv_calls), 1);
	ck_assert_int_eq(atomic_load(&p.timer_calls), 1);
	ck_assert_int_eq(atomic_load(&p.late_calls), 0);
	close(p.sv[0]);
	close(p.sv[1]);
	tu_latch_destroy(&p.submitted);
}
END_TEST

struct drain {
	agr_worker *w;
	int timer_ret, timer_res, nop_ret, nop_res;
	atomic_int timer_calls, nop_calls;
	struct tu_latch submitted;
};

static void drain_nop_done(int res, void *arg)
{
	struct drain *dr = arg;

	dr->nop_res = res;
	atomic_fetch_add(&dr->nop_calls, 1);
}

/* A follow-up op from a callback during the graceful drain. */
static void drain_timer_fired(int res, void *arg)
{
	struct drain *dr = arg;
	struct io_uring_sqe *sqe;

	dr->timer_res = res;
	dr->nop_ret = agr_io_sqe(dr->w, drain_nop_done, dr, &sqe);
	if (dr->nop_ret == 0)
		io_uring_prep_nop(sqe);
	atomic_fetch_add(&dr->timer_calls, 1);
}

static void start_drain_timer(void *arg)
{
	struct drain *dr = arg;

	dr->w = agr_worker_current();
	dr->timer_ret = agr_io_timeout(dr->w, 100 * MS, drain_timer_fired,
				       dr);
	tu_latch_count_down(&dr->submitted);
}

START_TEST(graceful_stop_waits_for_inflight_io)
{
	struct drain dr = { .timer_res = 1, .nop_ret = 1, .nop_res = 1 };
	struct rig g;

	tu_latch_init(&dr.submitted, 1);
	rig_up(&g, 1);
	run_on(g.s, 0, start_drain_timer, &dr);
	ck_assert(tu_latch_wait(&dr.submitted, TU_LONG_NS));
	ck_assert_int_eq(dr.timer_ret, 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(g.sup, TU_LONG_NS), 0);
	ck_assert_int_eq(atomic_load(&dr.timer_calls), 1);
	ck_assert_int_eq(dr.timer_res, -ETIME);
	ck_assert_int_eq(dr.nop_ret, 0);
	ck_assert_int_eq(atomic_load(&dr.nop_calls), 1);
	ck_assert_int_eq(dr.nop_res, 0);
	agr_supplier_free(g.sup);
	tu_latch_destroy(&dr.submitted);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("io");
	TCase *files = tcase_create("files");
	TCase *net = tcase_create("sockets");
	TCase *ring = tcase_create("ring");
	TCase *disp = tcase_create("dispatcher");
	TCase *down = tcase_create("teardown");
	TCase *all[] = { files, net, ring, disp, down };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(all); i++) {
		/* Generous even when run by hand, outside `make check`. */
		tcase_set_timeout(all[i], 120);
		tcase_add_checked_fixture(all[i], tu_reset_worker_failures, NULL);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_test(files, read_write_short_reads_and_eof);
	tcase_add_test(files, readv_and_writev_scatter_and_gather);
	tcase_add_test(files, write_fsync_then_reread);
	tcase_add_test(files, openat_and_close);
	tcase_add_test(files, raw_sqe_nop_statx_and_fallocate);

	tcase_add_test(net, accept_connect_send_recv_on_loopback);
	tcase_add_test(net, connect_to_a_closed_port_is_refused);
	tcase_add_test(net, peer_reset_fails_recv_and_send);
	tcase_add_test(net, multishot_accept_until_cancelled);

	tcase_add_test(ring, timeout_fires_and_another_is_cancelled);
	tcase_add_test(ring, calls_refuse_other_threads_and_null_callbacks);
	tcase_add_loop_test(ring, full_sq_is_flushed_and_retried, 0, 2);
	tcase_add_test(ring, ops_of_one_turn_go_to_the_kernel_together);
	tcase_add_loop_test(ring, submit_batch_sends_prepared_sqes_early, 0,
			    (int)ARRAY_SIZE(early_cases));

	tcase_add_test(disp, chained_io_keeps_its_group_serial);
	tcase_add_test(disp, two_groups_interleave_on_one_ring);

	tcase_add_loop_test(down, force_stop_cancels_a_recv_in_a_function, 0,
			    2);
	tcase_add_test(down, supplier_force_stop_cancels_pending_io);
	tcase_add_test(down, graceful_stop_waits_for_inflight_io);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
