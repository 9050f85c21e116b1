/* SPDX-License-Identifier: MIT */
/*
 * runtime_startup.c - check_runtime's startup: every component
 * prepared before any starts, failures rolled back in reverse (and
 * forced where a rollback fails), stops and forces during startup, and
 * a runtime of dispatchers and composites.
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

/* ---- startup ---- */

/* agr_runtime_start() on another thread. */
struct starter {
	pthread_t thread;
	agr_runtime *rt;
	int result;
};

static void *run_start(void *arg)
{
	struct starter *s = arg;

	s->result = agr_runtime_start(s->rt);
	return NULL;
}

static void starter_start(struct starter *s, agr_runtime *rt)
{
	*s = (struct starter){ .rt = rt, .result = 1 };
	ck_assert_int_eq(pthread_create(&s->thread, NULL, run_start, s), 0);
}

static int starter_join(struct starter *s)
{
	pthread_join(s->thread, NULL);
	return s->result;
}

/* WowRuntimeTest: "start prepares every component before opening
 * processing". */
START_TEST(start_prepares_every_component_before_starting)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "start:first",
		"start:second", "quiesce:first",  "quiesce:second",
		"stop:second",	 "stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second, late;
	agr_component_report c[2];
	agr_runtime_report r;

	add_two_probes(rt, &first, &second);
	probe_init(&late, "late");
	ck_assert_int_eq(agr_runtime_start(NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_RUNNING);
	ck_assert_int_eq(agr_runtime_start(rt), -EALREADY);
	ck_assert_int_eq(agr_runtime_add_component(rt, "late", &probe_ops,
						   &late),
			 -EBUSY);
	ck_assert_ptr_eq(first.rt, rt);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	tu_journal_assert(&journal, expected, 8, 8);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.startup_result, 0);
	ck_assert(c[0].prepare_ran && c[0].start_ran);
	ck_assert_int_eq(c[1].start_result, 0);
	ck_assert_uint_eq(c[0].force_calls, 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
	probe_destroy(&late);
}
END_TEST

/*
 * WowRuntimeTest: "start failure rolls prepared components back in
 * reverse order" and "startup failure closes intake before rollback":
 * the quiet period (10 s here) is skipped, admission is closed when the
 * rollback quiesces, and the cleanup failure is attached.
 */
START_TEST(start_failure_rolls_back_in_reverse)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "start:first",
		"start:second",	 "quiesce:first",  "quiesce:second",
		"stop:second",	 "stop:first",	   "force:second",
		"force:first" };
	agr_runtime *rt = new_runtime(60000 * MS, 10000 * MS);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	uint64_t before;

	add_two_probes(rt, &first, &second);
	first.stop_ret = -EINVAL; /* the cleanup failure */
	second.start_ret = -EIO;
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_start(rt), -EIO);
	ck_assert_uint_lt(tu_now_ns() - before, 5000 * MS);
	tu_journal_assert(&journal, expected, 10, 10);
	ck_assert_int_eq(first.lease_at_quiesce, -ESHUTDOWN);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_STOPPED);
	ck_assert_int_eq(agr_runtime_stop(rt), -EIO);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert_int_eq(r.startup_result, -EIO);
	ck_assert_int_eq(r.cleanup_result, -EINVAL);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EINVAL);
	ck_assert(r.forced);
	ck_assert_int_eq(c[1].start_result, -EIO);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "prepare failure gracefully rolls back prepared and
 * force stops all components": third is never prepared, but forced.
 */
START_TEST(prepare_failure_rolls_back_prepared_forces_all)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "quiesce:first",
		"quiesce:second", "stop:second",   "stop:first",
		"force:third",	 "force:second",   "force:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe p[3];
	agr_runtime_report r;

	tu_journal_reset(&journal);
	probe_init(&p[0], "first");
	probe_init(&p[1], "second");
	probe_init(&p[2], "third");
	p[0].stop_ret = -EINVAL;
	p[1].prepare_ret = -ENOENT;
	add_probe(rt, &p[0]);
	add_probe(rt, &p[1]);
	add_probe(rt, &p[2]);
	ck_assert_int_eq(agr_runtime_start(rt), -ENOENT);
	tu_journal_assert(&journal, expected, 9, 9);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOENT);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EINVAL);
	ck_assert_int_eq(atomic_load(&p[2].prepares), 0);
	ck_assert_int_eq(atomic_load(&p[0].starts), 0);
	agr_runtime_free(rt);
	probe_destroy(&p[0]);
	probe_destroy(&p[1]);
	probe_destroy(&p[2]);
}
END_TEST

/* WowRuntimeTest: "successful startup rollback does not force stop
 * components". */
START_TEST(successful_rollback_forces_nothing)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_runtime_report r;
	struct probe only;

	tu_journal_reset(&journal);
	probe_init(&only, "only");
	only.start_ret = -EPROTO;
	add_probe(rt, &only);
	ck_assert_int_eq(agr_runtime_start(rt), -EPROTO);
	ck_assert_int_eq(agr_runtime_stop(rt), -EPROTO);
	get_report(rt, &r, NULL, 0);
	ck_assert(!r.forced);
	ck_assert_int_eq(r.cleanup_result, 0);
	ck_assert_int_eq(atomic_load(&only.stops), 1);
	ck_assert_int_eq(atomic_load(&only.forces), 0);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&only.forces), 0);
	probe_destroy(&only);
}
END_TEST

/*
 * WowRuntimeTest: "failure reported during prepare prevents preparing
 * the next component" (_i == 0) and "failure reported during start
 * prevents starting the next component" (_i == 1).
 */
START_TEST(reported_startup_failure_stops_the_startup)
{
	static const char *const in_prepare[] = { "prepare:first",
						  "quiesce:first",
						  "stop:first" };
	static const char *const in_start[] = {
		"prepare:first",  "prepare:second", "start:first",
		"quiesce:first", "quiesce:second", "stop:second",
		"stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_runtime_report r;

	add_two_probes(rt, &first, &second);
	if (_i == 0)
		first.report_in_prepare = -ENOTCONN;
	else
		first.report_in_start = -ENOTCONN;
	ck_assert_int_eq(agr_runtime_report_failure(rt, 0), -EINVAL);
	ck_assert_int_eq(agr_runtime_report_failure(NULL, -EIO), -EINVAL);
	ck_assert_int_eq(agr_runtime_start(rt), -ENOTCONN);
	if (_i == 0)
		tu_journal_assert(&journal, in_prepare, 3, 3);
	else
		tu_journal_assert(&journal, in_start, 7, 7);
	ck_assert_int_eq(atomic_load(&second.starts), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), -ENOTCONN);
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EIO), -EALREADY);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOTCONN);
	ck_assert_uint_eq(r.nsuppressed, 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "graceful stop requested during prepare is retained
 * and rolls startup back": the prepare in progress finishes, the next
 * component is never prepared, the stop is the ordinary one.
 */
START_TEST(stop_during_startup_aborts_it)
{
	static const char *const expected[] = { "prepare:first",
						"quiesce:first",
						"stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	struct starter st;
	struct stopper sp;

	add_two_probes(rt, &first, &second);
	first.prepare_mode = STOP_BLOCKS_UNTIL_RELEASED;
	starter_start(&st, rt);
	ck_assert(tu_latch_wait(&first.step_entered, TU_LONG_NS));
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_STARTING);
	stopper_start(&sp, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	probe_release(&first);
	ck_assert_int_eq(starter_join(&st), -ECANCELED);
	ck_assert_int_eq(stopper_join(&sp), 0);
	tu_journal_assert(&journal, expected, 3, 3);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.startup_result, -ECANCELED);
	ck_assert(!c[1].prepare_ran && !c[1].quiesce_ran);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&second.prepares), 0);
	ck_assert_int_eq(atomic_load(&second.forces), 0);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "force stop interrupts a startup blocked inside a
 * component" and "force stop compensates resources acquired after an
 * overlapping prepare call".
 */
START_TEST(force_during_startup_aborts_and_compensates)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	struct starter st;

	add_two_probes(rt, &first, &second);
	first.prepare_mode = STOP_BLOCKS_UNTIL_FORCED;
	starter_start(&st, rt);
	ck_assert(tu_latch_wait(&first.step_entered, TU_LONG_NS));
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(starter_join(&st), -ECANCELED);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	/* Forced during its prepare, and once more after it returned. */
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	ck_assert_int_eq(atomic_load(&second.prepares), 0);
	ck_assert_int_eq(atomic_load(&first.starts), 0);
	ck_assert_int_eq(atomic_load(&first.quiesces), 0);
	get_report(rt, &r, c, 2);
	ck_assert(r.forced);
	ck_assert_uint_eq(c[0].force_calls, 2);
	ck_assert_uint_eq(c[1].force_calls, 1);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "failure reported during a blocked start is force
 * stopped by the startup deadline": the reported failure stays primary,
 * the timeout is suppressed behind it.
 */
START_TEST(blocked_start_is_forced_by_the_deadline)
{
	agr_runtime *rt = new_runtime(300 * MS, 0);
	struct probe first, second;
	agr_runtime_report r;
	uint64_t before;

	add_two_probes(rt, &first, &second);
	first.report_in_start = -ENOTCONN;
	first.start_mode = STOP_BLOCKS_UNTIL_FORCED;
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_start(rt), -ENOTCONN);
	ck_assert_uint_ge(tu_now_ns() - before, 300 * MS);
	ck_assert_uint_lt(tu_now_ns() - before, 300 * MS + FORCE_BOUND_NS);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOTCONN);
	ck_assert(r.deadline_passed);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.starts), 0);
	ck_assert_int_eq(atomic_load(&first.quiesces), 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "shutdown deadline covers a blocking component
 * quiesce": the blocked quiesce is forced at the deadline and once more
 * when it returns; the next component is never quiesced gracefully.
 */
START_TEST(blocked_quiesce_is_forced_and_compensated)
{
	agr_runtime *rt = new_runtime(300 * MS, 0);
	struct probe first, second;

	add_two_probes(rt, &first, &second);
	first.quiesce_mode = STOP_BLOCKS_UNTIL_RELEASED;
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	probe_release(&first);
	agr_runtime_free(rt); /* joins the stop thread */
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.quiesces), 0);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&second.stops), 0);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "global shutdown deadline force stops every component
 * and suppresses force failures".
 */
START_TEST(deadline_suppresses_force_failures)
{
	agr_runtime *rt = new_runtime(200 * MS, 0);
	struct probe first, second, slow;
	agr_runtime_report r;

	add_two_probes(rt, &first, &second);
	probe_init(&slow, "slow");
	slow.mode = STOP_BLOCKS_UNTIL_FORCED;
	first.force_ret = -EBADF;
	second.force_ret = -EPIPE;
	add_probe(rt, &slow);
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	/* Forced in reverse: second, then first. */
	ck_assert_uint_eq(r.nsuppressed, 2);
	ck_assert_int_eq(r.suppressed[0], -EPIPE);
	ck_assert_int_eq(r.suppressed[1], -EBADF);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&second.stops), 0);
	probe_destroy(&first);
	probe_destroy(&second);
	probe_destroy(&slow);
}
END_TEST

/*
 * WowRuntimeTest: "graceful failure remains primary when a later
 * component reaches the deadline" (_i == 0) and "explicit force retains
 * a graceful failure observed before a later stop hangs" (_i == 1).
 */
START_TEST(graceful_failure_stays_primary)
{
	agr_runtime *rt = new_runtime(_i == 0 ? 300 * MS : TU_LONG_NS, 0);
	struct probe first, second;
	agr_runtime_report r;
	struct stopper sp;

	add_two_probes(rt, &first, &second);
	first.mode = STOP_BLOCKS_UNTIL_FORCED;
	second.stop_ret = -EIO; /* stopped first */
	stopper_start(&sp, rt);
	ck_assert(tu_latch_wait(&first.stop_entered, TU_LONG_NS));
	if (_i == 1)
		ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(stopper_join(&sp), -EIO);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert_int_eq(r.deadline_passed, _i == 0);
	ck_assert_uint_eq(r.nsuppressed, _i == 0 ? 1 : 0);
	if (_i == 0)
		ck_assert_int_eq(r.suppressed[0], -ETIMEDOUT);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "runtime component failure terminates the complete
 * runtime" and "fatal failure escalates an ordinary quiet shutdown
 * immediately": a failure reported while a stop waits out a long quiet
 * period closes admission at once; everything is then forced.
 */
START_TEST(reported_failure_terminates_the_runtime)
{
	agr_runtime *rt = new_runtime(60000 * MS, 10000 * MS);
	struct probe first, second;
	agr_runtime_report r;
	struct stopper sp;
	uint64_t before;

	add_two_probes(rt, &first, &second);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	stopper_start(&sp, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EHOSTDOWN), 0);
	ck_assert_int_eq(stopper_join(&sp), -EHOSTDOWN);
	ck_assert_uint_lt(tu_now_ns() - before, 5000 * MS);
	ck_assert_int_eq(first.lease_at_quiesce, -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&first.stops), 1);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -EHOSTDOWN);
	ck_assert(r.forced);
	agr_runtime_free(rt);

	/* Reported on a running runtime, it begins the stop by itself. */
	rt = new_runtime(TU_LONG_NS, 0);
	add_probe(rt, &first);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EL2HLT), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), -EL2HLT);
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * AggregateDispatcherTest: "top-level runtime waits for aggregate
 * dispatcher message readiness" and "prepare subscribes without
 * processing until start"; CompositeEventDispatcherLifecycleTest:
 * "runtime graceful stop closes every logical intake before scheduler
 * cleanup", with the runtime doing the start.
 */
START_TEST(runtime_starts_dispatchers_and_composites)
{
	static const char *const expected[] = {
		"composite:start:domain", "composite:start:state",
		"composite:close:domain", "composite:close:state",
		"composite:stop:state",	  "composite:stop:domain",
		"composite:stop:scheduler" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(2), *own = new_supplier(1);
	struct tu_tally done;
	struct tmsg early, ev;
	agr_composite *comp;
	agr_dispatcher *d;

	tu_journal_reset(&journal);
	tu_tally_init(&done);
	d = new_dispatcher(sup, "d", &payment, &done);
	comp = new_orders(own, &done);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	tmsg_init(&early, "payment-1");
	send_ok(d, &early); /* admitted; waits for the start */
	tmsg_init(&ev, "order-1");
	send_ok(agr_composite_event_stream(comp), &ev);
	ck_assert_int_eq(atomic_load(&early.completions), 0);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(early.status, 0);
	ck_assert_int_eq(ev.status, 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	tu_journal_assert(&journal, expected, 7, 7);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/*
 * CompositeEventDispatcherLifecycleTest: "reported event child start
 * failure prevents state child admission", under the runtime: start
 * returns the child's error, the state child never starts, and the
 * rollback cleans it up (its parked message is discarded) and stops the
 * scheduler; the dispatcher registered after it, never reached, is
 * forced so that its parked message is discarded too.
 */
START_TEST(composite_domain_start_failure_fails_startup)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(1), *own = new_supplier(1);
	struct tu_tally done;
	struct tmsg parked, after;
	agr_composite *comp;
	agr_scheduler *sched;
	agr_runtime_report r;
	agr_dispatcher *d;

	tu_journal_reset(&journal);
	tu_tally_init(&done);
	comp = new_orders(own, &done);
	sched = agr_dispatcher_scheduler(agr_composite_state_event(comp));
	d = new_dispatcher(sup, "d", &payment, &done);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	tmsg_init(&parked, "order-1");
	send_ok(agr_composite_state_event(comp), &parked);
	tmsg_init(&after, "payment-1");
	send_ok(d, &after);
	ck_assert_int_eq(agr_dispatcher_quiesce(
				 agr_composite_event_stream(comp)),
			 0);
	ck_assert_int_eq(agr_runtime_start(rt), -ESHUTDOWN);
	ck_assert_int_eq(tu_journal_count(&journal, "composite:start:state"),
			 0);
	ck_assert_int_eq(
		tu_journal_count(&journal, "composite:stop:scheduler"), 1);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(parked.status, AGR_DISCARDED);
	ck_assert_int_eq(after.status, AGR_DISCARDED);
	ck_assert(agr_scheduler_is_terminated(sched));
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ESHUTDOWN);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

void runtime_startup_tests(TCase *ref)
{
	tcase_add_test(ref, start_prepares_every_component_before_starting);
	tcase_add_test(ref, start_failure_rolls_back_in_reverse);
	tcase_add_test(ref, prepare_failure_rolls_back_prepared_forces_all);
	tcase_add_test(ref, successful_rollback_forces_nothing);
	tcase_add_loop_test(ref, reported_startup_failure_stops_the_startup,
			    0, 2);
	tcase_add_test(ref, stop_during_startup_aborts_it);
	tcase_add_test(ref, force_during_startup_aborts_and_compensates);
	tcase_add_test(ref, blocked_start_is_forced_by_the_deadline);
	tcase_add_test(ref, blocked_quiesce_is_forced_and_compensated);
	tcase_add_test(ref, deadline_suppresses_force_failures);
	tcase_add_loop_test(ref, graceful_failure_stays_primary, 0, 2);
	tcase_add_test(ref, reported_failure_terminates_the_runtime);
	tcase_add_test(ref, runtime_starts_dispatchers_and_composites);
	tcase_add_test(ref, composite_domain_start_failure_fails_startup);
}
