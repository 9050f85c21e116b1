/* SPDX-License-Identifier: MIT */
/*
 * histogram.h - recording into latency histograms (internal). One
 * writer per histogram (its worker), readers anywhere: relaxed atomic
 * bumps, no lock, no allocation.
 */
#ifndef AGR_HISTOGRAM_H
#define AGR_HISTOGRAM_H

#include "internal.h"

#include <aggring/histogram.h>

struct agr__histogram {
	atomic_uint_fast64_t count, sum_ns, max_ns;
	atomic_uint_fast64_t buckets[AGR_HISTOGRAM_BUCKETS];
};

/* Single writer only. */
static inline void agr__histogram_record(struct agr__histogram *h,
					 uint64_t ns)
{
	agr__bump(&h->buckets[agr_histogram_bucket_of(ns)]);
	agr__bump(&h->count);
	agr__bump_by(&h->sum_ns, ns);
	if (ns > atomic_load_explicit(&h->max_ns, memory_order_relaxed))
		atomic_store_explicit(&h->max_ns, ns, memory_order_relaxed);
}

/* Adds a consistent-enough copy of `h` into `out` (any thread). */
void agr__histogram_read(const struct agr__histogram *h, agr_histogram *out);

#endif /* AGR_HISTOGRAM_H */
