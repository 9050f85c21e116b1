/* SPDX-License-Identifier: MIT */
/*
 * metrics_worker.c - check_metrics' worker loop figures and the
 * blocking detector (the watchdog): a sleeping handler reported once,
 * none for a handler waiting on I/O, only plausible holds, each handler
 * timed on its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "metrics_test.h"
#include "testutil.h"

/* ==== worker metrics ==== */

static void run_tasks(agr_scheduler *s, int n)
{
	struct tu_latch done;
	int i;

	tu_latch_init(&done, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(agr_scheduler_schedule(s, 0, tu_count_down,
							&done), 0);
	ck_assert(tu_latch_wait(&done, TU_LONG_NS));
	tu_latch_destroy(&done);
}

/*
 * Schedules tasks from this (non-worker) thread until one of them had
 * to wake the worker with a doorbell. The pause before each lets the
 * worker fall asleep; one still awake only costs another round.
 */
static agr_worker_metrics ring_until_doorbell(agr_scheduler *s)
{
	const struct timespec pause = { 0, 2 * MS };
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;
	agr_worker_metrics m;

	do {
		nanosleep(&pause, NULL);
		run_tasks(s, 1);
		m = worker_metrics(s, 0);
	} while (m.doorbells == 0 && tu_now_ns() < deadline);
	return m;
}

/* A timer armed by a task, observed from the test thread. */
struct probe {
	struct tu_latch armed, fired;
	agr_worker *w;
	uint64_t timeout_ns;
	int submit_ret, cancel_ret, res;
};

static void probe_init(struct probe *p, uint64_t timeout_ns)
{
	memset(p, 0, sizeof(*p));
	tu_latch_init(&p->armed, 1);
	tu_latch_init(&p->fired, 1);
	p->timeout_ns = timeout_ns;
	p->res = 1;
}

static void probe_destroy(struct probe *p)
{
	tu_latch_destroy(&p->armed);
	tu_latch_destroy(&p->fired);
}

static void probe_fired(int res, void *arg)
{
	struct probe *p = arg;

	p->res = res;
	tu_latch_count_down(&p->fired);
}

static void arm(void *arg)
{
	struct probe *p = arg;

	p->w = agr_worker_current();
	p->submit_ret = agr_io_timeout(p->w, p->timeout_ns, probe_fired, p);
	tu_latch_count_down(&p->armed);
}

static void disarm(void *arg)
{
	struct probe *p = arg;

	p->cancel_ret = agr_io_cancel(p->w, p);
}

static void schedule(agr_scheduler *s, agr_task_fn fn, void *arg)
{
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, fn, arg), 0);
}

START_TEST(worker_metrics_reject_bad_arguments)
{
	agr_supplier *sup = new_supplier("pool", 2);
	agr_scheduler *s = lookup(sup);
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(NULL, 0, &m), -EINVAL);
	ck_assert_int_eq(agr_scheduler_worker_metrics(s, -1, &m), -EINVAL);
	ck_assert_int_eq(agr_scheduler_worker_metrics(s, 2, &m), -EINVAL);
	ck_assert_int_eq(agr_scheduler_worker_metrics(s, 0, NULL), -EINVAL);
	ck_assert_int_eq(agr_scheduler_worker_metrics(s, 1, &m), 0);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(worker_metrics_follow_the_loop)
{
	agr_supplier *sup = new_supplier("pool", 1);
	agr_scheduler *s = lookup(sup);
	agr_worker_metrics m, before;
	struct probe forever, brief;

	run_tasks(s, 10);
	m = worker_metrics(s, 0);
	ck_assert_uint_gt(m.iterations, 0);
	ck_assert_uint_ge(m.items, 10);

	m = ring_until_doorbell(s);
	ck_assert_uint_gt(m.doorbells, 0);
	ck_assert_uint_gt(m.blocked_ns, 0); /* it slept before the bell */
	ck_assert_uint_gt(m.running_ns, 0);
	ck_assert_uint_eq(m.cq_overflow, 0);
	ck_assert_uint_eq(m.blocking_detected, 0);

	/* A timer that cannot fire during the test is in flight... */
	before = worker_metrics(s, 0);
	probe_init(&forever, TU_LONG_NS * 4);
	schedule(s, arm, &forever);
	ck_assert(tu_latch_wait(&forever.armed, TU_LONG_NS));
	ck_assert_int_eq(forever.submit_ret, 0);
	m = worker_metrics(s, 0);
	ck_assert_int_eq(m.inflight, 1);
	ck_assert_uint_eq(m.io_completions, before.io_completions);
	/* ...until cancelled: its completion counts, the cancel's not. */
	schedule(s, disarm, &forever);
	ck_assert(tu_latch_wait(&forever.fired, TU_LONG_NS));
	ck_assert_int_eq(forever.cancel_ret, 1);
	ck_assert_int_eq(forever.res, -ECANCELED);
	m = worker_metrics(s, 0);
	ck_assert_int_eq(m.inflight, 0);
	ck_assert_uint_eq(m.io_completions, before.io_completions + 1);

	/* A timer that fires. */
	probe_init(&brief, 5 * MS);
	schedule(s, arm, &brief);
	ck_assert(tu_latch_wait(&brief.fired, TU_LONG_NS));
	ck_assert_int_eq(brief.submit_ret, 0);
	ck_assert_int_eq(brief.res, -ETIME);
	m = worker_metrics(s, 0);
	ck_assert_int_eq(m.inflight, 0);
	ck_assert_uint_eq(m.io_completions, before.io_completions + 2);
	ck_assert_uint_ge(m.items, before.items + 3);
	ck_assert_uint_gt(m.iterations, before.iterations);

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	probe_destroy(&forever);
	probe_destroy(&brief);
}
END_TEST

/* ==== blocking detector ==== */

/*
 * Reports of the detector seen by the log hook. Static, so that a hook
 * still running on the watchdog's thread never sees a dead object; the
 * tests stop the watchdog (joining it) before they uninstall the hook.
 */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n;
	char first[512];
	unsigned long long longest_ms; /* the longest hold reported */
	char longest[512];
} reports;

/* The "for <n> ms" of a report; 0 if it has none. */
static unsigned long long held_ms(const char *msg)
{
	const char *at = strstr(msg, "has held worker");

	at = at ? strstr(at, " for ") : NULL;
	return at ? strtoull(at + 5, NULL, 10) : 0;
}

static void note_report(agr_log_level level, const char *msg, void *arg)
{
	unsigned long long ms = held_ms(msg);

	(void)arg;
	if (level != AGR_LOG_WARN || !strstr(msg, "blocking detected"))
		return;
	pthread_mutex_lock(&reports.lock);
	if (reports.n++ == 0)
		snprintf(reports.first, sizeof(reports.first), "%s", msg);
	if (ms > reports.longest_ms) {
		reports.longest_ms = ms;
		snprintf(reports.longest, sizeof(reports.longest), "%s", msg);
	}
	pthread_cond_broadcast(&reports.cond);
	pthread_mutex_unlock(&reports.lock);
}

static void watch(uint64_t threshold_ns)
{
	pthread_mutex_init(&reports.lock, NULL);
	tu_cond_init_monotonic(&reports.cond);
	reports.n = 0;
	reports.first[0] = '\0';
	reports.longest_ms = 0;
	reports.longest[0] = '\0';
	agr_set_log_hook(note_report, NULL);
	ck_assert_int_eq(agr_watchdog_start(threshold_ns), 0);
}

static void unwatch(void)
{
	agr_watchdog_stop();
	agr_set_log_hook(NULL, NULL);
}

/* The number of reports so far; the first one's text into `first`. */
static int reports_seen(char first[sizeof(reports.first)])
{
	int n;

	pthread_mutex_lock(&reports.lock);
	n = reports.n;
	if (first)
		memcpy(first, reports.first, sizeof(reports.first));
	pthread_mutex_unlock(&reports.lock);
	return n;
}

static int report_count(void)
{
	return reports_seen(NULL);
}

/* No report yet; or the first one, in the failure message. */
static void assert_no_report(void)
{
	char first[sizeof(reports.first)];
	int n = reports_seen(first);

	ck_assert_msg(n == 0, "%d report(s), the first: %s", n, first);
}

/* True when `n` reports came before `timeout_ns` passed. */
static bool wait_reports(int n, uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	bool ok;

	pthread_mutex_lock(&reports.lock);
	while (reports.n < n &&
	       pthread_cond_timedwait(&reports.cond, &reports.lock, &ts) !=
		       ETIMEDOUT)
		;
	ok = reports.n >= n;
	pthread_mutex_unlock(&reports.lock);
	return ok;
}

static void assert_first_report_has(const char *what)
{
	char first[sizeof(reports.first)];

	reports_seen(first);
	ck_assert_msg(strstr(first, what) != NULL,
		      "\"%s\" not in the report \"%s\"", what, first);
}

/* "group <g>", not followed by another digit. */
static void assert_first_report_names_group(int g)
{
	char first[sizeof(reports.first)], text[32];
	const char *at;

	reports_seen(first);
	snprintf(text, sizeof(text), "group %d", g);
	at = strstr(first, text);
	ck_assert_msg(at && !(at[strlen(text)] >= '0' &&
			      at[strlen(text)] <= '9'),
		      "\"%s\" not in the report \"%s\"", text, first);
}

/* A task that blocks its worker for `ns`, then counts `done` down. */
struct blocker {
	uint64_t ns;
	struct tu_latch done;
};

static void block_task(void *arg)
{
	struct blocker *b = arg;

	block_for(b->ns);
	tu_latch_count_down(&b->done);
}

/* Runs a task that blocks worker 0 of `s` for `ns`, and waits for it. */
static void run_blocking_task(agr_scheduler *s, uint64_t ns)
{
	struct blocker b = { .ns = ns };

	tu_latch_init(&b.done, 1);
	schedule(s, block_task, &b);
	ck_assert(tu_latch_wait(&b.done, TU_LONG_NS));
	tu_latch_destroy(&b.done);
}

START_TEST(detector_reports_a_sleeping_handler_once)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg t, after;
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_worker_metrics wm;
	agr_dispatcher *d;

	tu_tally_init(&done);
	o = options("ledger", sup, &done);
	d = new_dispatcher(&o);
	add_fn(d, "Sleep", sleep_300ms, NULL);
	add_fn(d, "Quick", done_now, NULL);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	watch(50 * MS);

	tmsg_init(&t, "order-7", "Sleep");
	send_ok(d, &t);
	ck_assert_msg(wait_reports(1, TU_LONG_NS),
		      "a handler that slept 300 ms went unreported");
	wait_completed(&done, 1);
	/* The group's next, short run is not reported. */
	tmsg_init(&after, "order-7", "Quick");
	send_ok(d, &after);
	wait_completed(&done, 2);

	ck_assert_int_eq(report_count(), 1);
	assert_first_report_has("ledger");
	assert_first_report_names_group(agr_dispatcher_group_of(d, &t.m));
	assert_first_report_has("type Sleep");
	wm = worker_metrics(agr_dispatcher_scheduler(d), worker_of(d, &t));
	ck_assert_uint_eq(wm.blocking_detected, 1);
	unwatch();
	stop(d);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

static uint64_t timer_300ms = 300 * MS;

/*
 * A handler that waits 300 ms on I/O does not hold its worker. Once its
 * message and the one queued behind it have completed, the watchdog has
 * had 24 scans (4 per 50 ms threshold) during the wait; had it taken
 * the wait for blocking, it would have said so 50 to 63 ms in, long
 * before. A sleeping task then shows the same watchdog was awake.
 */
START_TEST(detector_stays_quiet_on_a_handler_waiting_for_io)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg t, after;
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_worker_metrics wm;
	agr_dispatcher *d;
	agr_scheduler *s;

	tu_tally_init(&done);
	o = options("ledger", sup, &done);
	d = new_dispatcher(&o);
	s = agr_dispatcher_scheduler(d);
	add_fn(d, "Wait", wait_on_timer, &timer_300ms);
	add_fn(d, "Quick", done_now, NULL);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	watch(50 * MS);

	tmsg_init(&t, "order-7", "Wait");
	tmsg_init(&after, "order-7", "Quick");
	send_ok(d, &t);
	send_ok(d, &after);
	wait_completed(&done, 2);
	ck_assert_int_eq(t.timer_res, -ETIME); /* it did wait 300 ms */
	assert_statuses(&t, 1, 0);
	assert_statuses(&after, 1, 0);
	assert_no_report();
	wm = worker_metrics(s, 0);
	ck_assert_uint_eq(wm.blocking_detected, 0);

	run_blocking_task(s, 300 * MS);
	ck_assert(wait_reports(1, TU_LONG_NS));
	ck_assert_int_eq(report_count(), 1);
	assert_first_report_has("a task");
	unwatch();
	stop(d);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/* Tiny tasks, each scheduling the next, keep a worker busy for a while. */
struct chain {
	agr_scheduler *s;
	uint64_t until_ns;
	long links;
	int error;
	struct tu_latch done;
};

static void next_link(void *arg)
{
	struct chain *c = arg;

	c->links++;
	if (tu_now_ns() < c->until_ns) {
		c->error = agr_scheduler_schedule(c->s, 0, next_link, c);
		if (c->error == 0)
			return;
	}
	tu_latch_count_down(&c->done);
}

/*
 * A worker busy with a stream of tiny tasks for 1 s, while the
 * detector scans it 80 times: many scans meet a task that began after
 * the scan read the clock. A report may only say what can be true: no
 * run held the worker for longer than the test has lasted. Silence is
 * not demanded: on a loaded machine a worker preempted for over 50 ms
 * in the middle of a task is reported, by design.
 */
START_TEST(detector_reports_only_plausible_holds)
{
	agr_supplier *sup = new_supplier("pool", 1);
	agr_scheduler *s = lookup(sup);
	struct chain c = { .s = s };
	unsigned long long lasted_ms;
	uint64_t began;
	int n;

	tu_latch_init(&c.done, 1);
	began = tu_now_ns();
	watch(50 * MS);
	c.until_ns = tu_now_ns() + 1000 * MS;
	schedule(s, next_link, &c);
	ck_assert(tu_latch_wait(&c.done, TU_LONG_NS));
	ck_assert_int_eq(c.error, 0);
	unwatch();
	lasted_ms = (tu_now_ns() - began) / MS;
	n = report_count();
	ck_assert_msg(reports.longest_ms <= lasted_ms,
		      "%d report(s) in %ld tasks over %llu ms, the longest: "
		      "%s", n, c.links, lasted_ms, reports.longest);
	/* Each report counted once, on the worker it names. */
	ck_assert_uint_eq(worker_metrics(s, 0).blocking_detected,
			  (uint64_t)n);
	agr_supplier_free(sup);
	tu_latch_destroy(&c.done);
}
END_TEST

/* Keeps its worker busy for 10 ms: slow, yet not blocking. */
static int compute_10ms(agr_exchange *ex, void *arg)
{
	uint64_t end = tu_now_ns() + 10 * MS;

	(void)ex;
	(void)arg;
	while (tu_now_ns() < end)
		;
	return 0;
}

/*
 * 30 messages of one group, each computing for 10 ms, admitted before
 * start so that the group runs them back to back, in one activation of
 * 300 ms. No handler holds the worker for the 200 ms threshold, so the
 * detector, which reports handlers, has nothing to report. (A 10 ms
 * handler preempted for 190 ms would be reported, but that does not
 * happen even on a loaded machine.)
 */
START_TEST(detector_times_each_handler_not_the_group)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg t[30];
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	int i;

	tu_tally_init(&done);
	o = options("ledger", sup, &done);
	d = new_dispatcher(&o);
	add_fn(d, "Compute", compute_10ms, NULL);
	for (i = 0; i < 30; i++) {
		tmsg_init(&t[i], "order-7", "Compute");
		send_ok(d, &t[i]);
	}
	watch(200 * MS);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	wait_completed(&done, 30);
	unwatch();
	assert_no_report();
	ck_assert_uint_eq(worker_metrics(agr_dispatcher_scheduler(d), 0)
				  .blocking_detected, 0);
	stop(d);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

START_TEST(watchdog_starts_and_stops_twice)
{
	agr_supplier *sup = new_supplier("pool", 1);
	agr_scheduler *s = lookup(sup);

	agr_watchdog_stop(); /* never started: a no-op */
	watch(50 * MS);
	ck_assert_int_eq(agr_watchdog_start(50 * MS), 0); /* running */
	agr_watchdog_stop();
	agr_watchdog_stop();
	ck_assert_int_eq(report_count(), 0);

	/* Again, with the default threshold of 100 ms. */
	ck_assert_int_eq(agr_watchdog_start(0), 0);
	run_blocking_task(s, 300 * MS);
	ck_assert(wait_reports(1, TU_LONG_NS));
	agr_watchdog_stop();
	assert_first_report_has("a task");

	/* Stopped: blocking again goes unreported. */
	run_blocking_task(s, 150 * MS);
	ck_assert_int_eq(report_count(), 1);
	ck_assert_uint_eq(worker_metrics(s, 0).blocking_detected, 1);
	unwatch();
	agr_supplier_free(sup);
}
END_TEST

void metrics_worker_tests(TCase *work, TCase *dog)
{
	tcase_add_test(work, worker_metrics_reject_bad_arguments);
	tcase_add_test(work, worker_metrics_follow_the_loop);
	tcase_add_test(dog, detector_reports_a_sleeping_handler_once);
	tcase_add_test(dog, detector_stays_quiet_on_a_handler_waiting_for_io);
	tcase_add_test(dog, detector_reports_only_plausible_holds);
	tcase_add_test(dog, detector_times_each_handler_not_the_group);
	tcase_add_test(dog, watchdog_starts_and_stops_twice);
}
