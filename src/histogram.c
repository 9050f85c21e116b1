/* SPDX-License-Identifier: MIT */
/*
 * histogram.c - log-bucketed latency histograms: 8 linear sub-buckets
 * per power of two (3 significant bits, as HDR histograms keep).
 */
#include "histogram.h"

#define SUB_BITS 3
#define SUB (1u << SUB_BITS)
#define MAX_EXP ((AGR_HISTOGRAM_BUCKETS / SUB) + 1) /* 42 */

AGR_API int agr_histogram_bucket_of(uint64_t ns)
{
	unsigned e;

	if (ns < SUB)
		return (int)ns;
	e = 63u - (unsigned)__builtin_clzll(ns);
	if (e > MAX_EXP)
		return AGR_HISTOGRAM_BUCKETS - 1;
	return (int)((e - (SUB_BITS - 1)) * SUB +
		     ((ns >> (e - SUB_BITS)) & (SUB - 1)));
}

AGR_API uint64_t agr_histogram_bucket_upper(int i)
{
	unsigned e, m;

	if (i < 0 || i >= AGR_HISTOGRAM_BUCKETS)
		return 0;
	if (i == AGR_HISTOGRAM_BUCKETS - 1)
		return UINT64_MAX;
	if ((unsigned)i < SUB)
		return (uint64_t)i;
	e = (unsigned)i / SUB + (SUB_BITS - 1);
	m = (unsigned)i % SUB;
	return ((uint64_t)(SUB + m + 1) << (e - SUB_BITS)) - 1;
}

AGR_API uint64_t agr_histogram_percentile(const agr_histogram *h, double p)
{
	uint64_t rank, seen = 0, upper;
	int i;

	if (!h || h->count == 0 || !(p > 0))
		return 0;
	if (p > 100)
		p = 100;
	rank = (uint64_t)((double)h->count * p / 100.0 + 0.999999);
	if (rank == 0)
		rank = 1;
	for (i = 0; i < AGR_HISTOGRAM_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			upper = agr_histogram_bucket_upper(i);
			return upper < h->max_ns ? upper : h->max_ns;
		}
	}
	return h->max_ns;
}

AGR_API void agr_histogram_merge(agr_histogram *into,
				 const agr_histogram *from)
{
	int i;

	if (!into || !from)
		return;
	into->count += from->count;
	into->sum_ns += from->sum_ns;
	if (from->max_ns > into->max_ns)
		into->max_ns = from->max_ns;
	for (i = 0; i < AGR_HISTOGRAM_BUCKETS; i++)
		into->buckets[i] += from->buckets[i];
}

void agr__histogram_read(const struct agr__histogram *h, agr_histogram *out)
{
	uint64_t max;
	int i;

	out->count += atomic_load_explicit(&h->count, memory_order_relaxed);
	out->sum_ns += atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
	max = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
	if (max > out->max_ns)
		out->max_ns = max;
	for (i = 0; i < AGR_HISTOGRAM_BUCKETS; i++)
		out->buckets[i] += atomic_load_explicit(&h->buckets[i],
							memory_order_relaxed);
}
