/* SPDX-License-Identifier: MIT */
/*
 * check_metrics.c - what aggring lets one observe (aggring/metrics.h):
 * histogram buckets and percentiles against known data
 * (metrics_histogram.c), dispatcher counters that add up, latency
 * histograms and queue depth (here), the worker loop's figures and the
 * blocking detector (metrics_worker.c), and Prometheus text
 * (metrics_prometheus.c) that a strict reader of the exposition format
 * (prom_reader.c) accepts.
 *
 * Handlers, tasks and callbacks run on workers: they record what they
 * see and the test thread asserts, since a failed ck_assert on a worker
 * would end the child abruptly. Timing is asserted as lower bounds only.
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

const agr_named_aggregate order = { "sales", "Order" };

const agr_named_aggregate cart = { "sales", "Cart" };

/* ==== a count that can be waited on ==== */

void wait_completed(struct tu_tally *t, long n)
{
	ck_assert_msg(tu_tally_wait(t, n, TU_LONG_NS),
		      "%ld of %ld messages completed", tu_tally_value(t), n);
}

/* ==== test messages and handlers ==== */

void tmsg_init(struct tmsg *t, const char *id, const char *type)
{
	memset(t, 0, sizeof(*t));
	atomic_init(&t->completions, 0);
	t->m.aggregate_id = id;
	t->m.type = type;
	t->m.user = t;
	t->status = 1;
	t->timer_res = 1;
}

static struct tmsg *tmsg_of(agr_exchange *ex)
{
	return agr_exchange_message(ex)->user;
}

/* The completion callback; `arg` is a tally. */
static void completed(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = msg->user;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	tu_tally_add(arg);
}

int done_now(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

int fail_eio(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return -EIO;
}

/* Holds its group until the test calls agr_exchange_done(). Arg: latch. */
static int hold(agr_exchange *ex, void *arg)
{
	tmsg_of(ex)->ex = ex;
	tu_latch_count_down(arg);
	return AGR_PENDING;
}

static void timer_fired(int res, void *arg)
{
	agr_exchange *ex = arg;

	tmsg_of(ex)->timer_res = res;
	agr_exchange_done(ex, res == -ETIME ? 0 : res);
}

/* Waits on a timer without blocking its worker. Arg: the nanoseconds. */
int wait_on_timer(agr_exchange *ex, void *arg)
{
	const uint64_t *ns = arg;
	int ret = agr_io_timeout(agr_exchange_worker(ex), *ns, timer_fired,
				 ex);

	return ret < 0 ? ret : AGR_PENDING;
}

/* Blocks the calling thread: what the blocking detector is there for. */
void block_for(uint64_t ns)
{
	struct timespec left = {
		.tv_sec = (time_t)(ns / 1000000000ull),
		.tv_nsec = (long)(ns % 1000000000ull),
	};

	while (nanosleep(&left, &left) != 0 && errno == EINTR)
		;
}

int sleep_300ms(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	block_for(300 * MS);
	return 0;
}

/* ==== suppliers, schedulers and dispatchers ==== */

agr_supplier *new_supplier(const char *name, int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new(name, workers, &sup), 0);
	return sup;
}

agr_scheduler *lookup(agr_supplier *sup)
{
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	return s;
}

/* An Order dispatcher of 16 groups on `sup`, which it does not own. */
agr_dispatcher_options options(const char *name, agr_supplier *sup,
			       struct tu_tally *completions)
{
	agr_dispatcher_options o = {
		.name = name,
		.named_aggregate = order,
		.parallelism = 16,
		.supplier = sup,
		.on_complete = completed,
		.complete_arg = completions,
	};

	return o;
}

agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o)
{
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(o, &d), 0);
	return d;
}

void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
	    void *arg)
{
	ck_assert_int_eq(agr_dispatcher_register(d, type, fn, arg), 0);
}

void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

void stop(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
}

static agr_dispatcher_metrics metrics_of(const agr_dispatcher *d)
{
	agr_dispatcher_metrics m;

	ck_assert_int_eq(agr_dispatcher_metrics_get(d, &m), 0);
	return m;
}

agr_worker_metrics worker_metrics(agr_scheduler *s, int index)
{
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(s, index, &m), 0);
	return m;
}

/* The worker that runs the group of `t`. */
int worker_of(agr_dispatcher *d, struct tmsg *t)
{
	return agr_dispatcher_group_of(d, &t->m) %
	       agr_scheduler_parallelism(agr_dispatcher_scheduler(d));
}

/*
 * Writes "<prefix><n>" for the first n whose group is neither `not1`
 * nor `not2`; returns that group.
 */
static int pick_id(agr_dispatcher *d, char *buf, size_t len,
		   const char *prefix, int not1, int not2)
{
	agr_message m;
	int n, g;

	memset(&m, 0, sizeof(m));
	m.aggregate_id = buf;
	for (n = 0; n < 100000; n++) {
		snprintf(buf, len, "%s%d", prefix, n);
		g = agr_dispatcher_group_of(d, &m);
		if (g != not1 && g != not2)
			return g;
	}
	ck_abort_msg("no id of prefix %s fits", prefix);
}

static void assert_stats_eq(const agr_dispatcher_stats *got,
			    const agr_dispatcher_stats *want)
{
	ck_assert_uint_eq(got->admitted, want->admitted);
	ck_assert_uint_eq(got->refused, want->refused);
	ck_assert_uint_eq(got->handled, want->handled);
	ck_assert_uint_eq(got->failed, want->failed);
	ck_assert_uint_eq(got->skipped, want->skipped);
	ck_assert_uint_eq(got->discarded, want->discarded);
	ck_assert_uint_eq(got->interrupted, want->interrupted);
}

static bool histogram_is_empty(const agr_histogram *h)
{
	agr_histogram zero;

	memset(&zero, 0, sizeof(zero));
	return memcmp(h, &zero, sizeof(zero)) == 0;
}

/* count, sum, max and the buckets agree with one another. */
static void assert_consistent(const agr_histogram *h)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < AGR_HISTOGRAM_BUCKETS; i++)
		n += h->buckets[i];
	ck_assert_uint_eq(n, h->count);
	ck_assert_uint_le(h->max_ns, h->sum_ns);
	ck_assert_uint_eq(pct(h, 100), h->max_ns);
	if (h->count)
		ck_assert(h->buckets[agr_histogram_bucket_of(h->max_ns)] > 0);
}

/* ==== dispatcher counters ==== */

enum { N_OK = 5, N_FAIL = 3, N_SKIP = 4, N_QUEUED = 4, N_LATE = 2 };

#define N_ALL (N_OK + N_FAIL + N_SKIP + 1 + N_QUEUED)

static const char *const ids[] = { "order-1", "order-2", "order-3",
				   "order-4", "order-5", "order-6" };

static void send_typed(agr_dispatcher *d, struct tmsg *ts, int n,
		       const char *type)
{
	int i;

	for (i = 0; i < n; i++) {
		tmsg_init(&ts[i], ids[(size_t)i % ARRAY_SIZE(ids)], type);
		send_ok(d, &ts[i]);
	}
}

void assert_statuses(struct tmsg *ts, int n, int status)
{
	int i;

	for (i = 0; i < n; i++) {
		ck_assert_int_eq(atomic_load(&ts[i].completions), 1);
		ck_assert_int_eq(ts[i].status, status);
	}
}

/* Sends that a stopped dispatcher refuses. */
static void send_refused(agr_dispatcher *d, struct tmsg *ts, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		tmsg_init(&ts[i], ids[(size_t)i % ARRAY_SIZE(ids)], "A");
		ck_assert_int_eq(agr_dispatcher_send(d, &ts[i].m), -ESHUTDOWN);
	}
}

/* Once stopped: each counter is what was sent, admitted their sum. */
static agr_dispatcher_metrics assert_counted(agr_dispatcher *d)
{
	const agr_dispatcher_stats want = {
		.admitted = N_ALL,
		.refused = N_LATE,
		.handled = N_OK,
		.failed = N_FAIL,
		.skipped = N_SKIP,
		.discarded = N_QUEUED,
		.interrupted = 1,
	};
	agr_dispatcher_metrics m = metrics_of(d);
	agr_dispatcher_stats st;

	assert_stats_eq(&m.messages, &want);
	ck_assert_uint_eq(m.messages.admitted,
			  m.messages.handled + m.messages.failed +
				  m.messages.skipped + m.messages.discarded +
				  m.messages.interrupted);
	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	assert_stats_eq(&st, &want);
	return m;
}

/* Nothing left queued; latency histograms filled only when `on`. */
static void assert_latencies(const agr_dispatcher_metrics *m, bool on,
			     uint64_t held_for)
{
	ck_assert_uint_eq(m->queue_depth, 0);
	ck_assert_uint_eq(m->deepest_group_depth, 0);
	ck_assert_int_eq(m->deepest_group, -1);
	ck_assert_int_eq(m->latency_enabled, on);
	if (on) {
		ck_assert_uint_eq(m->queue_latency.count, N_ALL - N_QUEUED);
		ck_assert_uint_eq(m->processing_latency.count,
				  N_ALL - N_QUEUED);
		assert_consistent(&m->queue_latency);
		assert_consistent(&m->processing_latency);
		ck_assert_uint_ge(m->processing_latency.max_ns, held_for);
	} else {
		ck_assert(histogram_is_empty(&m->queue_latency));
		ck_assert(histogram_is_empty(&m->processing_latency));
	}
}

/*
 * Every outcome: handled, failed, skipped (no function for type "B"),
 * interrupted (a held message with no I/O, at a force stop), discarded
 * (those queued behind it), refused (sent after it). Once stopped, admitted is
 * the sum of the outcomes and each counter is what was sent. _i == 0:
 * latency metrics on, and both histograms count the 13 messages whose
 * functions started; 1: off, and the histograms stay empty while the
 * counters are the same.
 */
START_TEST(counters_add_up_after_a_stop)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg ok[N_OK], bad[N_FAIL], skip[N_SKIP], queued[N_QUEUED];
	struct tmsg held, late[N_LATE];
	struct tu_latch started;
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher_metrics m;
	agr_dispatcher *d;
	uint64_t since, held_for;
	int i;

	tu_tally_init(&done);
	tu_latch_init(&started, 1);
	o = options("count", sup, &done);
	o.metrics = _i == 0;
	d = new_dispatcher(&o);
	add_fn(d, "A", done_now, NULL);
	add_fn(d, "E", fail_eio, NULL);
	add_fn(d, "H", hold, &started);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	send_typed(d, ok, N_OK, "A");
	send_typed(d, bad, N_FAIL, "E");
	send_typed(d, skip, N_SKIP, "B");
	wait_completed(&done, N_OK + N_FAIL + N_SKIP);

	tmsg_init(&held, "held-1", "H");
	send_ok(d, &held);
	ck_assert(tu_latch_wait(&started, TU_LONG_NS));
	since = tu_now_ns();
	for (i = 0; i < N_QUEUED; i++) {
		tmsg_init(&queued[i], "held-1", "A");
		send_ok(d, &queued[i]);
	}
	/* It started before `since` and is ended after this. */
	held_for = tu_now_ns() - since;
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	send_refused(d, late, N_LATE);
	wait_completed(&done, N_ALL);
	agr_exchange_done(held.ex, 0); /* too late: ignored */
	stop(d);

	m = assert_counted(d);
	assert_statuses(ok, N_OK, 0);
	assert_statuses(bad, N_FAIL, -EIO);
	assert_statuses(skip, N_SKIP, 0);
	assert_statuses(&held, 1, AGR_INTERRUPTED);
	assert_statuses(queued, N_QUEUED, AGR_DISCARDED);
	for (i = 0; i < N_LATE; i++)
		ck_assert_int_eq(atomic_load(&late[i].completions), 0);

	assert_latencies(&m, _i == 0, held_for);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_latch_destroy(&started);
	tu_tally_destroy(&done);
}
END_TEST

START_TEST(metrics_snapshot_names_its_dispatcher)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher_metrics m;
	agr_dispatcher *d;

	tu_tally_init(&done);
	o = options("names", sup, &done);
	d = new_dispatcher(&o);
	ck_assert_int_eq(agr_dispatcher_metrics_get(NULL, &m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_metrics_get(d, NULL), -EINVAL);
	m = metrics_of(d);
	ck_assert_str_eq(m.dispatcher, "names");
	ck_assert_str_eq(m.context, "sales");
	ck_assert_str_eq(m.aggregate, "Order");
	ck_assert(!m.latency_enabled);
	ck_assert_int_eq(m.deepest_group, -1);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/* ==== latencies ==== */

static uint64_t timer_20ms = 20 * MS;

/*
 * Two messages of one id, each waiting 20 ms on a timer, both admitted
 * before start: the first is processed for at least 20 ms, and the
 * second, queued since before the first began, waits at least as long.
 */
START_TEST(latencies_have_known_lower_bounds)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg t[2];
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher_metrics m;
	agr_dispatcher *d;

	tu_tally_init(&done);
	o = options("timed", sup, &done);
	o.metrics = true;
	d = new_dispatcher(&o);
	add_fn(d, "T", wait_on_timer, &timer_20ms);
	tmsg_init(&t[0], "order-1", "T");
	tmsg_init(&t[1], "order-1", "T");
	send_ok(d, &t[0]);
	send_ok(d, &t[1]);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	wait_completed(&done, 2);
	ck_assert_int_eq(t[0].timer_res, -ETIME);
	ck_assert_int_eq(t[1].timer_res, -ETIME);
	assert_statuses(t, 2, 0);

	m = metrics_of(d);
	ck_assert(m.latency_enabled);
	ck_assert_uint_eq(m.processing_latency.count, 2);
	ck_assert_uint_ge(pct(&m.processing_latency, 100), 20 * MS);
	ck_assert_uint_ge(pct(&m.processing_latency, 50), 20 * MS);
	ck_assert_uint_ge(m.processing_latency.sum_ns, 40 * MS);
	ck_assert_uint_eq(m.queue_latency.count, 2);
	ck_assert_uint_ge(pct(&m.queue_latency, 100), 20 * MS);
	assert_consistent(&m.processing_latency);
	assert_consistent(&m.queue_latency);
	stop(d);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/* ==== queue depth ==== */

/*
 * With x's and y's first messages held: six queued, four of them in x's
 * group; latency counted only when `on` (three started, one finished).
 */
static void assert_x_deepest(agr_dispatcher *d, struct tmsg *hx, int gx,
			     bool on)
{
	agr_dispatcher_metrics m = metrics_of(d);

	ck_assert_uint_eq(m.queue_depth, 6);
	ck_assert_uint_eq(m.deepest_group_depth, 4);
	ck_assert_int_eq(m.deepest_group, gx);
	ck_assert_int_eq(m.deepest_group, agr_dispatcher_group_of(d, &hx->m));
	if (on) {
		/* Started: hx, hy, qz; finished: qz. */
		ck_assert_uint_eq(m.queue_latency.count, 3);
		ck_assert_uint_eq(m.processing_latency.count, 1);
	} else {
		ck_assert(!m.latency_enabled);
		ck_assert(histogram_is_empty(&m.queue_latency));
	}
}

/*
 * Groups x and y each hold a message (AGR_PENDING) with 3 and 1 queued
 * behind it; one message of group z has come and gone. The depth
 * counts the 6 admitted and not completed, and group x is the deepest.
 * _i == 0: latency metrics on; 1: only a queue limit, which counts the
 * depth as well.
 */
START_TEST(queue_depth_finds_the_deepest_group)
{
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg hx, hy, qx[3], qy, qz;
	struct tu_latch started;
	char x[16], y[16], z[16];
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher_metrics m;
	agr_dispatcher *d;
	int gx, gy, i;

	tu_tally_init(&done);
	tu_latch_init(&started, 2);
	o = options("deep", sup, &done);
	o.metrics = _i == 0;
	o.queue_limit = _i == 0 ? 0 : 100;
	d = new_dispatcher(&o);
	add_fn(d, "H", hold, &started);
	add_fn(d, "A", done_now, NULL);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	gx = pick_id(d, x, sizeof(x), "x-", -1, -1);
	gy = pick_id(d, y, sizeof(y), "y-", gx, -1);
	pick_id(d, z, sizeof(z), "z-", gx, gy);

	tmsg_init(&hx, x, "H");
	tmsg_init(&hy, y, "H");
	send_ok(d, &hx);
	send_ok(d, &hy);
	ck_assert(tu_latch_wait(&started, TU_LONG_NS));
	for (i = 0; i < 3; i++) {
		tmsg_init(&qx[i], x, "A");
		send_ok(d, &qx[i]);
	}
	tmsg_init(&qy, y, "A");
	tmsg_init(&qz, z, "A");
	send_ok(d, &qy);
	send_ok(d, &qz);
	wait_completed(&done, 1);
	ck_assert_int_eq(atomic_load(&qz.completions), 1);

	assert_x_deepest(d, &hx, gx, _i == 0);

	agr_exchange_done(hx.ex, 0);
	agr_exchange_done(hy.ex, 0);
	wait_completed(&done, 7);
	m = metrics_of(d);
	ck_assert_uint_eq(m.queue_depth, 0);
	ck_assert_uint_eq(m.deepest_group_depth, 0);
	ck_assert_int_eq(m.deepest_group, -1);
	if (_i == 0) {
		ck_assert_uint_eq(m.queue_latency.count, 7);
		ck_assert_uint_eq(m.processing_latency.count, 7);
	}
	stop(d);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_latch_destroy(&started);
	tu_tally_destroy(&done);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *hist = tcase_create("histogram");
	TCase *disp = tcase_create("dispatcher");
	TCase *work = tcase_create("worker");
	TCase *dog = tcase_create("watchdog");
	TCase *prom = tcase_create("prometheus");

	metrics_histogram_tests(hist);

	tcase_add_loop_test(disp, counters_add_up_after_a_stop, 0, 2);
	tcase_add_test(disp, metrics_snapshot_names_its_dispatcher);
	tcase_add_test(disp, latencies_have_known_lower_bounds);
	tcase_add_loop_test(disp, queue_depth_finds_the_deepest_group, 0, 2);

	metrics_worker_tests(work, dog);

	prom_reader_tests(prom);
	metrics_prometheus_tests(prom);

	tcase_set_timeout(hist, 120);
	tcase_set_timeout(disp, 120);
	tcase_set_timeout(work, 120);
	tcase_set_timeout(dog, 120);
	tcase_set_timeout(prom, 120);
	suite_add_tcase(s, hist);
	suite_add_tcase(s, disp);
	suite_add_tcase(s, work);
	suite_add_tcase(s, dog);
	suite_add_tcase(s, prom);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
