/* SPDX-License-Identifier: MIT */
/*
 * check_composite.c - the composite event dispatcher: two children on
 * one borrowed scheduler, the order of start, quiesce, graceful and
 * forced stop, and the reference's composite cases.
 *
 * The step hook records each step into a journal, and at some steps
 * also what the real objects say at that moment (a child refusing
 * sends, the scheduler not yet disposed), so the order is checked
 * against the children and the supplier, not only against labels.
 * Everything seen on worker threads or in hooks is recorded there and
 * asserted on the test thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

static const agr_named_aggregate order = { "sales", "Order" };

/* ---- messages and their completions ---- */

struct tmsg {
	agr_message m; /* first: the completion casts back */
	int status;
	atomic_int completions;
};

static void tmsg_init(struct tmsg *t, const char *id)
{
	memset(t, 0, sizeof(*t));
	t->m.aggregate_id = id;
	t->m.type = "event";
	t->status = 1; /* no completion yet */
	atomic_init(&t->completions, 0);
}

static void on_complete(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = (struct tmsg *)(void *)msg;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	tu_tally_add(arg);
}

/* ---- fixture ---- */

struct fixture {
	struct tu_journal j;
	struct tu_tally done;
	agr_supplier *sup;
	agr_composite *c;
	agr_scheduler *sched;
	/* What the hook saw at some steps (-1: step not reached). */
	int domain_send_at_close_state;
	int state_send_at_stop_scheduler;
	int disposed_at_close_domain;
	int disposed_at_stop_scheduler;
	struct tmsg probe;
	struct tu_latch stop_domain_reached;
};

/* Sends a probe; its result says whether the child was still open. */
static int probe_send(struct fixture *f, agr_dispatcher *d)
{
	int ret;

	tmsg_init(&f->probe, "probe");
	ret = agr_dispatcher_send(d, &f->probe.m);
	return ret;
}

static void on_step(const char *step, void *arg)
{
	struct fixture *f = arg;

	tu_journal_add(&f->j, step, NULL);
	if (strcmp(step, "close:domain") == 0) {
		f->disposed_at_close_domain =
			agr_scheduler_is_disposed(f->sched);
	} else if (strcmp(step, "stop:domain") == 0) {
		tu_latch_count_down(&f->stop_domain_reached);
	} else if (strcmp(step, "close:state") == 0) {
		f->domain_send_at_close_state =
			probe_send(f, agr_composite_event_stream(f->c));
	} else if (strcmp(step, "stop:scheduler") == 0) {
		f->state_send_at_stop_scheduler =
			probe_send(f, agr_composite_state_event(f->c));
		f->disposed_at_stop_scheduler =
			agr_scheduler_is_disposed(f->sched);
	}
}

static agr_dispatcher_options child_options(struct fixture *f)
{
	agr_dispatcher_options o;

	memset(&o, 0, sizeof(o));
	o.parallelism = 8;
	o.on_complete = on_complete;
	o.complete_arg = &f->done;
	return o;
}

static agr_composite_options composite_options(struct fixture *f,
					       bool owns_supplier)
{
	agr_composite_options o;

	memset(&o, 0, sizeof(o));
	o.name = "orders";
	o.named_aggregate = order;
	o.supplier = f->sup;
	o.owns_supplier = owns_supplier;
	o.event_stream = child_options(f);
	o.state_event = child_options(f);
	o.on_step = on_step;
	o.step_arg = f;
	return o;
}

static void fixture_init(struct fixture *f, bool owns_supplier)
{
	agr_composite_options o;

	memset(f, 0, sizeof(*f));
	tu_journal_init(&f->j);
	tu_tally_init(&f->done);
	tu_latch_init(&f->stop_domain_reached, 1);
	f->domain_send_at_close_state = -1;
	f->state_send_at_stop_scheduler = -1;
	f->disposed_at_close_domain = -1;
	f->disposed_at_stop_scheduler = -1;
	ck_assert_int_eq(agr_supplier_new("evt", 2, &f->sup), 0);
	o = composite_options(f, owns_supplier);
	ck_assert_int_eq(agr_composite_new(&o, &f->c), 0);
	f->sched = agr_dispatcher_scheduler(agr_composite_event_stream(f->c));
	ck_assert_ptr_nonnull(f->sched);
}

/* Frees the composite and, when it does not own it, the supplier. */
static void fixture_destroy(struct fixture *f, bool owns_supplier)
{
	agr_composite_free(f->c);
	if (!owns_supplier)
		agr_supplier_free(f->sup);
	tu_latch_destroy(&f->stop_domain_reached);
	tu_tally_destroy(&f->done);
	tu_journal_destroy(&f->j);
}

static void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

/* ---- functions ---- */

struct seen {
	atomic_uintptr_t sched;
	atomic_int calls;
};

static int record_scheduler(agr_exchange *ex, void *arg)
{
	struct seen *s = arg;
	agr_scheduler *sched = agr_worker_scheduler(agr_exchange_worker(ex));

	atomic_store(&s->sched, (uintptr_t)sched);
	atomic_fetch_add(&s->calls, 1);
	return 0;
}

/* ---- tests ---- */

START_TEST(children_share_one_scheduler)
{
	struct fixture f;
	struct seen domain = { 0 }, state = { 0 };
	agr_dispatcher *es, *se;
	struct tmsg a, b;

	fixture_init(&f, true);
	es = agr_composite_event_stream(f.c);
	se = agr_composite_state_event(f.c);
	ck_assert_ptr_nonnull(es);
	ck_assert_ptr_nonnull(se);
	ck_assert_ptr_ne(es, se);
	ck_assert_str_eq(agr_composite_name(f.c), "orders");
	ck_assert_str_eq(agr_dispatcher_name(es), "orders.domain");
	ck_assert_str_eq(agr_dispatcher_name(se), "orders.state");
	ck_assert_ptr_eq(agr_dispatcher_scheduler(se), f.sched);
	ck_assert_int_eq(agr_supplier_size(f.sup), 1);
	ck_assert_int_eq(agr_dispatcher_parallelism(es), 8);

	ck_assert_int_eq(agr_dispatcher_register(es, NULL, record_scheduler,
						 &domain), 0);
	ck_assert_int_eq(agr_dispatcher_register(se, NULL, record_scheduler,
						 &state), 0);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	tmsg_init(&a, "order-1");
	tmsg_init(&b, "order-1");
	send_ok(es, &a);
	send_ok(se, &b);
	ck_assert(tu_tally_wait(&f.done, 2, TU_LONG_NS));
	ck_assert_int_eq(a.status, 0);
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(atomic_load(&domain.calls), 1);
	ck_assert_int_eq(atomic_load(&state.calls), 1);
	ck_assert_ptr_eq((void *)atomic_load(&domain.sched), f.sched);
	ck_assert_ptr_eq((void *)atomic_load(&state.sched), f.sched);

	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(f.sched));
	fixture_destroy(&f, true);
}
END_TEST

/*
 * CompositeEventDispatcherLifecycleTest: "runtime graceful stop closes
 * every logical intake before scheduler cleanup". The closes belong to
 * the quiesce that a stop does first; the stops then go in reverse.
 */
START_TEST(graceful_stop_closes_domain_state_scheduler)
{
	static const char *const expected[] = {
		"start:domain", "start:state", "close:domain", "close:state",
		"stop:state",	"stop:domain", "stop:scheduler" };
	struct fixture f;
	struct tmsg t[6];
	int i;

	fixture_init(&f, true);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	/* Messages with no function: they complete, skipped, in the drain. */
	for (i = 0; i < 6; i++) {
		tmsg_init(&t[i], i % 2 ? "order-1" : "order-2");
		send_ok(i < 3 ? agr_composite_event_stream(f.c)
			      : agr_composite_state_event(f.c),
			&t[i]);
	}
	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, TU_LONG_NS), 0);
	tu_journal_assert(&f.j, expected, 7, 7);
	/* Each step happened after the one before had taken effect. */
	ck_assert_int_eq(f.disposed_at_close_domain, 0);
	ck_assert_int_eq(f.domain_send_at_close_state, -ESHUTDOWN);
	ck_assert_int_eq(f.state_send_at_stop_scheduler, -ESHUTDOWN);
	ck_assert_int_eq(f.disposed_at_stop_scheduler, 0);
	ck_assert(agr_scheduler_is_disposed(f.sched));
	ck_assert(agr_scheduler_is_terminated(f.sched));
	ck_assert(tu_tally_wait(&f.done, 6, TU_LONG_NS));
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(t[i].status, 0);
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	}
	/* The refused probes never completed. */
	ck_assert_int_eq(atomic_load(&f.probe.completions), 0);
	fixture_destroy(&f, true);
}
END_TEST

/*
 * The reference's child order [event-stream, state-event]: a composite
 * that is only quiesced shows the two closes and nothing else.
 */
START_TEST(start_and_quiesce_go_to_children_in_order)
{
	static const char *const expected[] = { "start:domain", "start:state",
						"close:domain",
						"close:state" };
	struct fixture f;
	struct tmsg late;

	fixture_init(&f, true);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	ck_assert_int_eq(agr_composite_quiesce(f.c), 0);
	ck_assert_int_eq(agr_composite_quiesce(f.c), 0); /* once only */
	tu_journal_assert(&f.j, expected, 4, 4);
	tmsg_init(&late, "order-1");
	ck_assert_int_eq(agr_dispatcher_send(agr_composite_event_stream(f.c),
					     &late.m),
			 -ESHUTDOWN);
	ck_assert_int_eq(agr_dispatcher_send(agr_composite_state_event(f.c),
					     &late.m),
			 -ESHUTDOWN);
	/* A stopped composite does not start again. */
	ck_assert_int_eq(agr_composite_start(f.c), -ESHUTDOWN);
	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, TU_LONG_NS), 0);
	ck_assert_int_eq(atomic_load(&late.completions), 0);
	fixture_destroy(&f, true);
}
END_TEST

/* ---- a child that does not start ---- */

static int count_call(agr_exchange *ex, void *arg)
{
	(void)ex;
	atomic_fetch_add((atomic_int *)arg, 1);
	return 0;
}

/*
 * CompositeEventDispatcherLifecycleTest: "reported event child start
 * failure prevents state child admission". The event-stream child is
 * quiesced by hand, so its start fails: the state child is never
 * started (its parked message is not handled), and the stop that
 * cleans up discards that message and stops the scheduler.
 */
START_TEST(domain_start_failure_keeps_state_unstarted)
{
	static const char *const expected[] = {
		"start:domain", "close:domain", "close:state", "stop:state",
		"stop:domain",	"stop:scheduler" };
	struct fixture f;
	atomic_int calls;
	struct tmsg parked;

	fixture_init(&f, true);
	atomic_init(&calls, 0);
	ck_assert_int_eq(agr_dispatcher_register(
				 agr_composite_state_event(f.c), NULL,
				 count_call, &calls),
			 0);
	tmsg_init(&parked, "order-1");
	send_ok(agr_composite_state_event(f.c), &parked);
	ck_assert_int_eq(agr_dispatcher_quiesce(
				 agr_composite_event_stream(f.c)),
			 0);
	ck_assert_int_eq(agr_composite_start(f.c), -ESHUTDOWN);
	ck_assert_int_eq(tu_journal_count(&f.j, "start:state"), 0);
	ck_assert_int_eq(atomic_load(&parked.completions), 0);

	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, TU_LONG_NS), 0);
	tu_journal_assert(&f.j, expected, 6, 6);
	ck_assert(tu_tally_wait(&f.done, 1, TU_LONG_NS));
	ck_assert_int_eq(parked.status, AGR_DISCARDED);
	ck_assert_int_eq(atomic_load(&calls), 0);
	ck_assert(agr_scheduler_is_terminated(f.sched));
	fixture_destroy(&f, true);
}
END_TEST

/* ---- force stop while a child's work blocks ---- */

struct blocker {
	struct tu_latch entered;
	struct tu_latch release;
};

/* Blocks its worker, as cleanup stuck in a blocking call would. */
static int block_worker(agr_exchange *ex, void *arg)
{
	struct blocker *b = arg;

	(void)ex;
	tu_latch_count_down(&b->entered);
	tu_latch_wait(&b->release, TU_LONG_NS);
	return 0;
}

struct stop_call {
	pthread_t thread;
	agr_composite *c;
	int result;
	uint64_t took;
};

static void *call_stop_gracefully(void *arg)
{
	struct stop_call *s = arg;

	s->result = agr_composite_stop_gracefully(s->c, TU_LONG_NS);
	return NULL;
}

static void *call_force_stop(void *arg)
{
	struct stop_call *s = arg;
	uint64_t before = tu_now_ns();

	s->result = agr_composite_force_stop(s->c);
	s->took = tu_now_ns() - before;
	return NULL;
}

/* The force, not the graceful stop, disposed the scheduler: once each. */
static void assert_forced_once(struct fixture *f)
{
	ck_assert(agr_scheduler_is_disposed(f->sched));
	ck_assert_int_eq(tu_journal_count(&f->j, "force:scheduler"), 1);
	ck_assert_int_eq(tu_journal_count(&f->j, "force:domain"), 1);
	ck_assert_int_eq(tu_journal_count(&f->j, "force:state"), 1);
}

/*
 * CompositeEventDispatcherLifecycleTest: "runtime force stop does not
 * wait for physical intake cleanup"; the supplier is forced once.
 */
START_TEST(force_stop_returns_while_child_cleanup_blocks)
{
	struct fixture f;
	struct blocker b;
	struct stop_call graceful, other_force;
	struct tmsg t;
	uint64_t before, took;
	int ret;

	fixture_init(&f, true);
	tu_latch_init(&b.entered, 1);
	tu_latch_init(&b.release, 1);
	ck_assert_int_eq(agr_dispatcher_register(
				 agr_composite_event_stream(f.c), NULL,
				 block_worker, &b),
			 0);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	tmsg_init(&t, "order-1");
	send_ok(agr_composite_event_stream(f.c), &t);
	ck_assert(tu_latch_wait(&b.entered, TU_LONG_NS));

	/* A graceful stop waits in stop:domain for the blocked handler. */
	graceful = (struct stop_call){ .c = f.c };
	ck_assert_int_eq(pthread_create(&graceful.thread, NULL,
					call_stop_gracefully, &graceful),
			 0);
	ck_assert(tu_latch_wait(&f.stop_domain_reached, TU_LONG_NS));

	other_force = (struct stop_call){ .c = f.c, .result = 1 };
	ck_assert_int_eq(pthread_create(&other_force.thread, NULL,
					call_force_stop, &other_force),
			 0);
	before = tu_now_ns();
	ret = agr_composite_force_stop(f.c);
	took = tu_now_ns() - before;
	pthread_join(other_force.thread, NULL);
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(other_force.result, 0);
	/* The reference's bound for a force stop, whichever call acted. */
	ck_assert_uint_lt(took, 1000 * MS);
	ck_assert_uint_lt(other_force.took, 1000 * MS);
	ck_assert_int_eq(agr_composite_force_stop(f.c), 0);
	assert_forced_once(&f);

	tu_latch_count_down(&b.release);
	pthread_join(graceful.thread, NULL);
	ck_assert_int_eq(graceful.result, 0);
	/* The graceful stop reached the supplier after the force: skipped. */
	ck_assert_int_eq(tu_journal_count(&f.j, "stop:scheduler"), 0);
	ck_assert_int_eq(tu_journal_count(&f.j, "close:state"), 1);
	ck_assert_int_eq(tu_journal_count(&f.j, "force:scheduler"), 1);
	ck_assert(tu_tally_wait(&f.done, 1, TU_LONG_NS));
	ck_assert_int_eq(t.status, 0);
	fixture_destroy(&f, true);
	tu_latch_destroy(&b.entered);
	tu_latch_destroy(&b.release);
}
END_TEST

/* ---- a child whose stop fails ---- */

START_TEST(failed_child_stop_still_stops_the_rest)
{
	static const char *const expected[] = {
		"start:domain", "start:state", "close:domain", "close:state",
		"stop:state",	"stop:domain", "stop:scheduler" };
	struct fixture f;
	struct tu_stuck_recv r;
	struct tmsg stuck, fine, late;

	fixture_init(&f, true);
	tu_stuck_recv_init(&r);
	ck_assert_int_eq(agr_dispatcher_register(
				 agr_composite_event_stream(f.c), NULL,
				 tu_stuck_recv_fn, &r),
			 0);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	tmsg_init(&stuck, "order-1");
	tmsg_init(&fine, "order-2");
	send_ok(agr_composite_event_stream(f.c), &stuck);
	send_ok(agr_composite_state_event(f.c), &fine);
	ck_assert(tu_latch_wait(&r.started, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&r.submit_ret), 0);
	ck_assert(tu_tally_wait(&f.done, 1, TU_LONG_NS));
	ck_assert_int_eq(fine.status, 0);

	/* The domain child cannot drain; the others are still stopped. */
	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, 100 * MS),
			 -ETIMEDOUT);
	tu_journal_assert(&f.j, expected, 7, 7);
	ck_assert_int_eq(f.domain_send_at_close_state, -ESHUTDOWN);
	ck_assert_int_eq(f.state_send_at_stop_scheduler, -ESHUTDOWN);
	ck_assert(agr_scheduler_is_disposed(f.sched));
	tmsg_init(&late, "order-3");
	ck_assert_int_eq(agr_dispatcher_send(agr_composite_state_event(f.c),
					     &late.m),
			 -ESHUTDOWN);

	/* The force cancels the receive; the message completes interrupted. */
	ck_assert_int_eq(agr_composite_force_stop(f.c), 0);
	ck_assert(tu_tally_wait(&f.done, 2, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&r.recv_res), -ECANCELED);
	ck_assert_int_eq(stuck.status, AGR_INTERRUPTED);
	ck_assert_int_eq(atomic_load(&stuck.completions), 1);
	fixture_destroy(&f, true);
	tu_stuck_recv_destroy(&r);
}
END_TEST

/* ---- a borrowed supplier stays its owner's ---- */

START_TEST(supplier_not_owned_is_left_running)
{
	static const char *const expected[] = {
		"start:domain", "start:state", "close:domain", "close:state",
		"stop:state",	"stop:domain", "force:state",  "force:domain" };
	struct fixture f;
	struct tu_latch ran;

	fixture_init(&f, false);
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	ck_assert_int_eq(agr_composite_stop_gracefully(f.c, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_composite_force_stop(f.c), 0);
	tu_journal_assert(&f.j, expected, 8, 8);
	ck_assert(!agr_scheduler_is_disposed(f.sched));
	tu_latch_init(&ran, 1);
	ck_assert_int_eq(
		agr_scheduler_schedule(f.sched, 0, tu_count_down, &ran), 0);
	ck_assert(tu_latch_wait(&ran, TU_LONG_NS));
	tu_latch_destroy(&ran);
	agr_composite_free(f.c);
	f.c = NULL;
	/* Freeing the composite left the supplier usable. */
	ck_assert(!agr_scheduler_is_disposed(f.sched));
	ck_assert_int_eq(agr_supplier_stop_gracefully(f.sup, TU_LONG_NS), 0);
	fixture_destroy(&f, false);
}
END_TEST

START_TEST(free_without_stop_completes_every_message)
{
	struct fixture f;
	struct tmsg t[16];
	int i;

	fixture_init(&f, true);
	/* Half before start (parked), half after. */
	for (i = 0; i < 8; i++) {
		tmsg_init(&t[i], i % 2 ? "order-1" : "order-2");
		send_ok(i % 2 ? agr_composite_event_stream(f.c)
			      : agr_composite_state_event(f.c),
			&t[i]);
	}
	ck_assert_int_eq(agr_composite_start(f.c), 0);
	for (i = 8; i < 16; i++) {
		tmsg_init(&t[i], i % 2 ? "order-3" : "order-4");
		send_ok(i % 2 ? agr_composite_event_stream(f.c)
			      : agr_composite_state_event(f.c),
			&t[i]);
	}
	agr_composite_free(f.c);
	f.c = NULL;
	for (i = 0; i < 16; i++) {
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
		ck_assert(t[i].status == 0 || t[i].status == AGR_DISCARDED);
	}
	fixture_destroy(&f, true);
}
END_TEST

START_TEST(rejects_bad_options)
{
	struct fixture f;
	agr_composite_options o;
	agr_composite *c = NULL;
	agr_scheduler *s = NULL;

	memset(&f, 0, sizeof(f));
	tu_tally_init(&f.done);
	ck_assert_int_eq(agr_supplier_new("evt", 1, &f.sup), 0);
	o = composite_options(&f, true);
	o.on_step = NULL;
	ck_assert_int_eq(agr_composite_new(NULL, &c), -EINVAL);
	ck_assert_int_eq(agr_composite_new(&o, NULL), -EINVAL);
	o.name = "";
	ck_assert_int_eq(agr_composite_new(&o, &c), -EINVAL);
	o.name = NULL;
	ck_assert_int_eq(agr_composite_new(&o, &c), -EINVAL);
	o = composite_options(&f, true);
	o.supplier = NULL;
	ck_assert_int_eq(agr_composite_new(&o, &c), -EINVAL);
	o = composite_options(&f, true);
	o.event_stream.on_complete = NULL;
	ck_assert_int_eq(agr_composite_new(&o, &c), -EINVAL);
	o = composite_options(&f, true);
	o.named_aggregate.aggregate_name = "";
	ck_assert_int_eq(agr_composite_new(&o, &c), -EINVAL);
	ck_assert_ptr_null(c);

	ck_assert_int_eq(agr_composite_start(NULL), -EINVAL);
	ck_assert_int_eq(agr_composite_quiesce(NULL), -EINVAL);
	ck_assert_int_eq(agr_composite_stop_gracefully(NULL, 0), -EINVAL);
	ck_assert_int_eq(agr_composite_force_stop(NULL), -EINVAL);
	ck_assert_ptr_null(agr_composite_event_stream(NULL));
	ck_assert_ptr_null(agr_composite_state_event(NULL));
	ck_assert_ptr_null(agr_composite_name(NULL));
	agr_composite_free(NULL);

	/* A failed creation left the supplier the caller's and usable. */
	ck_assert_int_eq(agr_supplier_get_or_init(f.sup, &order, &s), 0);
	ck_assert(!agr_scheduler_is_disposed(s));
	agr_supplier_free(f.sup);
	tu_tally_destroy(&f.done);
}
END_TEST

START_TEST(refused_on_a_stopping_supplier)
{
	struct fixture f;
	agr_composite_options o;
	agr_composite *c = NULL;

	memset(&f, 0, sizeof(f));
	tu_tally_init(&f.done);
	ck_assert_int_eq(agr_supplier_new("evt", 1, &f.sup), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(f.sup, TU_LONG_NS), 0);
	o = composite_options(&f, true);
	ck_assert_int_eq(agr_composite_new(&o, &c), -ESHUTDOWN);
	ck_assert_ptr_null(c);
	agr_supplier_free(f.sup);
	tu_tally_destroy(&f.done);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("composite");
	TCase *ref = tcase_create("reference");
	TCase *core = tcase_create("core");

	tcase_add_test(ref, graceful_stop_closes_domain_state_scheduler);
	tcase_add_test(ref, force_stop_returns_while_child_cleanup_blocks);
	tcase_add_test(ref, failed_child_stop_still_stops_the_rest);
	tcase_add_test(ref, domain_start_failure_keeps_state_unstarted);
	tcase_add_test(ref, start_and_quiesce_go_to_children_in_order);
	tcase_add_test(core, children_share_one_scheduler);
	tcase_add_test(core, supplier_not_owned_is_left_running);
	tcase_add_test(core, free_without_stop_completes_every_message);
	tcase_add_test(core, rejects_bad_options);
	tcase_add_test(core, refused_on_a_stopping_supplier);
	tcase_set_timeout(ref, 120);
	tcase_set_timeout(core, 120);
	suite_add_tcase(s, ref);
	suite_add_tcase(s, core);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
