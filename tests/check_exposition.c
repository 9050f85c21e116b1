/* SPDX-License-Identifier: MIT */
/*
 * check_exposition.c - the Prometheus text of src/metrics.c, line by
 * line, on figures made up here. src/metrics.c and src/histogram.c are
 * built into this program with stand-ins for the five dispatcher and
 * scheduler calls they make, so that a test can put an observation
 * exactly on a bucket bound, or one nanosecond above it, and know every
 * counter the text must show.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include <aggring/dispatcher.h> /* the stand-ins below */
#include <aggring/metrics.h>

#include "internal.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define LE_FIRST 7  /* the bounds are 2^k - 1 ns for k = 7 .. 36 */
#define LE_LAST 36

/* ---- stand-ins for the library around src/metrics.c ---- */

struct agr_scheduler {
	const char *name;
	int parallelism;
	agr_worker_metrics workers[4];
};

struct agr_dispatcher {
	agr_dispatcher_metrics m;
	agr_scheduler *sched;
};

static int logged;

void agr__log(agr_log_level level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
	logged++;
}

int agr_dispatcher_metrics_get(const agr_dispatcher *d,
			       agr_dispatcher_metrics *out)
{
	if (!d || !out)
		return -EINVAL;
	*out = d->m;
	return 0;
}

agr_scheduler *agr_dispatcher_scheduler(const agr_dispatcher *d)
{
	return d ? d->sched : NULL;
}

int agr_scheduler_parallelism(const agr_scheduler *s)
{
	return s ? s->parallelism : -EINVAL;
}

const char *agr_scheduler_name(const agr_scheduler *s)
{
	return s ? s->name : NULL;
}

int agr_scheduler_worker_metrics(agr_scheduler *s, int index,
				 agr_worker_metrics *out)
{
	if (!s || !out || index < 0 || index >= s->parallelism)
		return -EINVAL;
	*out = s->workers[index];
	return 0;
}

/* ---- helpers ---- */

static void record(agr_histogram *h, uint64_t ns)
{
	h->buckets[agr_histogram_bucket_of(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

static char *render_text(agr_dispatcher *const *ds, size_t n)
{
	int len = agr_metrics_write_prometheus(ds, n, NULL, 0);
	char *text;

	ck_assert_int_gt(len, 0);
	text = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(agr_metrics_write_prometheus(ds, n, text,
						      (size_t)len + 1), len);
	return text;
}

/* `text` holds `line` as a whole line. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p;

	for (p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void assert_line(const char *text, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void assert_line(const char *text, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!has_line(text, line))
		fprintf(stderr, "%s", text); /* too long for a message */
	ck_assert_msg(has_line(text, line), "no line \"%s\"", line);
}

/* Lines that start with `prefix`. */
static int count_lines(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *p = text;
	int count = 0;

	while (p && *p) {
		count += strncmp(p, prefix, n) == 0;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return count;
}

/* 2^k - 1 ns in seconds, every digit written out. */
static void bound_text(char *out, size_t cap, int k)
{
	uint64_t ns = (1ull << k) - 1;

	snprintf(out, cap, "%llu.%09llu",
		 (unsigned long long)(ns / 1000000000u),
		 (unsigned long long)(ns % 1000000000u));
}

#define LABELS "context=\"sales\",aggregate=\"Order\",dispatcher=\"d\""
#define PROC "aggring_processing_latency_seconds"

static void dispatcher_init(agr_dispatcher *d, agr_scheduler *s)
{
	memset(d, 0, sizeof(*d));
	d->m.dispatcher = "d";
	d->m.context = "sales";
	d->m.aggregate = "Order";
	d->m.latency_enabled = true;
	d->m.depth_enabled = true;
	d->sched = s;
}

/* ---- the tests ---- */

/*
 * An observation equal to a bound is counted by that le, one a
 * nanosecond above it by the next le only; for every bound.
 */
START_TEST(each_le_is_its_buckets_true_end)
{
	char le[32], next[32], prev[32];
	agr_dispatcher d, *ds = &d;
	uint64_t bound;
	char *text;
	int k;

	for (k = LE_FIRST; k <= LE_LAST; k++) {
		dispatcher_init(&d, NULL);
		bound = (1ull << k) - 1;
		record(&d.m.processing_latency, bound);
		record(&d.m.processing_latency, bound + 1);
		text = render_text(&ds, 1);
		bound_text(le, sizeof(le), k);
		/* Trailing zeros of the fraction go; the bounds end in odd
		 * nanoseconds, so there are none. */
		assert_line(text, PROC "_bucket{" LABELS ",le=\"%s\"} 1", le);
		if (k > LE_FIRST) {
			bound_text(prev, sizeof(prev), k - 1);
			assert_line(text, PROC "_bucket{" LABELS ",le=\"%s\"} 0",
				    prev);
		}
		if (k < LE_LAST) {
			bound_text(next, sizeof(next), k + 1);
			assert_line(text, PROC "_bucket{" LABELS ",le=\"%s\"} 2",
				    next);
		}
		assert_line(text, PROC "_bucket{" LABELS ",le=\"+Inf\"} 2");
		assert_line(text, PROC "_count{" LABELS "} 2");
		free(text);
	}
}
END_TEST

/* The bounds, in order: 2^k - 1 ns for k = 7 .. 36, then +Inf. */
START_TEST(the_bounds_are_the_documented_ones)
{
	agr_dispatcher d, *ds = &d;
	const char *p;
	char want[200], le[32];
	char *text;
	int k;

	dispatcher_init(&d, NULL);
	text = render_text(&ds, 1);
	p = text;
	for (k = LE_FIRST; k <= LE_LAST + 1; k++) {
		if (k <= LE_LAST)
			bound_text(le, sizeof(le), k);
		snprintf(want, sizeof(want), PROC "_bucket{" LABELS ",le=\"%s\"}",
			 k <= LE_LAST ? le : "+Inf");
		p = strstr(p, want);
		ck_assert_msg(p != NULL, "no %s after the bound before", want);
	}
	ck_assert_int_eq(count_lines(text, PROC "_bucket{"),
			 LE_LAST - LE_FIRST + 2);
	/* Each is a bucket end: the next nanosecond is another bucket. */
	for (k = LE_FIRST; k <= LE_LAST; k++)
		ck_assert_int_ne(agr_histogram_bucket_of((1ull << k) - 1),
				 agr_histogram_bucket_of(1ull << k));
	free(text);
}
END_TEST

/* _sum in seconds to the nanosecond; cumulative counts in between. */
START_TEST(sum_and_cumulative_counts_are_exact)
{
	agr_dispatcher d, *ds = &d;
	char *text;

	dispatcher_init(&d, NULL);
	record(&d.m.processing_latency, 1);		/* le 127 ns */
	record(&d.m.processing_latency, 127);		/* le 127 ns */
	record(&d.m.processing_latency, 128);		/* le 255 ns */
	record(&d.m.processing_latency, 1500000000);	/* le 2.147483647 s */
	record(&d.m.queue_latency, 2000000000);
	text = render_text(&ds, 1);
	assert_line(text, PROC "_bucket{" LABELS ",le=\"0.000000127\"} 2");
	assert_line(text, PROC "_bucket{" LABELS ",le=\"0.000000255\"} 3");
	assert_line(text, PROC "_bucket{" LABELS ",le=\"1.073741823\"} 3");
	assert_line(text, PROC "_bucket{" LABELS ",le=\"2.147483647\"} 4");
	assert_line(text, PROC "_sum{" LABELS "} 1.500000256");
	assert_line(text, PROC "_count{" LABELS "} 4");
	assert_line(text, "aggring_queue_latency_seconds_sum{" LABELS "} 2.0");
	free(text);

	/* Latency off: no histogram lines at all, not empty ones. */
	d.m.latency_enabled = false;
	text = render_text(&ds, 1);
	ck_assert_int_eq(count_lines(text, PROC), 0);
	ck_assert_int_eq(count_lines(text, "aggring_queue_latency_seconds"),
			 0);
	ck_assert_int_eq(count_lines(text, "# TYPE " PROC " histogram"), 1);
	free(text);
}
END_TEST

/* Intake and outcomes are two families: each sums to what it counts. */
START_TEST(intake_and_outcomes_are_separate_families)
{
	agr_dispatcher d, *ds = &d;
	char *text;

	dispatcher_init(&d, NULL);
	d.m.messages = (agr_dispatcher_stats){ .admitted = 10, .refused = 3,
					       .handled = 5, .failed = 2,
					       .skipped = 1, .discarded = 1,
					       .interrupted = 4 };
	text = render_text(&ds, 1);
	assert_line(text, "# TYPE aggring_sends_total counter");
	assert_line(text, "aggring_sends_total{" LABELS ",result=\"admitted\"} 10");
	assert_line(text, "aggring_sends_total{" LABELS ",result=\"refused\"} 3");
	ck_assert_int_eq(count_lines(text, "aggring_sends_total{"), 2);
	assert_line(text, "# TYPE aggring_messages_total counter");
	assert_line(text, "aggring_messages_total{" LABELS ",outcome=\"handled\"} 5");
	assert_line(text, "aggring_messages_total{" LABELS ",outcome=\"failed\"} 2");
	assert_line(text, "aggring_messages_total{" LABELS ",outcome=\"skipped\"} 1");
	assert_line(text,
		    "aggring_messages_total{" LABELS ",outcome=\"discarded\"} 1");
	assert_line(text, "aggring_messages_total{" LABELS
			  ",outcome=\"interrupted\"} 4");
	ck_assert_int_eq(count_lines(text, "aggring_messages_total{"), 5);
	free(text);
}
END_TEST

static const char *const worker_families[] = {
	"aggring_worker_iterations_total",
	"aggring_worker_doorbells_total",
	"aggring_worker_items_total",
	"aggring_worker_io_completions_total",
	"aggring_worker_sleep_seconds_total",
	"aggring_worker_running_seconds_total",
	"aggring_worker_sq_full_total",
	"aggring_worker_cq_overflows_total",
	"aggring_worker_early_submits_total",
	"aggring_worker_blocking_detected_total",
	"aggring_worker_inflight_operations",
};

static agr_worker_metrics made_up(uint64_t base)
{
	return (agr_worker_metrics){
		.iterations = base + 1, .doorbells = base + 2,
		.items = base + 3, .io_completions = base + 4,
		.blocked_ns = 1500000000 + base, .running_ns = 250000000,
		.sq_full = base + 7, .cq_overflow = base + 8,
		.early_submits = base + 9, .blocking_detected = base + 10,
		.inflight = (int)base + 11,
	};
}

/*
 * Every worker of every scheduler once, though two dispatchers share
 * one, labelled by the named aggregate, scheduler and index.
 */
START_TEST(workers_by_scheduler_and_index)
{
	agr_scheduler pool = { .name = "pool-Order", .parallelism = 2 };
	agr_scheduler odd = { .name = "we\"ird", .parallelism = 1 };
	agr_dispatcher d[3], *ds[3] = { &d[0], &d[1], &d[2] };
	const char *const w0 = "{context=\"sales\",aggregate=\"Order\","
			       "scheduler=\"pool-Order\",worker=\"0\"}";
	const char *const w1 = "{context=\"sales\",aggregate=\"Order\","
			       "scheduler=\"pool-Order\",worker=\"1\"}";
	const char *const o0 = "{context=\"sales\",aggregate=\"Cart\","
			       "scheduler=\"we\\\"ird\",worker=\"0\"}";
	char prefix[64];
	char *text;
	size_t i;

	pool.workers[0] = made_up(100);
	pool.workers[1] = made_up(200);
	odd.workers[0] = made_up(300);
	dispatcher_init(&d[0], &pool);
	dispatcher_init(&d[1], &pool);
	d[1].m.dispatcher = "d2";
	dispatcher_init(&d[2], &odd);
	d[2].m.dispatcher = "d3";
	d[2].m.aggregate = "Cart";
	text = render_text(ds, 3);
	for (i = 0; i < COUNT_OF(worker_families); i++) {
		snprintf(prefix, sizeof(prefix), "%s{", worker_families[i]);
		ck_assert_int_eq(count_lines(text, prefix), 3);
		assert_line(text, "# TYPE %s %s", worker_families[i],
			    strstr(worker_families[i], "_total") ? "counter" :
								    "gauge");
	}
	assert_line(text, "aggring_worker_iterations_total%s 101", w0);
	assert_line(text, "aggring_worker_iterations_total%s 201", w1);
	assert_line(text, "aggring_worker_iterations_total%s 301", o0);
	assert_line(text, "aggring_worker_doorbells_total%s 202", w1);
	assert_line(text, "aggring_worker_items_total%s 203", w1);
	assert_line(text, "aggring_worker_io_completions_total%s 204", w1);
	assert_line(text, "aggring_worker_sleep_seconds_total%s 1.5000002", w1);
	assert_line(text, "aggring_worker_running_seconds_total%s 0.25", w1);
	assert_line(text, "aggring_worker_sq_full_total%s 207", w1);
	assert_line(text, "aggring_worker_cq_overflows_total%s 208", w1);
	assert_line(text, "aggring_worker_early_submits_total%s 209", w1);
	assert_line(text, "aggring_worker_blocking_detected_total%s 210", w1);
	assert_line(text, "aggring_worker_inflight_operations%s 311", o0);
	free(text);
}
END_TEST

START_TEST(bad_arguments_are_named)
{
	agr_dispatcher d, *ds[2] = { &d, NULL };
	char buf[16];

	dispatcher_init(&d, NULL);
	logged = 0;
	ck_assert_int_eq(agr_metrics_write_prometheus(NULL, 1, buf,
						      sizeof(buf)), -EINVAL);
	ck_assert_int_eq(logged, 1);
	ck_assert_int_eq(agr_metrics_write_prometheus(ds, 2, buf,
						      sizeof(buf)), -EINVAL);
	ck_assert_int_eq(logged, 2);
	/* No dispatcher: the families alone. */
	ck_assert_int_gt(agr_metrics_write_prometheus(NULL, 0, NULL, 0), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("exposition");
	TCase *tc = tcase_create("text");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, each_le_is_its_buckets_true_end);
	tcase_add_test(tc, the_bounds_are_the_documented_ones);
	tcase_add_test(tc, sum_and_cumulative_counts_are_exact);
	tcase_add_test(tc, intake_and_outcomes_are_separate_families);
	tcase_add_test(tc, workers_by_scheduler_and_index);
	tcase_add_test(tc, bad_arguments_are_named);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
