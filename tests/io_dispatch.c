/* SPDX-License-Identifier: MIT */
/*
 * io_dispatch.c - check_io's I/O from dispatcher functions: chains that
 * keep their group serial, two groups interleaved on one ring; and
 * teardown with I/O in flight (force stops cancel it, a graceful stop
 * waits for it).
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

void io_dispatch_tests(TCase *disp, TCase *down)
{
	tcase_add_test(disp, chained_io_keeps_its_group_serial);
	tcase_add_test(disp, two_groups_interleave_on_one_ring);
	tcase_add_loop_test(down, force_stop_cancels_a_recv_in_a_function, 0,
			    2);
	tcase_add_test(down, supplier_force_stop_cancels_pending_io);
	tcase_add_test(down, graceful_stop_waits_for_inflight_io);
}
