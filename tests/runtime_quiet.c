/* SPDX-License-Identifier: MIT */
/*
 * runtime_quiet.c - check_runtime's admission leases and the quiet
 * boundary, the deadline with a function stuck on I/O, and a composite
 * taking its place in the order of quiesce and stop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring.h>

#include "runtime_test.h"
#include "testutil.h"

/* ---- leases and the quiet boundary ---- */

START_TEST(admission_stays_open_while_work_is_active)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 20 * MS);
	agr_supplier *sup = new_supplier(1);
	struct tu_tally done;
	struct tmsg during, after;
	struct stopper s;
	agr_dispatcher *d;
	int logged;

	tu_tally_init(&done);
	d = new_dispatcher(sup, "d", &order, &done);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);

	/* A release without a lease is reported and changes nothing. */
	logged = errors_logged();
	agr_runtime_lease_release(rt);
	ck_assert_int_eq(errors_logged(), logged + 1);
	ck_assert_uint_eq(agr_runtime_active(rt), 0);

	/* Our own lease keeps the runtime active through the boundary. */
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), 0);
	ck_assert_uint_eq(agr_runtime_active(rt), 1);
	stopper_start(&s, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	tmsg_init(&during, "order-1");
	send_ok(d, &during);
	ck_assert(tu_tally_wait(&done, 1, TU_LONG_NS));
	ck_assert_int_eq(during.status, 0);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_QUIET);
	agr_runtime_lease_release(rt);

	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_uint_eq(agr_runtime_active(rt), 0);
	tmsg_init(&after, "order-1");
	ck_assert_int_eq(agr_dispatcher_send(d, &after.m), -ESHUTDOWN);
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&after.completions), 0);
	agr_runtime_free(rt);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/*
 * A's function holds its message (AGR_PENDING) across the start of the
 * stop; then, on A's worker, it sends follow-on work to B and finishes.
 * The follow-on must be admitted and handled: leases are still granted
 * during the quiet boundary.
 */
struct follow_on {
	agr_dispatcher *b;
	agr_exchange *ex;
	int worker;
	struct tu_latch held;
	struct tmsg next;
	atomic_int send_ret;
	atomic_int b_calls;
};

static int hold_message(agr_exchange *ex, void *arg)
{
	struct follow_on *f = arg;

	f->ex = ex;
	f->worker = agr_worker_index(agr_exchange_worker(ex));
	tu_latch_count_down(&f->held);
	return AGR_PENDING;
}

static void send_follow_on_and_finish(void *arg)
{
	struct follow_on *f = arg;

	atomic_store(&f->send_ret, agr_dispatcher_send(f->b, &f->next.m));
	agr_exchange_done(f->ex, 0);
}

static int count_b(agr_exchange *ex, void *arg)
{
	struct follow_on *f = arg;

	(void)ex;
	atomic_fetch_add(&f->b_calls, 1);
	return 0;
}

/* The report after the follow-on: each dispatcher handled one, in time. */
static void assert_both_handled(agr_runtime *rt)
{
	agr_component_report c[2];
	agr_runtime_report r;

	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, 0);
	ck_assert_uint_ge(r.quiet_ns, 50 * MS);
	ck_assert_int_eq(c[0].kind, AGR_COMPONENT_DISPATCHER);
	ck_assert_str_eq(c[0].name, "a");
	ck_assert_uint_eq(c[0].handled, 1);
	ck_assert_uint_eq(c[1].handled, 1);
	ck_assert_uint_eq(c[0].discarded + c[1].discarded, 0);
	ck_assert_uint_eq(c[0].in_flight + c[1].in_flight, 0);
	ck_assert(c[0].stop_ran && c[1].stop_ran);
}

START_TEST(follow_on_work_in_quiet_boundary_is_handled)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 50 * MS);
	agr_supplier *sup = new_supplier(2);
	struct follow_on f = { .worker = -1 };
	struct tu_tally done;
	struct tmsg first, late;
	struct stopper s;
	agr_dispatcher *a;

	tu_tally_init(&done);
	tu_latch_init(&f.held, 1);
	atomic_init(&f.send_ret, 1);
	atomic_init(&f.b_calls, 0);
	a = new_dispatcher(sup, "a", &order, &done);
	f.b = new_dispatcher(sup, "b", &payment, &done);
	ck_assert_int_eq(agr_dispatcher_register(a, NULL, hold_message, &f),
			 0);
	ck_assert_int_eq(agr_dispatcher_register(f.b, NULL, count_b, &f), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, a), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, f.b), 0);
	ck_assert_int_eq(agr_dispatcher_start(a), 0);
	ck_assert_int_eq(agr_dispatcher_start(f.b), 0);
	tmsg_init(&first, "order-1");
	tmsg_init(&f.next, "payment-1");
	send_ok(a, &first);
	ck_assert(tu_latch_wait(&f.held, TU_LONG_NS));

	stopper_start(&s, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	ck_assert_uint_eq(agr_runtime_active(rt), 1);
	ck_assert_int_eq(agr_scheduler_schedule(agr_dispatcher_scheduler(a),
						(unsigned)f.worker,
						send_follow_on_and_finish, &f),
			 0);
	ck_assert_int_eq(stopper_join(&s), 0);

	ck_assert_int_eq(atomic_load(&f.send_ret), 0);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(first.status, 0);
	ck_assert_int_eq(f.next.status, 0);
	ck_assert_int_eq(atomic_load(&f.b_calls), 1);
	tmsg_init(&late, "payment-2");
	ck_assert_int_eq(agr_dispatcher_send(f.b, &late.m), -ESHUTDOWN);

	assert_both_handled(rt);
	agr_runtime_free(rt);
	agr_dispatcher_free(a);
	agr_dispatcher_free(f.b);
	agr_supplier_free(sup);
	tu_latch_destroy(&f.held);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- the deadline with a function stuck on I/O ---- */

/* The report after the deadline: forced, one interrupted, one discarded. */
static void assert_one_interrupted_one_discarded(agr_runtime *rt)
{
	agr_component_report c[1];
	agr_runtime_report r;

	get_report(rt, &r, c, 1);
	ck_assert(r.deadline_passed);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	ck_assert_uint_eq(c[0].in_flight_at_deadline, 2);
	ck_assert(!c[0].stop_ran);
	ck_assert(c[0].force_ran);
	ck_assert_uint_eq(c[0].discarded, 1);
	ck_assert_uint_eq(c[0].failed, 0);
	ck_assert_uint_eq(c[0].interrupted, 1); /* its function saw -ECANCELED */
	ck_assert_uint_eq(c[0].in_flight, 0);
}

START_TEST(deadline_discards_work_stuck_on_recv)
{
	agr_runtime *rt = new_runtime(300 * MS, 20 * MS);
	agr_supplier *sup = new_supplier(1);
	struct tu_stuck_recv rv;
	struct tu_tally done;
	struct tmsg stuck, queued;
	agr_dispatcher *d;
	uint64_t before, took;

	tu_tally_init(&done);
	tu_stuck_recv_init(&rv);
	d = new_dispatcher(sup, "d", &order, &done);
	ck_assert_int_eq(
		agr_dispatcher_register(d, NULL, tu_stuck_recv_fn, &rv), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	tmsg_init(&stuck, "order-1");
	tmsg_init(&queued, "order-1"); /* same group: waits behind it */
	send_ok(d, &stuck);
	ck_assert(tu_latch_wait(&rv.started, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&rv.submit_ret), 0);
	send_ok(d, &queued);
	ck_assert_uint_eq(agr_runtime_active(rt), 2);

	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_ge(took, 300 * MS);
	ck_assert_uint_lt(took, 300 * MS + FORCE_BOUND_NS);

	/*
	 * Both complete: the stuck one interrupted (its function ran), the
	 * queued one discarded (the sender may redeliver it).
	 */
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&rv.recv_res), -ECANCELED);
	ck_assert_int_eq(stuck.status, AGR_INTERRUPTED);
	ck_assert_int_eq(queued.status, AGR_DISCARDED);
	ck_assert_int_eq(atomic_load(&stuck.completions), 1);
	ck_assert_int_eq(atomic_load(&queued.completions), 1);
	ck_assert_int_eq(atomic_load(&rv.calls), 1);

	ck_assert(warned("deadline passed with 2 message(s) in flight"));
	/* Each lease is released just after its completion callback. */
	ck_assert(wait_no_lease(rt));
	assert_one_interrupted_one_discarded(rt);
	agr_runtime_free(rt); /* waits for the last lease */
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_stuck_recv_destroy(&rv);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- a composite among the components ---- */

/* The composite is the second component and handled all four. */
static void assert_composite_reported(agr_runtime *rt)
{
	agr_component_report c[3];
	agr_runtime_report r;

	get_report(rt, &r, c, 3);
	ck_assert_uint_eq(r.ncomponents, 3);
	ck_assert_int_eq(c[1].kind, AGR_COMPONENT_COMPOSITE);
	ck_assert_str_eq(c[1].name, "orders");
	ck_assert_uint_eq(c[1].handled, 4); /* both children, skipped */
	ck_assert_uint_eq(c[1].in_flight, 0);
}

START_TEST(composite_takes_its_place_in_the_order)
{
	static const char *const expected[] = {
		"quiesce:first",
		"composite:close:domain",
		"composite:close:state",
		"quiesce:last",
		"stop:last",
		"composite:stop:state",
		"composite:stop:domain",
		"composite:stop:scheduler",
		"stop:first",
	};
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(2);
	struct probe first, last;
	struct tu_tally done;
	struct tmsg t[4];
	agr_composite *comp;
	agr_scheduler *sched;
	int i;

	tu_journal_reset(&journal);
	tu_tally_init(&done);
	probe_init(&first, "first");
	probe_init(&last, "last");
	comp = new_orders(sup, &done);
	sched = agr_dispatcher_scheduler(agr_composite_state_event(comp));

	add_probe(rt, &first);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), -EEXIST);
	ck_assert_int_eq(agr_runtime_add_dispatcher(
				 rt, agr_composite_event_stream(comp)),
			 -EEXIST);
	add_probe(rt, &last);
	ck_assert_int_eq(agr_composite_start(comp), 0);
	tu_journal_reset(&journal); /* only the stop's steps */
	for (i = 0; i < 4; i++) {
		tmsg_init(&t[i], "order-1");
		send_ok(i % 2 ? agr_composite_event_stream(comp)
			      : agr_composite_state_event(comp),
			&t[i]);
	}
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	tu_journal_assert(&journal, expected, 9, 9);
	ck_assert(agr_scheduler_is_terminated(sched));
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(t[i].status, 0);
	assert_composite_reported(rt);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	probe_destroy(&first);
	probe_destroy(&last);
	tu_tally_destroy(&done);
}
END_TEST

void runtime_quiet_tests(TCase *ref, TCase *core)
{
	tcase_add_test(ref, composite_takes_its_place_in_the_order);
	tcase_add_test(core, admission_stays_open_while_work_is_active);
	tcase_add_test(core, follow_on_work_in_quiet_boundary_is_handled);
	tcase_add_test(core, deadline_discards_work_stuck_on_recv);
}
