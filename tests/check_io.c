/* SPDX-License-Identifier: MIT */
/*
 * check_io.c - asynchronous I/O on a worker's ring (aggring/io.h): every
 * operation against real files (here) and loopback sockets
 * (io_sockets.c), raw SQEs, misuse, a submission queue that overflows,
 * batching and early submits (AGR_SUBMIT_BATCH; io_ring.c), dispatcher
 * functions that chain I/O, and teardown with I/O in flight
 * (io_dispatch.c). The operations run as plans (io_plan.c).
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

#include "io_test.h"
#include "testutil.h"

/* ---- files ---- */

static const char *tmp_root(void)
{
	const char *dir = getenv("TMPDIR");

	return dir && *dir ? dir : "/tmp";
}

/* A new empty file, open for reading and writing; its name in `path`. */
int tmp_file(char *path, size_t size)
{
	int n = snprintf(path, size, "%s/aggring-io-XXXXXX", tmp_root());
	int fd;

	ck_assert(n > 0 && (size_t)n < size);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	return fd;
}

void tmp_dir(char *path, size_t size)
{
	int n = snprintf(path, size, "%s/aggring-io-XXXXXX", tmp_root());

	ck_assert(n > 0 && (size_t)n < size);
	ck_assert_ptr_nonnull(mkdtemp(path));
}

/* The file holds exactly `text`, read back from the test thread. */
void assert_file_holds(const char *path, const char *text)
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

int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* A TCP socket bound to 127.0.0.1 on an ephemeral port. */
int tcp_bound(bool listening, struct sockaddr_in *addr)
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
void tcp_pair(int fds[2])
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

in_port_t port_of(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	ck_assert_int_eq(peer ? getpeername(fd, (struct sockaddr *)&a, &len) :
				getsockname(fd, (struct sockaddr *)&a, &len),
			 0);
	return a.sin_port;
}

/* ---- one supplier, one scheduler ---- */

agr_supplier *new_supplier(int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("io", workers, &sup), 0);
	ck_assert_ptr_nonnull(sup);
	return sup;
}

void rig_up(struct rig *g, int workers)
{
	agr_named_aggregate named = { "sales", "Order" };

	g->sup = new_supplier(workers);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &named, &g->s), 0);
}

/* Nothing may be left in flight, so the graceful stop ends at once. */
void rig_down(struct rig *g)
{
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
}

void run_on(agr_scheduler *s, unsigned hint, agr_task_fn fn,
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

agr_worker *worker_at(struct rig *g, unsigned hint)
{
	struct look l = { .w = NULL };

	tu_latch_init(&l.done, 1);
	run_on(g->s, hint, look_task, &l);
	ck_assert(tu_latch_wait(&l.done, TU_LONG_NS));
	tu_latch_destroy(&l.done);
	ck_assert_ptr_nonnull(l.w);
	return l.w;
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

const char *const call_names[NCALLS] = {
	"agr_io_sqe",	 "agr_io_read",		    "agr_io_write",
	"agr_io_readv",	 "agr_io_writev",	    "agr_io_fsync",
	"agr_io_openat", "agr_io_close",	    "agr_io_accept",
	"agr_io_accept_multishot", "agr_io_connect", "agr_io_recv",
	"agr_io_send",	 "agr_io_timeout",	    "agr_io_cancel",
};

void count_call(int res, void *arg)
{
	(void)res;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/*
 * Calls every function of aggring/io.h with arguments that are valid
 * but for `w` and `cb`. Static buffers: if a call wrongly went through,
 * the kernel would still have live memory to use.
 */
void call_every_op(agr_worker *w, agr_io_cb cb, void *arg,
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

void assert_all_einval(const int ret[NCALLS], int n, const char *how)
{
	int i;

	for (i = 0; i < n; i++)
		ck_assert_msg(ret[i] == -EINVAL, "%s %s: %d, want -EINVAL",
			      call_names[i], how, ret[i]);
}

void misuse_task(void *arg)
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

	io_socket_tests(net);

	io_ring_tests(ring);

	io_dispatch_tests(disp, down);

	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
