/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_force.c - check_dispatcher's force stops: a function stuck
 * on I/O that never completes, chains of I/O that resubmit, and a done
 * from another thread after the stop.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "dispatcher_test.h"
#include "testutil.h"

/* ---- a function stuck on I/O that never completes ---- */

struct stuck_recv {
	struct journal j;
	struct tu_latch started;
	int fds[2];
	char buf[8];
	agr_exchange *ex;
	int submit_ret;
	int recv_res;
};

static void recv_finished(int res, void *arg)
{
	struct stuck_recv *r = arg;

	r->recv_res = res;
	agr_exchange_done(r->ex, res < 0 ? res : 0);
}

/* Message seq 1 waits for bytes nobody sends. */
static int recv_forever(agr_exchange *ex, void *arg)
{
	struct stuck_recv *r = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&r->j, EV_START + seq);
	if (seq != 1)
		return 0;
	r->ex = ex;
	r->submit_ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0],
				    r->buf, sizeof(r->buf), 0, recv_finished,
				    r);
	tu_latch_count_down(&r->started);
	return r->submit_ret < 0 ? r->submit_ret : AGR_PENDING;
}

/* Five admitted: the stuck one interrupted, the four behind it discarded. */
static void assert_one_interrupted_four_discarded(agr_dispatcher *d)
{
	agr_dispatcher_stats st = stats_of(d);

	ck_assert_uint_eq(st.admitted, 5);
	ck_assert_uint_eq(st.handled + st.failed + st.skipped + st.discarded +
				  st.interrupted,
			  5);
	ck_assert_uint_eq(st.discarded, 4);
	ck_assert_uint_eq(st.interrupted, 1);
	ck_assert_uint_eq(st.handled, 0);
}

/* _i == 0: the dispatcher owns its supplier; 1: it does not. */
START_TEST(force_stop_cancels_blocked_io)
{
	agr_supplier *sup = new_supplier(1);
	struct stuck_recv r = { .recv_res = 1 };
	struct tmsg t[5], late;
	struct stopper s;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &r.j);
	agr_dispatcher *d;
	uint64_t before;
	int i;

	journal_init(&r.j);
	tu_latch_init(&r.started, 1);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r.fds), 0);
	d = new_dispatcher(&o);
	add_fn(d, NULL, recv_forever, &r);
	start(d);
	for (i = 0; i < 5; i++)
		tmsg_init(&t[i], "order-1", i + 1);
	send_ok(d, &t[0]);
	ck_assert(tu_latch_wait(&r.started, TU_LONG_NS));
	ck_assert_int_eq(r.submit_ret, 0);
	for (i = 1; i < 5; i++)
		send_ok(d, &t[i]); /* queued behind the stuck one */
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	stopper_start(&s, d, &r.j);

	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert_uint_lt(tu_now_ns() - before, 1000 * MS);

	ck_assert(journal_wait(&r.j, 5));
	/* The force took over the graceful stop, which succeeds. */
	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_int_eq(r.recv_res, -ECANCELED);
	/* Its function saw it: interrupted, unlike those behind it. */
	ck_assert_int_eq(t[0].status, AGR_INTERRUPTED);
	for (i = 1; i < 5; i++) {
		ck_assert_int_eq(t[i].status, AGR_DISCARDED);
		ck_assert_int_eq(journal_pos(&r.j, EV_START + t[i].seq), -1);
	}
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	tmsg_init(&late, "order-1", 9);
	ck_assert_int_eq(agr_dispatcher_send(d, &late.m), -ESHUTDOWN);
	assert_one_interrupted_four_discarded(d);
	agr_dispatcher_free(d);
	if (_i != 0)
		agr_supplier_free(sup);
	ck_assert_int_eq(tu_tally_value(&r.j.completed), 5);
	close(r.fds[0]);
	close(r.fds[1]);
	tu_latch_destroy(&r.started);
	journal_destroy(&r.j);
}
END_TEST

/* ---- a force stop ends chains of I/O ---- */

#define CHAINS 1000

struct chain_run {
	struct tu_latch running; /* every chain has hopped a few times */
	atomic_bool forced;
	atomic_long hops_after_force;
	struct tu_tally completed;
};

/* One message whose handler resubmits a NOP from each NOP's callback. */
struct chain {
	agr_message m; /* m.user points here */
	struct chain_run *run;
	agr_exchange *ex;
	int index;
	int hops;
	int status;
	atomic_int completions;
};

static void chain_hop(int res, void *arg);

static int chain_next(struct chain *c)
{
	struct io_uring_sqe *sqe;
	int ret = agr_io_sqe(agr_exchange_worker(c->ex), chain_hop, c, &sqe);

	if (ret == 0)
		io_uring_prep_nop(sqe);
	return ret;
}

static void chain_hop(int res, void *arg)
{
	struct chain *c = arg;
	int ret;

	if (atomic_load(&c->run->forced))
		atomic_fetch_add(&c->run->hops_after_force, 1);
	if (++c->hops == 4)
		tu_latch_count_down(&c->run->running);
	/* A chain ends only when the library refuses its next hop. */
	ret = res < 0 ? res : chain_next(c);
	if (ret < 0)
		agr_exchange_done(c->ex, ret);
}

static int chain_start(agr_exchange *ex, void *arg)
{
	struct chain *c = agr_exchange_message(ex)->user;
	int ret;

	(void)arg;
	c->ex = ex;
	ret = chain_next(c);
	return ret < 0 ? ret : AGR_PENDING;
}

static int chain_group(const agr_message *msg, int parallelism, void *arg)
{
	(void)arg;
	return ((const struct chain *)msg->user)->index % parallelism;
}

static void chain_completed(agr_message *msg, int status, void *arg)
{
	struct chain *c = msg->user;

	c->status = status;
	atomic_fetch_add(&c->completions, 1);
	tu_tally_add(arg);
}

/*
 * 1,000 groups each run a handler that resubmits I/O from its own
 * callbacks and would never stop by itself. After the force stop, the
 * library refuses their next submissions (-ECANCELED), so every chain
 * ends within a few hops and every message completes exactly once with
 * the error its handler got. _i == 0: the supplier is shared, so the
 * dispatcher's force refuses the chains' I/O (-ECANCELED); 1: the
 * dispatcher owns it and forces it too, and the workers' teardown
 * refuses it (-ESHUTDOWN, as io.h says). Either way each message
 * reached its function: AGR_INTERRUPTED.
 */
START_TEST(force_stop_ends_resubmitting_chains)
{
	struct chain_run run = { 0 };
	struct chain *c = calloc(CHAINS, sizeof(*c));
	agr_supplier *sup = new_supplier(2);
	agr_dispatcher_options o = options(sup, _i == 1, CHAINS,
					   &run.completed);
	agr_dispatcher *d;
	uint64_t before;
	long after;
	int i;

	ck_assert_ptr_nonnull(c);
	tu_latch_init(&run.running, CHAINS);
	tu_tally_init(&run.completed);
	o.on_complete = chain_completed;
	o.group_key = chain_group;
	d = new_dispatcher(&o);
	add_fn(d, NULL, chain_start, NULL);
	start(d);
	for (i = 0; i < CHAINS; i++) {
		c[i].run = &run;
		c[i].index = i;
		c[i].m.aggregate_id = "chain";
		c[i].m.user = &c[i];
		ck_assert_int_eq(agr_dispatcher_send(d, &c[i].m), 0);
	}
	ck_assert(tu_latch_wait(&run.running, TU_LONG_NS));

	atomic_store(&run.forced, true);
	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert(tu_tally_wait(&run.completed, CHAINS, TU_LONG_NS));
	after = atomic_load(&run.hops_after_force);
	fprintf(stderr, "force stop ended %d chains in %.1f ms, %ld hops "
		"after it\n", CHAINS, (double)(tu_now_ns() - before) / 1e6,
		after);
	/* Until its worker takes the sweep, a chain hops a turn or two. */
	ck_assert_int_le(after, 16 * CHAINS);
	agr_dispatcher_free(d);
	if (_i == 0)
		agr_supplier_free(sup);
	for (i = 0; i < CHAINS; i++) {
		ck_assert_int_eq(atomic_load(&c[i].completions), 1);
		ck_assert_int_eq(c[i].status, AGR_INTERRUPTED);
	}
	tu_tally_destroy(&run.completed);
	tu_latch_destroy(&run.running);
	free(c);
}
END_TEST

/*
 * A function pending on the test thread (no I/O to cancel) is finished
 * from that thread after a force stop: the message completes once
 * (discarded by the force, which finds no I/O left, or by that call,
 * whichever comes first), and the one queued behind it is discarded.
 * _i == 0: the dispatcher owns the supplier, whose workers have ended
 * by then; 1: it does not.
 */
START_TEST(done_from_another_thread_after_force_stop_completes)
{
	agr_supplier *sup = new_supplier(1);
	struct tmsg t1, t2;
	struct held h;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &h.j);
	agr_scheduler *sched;
	agr_dispatcher *d;

	held_init(&h);
	d = new_dispatcher(&o);
	sched = agr_dispatcher_scheduler(d);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	if (_i == 0)
		ck_assert(wait_until_terminated(sched, TU_LONG_NS));
	agr_exchange_done(h.ex, -ECANCELED);
	ck_assert_msg(journal_wait(&h.j, 2),
		      "%ld of 2 messages completed after the force stop",
		      tu_tally_value(&h.j.completed));
	ck_assert_int_eq(t1.status, AGR_INTERRUPTED);
	ck_assert_int_eq(t2.status, AGR_DISCARDED);
	agr_dispatcher_free(d);
	if (_i != 0)
		agr_supplier_free(sup);
	held_destroy(&h);
}
END_TEST

void dispatcher_force_tests(TCase *ref, TCase *stress)
{
	tcase_add_loop_test(ref, force_stop_cancels_blocked_io, 0, 2);
	tcase_add_loop_test(ref,
			    done_from_another_thread_after_force_stop_completes,
			    0, 2);
	tcase_add_loop_test(stress, force_stop_ends_resubmitting_chains, 0,
			    2);
}
