/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_pending.c - check_dispatcher's pending functions: one that
 * never finishes, ended by a force stop; a message discarded once its
 * I/O is gone; graceful timeouts and frees that name what holds them;
 * a done inside the function; an init hook's EPERM.
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

/* ---- a pending function that never finishes ---- */

#define FORCE_BOUND_NS (2000 * MS)

/*
 * Message 1's function returns AGR_PENDING and never finishes. A force
 * stop ends it (AGR_INTERRUPTED: no I/O left) and discards the one
 * queued behind it (AGR_DISCARDED), within
 * the bound; a late agr_exchange_done() is logged and ignored; free
 * returns at once. _i == 0: the dispatcher owns its supplier (whose
 * workers the force tears down); 1: it does not.
 */
START_TEST(force_stop_ends_a_pending_function_that_never_finishes)
{
	agr_supplier *sup = new_supplier(1);
	struct tmsg t1, t2;
	struct held h;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &h.j);
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	uint64_t before;

	held_init(&h);
	logbook_open();
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	t1.m.type = "lost-callback";
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));

	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert(journal_wait(&h.j, 2));
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	/* t1 reached its function, t2 never did. */
	ck_assert_int_eq(t1.status, AGR_INTERRUPTED);
	ck_assert_int_eq(t2.status, AGR_DISCARDED);
	ck_assert_int_eq(journal_pos(&h.j, EV_START + 2), -1);
	/* Not silently: which group, which message, for how long. */
	ASSERT_LOGGED("orders: force stop: group",
		      "ended its message of type \"lost-callback\"",
		      "AGR_INTERRUPTED");

	agr_exchange_done(h.ex, 0); /* too late: ignored, and said so */
	ASSERT_LOGGED("orders: agr_exchange_done()",
		      "after its message completed", NULL);
	before = tu_now_ns();
	st = stats_of(d);
	agr_dispatcher_free(d);
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_uint_eq(st.discarded, 1);
	ck_assert_uint_eq(st.interrupted, 1);
	ck_assert_uint_eq(st.failed, 0);
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ck_assert_int_eq(atomic_load(&t2.completions), 1);
	ck_assert_int_eq(tu_tally_value(&h.j.completed), 2);
	if (_i != 0)
		agr_supplier_free(sup);
	logbook_close();
	held_destroy(&h);
}
END_TEST

/*
 * Issue 29's silent spot: agr_dispatcher_free() alone, no stop before
 * it, on a function that returned AGR_PENDING and never finishes. The
 * free forces the stop, which ends the message (AGR_INTERRUPTED) and
 * names it, as a graceful stop's report would; then the free returns.
 */
START_TEST(free_alone_ends_a_pending_function_and_says_so)
{
	struct tmsg t1;
	struct held h;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	uint64_t before;

	held_init(&h);
	logbook_open();
	o = owned_options(1, 8, &h.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	t1.m.type = "lost-callback";
	send_ok(d, &t1);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	before = tu_now_ns();
	agr_dispatcher_free(d);
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(t1.status, AGR_INTERRUPTED);
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ASSERT_LOGGED("orders: force stop: group",
		      "ended its message of type \"lost-callback\"",
		      "AGR_INTERRUPTED");
	logbook_close();
	held_destroy(&h);
}
END_TEST

/* A receive whose callback loses the exchange: it never finishes. */
struct lost_recv {
	struct journal j;
	struct tu_latch started;
	int fds[2];
	char buf[8];
	atomic_int recv_res;
	int res_at_completion;
};

void recv_lost(int res, void *arg)
{
	struct lost_recv *r = arg;

	atomic_store(&r->recv_res, res); /* and no agr_exchange_done() */
}

static int recv_then_forget(agr_exchange *ex, void *arg)
{
	struct lost_recv *r = arg;
	int ret;

	journal_add(&r->j, EV_START + current_tmsg(ex)->seq);
	ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0], r->buf,
			  sizeof(r->buf), 0, recv_lost, r);
	tu_latch_count_down(&r->started);
	return ret < 0 ? ret : AGR_PENDING;
}

static void note_recv_at_completion(agr_message *msg, int status, void *arg)
{
	struct lost_recv *r = arg;

	r->res_at_completion = atomic_load(&r->recv_res);
	record_completion(msg, status, &r->j);
}

/*
 * A dispatcher (on `sup`, owned or not) whose one function receives on
 * r's socketpair and forgets its message: started, and `t` sent and its
 * receive submitted.
 */
static agr_dispatcher *lost_recv_start(struct lost_recv *r,
				       agr_supplier *sup, bool owned,
				       struct tmsg *t)
{
	agr_dispatcher_options o = options(sup, owned, 8, r);
	agr_dispatcher *d;

	o.on_complete = note_recv_at_completion;
	journal_init(&r->j);
	tu_latch_init(&r->started, 1);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r->fds), 0);
	d = new_dispatcher(&o);
	add_fn(d, NULL, recv_then_forget, r);
	start(d);
	tmsg_init(t, "order-1", 1);
	send_ok(d, t);
	ck_assert(tu_latch_wait(&r->started, TU_LONG_NS));
	return d;
}

static void lost_recv_destroy(struct lost_recv *r)
{
	close(r->fds[0]);
	close(r->fds[1]);
	tu_latch_destroy(&r->started);
	journal_destroy(&r->j);
}

/*
 * The force cancels the receive, whose callback does not finish the
 * function: the message ends (AGR_INTERRUPTED) once the receive is
 * gone, not before (its buffer is the kernel's until then). _i as
 * above.
 */
START_TEST(force_stop_discards_a_pending_message_once_its_io_is_gone)
{
	agr_supplier *sup = new_supplier(1);
	struct lost_recv r = { .recv_res = 1, .res_at_completion = 1 };
	agr_dispatcher *d;
	uint64_t before;
	struct tmsg t;

	d = lost_recv_start(&r, sup, _i == 0, &t);
	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	/*
	 * Torn down with the receive in flight (_i == 0), the workers
	 * leave the message to the stop, which sweeps once they exited.
	 */
	if (_i == 0)
		stop(d);
	ck_assert(journal_wait(&r.j, 1));
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(t.status, AGR_INTERRUPTED);
	ck_assert_int_eq(r.res_at_completion, -ECANCELED);
	agr_dispatcher_free(d);
	ck_assert_int_eq(atomic_load(&t.completions), 1);
	if (_i != 0)
		agr_supplier_free(sup);
	lost_recv_destroy(&r);
}
END_TEST

/*
 * A graceful stop that runs out while a pending function's receive is
 * in flight says so, instead of blaming a missing agr_exchange_done().
 */
START_TEST(graceful_timeout_names_io_in_flight)
{
	agr_supplier *sup = new_supplier(1);
	struct lost_recv r = { .recv_res = 1, .res_at_completion = 1 };
	agr_dispatcher *d;
	struct tmsg t;

	logbook_open();
	d = lost_recv_start(&r, sup, true, &t);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	ASSERT_LOGGED("agr_dispatcher_stop_gracefully() ran out",
		      "holds a message of no type (NULL)",
		      "ring operation(s) in flight that may be its own I/O");
	ck_assert_int_eq(tu_logbook_count(&logbook, TU_LOG_ANY,
					  "has not called agr_exchange_done()",
					  NULL, NULL),
			 0);
	agr_dispatcher_free(d);
	ck_assert_int_eq(t.status, AGR_INTERRUPTED);
	logbook_close();
	lost_recv_destroy(&r);
}
END_TEST

/* Calls agr_exchange_done() before it returns; returns its arg. */
static int done_early(agr_exchange *ex, void *arg)
{
	agr_exchange_done(ex, -EIO);
	return (int)(intptr_t)arg;
}

/*
 * agr_exchange_done() inside the function, before it returns: with
 * AGR_PENDING returned it finishes the function (the message fails
 * with its status); with 0 returned nothing was pending, so it is
 * ignored and said so, naming a NULL type as such.
 */
START_TEST(done_inside_the_function_is_applied_or_reported)
{
	struct journal j;
	agr_dispatcher_options o = owned_options(1, 4, &j);
	struct tmsg pending, plain;
	agr_dispatcher *d;

	journal_init(&j);
	logbook_open();
	d = new_dispatcher(&o);
	add_fn(d, "pending", done_early, (void *)(intptr_t)AGR_PENDING);
	add_fn(d, NULL, done_early, (void *)(intptr_t)0);
	start(d);
	tmsg_init(&pending, "order-1", 1);
	pending.m.type = "pending";
	tmsg_init(&plain, "order-2", 2); /* type NULL: only the catch-all */
	send_ok(d, &pending);
	ck_assert(journal_wait(&j, 1));
	send_ok(d, &plain);
	ck_assert(journal_wait(&j, 2));
	/* "pending" also matches the catch-all, which returns 0. */
	ck_assert_int_eq(pending.status, -EIO);
	ck_assert_int_eq(plain.status, 0);
	ck_assert_int_eq(atomic_load(&plain.completions), 1);
	ASSERT_LOGGED("a function for a message of no type (NULL) called "
		      "agr_exchange_done() before it returned",
		      "returned 0", "ignored");
	stop_and_free(d);
	logbook_close();
	journal_destroy(&j);
}
END_TEST

/* A worker init hook's own EPERM is not explained as io_uring's. */
static int init_eperm(agr_worker *w, void *arg)
{
	(void)w;
	(void)arg;
	return -EPERM;
}

START_TEST(init_hook_eperm_is_its_own)
{
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;

	so.parallelism = 1;
	so.worker_init = init_eperm;
	logbook_open();
	ck_assert_int_eq(agr_supplier_new_opts("hook", &so, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), -EPERM);
	ASSERT_LOGGED("the worker init hook failed", NULL, NULL);
	ck_assert_ptr_null(strstr(agr_strerror(-EPERM), "io_uring"));
	ck_assert_ptr_null(strstr(agr_strerror(-ENOSYS), "io_uring"));
	agr_supplier_free(sup);
	logbook_close();
}
END_TEST

/* Message 1's function blocks (a blocking call) until released. */
struct blocker {
	struct journal j;
	struct tu_latch started, release;
};

static int block_until_released(agr_exchange *ex, void *arg)
{
	struct blocker *b = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&b->j, EV_START + seq);
	if (seq == 1) {
		tu_latch_count_down(&b->started);
		TU_EXPECT(tu_latch_wait(&b->release, TU_LONG_NS * 2));
	}
	return 0;
}

static void free_dispatcher(void *d)
{
	agr_dispatcher_free(d);
}

/*
 * Only a function blocked in a call can hold a forced dispatcher; then
 * free says what it waits for (dispatcher, group, type, age) every 5 s
 * rather than hang silently, and returns once the function does.
 */
START_TEST(free_names_the_function_it_waits_for)
{
	struct blocker b;
	struct tu_aside f;
	agr_dispatcher *d;
	struct tmsg t;
	char group[32];
	agr_dispatcher_options o;

	journal_init(&b.j);
	tu_latch_init(&b.started, 1);
	tu_latch_init(&b.release, 1);
	logbook_open();
	o = owned_options(1, 8, &b.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, block_until_released, &b);
	start(d);
	tmsg_init(&t, "order-1", 1);
	t.m.type = "blocked";
	send_ok(d, &t);
	ck_assert(tu_latch_wait(&b.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	tu_aside_start(&f, free_dispatcher, d);
	snprintf(group, sizeof(group), "group %d ",
		 agr_group_key("order-1", 8));
	ASSERT_LOGGED("orders: agr_dispatcher_free() waits", group,
		      "type \"blocked\"");
	ck_assert(!tu_aside_wait(&f, 0));
	tu_latch_count_down(&b.release);
	ck_assert(tu_aside_wait(&f, TU_LONG_NS));
	tu_aside_join(&f);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(atomic_load(&t.completions), 1);
	logbook_close();
	tu_latch_destroy(&b.started);
	tu_latch_destroy(&b.release);
	journal_destroy(&b.j);
}
END_TEST

/* A graceful stop that runs out names the group and message holding it. */
START_TEST(graceful_timeout_names_what_holds_it)
{
	agr_dispatcher *d;
	struct tmsg t1;
	struct held h;
	char group[32];

	held_init(&h);
	logbook_open();
	d = started_dispatcher(1, 8, &h.j, NULL, hold_first, &h);
	tmsg_init(&t1, "order-1", 1);
	t1.m.type = "slow";
	send_ok(d, &t1);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	snprintf(group, sizeof(group), "group %d ",
		 agr_group_key("order-1", 8));
	ASSERT_LOGGED("orders: agr_dispatcher_stop_gracefully() ran out",
		      group, "type \"slow\", pending for");
	agr_exchange_done(h.ex, 0);
	stop_and_free(d);
	ck_assert_int_eq(t1.status, 0);
	logbook_close();
	held_destroy(&h);
}
END_TEST

void dispatcher_pending_tests(TCase *core)
{
	tcase_add_loop_test(
		core, force_stop_ends_a_pending_function_that_never_finishes,
		0, 2);
	tcase_add_loop_test(
		core, force_stop_discards_a_pending_message_once_its_io_is_gone,
		0, 2);
	tcase_add_test(core, free_alone_ends_a_pending_function_and_says_so);
	tcase_add_test(core, free_names_the_function_it_waits_for);
	tcase_add_test(core, graceful_timeout_names_what_holds_it);
	tcase_add_test(core, graceful_timeout_names_io_in_flight);
	tcase_add_test(core, done_inside_the_function_is_applied_or_reported);
	tcase_add_test(core, init_hook_eperm_is_its_own);
}
