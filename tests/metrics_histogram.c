/* SPDX-License-Identifier: MIT */
/*
 * metrics_histogram.c - check_metrics' histograms: buckets that
 * partition the values, percentiles against known data, merging.
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

uint64_t pct(const agr_histogram *h, double p)
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

void metrics_histogram_tests(TCase *hist)
{
	tcase_add_test(hist, buckets_partition_the_values);
	tcase_add_test(hist, huge_values_share_the_last_bucket);
	tcase_add_test(hist, percentiles_of_known_data);
	tcase_add_test(hist, percentile_edge_cases);
	tcase_add_test(hist, merge_adds_histograms);
}
