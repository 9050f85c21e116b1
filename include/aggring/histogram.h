/* SPDX-License-Identifier: MIT */
/*
 * aggring/histogram.h - the latency histogram the metrics are read
 * into: a plain value, copied out by the *_metrics_get calls, that a
 * caller may merge and query on any thread.
 */
#ifndef AGGRING_HISTOGRAM_H
#define AGGRING_HISTOGRAM_H

#include <stdint.h>

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Log-bucketed latency histogram in nanoseconds (HDR-style: 8 linear
 * sub-buckets per power of two, so a bucket's width is at most 1/8 of
 * its value). Bucket i counts the values from
 * agr_histogram_bucket_upper(i - 1) + 1 to agr_histogram_bucket_upper(i)
 * inclusive; every power of two 2^k (3 <= k <= 42) starts a bucket, so
 * 2^k - 1 is the last value of the bucket before it. Values of about
 * 2.3 hours (15 x 2^39 ns) and more share the last bucket.
 */
#define AGR_HISTOGRAM_BUCKETS 328

typedef struct agr_histogram {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t buckets[AGR_HISTOGRAM_BUCKETS];
} agr_histogram;

/* Index of the bucket that counts `ns`. */
AGR_API int agr_histogram_bucket_of(uint64_t ns);
/* Largest value counted by bucket `i`; 0 if `i` is out of range. */
AGR_API uint64_t agr_histogram_bucket_upper(int i);
/*
 * The value at percentile `p` (0 < p <= 100): the upper bound of the
 * bucket holding it, never more than max_ns. 0 for an empty histogram.
 */
AGR_API uint64_t agr_histogram_percentile(const agr_histogram *h, double p);
/* Adds `from` into `into`. */
AGR_API void agr_histogram_merge(agr_histogram *into,
				 const agr_histogram *from);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_HISTOGRAM_H */
