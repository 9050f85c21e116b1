/* SPDX-License-Identifier: MIT */
/*
 * runtime_stops.c - check_runtime's stops: the global deadline, failures
 * (the first error wins, the rest still stop), force stop, and
 * concurrent stops sharing one shutdown.
 */
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

#include "runtime_test.h"
#include "testutil.h"

/* ---- the deadline ---- */

/*
 * WowRuntimeTest: "components quiesce first->second, stop
 * second->first; on deadline the stop of the first never runs
 * gracefully". The second, forced inside its stop, is forced once more
 * when that stop returns (the compensation).
 */
START_TEST(deadline_forces_first_never_graceful)
{
	static const char *const expected[] = {
		"quiesce:first", "quiesce:second", "stop:second",
		"force:second" };
	agr_runtime *rt = new_runtime(300 * MS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, second;
	uint64_t before, took;

	add_two_probes(rt, &first, &second);
	second.mode = STOP_BLOCKS_UNTIL_FORCED;
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_ge(took, 300 * MS);
	ck_assert_uint_lt(took, 300 * MS + FORCE_BOUND_NS);
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);

	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	ck_assert(r.deadline_passed);
	ck_assert(r.forced);
	ck_assert(!c[0].stop_ran);
	ck_assert(c[0].force_ran);
	ck_assert(c[1].stop_ran && c[1].force_ran);
	/* Free joins the stop thread: nothing can call first after. */
	agr_runtime_free(rt);
	tu_journal_assert(&journal, expected, 4, 6);
	ck_assert_int_eq(tu_journal_count(&journal, "force:second"), 2);
	ck_assert_int_eq(tu_journal_count(&journal, "force:first"), 1);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&second.forces), 2);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

START_TEST(stop_returns_at_deadline_while_a_stop_blocks)
{
	agr_runtime *rt = new_runtime(200 * MS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, stuck;
	uint64_t before, took;

	tu_journal_reset(&journal);
	probe_init(&first, "first");
	probe_init(&stuck, "stuck");
	stuck.mode = STOP_BLOCKS_UNTIL_RELEASED; /* ignores the force */
	add_probe(rt, &first);
	add_probe(rt, &stuck);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_lt(took, 200 * MS + FORCE_BOUND_NS);
	get_report(rt, &r, c, 2);
	ck_assert(c[1].stop_ran);
	ck_assert_int_eq(c[1].stop_result, -EINPROGRESS);
	ck_assert(c[1].force_ran);
	ck_assert(c[0].force_ran);
	probe_release(&stuck);
	agr_runtime_free(rt); /* joins the stop thread, now unblocked */
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	/* Its stop returned after the force: forced once more. */
	ck_assert_int_eq(atomic_load(&stuck.forces), 2);
	probe_destroy(&first);
	probe_destroy(&stuck);
}
END_TEST

/* ---- failures ---- */

/*
 * WowRuntimeTest: "shutdown continues after failures and suppresses
 * later failures".
 */
START_TEST(failure_still_stops_the_rest_and_first_error_wins)
{
	static const char *const expected[] = {
		"quiesce:c1", "quiesce:c2", "quiesce:c3", "stop:c3",
		"stop:c2",    "stop:c1",    "force:c3",	  "force:c2",
		"force:c1" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[3];
	agr_runtime_report r;
	struct probe p[3];
	int logged;

	tu_journal_reset(&journal);
	probe_init(&p[0], "c1");
	probe_init(&p[1], "c2");
	probe_init(&p[2], "c3");
	p[1].stop_ret = -EPIPE;
	p[2].stop_ret = -EIO; /* stopped first: the primary failure */
	add_probe(rt, &p[0]);
	add_probe(rt, &p[1]);
	add_probe(rt, &p[2]);
	logged = errors_logged();
	ck_assert_int_eq(agr_runtime_stop(rt), -EIO);
	tu_journal_assert(&journal, expected, 9, 9);
	ck_assert_int_eq(errors_logged() - logged, 2); /* each failure */
	get_report(rt, &r, c, 3);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert(r.forced);
	ck_assert(!r.deadline_passed);
	ck_assert_int_eq(c[0].stop_result, 0);
	ck_assert_int_eq(c[1].stop_result, -EPIPE); /* recorded too */
	ck_assert_int_eq(c[2].stop_result, -EIO);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EPIPE);
	agr_runtime_free(rt);
	probe_destroy(&p[0]);
	probe_destroy(&p[1]);
	probe_destroy(&p[2]);
}
END_TEST

START_TEST(quiesce_failure_fails_the_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe a, b;

	tu_journal_reset(&journal);
	probe_init(&a, "a");
	probe_init(&b, "b");
	a.quiesce_ret = -EPERM;
	add_probe(rt, &a);
	add_probe(rt, &b);
	ck_assert_int_eq(agr_runtime_stop(rt), -EPERM);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(c[0].quiesce_result, -EPERM);
	/* The rest of the sequence still ran, then everything was forced. */
	ck_assert_int_eq(atomic_load(&a.stops), 1);
	ck_assert_int_eq(atomic_load(&b.stops), 1);
	ck_assert_int_eq(atomic_load(&a.forces), 1);
	ck_assert_int_eq(atomic_load(&b.forces), 1);
	agr_runtime_free(rt);
	probe_destroy(&a);
	probe_destroy(&b);
}
END_TEST

/* ---- force stop ---- */

/*
 * WowRuntimeTest: "explicit force stop cancels graceful cleanup with at
 * most one compensation pass". The graceful observers complete with 0,
 * as the reference's do.
 */
START_TEST(force_stop_abandons_a_graceful_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, slow;
	struct stopper s;
	uint64_t before;

	tu_journal_reset(&journal);
	probe_init(&first, "first");
	probe_init(&slow, "slow");
	slow.mode = STOP_BLOCKS_UNTIL_FORCED;
	add_probe(rt, &first);
	add_probe(rt, &slow);
	stopper_start(&s, rt);
	ck_assert(tu_latch_wait(&slow.stop_entered, TU_LONG_NS));
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0); /* no-op now */
	get_report(rt, &r, c, 2);
	ck_assert(r.forced);
	ck_assert(!r.deadline_passed);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&slow.forces), 2);
	probe_destroy(&first);
	probe_destroy(&slow);
}
END_TEST

START_TEST(force_before_stop_and_free_without_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe a, b;

	tu_journal_reset(&journal);
	probe_init(&a, "a");
	probe_init(&b, "b");
	add_probe(rt, &a);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&a.quiesces), 0);
	ck_assert_int_eq(atomic_load(&a.forces), 1);
	agr_runtime_free(rt);

	/* Free without a stop forces once, and nothing graceful runs. */
	rt = new_runtime(TU_LONG_NS, 0);
	add_probe(rt, &b);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&b.quiesces), 0);
	ck_assert_int_eq(atomic_load(&b.stops), 0);
	ck_assert_int_eq(atomic_load(&b.forces), 1);
	probe_destroy(&a);
	probe_destroy(&b);
}
END_TEST

/* ---- concurrent stops ---- */

#define STOPPERS 8

/* _i == 0: every stop succeeds; 1: one component fails. */
START_TEST(concurrent_stops_share_one_shutdown)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 10 * MS);
	agr_supplier *sup = new_supplier(2);
	struct stopper s[STOPPERS];
	pthread_barrier_t start;
	struct probe a, b;
	struct tu_tally done;
	struct tmsg t[32];
	agr_dispatcher *d;
	int i, expected = _i == 0 ? 0 : -EIO;

	tu_journal_reset(&journal);
	tu_tally_init(&done);
	probe_init(&a, "a");
	probe_init(&b, "b");
	b.stop_ret = expected;
	d = new_dispatcher(sup, "d", &order, &done);
	add_probe(rt, &a);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	add_probe(rt, &b);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	for (i = 0; i < 32; i++) {
		tmsg_init(&t[i], i % 3 ? "order-1" : "order-2");
		send_ok(d, &t[i]);
	}
	pthread_barrier_init(&start, NULL, STOPPERS);
	for (i = 0; i < STOPPERS; i++) {
		s[i] = (struct stopper){ .rt = rt, .start = &start };
		ck_assert_int_eq(pthread_create(&s[i].thread, NULL, run_stop,
						&s[i]),
				 0);
	}
	for (i = 0; i < STOPPERS; i++)
		ck_assert_int_eq(stopper_join(&s[i]), expected);
	pthread_barrier_destroy(&start);
	ck_assert_int_eq(agr_runtime_stop(rt), expected);
	ck_assert_int_eq(atomic_load(&a.quiesces), 1);
	ck_assert_int_eq(atomic_load(&a.stops), 1);
	ck_assert_int_eq(atomic_load(&b.quiesces), 1);
	ck_assert_int_eq(atomic_load(&b.stops), 1);
	ck_assert_int_eq(tu_journal_count(&journal, "stop:a"), 1);
	ck_assert_int_eq(atomic_load(&a.forces), _i == 0 ? 0 : 1);
	ck_assert_int_eq(atomic_load(&b.forces), _i == 0 ? 0 : 1);
	/* Every message was handled before the dispatcher stopped. */
	ck_assert(tu_tally_wait(&done, 32, TU_LONG_NS));
	for (i = 0; i < 32; i++) {
		ck_assert_int_eq(t[i].status, 0);
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	}
	agr_runtime_free(rt);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	probe_destroy(&a);
	probe_destroy(&b);
	tu_tally_destroy(&done);
}
END_TEST

void runtime_stop_tests(TCase *ref, TCase *core)
{
	tcase_add_test(ref, deadline_forces_first_never_graceful);
	tcase_add_test(ref, failure_still_stops_the_rest_and_first_error_wins);
	tcase_add_test(ref, force_stop_abandons_a_graceful_stop);
	tcase_add_test(core, stop_returns_at_deadline_while_a_stop_blocks);
	tcase_add_test(core, quiesce_failure_fails_the_stop);
	tcase_add_test(core, force_before_stop_and_free_without_stop);
	tcase_add_loop_test(core, concurrent_stops_share_one_shutdown, 0, 2);
}
