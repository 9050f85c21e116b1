/* SPDX-License-Identifier: MIT */
/*
 * check_io_ext.c - what a storage service needs beyond plain agr_io_*:
 * raw SQEs that cannot be lost, chains the SQ-full flush never splits,
 * one operation cancelled by its id, linked timeouts, CQE flags,
 * registered files and buffers, multishot receive into a provided
 * buffer ring, multishot accept past a full CQ, zero-copy send (the
 * socket cases in io_ext_sockets.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "io_ext_test.h"
#include "testutil.h"

static const agr_named_aggregate order = { "sales", "Order" };

/* ---- a supplier with one worker and small rings ---- */

static void rig_up_opts(struct rig *g, agr_supplier_options *o)
{
	ck_assert_int_eq(agr_supplier_new_opts("ioext", o, &g->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &order, &g->s), 0);
}

void rig_up(struct rig *g, unsigned sq_entries)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;

	o.parallelism = 1;
	o.sq_entries = sq_entries;
	rig_up_opts(g, &o);
}

void rig_down(struct rig *g)
{
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
}

void run_on(struct rig *g, agr_task_fn fn, void *arg)
{
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, fn, arg), 0);
}

static int temp_file(void)
{
	char path[] = "/tmp/aggring-ioext-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

/* ---- raw SQEs ---- */

#define RAW_WRITES 24

#define RAW_LEN 512

struct raw_run {
	int fd;
	struct tu_tally done;
	int res[RAW_WRITES];
	int submit[RAW_WRITES];
	int raw_res;
	int commit_ret;
	char data[RAW_WRITES][RAW_LEN];
};

static void raw_write_done(int res, void *arg)
{
	int *slot = arg;

	*slot = res;
}

static void raw_done(int res, void *arg)
{
	struct raw_run *r = arg;

	r->raw_res = res;
}

static void count_done(int res, void *arg)
{
	(void)res;
	tu_tally_add(arg);
}

/*
 * What lost data: take a raw SQE, leave it unprepared, queue more
 * writes than the SQ holds, then prepare it. The full SQ was flushed
 * with the unprepared SQE in it, the late prep overwrote another
 * write's SQE, and a write reported 0 bytes it never wrote. Now every
 * write reaches the disk intact, the raw NOP completes, and so do
 * more writes after the commit.
 */
static void raw_then_writes(void *arg)
{
	struct raw_run *r = arg;
	agr_worker *w = agr_worker_current();
	struct io_uring_sqe *raw;
	int i;

	TU_EXPECT(agr_io_sqe(w, raw_done, r, &raw) == 0);
	for (i = 0; i < RAW_WRITES / 2; i++)
		r->submit[i] = agr_io_write(w, r->fd, r->data[i], RAW_LEN,
					    (uint64_t)i * RAW_LEN,
					    raw_write_done, &r->res[i]);
	io_uring_prep_nop(raw);
	r->commit_ret = agr_io_sqe_commit(w);
	for (; i < RAW_WRITES; i++)
		r->submit[i] = agr_io_write(w, r->fd, r->data[i], RAW_LEN,
					    (uint64_t)i * RAW_LEN,
					    raw_write_done, &r->res[i]);
	/* Marks the end: runs after every write above has completed. */
	TU_EXPECT(agr_io_fsync(w, r->fd, 0, count_done, &r->done) == 0);
}

START_TEST(raw_sqe_is_never_submitted_unprepared)
{
	struct raw_run *r = calloc(1, sizeof(*r));
	char back[RAW_LEN];
	struct rig g;
	int i, written = 0, refused = 0;

	ck_assert_ptr_nonnull(r);
	r->fd = temp_file();
	tu_tally_init(&r->done);
	for (i = 0; i < RAW_WRITES; i++)
		memset(r->data[i], 'a' + i, RAW_LEN);
	r->raw_res = 1;
	rig_up(&g, 8);
	run_on(&g, raw_then_writes, r);
	ck_assert(tu_tally_wait(&r->done, 1, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(r->commit_ret, 0);
	ck_assert_int_eq(r->raw_res, 0); /* the NOP, prepared late */
	for (i = 0; i < RAW_WRITES; i++) {
		if (r->submit[i] == -EBUSY) {
			refused++;
			continue;
		}
		ck_assert_int_eq(r->submit[i], 0);
		ck_assert_int_eq(r->res[i], RAW_LEN);
		ck_assert_int_eq(pread(r->fd, back, RAW_LEN,
				       (off_t)i * RAW_LEN), RAW_LEN);
		ck_assert_msg(memcmp(back, r->data[i], RAW_LEN) == 0,
			      "write %d reported %d but is not on disk", i,
			      r->res[i]);
		written++;
	}
	ck_assert_int_eq(refused, 0);
	ck_assert_int_eq(written, RAW_WRITES);
	close(r->fd);
	tu_tally_destroy(&r->done);
	free(r);
}
END_TEST

/* ---- raw SQEs: many open at once, and linked to the next call ---- */

#define MANY_RAW 40

struct many_raw {
	struct tu_tally done;
	int res[MANY_RAW];
	int take_ret[MANY_RAW];
	int good_fd;
	int bad_res, fsync_res, timeout_ret, chain_ret;
	char buf[16];
};

struct raw_slot_arg {
	struct many_raw *m;
	int res;
};

static void slot_done(int res, void *arg)
{
	struct raw_slot_arg *a = arg;

	a->res = res;
	tu_tally_add(&a->m->done);
}

static struct raw_slot_arg slot_args[MANY_RAW];

/* Forty raw SQEs taken first, each prepared only after all are taken. */
static void take_many_then_prepare(void *arg)
{
	struct many_raw *m = arg;
	agr_worker *w = agr_worker_current();
	struct io_uring_sqe *sqe[MANY_RAW];
	int i;

	for (i = 0; i < MANY_RAW; i++) {
		slot_args[i].m = m;
		slot_args[i].res = 1;
		m->take_ret[i] = agr_io_sqe(w, slot_done, &slot_args[i],
					    &sqe[i]);
	}
	for (i = 0; i < MANY_RAW; i++)
		if (m->take_ret[i] == 0)
			io_uring_prep_nop(sqe[i]);
	TU_EXPECT(agr_io_sqe_commit(w) == 0);
}

START_TEST(many_raw_sqes_stay_valid_until_committed)
{
	struct many_raw m;
	struct rig g;
	int i;

	memset(&m, 0, sizeof(m));
	tu_tally_init(&m.done);
	rig_up(&g, 0);
	run_on(&g, take_many_then_prepare, &m);
	ck_assert(tu_tally_wait(&m.done, MANY_RAW, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	for (i = 0; i < MANY_RAW; i++) {
		ck_assert_int_eq(m.take_ret[i], 0);
		ck_assert_int_eq(slot_args[i].res, 0);
	}
	tu_tally_destroy(&m.done);
}
END_TEST

static void store_and_tally(int res, void *arg)
{
	struct many_raw *m = arg;

	m->fsync_res = res;
	tu_tally_add(&m->done);
}

static void store_bad(int res, void *arg)
{
	((struct many_raw *)arg)->bad_res = res;
}

static void ignore_res(int res, void *arg)
{
	(void)res;
	(void)arg;
}

/*
 * Three writes wait in the SQ (early submits would go at four), then a
 * raw write to a closed fd linked (IOSQE_IO_LINK) to an fsync: the
 * two go together, so the failing write cancels the fsync. And a
 * linked timeout inside agr_io_chain() is refused.
 */
static void raw_link_then_fsync(void *arg)
{
	struct many_raw *m = arg;
	agr_worker *w = agr_worker_current();
	agr_io_params p = AGR_IO_PARAMS_INIT;
	struct io_uring_sqe *sqe;
	int i;

	for (i = 0; i < 3; i++)
		TU_EXPECT(agr_io_write(w, m->good_fd, m->buf, sizeof(m->buf),
				       (uint64_t)i * sizeof(m->buf),
				       ignore_res, NULL) == 0);
	TU_EXPECT(agr_io_sqe(w, store_bad, m, &sqe) == 0);
	io_uring_prep_write(sqe, 999, m->buf, sizeof(m->buf), 0);
	sqe->flags |= IOSQE_IO_LINK;
	TU_EXPECT(agr_io_sqe_commit(w) == 0);
	TU_EXPECT(agr_io_fsync(w, m->good_fd, 0, store_and_tally, m) == 0);

	m->chain_ret = agr_io_chain(w, 2);
	p.timeout_ns = MS;
	TU_EXPECT(agr_io_next(w, &p) == 0);
	m->timeout_ret = agr_io_fsync(w, m->good_fd, 0, ignore_res, NULL);
}

START_TEST(raw_sqe_links_to_the_next_call)
{
	struct many_raw m;
	struct rig g;

	memset(&m, 0, sizeof(m));
	m.bad_res = m.fsync_res = 1;
	m.good_fd = temp_file();
	tu_tally_init(&m.done);
	rig_up(&g, 0);
	run_on(&g, raw_link_then_fsync, &m);
	ck_assert(tu_tally_wait(&m.done, 1, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(m.bad_res, -EBADF);
	ck_assert_int_eq(m.fsync_res, -ECANCELED);
	ck_assert_int_eq(m.chain_ret, 0);
	ck_assert_int_eq(m.timeout_ret, -EINVAL);
	close(m.good_fd);
	tu_tally_destroy(&m.done);
}
END_TEST

/* ---- chains under SQ pressure ---- */

struct chain_run {
	int good_fd;
	struct tu_tally done;
	int fill_res[7];
	int write_res, fsync_res, chain_ret;
	int write_ret, fsync_ret;
	char buf[64];
};

static void store_res(int res, void *arg)
{
	*(int *)arg = res;
}

static void store_and_count(int res, void *arg)
{
	struct chain_run *c = arg;

	c->fsync_res = res;
	tu_tally_add(&c->done);
}

/*
 * The SQ (8) holds 7 prepared writes when a write->fsync chain is
 * queued. The chain's write goes to a closed fd and fails: if the
 * chain holds, the fsync after it is cancelled; had the full-SQ flush
 * split them, the fsync would run on its own and succeed.
 */
static void fill_then_chain(void *arg)
{
	struct chain_run *c = arg;
	agr_worker *w = agr_worker_current();
	int i;

	for (i = 0; i < 7; i++)
		TU_EXPECT(agr_io_write(w, c->good_fd, c->buf, sizeof(c->buf),
				       (uint64_t)i * sizeof(c->buf), store_res,
				       &c->fill_res[i]) == 0);
	c->chain_ret = agr_io_chain(w, 2);
	c->write_ret = agr_io_write(w, 999, c->buf, sizeof(c->buf), 0,
				    store_res, &c->write_res);
	c->fsync_ret = agr_io_fsync(w, c->good_fd, 0, store_and_count, c);
}

START_TEST(chain_is_not_split_by_a_full_sq)
{
	struct chain_run c = { .write_res = 1, .fsync_res = 1 };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct rig g;
	int i;

	c.good_fd = temp_file();
	memset(c.buf, 'x', sizeof(c.buf));
	tu_tally_init(&c.done);
	o.parallelism = 1;
	o.sq_entries = 8;
	o.submit_batch = 0; /* nothing leaves before the turn ends */
	rig_up_opts(&g, &o);
	run_on(&g, fill_then_chain, &c);
	ck_assert(tu_tally_wait(&c.done, 1, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(c.chain_ret, 0);
	ck_assert_int_eq(c.write_ret, 0);
	ck_assert_int_eq(c.fsync_ret, 0);
	for (i = 0; i < 7; i++)
		ck_assert_int_eq(c.fill_res[i], (int)sizeof(c.buf));
	ck_assert_int_eq(c.write_res, -EBADF);
	ck_assert_int_eq(c.fsync_res, -ECANCELED);
	close(c.good_fd);
	tu_tally_destroy(&c.done);
}
END_TEST

/* ---- one operation cancelled by id; a linked timeout ---- */

struct two_recvs {
	int sv[2];
	char a[8], b[8];
	int res_a, res_b;
	agr_io_id id_a, id_b;
	int cancel_ret;
	struct tu_tally done;
	struct tu_latch armed;
};

static void recv_a(int res, void *arg)
{
	struct two_recvs *t = arg;

	t->res_a = res;
	tu_tally_add(&t->done);
}

static void recv_b(int res, void *arg)
{
	struct two_recvs *t = arg;

	t->res_b = res;
	tu_tally_add(&t->done);
}

static void arm_two(void *arg)
{
	struct two_recvs *t = arg;
	agr_worker *w = agr_worker_current();
	agr_io_params p = AGR_IO_PARAMS_INIT;

	p.id = &t->id_a;
	TU_EXPECT(agr_io_next(w, &p) == 0);
	TU_EXPECT(agr_io_recv(w, t->sv[0], t->a, sizeof(t->a), 0, recv_a,
			      t) == 0);
	p.id = &t->id_b;
	TU_EXPECT(agr_io_next(w, &p) == 0);
	TU_EXPECT(agr_io_recv(w, t->sv[0], t->b, sizeof(t->b), 0, recv_b,
			      t) == 0);
	tu_latch_count_down(&t->armed);
}

static void cancel_a(void *arg)
{
	struct two_recvs *t = arg;

	t->cancel_ret = agr_io_cancel_op(agr_worker_current(), t->id_a);
}

/* Two receives with the same argument; only the one named is cancelled. */
START_TEST(cancel_op_cancels_exactly_one)
{
	struct two_recvs t = { .res_a = 1, .res_b = 1, .cancel_ret = 1 };
	struct rig g;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, t.sv), 0);
	tu_tally_init(&t.done);
	tu_latch_init(&t.armed, 1);
	rig_up(&g, 0);
	run_on(&g, arm_two, &t);
	ck_assert(tu_latch_wait(&t.armed, TU_LONG_NS));
	ck_assert_uint_ne(t.id_a, 0);
	ck_assert_uint_ne(t.id_a, t.id_b);
	run_on(&g, cancel_a, &t);
	ck_assert(tu_tally_wait(&t.done, 1, TU_LONG_NS));
	ck_assert_int_eq(t.res_a, -ECANCELED);
	/* b is still armed: only a's callback ran (read under the tally). */
	ck_assert_int_eq(tu_tally_value(&t.done), 1);
	ck_assert_int_eq(write(t.sv[1], "hi", 2), 2);
	ck_assert(tu_tally_wait(&t.done, 2, TU_LONG_NS));
	ck_assert_int_eq(t.res_b, 2);
	ck_assert_int_eq(t.cancel_ret, 0);
	rig_down(&g);
	tu_assert_no_worker_failure();
	close(t.sv[0]);
	close(t.sv[1]);
	tu_latch_destroy(&t.armed);
	tu_tally_destroy(&t.done);
}
END_TEST

static void arm_with_timeout(void *arg)
{
	struct two_recvs *t = arg;
	agr_worker *w = agr_worker_current();
	agr_io_params p = AGR_IO_PARAMS_INIT;

	p.timeout_ns = 20 * MS;
	TU_EXPECT(agr_io_next(w, &p) == 0);
	TU_EXPECT(agr_io_recv(w, t->sv[0], t->a, sizeof(t->a), 0, recv_a,
			      t) == 0);
}

/* Nobody writes: the linked timeout ends the receive. */
START_TEST(linked_timeout_ends_the_operation)
{
	struct two_recvs t = { .res_a = 1 };
	struct rig g;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, t.sv), 0);
	tu_tally_init(&t.done);
	rig_up(&g, 0);
	run_on(&g, arm_with_timeout, &t);
	ck_assert(tu_tally_wait(&t.done, 1, TU_LONG_NS));
	/* The kernel reports a linked timeout's victim as cancelled. */
	ck_assert_int_eq(t.res_a, -ECANCELED);
	rig_down(&g); /* the timeout's own CQE came too: nothing in flight */
	tu_assert_no_worker_failure();
	close(t.sv[0]);
	close(t.sv[1]);
	tu_tally_destroy(&t.done);
}
END_TEST

/* ---- registered files and buffers from the init hook ---- */

#define WORKERS 2

#define FIXED_LEN 4096

struct fixed;

struct fixed_slot {
	struct fixed *f;
	int res;
};

struct fixed {
	int fd[WORKERS];
	unsigned char *buf[WORKERS];
	struct fixed_slot slot[WORKERS];
	atomic_int unregistered;
	struct tu_tally done;
};

static int register_on_worker(agr_worker *w, void *arg)
{
	struct fixed *f = arg;
	int i = agr_worker_index(w);
	struct iovec iov;
	int ret;

	f->fd[i] = temp_file();
	if (posix_memalign((void **)&f->buf[i], FIXED_LEN, FIXED_LEN))
		return -ENOMEM;
	memset(f->buf[i], 'A' + i, FIXED_LEN);
	iov.iov_base = f->buf[i];
	iov.iov_len = FIXED_LEN;
	ret = io_uring_register_files(agr_worker_ring(w), &f->fd[i], 1);
	if (ret == 0)
		ret = io_uring_register_buffers(agr_worker_ring(w), &iov, 1);
	return ret;
}

static void unregister_on_worker(agr_worker *w, void *arg)
{
	struct fixed *f = arg;

	if (io_uring_unregister_buffers(agr_worker_ring(w)) == 0 &&
	    io_uring_unregister_files(agr_worker_ring(w)) == 0)
		atomic_fetch_add(&f->unregistered, 1);
}

static void fixed_written(int res, void *arg)
{
	struct fixed_slot *slot = arg;

	slot->res = res;
	tu_tally_add(&slot->f->done);
}

static void write_fixed(void *arg)
{
	struct fixed *f = arg;
	agr_worker *w = agr_worker_current();
	int i = agr_worker_index(w);
	agr_io_params p = AGR_IO_PARAMS_INIT;

	p.flags = AGR_IO_FIXED_FILE | AGR_IO_FIXED_BUF;
	p.buf_index = 0;
	TU_EXPECT(agr_io_next(w, &p) == 0);
	/* fd 0: the first registered file, not standard input. */
	f->slot[i].f = f;
	TU_EXPECT(agr_io_write(w, 0, f->buf[i], FIXED_LEN, 0, fixed_written,
			       &f->slot[i]) == 0);
}

START_TEST(init_hook_registers_files_and_buffers_used_by_io)
{
	struct fixed *f = calloc(1, sizeof(*f));
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	unsigned char back[FIXED_LEN];
	struct rig g;
	int i;

	ck_assert_ptr_nonnull(f);
	tu_tally_init(&f->done);
	o.parallelism = WORKERS;
	o.worker_init = register_on_worker;
	o.worker_exit = unregister_on_worker;
	o.hook_arg = f;
	rig_up_opts(&g, &o);
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(agr_scheduler_schedule(g.s, (unsigned)i,
							write_fixed, f), 0);
	ck_assert(tu_tally_wait(&f->done, WORKERS, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(atomic_load(&f->unregistered), WORKERS);
	for (i = 0; i < WORKERS; i++) {
		ck_assert_int_eq(f->slot[i].res, FIXED_LEN);
		ck_assert_int_eq(pread(f->fd[i], back, FIXED_LEN, 0),
				 FIXED_LEN);
		ck_assert_int_eq(back[0], 'A' + i);
		ck_assert_int_eq(back[FIXED_LEN - 1], 'A' + i);
		close(f->fd[i]);
		free(f->buf[i]);
	}
	tu_tally_destroy(&f->done);
	free(f);
}
END_TEST

/* ---- multishot accept that the kernel ends with a success ---- */

#define BURST 64 /* connections waiting before the accept is armed */

struct burst {
	int listener;
	agr_worker *w;
	int fds[BURST];
	int nfds, kernel_ends, final_res, arm_ret;
	struct tu_tally accepted;
	struct tu_latch ended;
};

static void burst_accepted(int res, unsigned flags, void *arg);

static void burst_arm(void *arg)
{
	struct burst *b = arg;

	b->w = agr_worker_current();
	b->arm_ret = agr_io_accept_multishot_cqe(b->w, b->listener,
						 SOCK_CLOEXEC, burst_accepted,
						 b);
	TU_EXPECT(b->arm_ret == 0);
}

static void burst_accepted(int res, unsigned flags, void *arg)
{
	struct burst *b = arg;

	if (res >= 0) {
		TU_EXPECT(b->nfds < BURST);
		if (b->nfds < BURST)
			b->fds[b->nfds++] = res;
		else
			close(res);
		tu_tally_add(&b->accepted);
	}
	if (flags & IORING_CQE_F_MORE)
		return;
	if (res >= 0) { /* the kernel ended it: the CQ was full */
		b->kernel_ends++;
		burst_arm(b);
		return;
	}
	b->final_res = res;
	tu_latch_count_down(&b->ended);
}

static void burst_cancel(void *arg)
{
	struct burst *b = arg;

	TU_EXPECT(agr_io_cancel(b->w, b) == 1);
}

/*
 * A burst of connections on a ring whose CQ holds 4: the kernel ends
 * the multishot accept with a successful CQE without IORING_CQE_F_MORE
 * (it could not post the next one). The callback sees the flags, arms
 * again, and every connection is accepted.
 */
START_TEST(multishot_accept_resumes_after_the_kernel_ends_it)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct burst b = { .final_res = 1 };
	struct sockaddr_in addr = { 0 };
	socklen_t len = sizeof(addr);
	int clients[BURST], i;
	struct rig g;

	b.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(b.listener, (struct sockaddr *)&addr,
			      sizeof(addr)), 0);
	ck_assert_int_eq(listen(b.listener, 2 * BURST), 0);
	ck_assert_int_eq(getsockname(b.listener, (struct sockaddr *)&addr,
				     &len), 0);
	for (i = 0; i < BURST; i++) {
		clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(connect(clients[i], (struct sockaddr *)&addr,
					 sizeof(addr)), 0);
	}
	tu_tally_init(&b.accepted);
	tu_latch_init(&b.ended, 1);
	o.parallelism = 1;
	o.sq_entries = 2;
	o.cq_entries = 4;
	rig_up_opts(&g, &o);
	run_on(&g, burst_arm, &b);
	ck_assert_msg(tu_tally_wait(&b.accepted, BURST, TU_LONG_NS),
		      "accepted %ld of %d connections",
		      tu_tally_value(&b.accepted), BURST);
	run_on(&g, burst_cancel, &b);
	ck_assert(tu_latch_wait(&b.ended, TU_LONG_NS));
	ck_assert_int_eq(b.final_res, -ECANCELED);
	ck_assert_int_eq(b.nfds, BURST);
	ck_assert_int_ge(b.kernel_ends, 1); /* the case this test is for */
	rig_down(&g);
	tu_assert_no_worker_failure();
	for (i = 0; i < BURST; i++) {
		close(b.fds[i]);
		close(clients[i]);
	}
	close(b.listener);
	tu_tally_destroy(&b.accepted);
	tu_latch_destroy(&b.ended);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("io_ext");
	TCase *c = tcase_create("core");

	tcase_set_timeout(c, 60);
	tcase_add_test(c, raw_sqe_is_never_submitted_unprepared);
	tcase_add_test(c, chain_is_not_split_by_a_full_sq);
	tcase_add_test(c, many_raw_sqes_stay_valid_until_committed);
	tcase_add_test(c, raw_sqe_links_to_the_next_call);
	tcase_add_test(c, cancel_op_cancels_exactly_one);
	tcase_add_test(c, linked_timeout_ends_the_operation);
	io_ext_socket_tests(c);
	tcase_add_test(c, multishot_accept_resumes_after_the_kernel_ends_it);
	tcase_add_test(c, init_hook_registers_files_and_buffers_used_by_io);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
