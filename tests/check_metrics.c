/* SPDX-License-Identifier: MIT */
/*
 * check_metrics.c - what aggring lets one observe (aggring/metrics.h):
 * histogram buckets and percentiles against known data, dispatcher
 * counters that add up, latency histograms and queue depth, the worker
 * loop's figures, the blocking detector, and Prometheus text that a
 * strict reader of the exposition format accepts.
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

#include "testutil.h"

#define MS 1000000ull
#define US 1000ull
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LAST_BUCKET (AGR_HISTOGRAM_BUCKETS - 1)

static const agr_named_aggregate order = { "sales", "Order" };
static const agr_named_aggregate cart = { "sales", "Cart" };

/* ==== histogram buckets ==== */

static uint64_t upper(int i)
{
	return agr_histogram_bucket_upper(i);
}

/* Why `v` is not where it belongs, or NULL. */
static const char *bucket_problem(uint64_t v)
{
	int b = agr_histogram_bucket_of(v);

	if (b < 0 || b >= AGR_HISTOGRAM_BUCKETS)
		return "bucket out of range";
	if (v > upper(b))
		return "above its bucket's upper bound";
	if (b > 0 && v <= upper(b - 1))
		return "not above the previous bucket's upper bound";
	/* At most 1/8 of the value wide; the last bucket is open. */
	if (v >= 8 && b < LAST_BUCKET && (upper(b) - upper(b - 1)) * 8 > v)
		return "bucket wider than 1/8 of the value";
	return NULL;
}

/*
 * Checks `v` and that its bucket does not come before the previous
 * value's. Asserts only on failure: a passing ck_assert costs a write.
 */
static void check_value(uint64_t v, int *prev_bucket)
{
	const char *why = bucket_problem(v);
	int b = agr_histogram_bucket_of(v);

	if (why)
		ck_abort_msg("%llu (bucket %d): %s", (unsigned long long)v, b,
			     why);
	if (b < *prev_bucket)
		ck_abort_msg("%llu: bucket %d after bucket %d",
			     (unsigned long long)v, b, *prev_bucket);
	*prev_bucket = b;
}

START_TEST(buckets_partition_the_values)
{
	uint64_t v, u;
	int prev = 0, i;

	for (v = 0; v < 8; v++) {
		ck_assert_int_eq(agr_histogram_bucket_of(v), (int)v);
		ck_assert_uint_eq(upper((int)v), v);
	}
	/* Every value up to 2^17, then a geometric walk to the top. */
	for (v = 0; v < (1u << 17); v++)
		check_value(v, &prev);
	for (; v <= UINT64_MAX / 2; v += v / 64 + 1)
		check_value(v, &prev);
	check_value(UINT64_MAX - 1, &prev);
	check_value(UINT64_MAX, &prev);
	/* Adjacent buckets meet exactly. */
	for (i = 0; i < LAST_BUCKET; i++) {
		u = upper(i);
		if (agr_histogram_bucket_of(u) != i ||
		    agr_histogram_bucket_of(u + 1) != i + 1)
			ck_abort_msg("bucket %d ends at %llu, but %llu is in "
				     "%d and %llu in %d", i,
				     (unsigned long long)u,
				     (unsigned long long)u,
				     agr_histogram_bucket_of(u),
				     (unsigned long long)(u + 1),
				     agr_histogram_bucket_of(u + 1));
	}
}
END_TEST

START_TEST(huge_values_share_the_last_bucket)
{
	const uint64_t hour = 3600ull * 1000000000ull;

	ck_assert_int_eq(agr_histogram_bucket_of(UINT64_MAX), LAST_BUCKET);
	ck_assert_int_eq(agr_histogram_bucket_of(1ull << 63), LAST_BUCKET);
	ck_assert_int_eq(agr_histogram_bucket_of(24 * hour), LAST_BUCKET);
	ck_assert_uint_eq(upper(LAST_BUCKET), UINT64_MAX);
	/* The header's "about 2.3 hours". */
	ck_assert_uint_ge(upper(LAST_BUCKET - 1) + 1, 2 * hour);
	ck_assert_uint_le(upper(LAST_BUCKET - 1) + 1, 3 * hour);
	ck_assert_int_lt(agr_histogram_bucket_of(2 * hour), LAST_BUCKET);
	ck_assert_uint_eq(upper(-1), 0);
	ck_assert_uint_eq(upper(AGR_HISTOGRAM_BUCKETS), 0);
}
END_TEST

/* ==== percentiles against known data ==== */

static void record(agr_histogram *h, uint64_t ns)
{
	h->buckets[agr_histogram_bucket_of(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

/* Records every whole microsecond from `from_us` to `to_us`. */
static void record_us(agr_histogram *h, uint64_t from_us, uint64_t to_us)
{
	uint64_t us;

	for (us = from_us; us <= to_us; us++)
		record(h, us * US);
}

static uint64_t pct(const agr_histogram *h, double p)
{
	return agr_histogram_percentile(h, p);
}

/* Within its bucket above the truth: never below, < 1/8 above. */
#define ASSERT_CLOSE_ABOVE(got, truth)                                  \
	do {                                                            \
		ck_assert_uint_ge((got), (truth));                      \
		ck_assert_uint_le((got), (truth) + (truth) / 8);        \
	} while (0)

START_TEST(percentiles_of_known_data)
{
	agr_histogram h;
	uint64_t prev = 0, v;
	double p;

	memset(&h, 0, sizeof(h));
	record_us(&h, 1, 10000);
	ck_assert_uint_eq(h.count, 10000);
	ck_assert_uint_eq(h.max_ns, 10000 * US);
	ASSERT_CLOSE_ABOVE(pct(&h, 50), 5000 * US);
	ASSERT_CLOSE_ABOVE(pct(&h, 90), 9000 * US);
	ASSERT_CLOSE_ABOVE(pct(&h, 99), 9900 * US);
	ASSERT_CLOSE_ABOVE(pct(&h, 99.99), 9999 * US);
	ASSERT_CLOSE_ABOVE(pct(&h, 0.01), 1 * US);
	ck_assert_uint_eq(pct(&h, 100), h.max_ns);
	/* Never above the largest value, never decreasing in p. */
	for (p = 0.25; p <= 100; p += 0.25) {
		v = pct(&h, p);
		if (v > h.max_ns || v < prev)
			ck_abort_msg("p%g = %llu after %llu (max %llu)", p,
				     (unsigned long long)v,
				     (unsigned long long)prev,
				     (unsigned long long)h.max_ns);
		prev = v;
	}
}
END_TEST

START_TEST(percentile_edge_cases)
{
	agr_histogram empty, one;

	memset(&empty, 0, sizeof(empty));
	memset(&one, 0, sizeof(one));
	ck_assert_uint_eq(pct(&empty, 50), 0);
	ck_assert_uint_eq(pct(&empty, 100), 0);
	ck_assert_uint_eq(agr_histogram_percentile(NULL, 50), 0);
	/* One value: every percentile is that value, capped by max. */
	record(&one, 12345);
	ck_assert_uint_eq(pct(&one, 0.001), 12345);
	ck_assert_uint_eq(pct(&one, 50), 12345);
	ck_assert_uint_eq(pct(&one, 100), 12345);
	/* Outside (0, 100]: nothing at or below 0, the maximum above. */
	ck_assert_uint_eq(pct(&one, 0), 0);
	ck_assert_uint_eq(pct(&one, -5), 0);
	ck_assert_uint_eq(pct(&one, (double)NAN), 0);
	ck_assert_uint_eq(pct(&one, 250), 12345);
	ck_assert_uint_eq(pct(&one, HUGE_VAL), 12345);
}
END_TEST

START_TEST(merge_adds_histograms)
{
	agr_histogram low, high, whole, merged;

	memset(&low, 0, sizeof(low));
	memset(&high, 0, sizeof(high));
	memset(&whole, 0, sizeof(whole));
	record_us(&low, 1, 5000);
	record_us(&high, 5001, 10000);
	record_us(&whole, 1, 10000);

	merged = low;
	agr_histogram_merge(&merged, &high);
	ck_assert_uint_eq(merged.count, 10000);
	ck_assert_uint_eq(merged.sum_ns, whole.sum_ns);
	ck_assert_uint_eq(merged.max_ns, 10000 * US);
	ck_assert(memcmp(&merged, &whole, sizeof(whole)) == 0);
	/* The larger maximum stays, whichever side it is on. */
	merged = high;
	agr_histogram_merge(&merged, &low);
	ck_assert(memcmp(&merged, &whole, sizeof(whole)) == 0);
	ASSERT_CLOSE_ABOVE(pct(&merged, 50), 5000 * US);
	/* NULL on either side changes nothing. */
	agr_histogram_merge(&merged, NULL);
	agr_histogram_merge(NULL, &low);
	ck_assert(memcmp(&merged, &whole, sizeof(whole)) == 0);
}
END_TEST

/* ==== a count that can be waited on ==== */

static void wait_completed(struct tu_tally *t, long n)
{
	ck_assert_msg(tu_tally_wait(t, n, TU_LONG_NS),
		      "%ld of %ld messages completed", tu_tally_value(t), n);
}

/* ==== test messages and handlers ==== */

struct tmsg {
	agr_message m;	  /* m.user points back here */
	int status;	  /* 1 until completed */
	atomic_int completions;
	agr_exchange *ex; /* a held message, finished by the test thread */
	int timer_res;	  /* what its timer reported */
};

static void tmsg_init(struct tmsg *t, const char *id, const char *type)
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

static int done_now(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static int fail_eio(agr_exchange *ex, void *arg)
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
static int wait_on_timer(agr_exchange *ex, void *arg)
{
	const uint64_t *ns = arg;
	int ret = agr_io_timeout(agr_exchange_worker(ex), *ns, timer_fired,
				 ex);

	return ret < 0 ? ret : AGR_PENDING;
}

/* Blocks the calling thread: what the blocking detector is there for. */
static void block_for(uint64_t ns)
{
	struct timespec left = {
		.tv_sec = (time_t)(ns / 1000000000ull),
		.tv_nsec = (long)(ns % 1000000000ull),
	};

	while (nanosleep(&left, &left) != 0 && errno == EINTR)
		;
}

static int sleep_300ms(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	block_for(300 * MS);
	return 0;
}

/* ==== suppliers, schedulers and dispatchers ==== */

static agr_supplier *new_supplier(const char *name, int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new(name, workers, &sup), 0);
	return sup;
}

static agr_scheduler *lookup(agr_supplier *sup)
{
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	return s;
}

/* An Order dispatcher of 16 groups on `sup`, which it does not own. */
static agr_dispatcher_options options(const char *name, agr_supplier *sup,
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

static agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o)
{
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(o, &d), 0);
	return d;
}

static void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
		   void *arg)
{
	ck_assert_int_eq(agr_dispatcher_register(d, type, fn, arg), 0);
}

static void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

static void stop(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
}

static agr_dispatcher_metrics metrics_of(const agr_dispatcher *d)
{
	agr_dispatcher_metrics m;

	ck_assert_int_eq(agr_dispatcher_metrics_get(d, &m), 0);
	return m;
}

static agr_worker_metrics worker_metrics(agr_scheduler *s, int index)
{
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(s, index, &m), 0);
	return m;
}

/* The worker that runs the group of `t`. */
static int worker_of(agr_dispatcher *d, struct tmsg *t)
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

static void assert_statuses(struct tmsg *ts, int n, int status)
{
	int i;

	for (i = 0; i < n; i++) {
		ck_assert_int_eq(atomic_load(&ts[i].completions), 1);
		ck_assert_int_eq(ts[i].status, status);
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
	const agr_dispatcher_stats want = {
		.admitted = N_ALL,
		.refused = N_LATE,
		.handled = N_OK,
		.failed = N_FAIL,
		.skipped = N_SKIP,
		.discarded = N_QUEUED,
		.interrupted = 1,
	};
	agr_supplier *sup = new_supplier("pool", 1);
	struct tmsg ok[N_OK], bad[N_FAIL], skip[N_SKIP], queued[N_QUEUED];
	struct tmsg held, late[N_LATE];
	struct tu_latch started;
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_dispatcher_metrics m;
	agr_dispatcher_stats st;
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
	for (i = 0; i < N_LATE; i++) {
		tmsg_init(&late[i], ids[i], "A");
		ck_assert_int_eq(agr_dispatcher_send(d, &late[i].m),
				 -ESHUTDOWN);
	}
	wait_completed(&done, N_ALL);
	agr_exchange_done(held.ex, 0); /* too late: ignored */
	stop(d);

	m = metrics_of(d);
	assert_stats_eq(&m.messages, &want);
	ck_assert_uint_eq(m.messages.admitted,
			  m.messages.handled + m.messages.failed +
				  m.messages.skipped + m.messages.discarded +
				  m.messages.interrupted);
	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	assert_stats_eq(&st, &want);
	assert_statuses(ok, N_OK, 0);
	assert_statuses(bad, N_FAIL, -EIO);
	assert_statuses(skip, N_SKIP, 0);
	assert_statuses(&held, 1, AGR_INTERRUPTED);
	assert_statuses(queued, N_QUEUED, AGR_DISCARDED);
	for (i = 0; i < N_LATE; i++)
		ck_assert_int_eq(atomic_load(&late[i].completions), 0);

	ck_assert_uint_eq(m.queue_depth, 0);
	ck_assert_uint_eq(m.deepest_group_depth, 0);
	ck_assert_int_eq(m.deepest_group, -1);
	ck_assert_int_eq(m.latency_enabled, _i == 0);
	if (_i == 0) {
		ck_assert_uint_eq(m.queue_latency.count, N_ALL - N_QUEUED);
		ck_assert_uint_eq(m.processing_latency.count,
				  N_ALL - N_QUEUED);
		assert_consistent(&m.queue_latency);
		assert_consistent(&m.processing_latency);
		ck_assert_uint_ge(m.processing_latency.max_ns, held_for);
	} else {
		ck_assert(histogram_is_empty(&m.queue_latency));
		ck_assert(histogram_is_empty(&m.processing_latency));
	}
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

	m = metrics_of(d);
	ck_assert_uint_eq(m.queue_depth, 6);
	ck_assert_uint_eq(m.deepest_group_depth, 4);
	ck_assert_int_eq(m.deepest_group, gx);
	ck_assert_int_eq(m.deepest_group, agr_dispatcher_group_of(d, &hx.m));
	if (_i == 0) {
		/* Started: hx, hy, qz; finished: qz. */
		ck_assert_uint_eq(m.queue_latency.count, 3);
		ck_assert_uint_eq(m.processing_latency.count, 1);
	} else {
		ck_assert(!m.latency_enabled);
		ck_assert(histogram_is_empty(&m.queue_latency));
	}

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

/* ==== worker metrics ==== */

static void count_down(void *arg)
{
	tu_latch_count_down(arg);
}

static void run_tasks(agr_scheduler *s, int n)
{
	struct tu_latch done;
	int i;

	tu_latch_init(&done, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(agr_scheduler_schedule(s, 0, count_down,
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

/* ==== a strict reader of the Prometheus text format 0.0.4 ==== */

/*
 * The reader compares the numbers it parsed exactly, on purpose: they
 * are counts far below 2^53, which a double holds exactly, and "close
 * to 6" would let a wrong count through. clang honours GCC's pragma.
 */
#pragma GCC diagnostic ignored "-Wfloat-equal"

#define MAX_FAMILIES 32
#define MAX_SAMPLES 1024
#define MAX_LABELS 8

enum kind { K_PLAIN, K_BUCKET, K_SUM, K_COUNT };

struct label {
	char name[32];
	char value[128];
};

struct family {
	char name[64];
	char type[16];
	bool closed; /* its group of lines has ended */
};

struct sample {
	char name[64];
	struct family *family; /* check_grouping closes it */
	enum kind kind;
	struct label labels[MAX_LABELS];
	int nlabels;
	double value;
	int line;
};

struct expo {
	struct family families[MAX_FAMILIES];
	int nfamilies;
	struct family *current;
	struct sample samples[MAX_SAMPLES];
	int nsamples;
	char error[256];
};

static bool reject(struct expo *e, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool reject(struct expo *e, int line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(e->error, sizeof(e->error), "line %d: ", line);

	va_start(ap, fmt);
	vsnprintf(e->error + n, sizeof(e->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

static bool is_name_start(char c, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
	return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

/*
 * A metric name [a-zA-Z_:][a-zA-Z0-9_:]* (colon) or a label name
 * [a-zA-Z_][a-zA-Z0-9_]* at *p, copied to `out`.
 */
static bool scan_name(const char **p, char *out, size_t cap, bool colon)
{
	const char *s = *p;
	size_t n = 0;

	if (!is_name_start(*s, colon))
		return false;
	while (is_name_char(s[n], colon))
		n++;
	if (n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + n;
	return true;
}

/* A quoted label value; only \\, \" and \n are escapes. */
static bool scan_value(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	char c;

	if (*s++ != '"')
		return false;
	while ((c = *s++) != '"') {
		if (c == '\0')
			return false;
		if (c == '\\') {
			c = *s++;
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return false;
		}
		if (n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

/* All of `s` is one number, as strtod reads it. */
static bool scan_number(const char *s, double *v)
{
	char *end;

	if (*s == '\0' || *s == ' ' || *s == '\t')
		return false;
	*v = strtod(s, &end);
	return *end == '\0';
}

static struct family *find_family(struct expo *e, const char *name)
{
	int i;

	for (i = 0; i < e->nfamilies; i++)
		if (strcmp(e->families[i].name, name) == 0)
			return &e->families[i];
	return NULL;
}

static const char *label_value(const struct sample *x, const char *name)
{
	int i;

	for (i = 0; i < x->nlabels; i++)
		if (strcmp(x->labels[i].name, name) == 0)
			return x->labels[i].value;
	return NULL;
}

/* HELP text: any text, with \\ and \n as its only escapes. */
static bool help_text_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s == '\\' && *++s != '\\' && *s != 'n')
			return false;
	return true;
}

static bool parse_help(struct expo *e, const char *s, int ln)
{
	char name[64];

	if (!scan_name(&s, name, sizeof(name), true) || *s++ != ' ' ||
	    !help_text_ok(s))
		return reject(e, ln, "bad HELP line");
	return true;
}

static bool parse_type(struct expo *e, const char *s, int ln)
{
	struct family *f;
	char name[64];

	if (!scan_name(&s, name, sizeof(name), true) || *s++ != ' ')
		return reject(e, ln, "bad TYPE line");
	if (strcmp(s, "counter") && strcmp(s, "gauge") &&
	    strcmp(s, "histogram"))
		return reject(e, ln, "unknown type \"%s\"", s);
	if (find_family(e, name))
		return reject(e, ln, "a second TYPE line for %s", name);
	if (e->nfamilies == MAX_FAMILIES)
		return reject(e, ln, "too many families");
	if (e->current)
		e->current->closed = true;
	f = &e->families[e->nfamilies++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->type, sizeof(f->type), "%s", s);
	e->current = f;
	return true;
}

static bool parse_comment(struct expo *e, const char *s, int ln)
{
	if (strncmp(s, "# HELP ", 7) == 0)
		return parse_help(e, s + 7, ln);
	if (strncmp(s, "# TYPE ", 7) == 0)
		return parse_type(e, s + 7, ln);
	return reject(e, ln, "a comment that is neither HELP nor TYPE");
}

static bool parse_label(struct expo *e, struct sample *x, const char **p,
			int ln)
{
	struct label *l;

	if (x->nlabels == MAX_LABELS)
		return reject(e, ln, "too many labels");
	l = &x->labels[x->nlabels];
	if (!scan_name(p, l->name, sizeof(l->name), false) || *(*p)++ != '=' ||
	    !scan_value(p, l->value, sizeof(l->value)))
		return reject(e, ln, "bad label %d", x->nlabels + 1);
	if (label_value(x, l->name))
		return reject(e, ln, "label %s twice", l->name);
	x->nlabels++;
	return true;
}

/* Its own family, or for name_bucket/_sum/_count that histogram. */
static bool assign_family(struct expo *e, struct sample *x)
{
	static const char *const suffixes[] = { "_bucket", "_sum", "_count" };
	size_t n = strlen(x->name), k, i;
	struct family *f = find_family(e, x->name);
	char base[64];

	if (f) {
		x->family = f;
		x->kind = K_PLAIN;
		return strcmp(f->type, "histogram") != 0;
	}
	for (i = 0; i < ARRAY_SIZE(suffixes); i++) {
		k = strlen(suffixes[i]);
		if (n <= k || strcmp(x->name + n - k, suffixes[i]) != 0)
			continue;
		memcpy(base, x->name, n - k);
		base[n - k] = '\0';
		f = find_family(e, base);
		if (f && strcmp(f->type, "histogram") == 0) {
			x->family = f;
			x->kind = (enum kind)(K_BUCKET + (int)i);
			return true;
		}
	}
	return false;
}

/* The lines of one family come together, after its TYPE line. */
static bool check_grouping(struct expo *e, struct sample *x)
{
	struct family *f = x->family;

	if (f == e->current)
		return true;
	if (f->closed)
		return reject(e, x->line, "%s: lines of %s are not together",
			      x->name, f->name);
	if (e->current)
		e->current->closed = true;
	e->current = f;
	return true;
}

/* le on buckets only, and a number there. */
static bool check_le(struct expo *e, const struct sample *x)
{
	const char *le = label_value(x, "le");
	double v;

	if ((x->kind == K_BUCKET) != (le != NULL))
		return reject(e, x->line, "le label %s",
			      le ? "misplaced" : "missing");
	if (le && !scan_number(le, &v))
		return reject(e, x->line, "le=\"%s\" is not a number", le);
	return true;
}

static bool parse_sample(struct expo *e, const char *s, int ln)
{
	struct sample *x;

	if (e->nsamples == MAX_SAMPLES)
		return reject(e, ln, "too many samples");
	x = &e->samples[e->nsamples];
	memset(x, 0, sizeof(*x));
	x->line = ln;
	if (!scan_name(&s, x->name, sizeof(x->name), true))
		return reject(e, ln, "no metric name");
	if (*s++ != '{')
		return reject(e, ln, "no labels");
	for (;;) {
		if (!parse_label(e, x, &s, ln))
			return false;
		if (*s != ',')
			break;
		s++;
	}
	if (*s++ != '}' || *s++ != ' ')
		return reject(e, ln, "labels not closed by \"} \"");
	if (!scan_number(s, &x->value) || !isfinite(x->value))
		return reject(e, ln, "\"%s\" is not a finite number", s);
	if (!assign_family(e, x))
		return reject(e, ln, "%s: no family with a TYPE line before",
			      x->name);
	if (!check_grouping(e, x) || !check_le(e, x))
		return false;
	e->nsamples++;
	return true;
}

/* Same family and the same labels, le aside. */
static bool same_series(const struct sample *a, const struct sample *b)
{
	int i, na = 0, nb = 0;
	const char *v;

	if (a->family != b->family)
		return false;
	for (i = 0; i < a->nlabels; i++) {
		if (strcmp(a->labels[i].name, "le") == 0)
			continue;
		na++;
		v = label_value(b, a->labels[i].name);
		if (!v || strcmp(v, a->labels[i].value) != 0)
			return false;
	}
	for (i = 0; i < b->nlabels; i++)
		nb += strcmp(b->labels[i].name, "le") != 0;
	return na == nb;
}

/*
 * The series of histogram sample `count`: buckets with rising le and
 * non-decreasing counts, the last le="+Inf" equal to _count, one _sum.
 * Returns the number of buckets, or -1.
 */
static int check_series(struct expo *e, const struct sample *count)
{
	double le, prev_le = -HUGE_VAL, prev = 0;
	int i, buckets = 0, sums = 0;
	bool inf = false;

	for (i = 0; i < e->nsamples; i++) {
		const struct sample *x = &e->samples[i];

		if (!same_series(x, count) || x->kind == K_COUNT)
			continue;
		if (x->kind == K_SUM) {
			sums++;
			continue;
		}
		le = strtod(label_value(x, "le"), NULL);
		if (inf || !(le > prev_le) || x->value < prev) {
			reject(e, x->line, "bucket le=%g (%g) after le=%g (%g)",
			       le, x->value, prev_le, prev);
			return -1;
		}
		inf = isinf(le);
		prev_le = le;
		prev = x->value;
		buckets++;
	}
	if (!inf || prev != count->value) {
		reject(e, count->line, "%s %g, _count %g",
		       inf ? "+Inf bucket" : "no +Inf bucket; the last",
		       prev, count->value);
		return -1;
	}
	if (sums != 1) {
		reject(e, count->line, "%d _sum lines", sums);
		return -1;
	}
	return buckets;
}

/* Every bucket belongs to a series with a _count. */
static bool check_histograms(struct expo *e)
{
	int i, n, buckets = 0, seen = 0;

	for (i = 0; i < e->nsamples; i++) {
		if (e->samples[i].kind == K_BUCKET)
			buckets++;
		if (e->samples[i].kind != K_COUNT)
			continue;
		n = check_series(e, &e->samples[i]);
		if (n < 0)
			return false;
		seen += n;
	}
	if (seen != buckets)
		return reject(e, 0, "%d buckets without a _count",
			      buckets - seen);
	return true;
}

static bool same_labels(const struct sample *a, const struct sample *b)
{
	int i;
	const char *v;

	if (a->nlabels != b->nlabels)
		return false;
	for (i = 0; i < a->nlabels; i++) {
		v = label_value(b, a->labels[i].name);
		if (!v || strcmp(v, a->labels[i].value) != 0)
			return false;
	}
	return true;
}

static bool check_unique(struct expo *e)
{
	int i, j;

	for (i = 0; i < e->nsamples; i++)
		for (j = i + 1; j < e->nsamples; j++)
			if (strcmp(e->samples[i].name,
				   e->samples[j].name) == 0 &&
			    same_labels(&e->samples[i], &e->samples[j]))
				return reject(e, e->samples[j].line,
					      "the same sample as line %d",
					      e->samples[i].line);
	return true;
}

/* Reads `text` into `e`; false (with e->error) on the first fault. */
static bool parse_exposition(struct expo *e, const char *text)
{
	const char *p = text, *nl;
	char line[1024];
	size_t len;
	int ln = 0;
	bool ok;

	memset(e, 0, sizeof(*e));
	if (*p == '\0')
		return reject(e, 0, "no text");
	while (*p) {
		ln++;
		nl = strchr(p, '\n');
		if (!nl)
			return reject(e, ln, "no newline at the end");
		len = (size_t)(nl - p);
		if (len == 0 || len >= sizeof(line))
			return reject(e, ln, "empty or overlong line");
		memcpy(line, p, len);
		line[len] = '\0';
		ok = line[0] == '#' ? parse_comment(e, line, ln) :
				      parse_sample(e, line, ln);
		if (!ok)
			return false;
		p = nl + 1;
	}
	return check_histograms(e) && check_unique(e);
}

/* ---- what aggring promises beyond the grammar ---- */

static const char *const allowed_labels[] = {
	"context", "aggregate", "dispatcher", "outcome", "result", "le",
	"scheduler", "worker"
};

static bool label_allowed(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(allowed_labels); i++)
		if (strcmp(name, allowed_labels[i]) == 0)
			return true;
	return false;
}

/*
 * context and aggregate on every sample, with dispatcher or (worker
 * figures) scheduler and worker; no other label but outcome or result
 * (counters) and le; no aggregate id as any value.
 */
static bool check_label_policy(struct expo *e, const char *const *agg_ids,
			       size_t nids)
{
	const struct sample *x;
	size_t k;
	int i, j;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		if (!label_value(x, "context") ||
		    !label_value(x, "aggregate") ||
		    !label_value(x, "dispatcher") ==
			    !(label_value(x, "scheduler") &&
			      label_value(x, "worker")))
			return reject(e, x->line, "a naming label is missing");
		if ((label_value(x, "outcome") || label_value(x, "result")) &&
		    strcmp(x->family->type, "counter") != 0)
			return reject(e, x->line, "outcome off a counter");
		for (j = 0; j < x->nlabels; j++) {
			if (!label_allowed(x->labels[j].name))
				return reject(e, x->line, "label %s",
					      x->labels[j].name);
			for (k = 0; k < nids; k++)
				if (strcmp(x->labels[j].value,
					   agg_ids[k]) == 0)
					return reject(e, x->line,
						      "aggregate id %s",
						      agg_ids[k]);
		}
	}
	return true;
}

static const struct sample *find_sample(const struct expo *e,
					const char *name,
					const char *dispatcher,
					const char *outcome)
{
	const struct sample *x;
	const char *v;
	int i;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		v = label_value(x, "outcome");
		if (!v)
			v = label_value(x, "result");
		if (strcmp(x->name, name) == 0 &&
		    label_value(x, "dispatcher") &&
		    strcmp(label_value(x, "dispatcher"), dispatcher) == 0 &&
		    (!outcome || (v && strcmp(v, outcome) == 0)))
			return x;
	}
	return NULL;
}

static double value_of(const struct expo *e, const char *name,
		       const char *dispatcher, const char *outcome)
{
	const struct sample *x = find_sample(e, name, dispatcher, outcome);

	ck_assert_msg(x != NULL, "no %s for %s (%s)", name, dispatcher,
		      outcome ? outcome : "-");
	return x->value;
}

static const char *type_of(struct expo *e, const char *family)
{
	const struct family *f = find_family(e, family);

	return f ? f->type : "(none)";
}

static struct expo *new_expo(void)
{
	struct expo *e = calloc(1, sizeof(*e));

	ck_assert_ptr_nonnull(e);
	return e;
}

/* ---- the reader rejects what it should ---- */

static bool parses(const char *text)
{
	struct expo *e = new_expo();
	bool ok = parse_exposition(e, text);

	free(e);
	return ok;
}

START_TEST(the_reader_is_strict)
{
	static const char *const good =
		"# HELP m_total Help \\\\ text\\n.\n"
		"# TYPE m_total counter\n"
		"m_total{a=\"x\\\"y\\\\z\\n\",b=\"\"} 3\n"
		"# TYPE h histogram\n"
		"h_bucket{a=\"1\",le=\"0.5\"} 1\n"
		"h_bucket{a=\"1\",le=\"+Inf\"} 2\n"
		"h_sum{a=\"1\"} 0.75\n"
		"h_count{a=\"1\"} 2\n";
#define M "# TYPE m counter\n"
#define H "# TYPE h histogram\n"
	static const struct {
		const char *why, *text;
	} bad[] = {
		{ "no text", "" },
		{ "no final newline", M "m{a=\"1\"} 3" },
		{ "no TYPE", "m{a=\"1\"} 3\n" },
		{ "no braces", M "m 3\n" },
		{ "no label", M "m{} 3\n" },
		{ "metric name", "# TYPE 1m counter\n" },
		{ "label name", M "m{1a=\"1\"} 3\n" },
		{ "colon in a label name", M "m{a:b=\"1\"} 3\n" },
		{ "unknown escape", M "m{a=\"\\t\"} 3\n" },
		{ "open quote", M "m{a=\"1} 3\n" },
		{ "label twice", M "m{a=\"1\",a=\"2\"} 3\n" },
		{ "not a number", M "m{a=\"1\"} 3x\n" },
		{ "two spaces", M "m{a=\"1\"}  3\n" },
		{ "a timestamp", M "m{a=\"1\"} 3 17\n" },
		{ "unknown type", "# TYPE m summary\n" },
		{ "TYPE twice", M M },
		{ "plain comment", "# a comment\n" },
		{ "blank line", M "\nm{a=\"1\"} 3\n" },
		{ "le off a bucket", M "m{le=\"1\"} 3\n" },
		{ "bucket without le", H "h_bucket{a=\"1\"} 1\n" },
		{ "bare histogram name", H "h{a=\"1\"} 1\n" },
		{ "falling buckets", H "h_bucket{a=\"1\",le=\"1\"} 2\n"
				       "h_bucket{a=\"1\",le=\"+Inf\"} 1\n"
				       "h_sum{a=\"1\"} 1\n"
				       "h_count{a=\"1\"} 1\n" },
		{ "no +Inf bucket", H "h_bucket{a=\"1\",le=\"1\"} 1\n"
				      "h_sum{a=\"1\"} 1\n"
				      "h_count{a=\"1\"} 1\n" },
		{ "+Inf is not _count", H "h_bucket{a=\"1\",le=\"+Inf\"} 2\n"
					  "h_sum{a=\"1\"} 1\n"
					  "h_count{a=\"1\"} 1\n" },
		{ "no _sum", H "h_bucket{a=\"1\",le=\"+Inf\"} 1\n"
			       "h_count{a=\"1\"} 1\n" },
		{ "family apart", M "# TYPE n gauge\nn{a=\"1\"} 1\n"
				    "m{a=\"1\"} 1\n" },
		{ "sample twice", M "m{a=\"1\"} 1\nm{a=\"1\"} 2\n" },
	};
#undef M
#undef H
	size_t i;

	ck_assert(parses(good));
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(!parses(bad[i].text), "accepted: %s", bad[i].why);
}
END_TEST

/* ---- two dispatchers, one with latency metrics and one without ---- */

#define ODD_NAME "we\"ird\\name"
#define ODD_NAME_ESCAPED "dispatcher=\"we\\\"ird\\\\name\""

static const char *const pair_ids[] = { "order-11", "order-12", "order-13",
					"cart-21",  "cart-22",	"cart-23" };

struct pair {
	agr_supplier *sup;
	agr_dispatcher *ds[2];
	struct tu_tally done;
	struct tmsg msgs[10];
};

static agr_dispatcher *pair_dispatcher(struct pair *p, const char *name,
				       const agr_named_aggregate *named,
				       bool metrics)
{
	agr_dispatcher_options o = options(name, p->sup, &p->done);
	agr_dispatcher *d;

	o.named_aggregate = *named;
	o.metrics = metrics;
	d = new_dispatcher(&o);
	add_fn(d, "A", done_now, NULL);
	add_fn(d, "E", fail_eio, NULL);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

/*
 * ODD_NAME (Order, metrics on): 3 handled, 1 failed, 2 skipped;
 * "plain" (Cart, metrics off): 2 handled, 2 failed. Both then stop,
 * and their supplier's workers, so that their figures no longer change.
 */
static void pair_setup(struct pair *p)
{
	static const char *const types[] = { "A", "A", "A", "E", "B", "B",
					     "A", "A", "E", "E" };
	int i;

	tu_tally_init(&p->done);
	p->sup = new_supplier("pool", 1);
	p->ds[0] = pair_dispatcher(p, ODD_NAME, &order, true);
	p->ds[1] = pair_dispatcher(p, "plain", &cart, false);
	for (i = 0; i < 10; i++) {
		tmsg_init(&p->msgs[i], pair_ids[(i < 6 ? 0 : 3) + i % 3],
			  types[i]);
		send_ok(p->ds[i < 6 ? 0 : 1], &p->msgs[i]);
	}
	wait_completed(&p->done, 10);
	stop(p->ds[0]);
	stop(p->ds[1]);
	/* The workers end too: their running time no longer grows. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(p->sup, TU_LONG_NS), 0);
}

static void pair_teardown(struct pair *p)
{
	agr_dispatcher_free(p->ds[0]);
	agr_dispatcher_free(p->ds[1]);
	agr_supplier_free(p->sup);
	tu_tally_destroy(&p->done);
}

/* The whole text for ds[0..n), through the sizing call. */
static char *render(agr_dispatcher *const *ds, size_t n, int *len_out)
{
	int len = agr_metrics_write_prometheus(ds, n, NULL, 0);
	char *buf;

	ck_assert_int_gt(len, 0);
	buf = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(agr_metrics_write_prometheus(ds, n, buf,
						      (size_t)len + 1), len);
	ck_assert_uint_eq(strlen(buf), (size_t)len);
	*len_out = len;
	return buf;
}

static void assert_outcomes(struct expo *e, const char *dispatcher,
			    const agr_dispatcher_stats *want)
{
	const char *const in = "aggring_sends_total";
	const char *const m = "aggring_messages_total";

	ck_assert(value_of(e, in, dispatcher, "admitted") ==
		  (double)want->admitted);
	ck_assert(value_of(e, in, dispatcher, "refused") ==
		  (double)want->refused);
	/* Outcomes only: their sum counts each completed message once. */
	ck_assert_ptr_null(find_sample(e, m, dispatcher, "admitted"));
	ck_assert_ptr_null(find_sample(e, in, dispatcher, "handled"));
	ck_assert(value_of(e, m, dispatcher, "handled") ==
		  (double)want->handled);
	ck_assert(value_of(e, m, dispatcher, "failed") ==
		  (double)want->failed);
	ck_assert(value_of(e, m, dispatcher, "skipped") ==
		  (double)want->skipped);
	ck_assert(value_of(e, m, dispatcher, "discarded") ==
		  (double)want->discarded);
	ck_assert(value_of(e, m, dispatcher, "interrupted") ==
		  (double)want->interrupted);
}

static const struct sample *find_worker(const struct expo *e,
					const char *name,
					const char *scheduler, int index)
{
	const struct sample *x;
	const char *s, *w;
	int i;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		s = label_value(x, "scheduler");
		w = label_value(x, "worker");
		if (strcmp(x->name, name) == 0 && s && w &&
		    strcmp(s, scheduler) == 0 && atoi(w) == index)
			return x;
	}
	return NULL;
}

static double worker_value(const struct expo *e, const char *name,
			   const char *scheduler, int index)
{
	const struct sample *x = find_worker(e, name, scheduler, index);

	ck_assert_msg(x != NULL, "no %s for %s worker %d", name, scheduler,
		      index);
	return x->value;
}

/*
 * One series per worker of each scheduler, equal to the worker's own
 * figures: the pair's workers have ended, so that these no longer move.
 */
static void assert_workers(struct expo *e, const struct pair *p)
{
	agr_scheduler *s;
	agr_worker_metrics m;
	const char *name;
	const struct sample *x;
	int d;

	for (d = 0; d < 2; d++) {
		s = agr_dispatcher_scheduler(p->ds[d]);
		name = agr_scheduler_name(s);
		ck_assert_int_eq(agr_scheduler_worker_metrics(s, 0, &m), 0);
		ck_assert(worker_value(e, "aggring_worker_iterations_total",
				       name, 0) == (double)m.iterations);
		ck_assert(worker_value(e, "aggring_worker_items_total", name,
				       0) == (double)m.items);
		ck_assert(worker_value(e, "aggring_worker_doorbells_total",
				       name, 0) == (double)m.doorbells);
		ck_assert(worker_value(e,
				       "aggring_worker_io_completions_total",
				       name, 0) == (double)m.io_completions);
		ck_assert(worker_value(e, "aggring_worker_sq_full_total", name,
				       0) == (double)m.sq_full);
		ck_assert(worker_value(e, "aggring_worker_early_submits_total",
				       name, 0) == (double)m.early_submits);
		ck_assert(fabs(worker_value(e,
					    "aggring_worker_sleep_seconds_total",
					    name, 0) -
			       (double)m.blocked_ns / 1e9) < 1e-9);
		ck_assert(worker_value(e, "aggring_worker_inflight_operations",
				       name, 0) == m.inflight);
		ck_assert_uint_gt(m.items, 0);
		ck_assert_ptr_null(find_worker(e,
					       "aggring_worker_items_total",
					       name, 1));
		x = find_worker(e, "aggring_worker_items_total", name, 0);
		ck_assert_str_eq(label_value(x, "context"), "sales");
		ck_assert_str_eq(label_value(x, "aggregate"),
				 d ? "Cart" : "Order");
	}
	ck_assert_str_eq(type_of(e, "aggring_worker_inflight_operations"),
			 "gauge");
	ck_assert_str_eq(type_of(e, "aggring_worker_sleep_seconds_total"),
			 "counter");
}

START_TEST(prometheus_text_passes_a_strict_reader)
{
	const agr_dispatcher_stats odd = { .admitted = 6, .handled = 3,
					   .failed = 1, .skipped = 2 };
	const agr_dispatcher_stats plain = { .admitted = 4, .handled = 2,
					     .failed = 2 };
	struct expo *e = new_expo();
	const struct sample *x;
	struct pair p;
	char *text;
	int len;

	pair_setup(&p);
	text = render(p.ds, 2, &len);
	ck_assert_msg(parse_exposition(e, text), "%s in:\n%s", e->error, text);
	ck_assert_msg(check_label_policy(e, pair_ids, ARRAY_SIZE(pair_ids)),
		      "%s in:\n%s", e->error, text);

	ck_assert_str_eq(type_of(e, "aggring_sends_total"), "counter");
	ck_assert_str_eq(type_of(e, "aggring_messages_total"), "counter");
	ck_assert_str_eq(type_of(e, "aggring_queue_depth"), "gauge");
	ck_assert_str_eq(type_of(e, "aggring_deepest_group_depth"), "gauge");
	ck_assert_str_eq(type_of(e, "aggring_queue_latency_seconds"),
			 "histogram");
	ck_assert_str_eq(type_of(e, "aggring_processing_latency_seconds"),
			 "histogram");
	assert_outcomes(e, ODD_NAME, &odd);
	assert_outcomes(e, "plain", &plain);
	ck_assert(value_of(e, "aggring_queue_depth", ODD_NAME, NULL) == 0);
	/* "plain" measures no depth: no sample, rather than a false 0. */
	ck_assert_ptr_null(find_sample(e, "aggring_queue_depth", "plain",
				       NULL));
	ck_assert_ptr_null(find_sample(e, "aggring_deepest_group_depth",
				       "plain", NULL));

	/* Latencies: all 6 of ODD_NAME started; none for "plain". */
	ck_assert(value_of(e, "aggring_queue_latency_seconds_count",
			   ODD_NAME, NULL) == 6);
	ck_assert(value_of(e, "aggring_processing_latency_seconds_count",
			   ODD_NAME, NULL) == 6);
	ck_assert(value_of(e, "aggring_processing_latency_seconds_sum",
			   ODD_NAME, NULL) > 0);
	ck_assert_ptr_null(find_sample(e,
				       "aggring_queue_latency_seconds_count",
				       "plain", NULL));
	ck_assert_ptr_null(find_sample(e,
				       "aggring_queue_latency_seconds_bucket",
				       "plain", NULL));

	/* The odd name is escaped in the text and whole once read. */
	ck_assert_ptr_nonnull(strstr(text, ODD_NAME_ESCAPED));
	x = find_sample(e, "aggring_messages_total", ODD_NAME, "handled");
	ck_assert_str_eq(label_value(x, "context"), "sales");
	ck_assert_str_eq(label_value(x, "aggregate"), "Order");
	x = find_sample(e, "aggring_messages_total", "plain", "handled");
	ck_assert_str_eq(label_value(x, "aggregate"), "Cart");
	assert_workers(e, &p);
	free(text);

	/* No dispatcher: the families alone, still well formed. */
	text = render(NULL, 0, &len);
	ck_assert_msg(parse_exposition(e, text), "%s in:\n%s", e->error, text);
	ck_assert_int_eq(e->nsamples, 0);
	free(text);
	pair_teardown(&p);
	free(e);
}
END_TEST

START_TEST(prometheus_buffer_works_like_snprintf)
{
	agr_dispatcher *with_null[2];
	char small[64], *full, *again;
	struct pair p;
	int len, len2;

	pair_setup(&p);
	full = render(p.ds, 2, &len);
	again = render(p.ds, 2, &len2);
	ck_assert_int_eq(len2, len);
	ck_assert_str_eq(again, full);
	ck_assert_uint_gt((size_t)len, sizeof(small));

	/* NULL or no room: only the length. */
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, NULL, 100),
			 len);
	small[0] = 'Z';
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small, 0), len);
	ck_assert_int_eq(small[0], 'Z');
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small, 1), len);
	ck_assert_int_eq(small[0], '\0');
	/* Too small: a NUL-terminated prefix. */
	memset(small, 'Z', sizeof(small));
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small,
						      sizeof(small)), len);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	ck_assert(memcmp(small, full, sizeof(small) - 1) == 0);
	/* One byte short: all but the last newline. */
	memset(again, 'Z', (size_t)len + 1);
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, again,
						      (size_t)len), len);
	ck_assert_uint_eq(strlen(again), (size_t)len - 1);
	ck_assert(memcmp(again, full, (size_t)len - 1) == 0);

	ck_assert_int_eq(agr_metrics_write_prometheus(NULL, 1, small,
						      sizeof(small)), -EINVAL);
	with_null[0] = p.ds[0];
	with_null[1] = NULL;
	ck_assert_int_eq(agr_metrics_write_prometheus(with_null, 2, small,
						      sizeof(small)), -EINVAL);
	free(full);
	free(again);
	pair_teardown(&p);
}
END_TEST

/* Reads a pipe to its end on a thread of its own. */
struct drain {
	pthread_t thread;
	int fd;
	char buf[1 << 17];
	size_t len;
	int error;
};

static void *drain_pipe(void *arg)
{
	struct drain *r = arg;
	ssize_t n;

	for (;;) {
		n = read(r->fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r->error = errno;
		if (n <= 0)
			break;
		r->len += (size_t)n;
	}
	r->buf[r->len] = '\0';
	return NULL;
}

/* Reads all of `fd` from its start. */
static char *read_file(int fd, size_t max)
{
	char *buf = malloc(max + 1);
	size_t len = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return buf;
}

START_TEST(prometheus_fd_gets_the_same_text)
{
	char path[] = "/tmp/check_metrics-XXXXXX";
	struct drain *r = calloc(1, sizeof(*r));
	char *full, *got;
	struct pair p;
	int fds[2], fd, len;

	ck_assert_ptr_nonnull(r);
	pair_setup(&p);
	full = render(p.ds, 2, &len);
	ck_assert_uint_lt((size_t)len, sizeof(r->buf) - 1);

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, fd), 0);
	got = read_file(fd, (size_t)len * 2);
	ck_assert_str_eq(got, full);
	free(got);
	close(fd);

	ck_assert_int_eq(pipe(fds), 0);
	r->fd = fds[0];
	ck_assert_int_eq(pthread_create(&r->thread, NULL, drain_pipe, r), 0);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, fds[1]), 0);
	close(fds[1]);
	ck_assert_int_eq(pthread_join(r->thread, NULL), 0);
	close(fds[0]);
	ck_assert_int_eq(r->error, 0);
	ck_assert_str_eq(r->buf, full);

	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, -1), -EBADF);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(NULL, 1, 1), -EINVAL);
	free(full);
	free(r);
	pair_teardown(&p);
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

	tcase_add_test(hist, buckets_partition_the_values);
	tcase_add_test(hist, huge_values_share_the_last_bucket);
	tcase_add_test(hist, percentiles_of_known_data);
	tcase_add_test(hist, percentile_edge_cases);
	tcase_add_test(hist, merge_adds_histograms);

	tcase_add_loop_test(disp, counters_add_up_after_a_stop, 0, 2);
	tcase_add_test(disp, metrics_snapshot_names_its_dispatcher);
	tcase_add_test(disp, latencies_have_known_lower_bounds);
	tcase_add_loop_test(disp, queue_depth_finds_the_deepest_group, 0, 2);

	tcase_add_test(work, worker_metrics_reject_bad_arguments);
	tcase_add_test(work, worker_metrics_follow_the_loop);

	tcase_add_test(dog, detector_reports_a_sleeping_handler_once);
	tcase_add_test(dog, detector_stays_quiet_on_a_handler_waiting_for_io);
	tcase_add_test(dog, detector_reports_only_plausible_holds);
	tcase_add_test(dog, detector_times_each_handler_not_the_group);
	tcase_add_test(dog, watchdog_starts_and_stops_twice);

	tcase_add_test(prom, the_reader_is_strict);
	tcase_add_test(prom, prometheus_text_passes_a_strict_reader);
	tcase_add_test(prom, prometheus_buffer_works_like_snprintf);
	tcase_add_test(prom, prometheus_fd_gets_the_same_text);

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
