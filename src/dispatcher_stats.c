/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_stats.c - a dispatcher's figures: stats, queue depths and
 * latency (aggring/dispatcher.h, aggring/metrics.h).
 */
#include "dispatcher.h"
#include "fault.h"
#include "settings.h"
#include "versioned.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/dispatcher.h>
#include <aggring/group_key.h>

/* ---- introspection ---- */

AGR_API const char *agr_dispatcher_name(const agr_dispatcher *d)
{
	return d ? d->name : NULL;
}

AGR_API int agr_dispatcher_parallelism(const agr_dispatcher *d)
{
	return d ? d->parallelism : -EINVAL;
}

AGR_API agr_scheduler *agr_dispatcher_scheduler(const agr_dispatcher *d)
{
	return d ? d->sched : NULL;
}

static uint64_t load(const atomic_uint_fast64_t *counter)
{
	return atomic_load_explicit(counter, memory_order_relaxed);
}

AGR_API int agr_dispatcher_stats_get(const agr_dispatcher *d,
				     agr_dispatcher_stats *out)
{
	int i;

	if (!d || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (i = 0; i < d->parallelism; i++) {
		const struct group *g = &d->groups[i];

		out->admitted += load(&g->admitted);
		out->refused += load(&g->refused);
		out->handled += load(&g->handled);
		out->failed += load(&g->failed);
		out->skipped += load(&g->skipped);
		out->discarded += load(&g->discarded);
		out->interrupted += load(&g->interrupted);
	}
	out->stuck = atomic_load_explicit(&d->stuck_detected,
					  memory_order_relaxed);
	return 0;
}

static void read_depths(const struct agr_dispatcher *d,
			agr_dispatcher_metrics *out)
{
	unsigned depth;
	int i;

	out->deepest_group = -1;
	out->depth_enabled = d->count_depth;
	if (!d->count_depth)
		return;
	for (i = 0; i < d->parallelism; i++) {
		depth = atomic_load_explicit(&d->groups[i].depth,
					     memory_order_relaxed);
		out->queue_depth += depth;
		if (depth > out->deepest_group_depth) {
			out->deepest_group_depth = depth;
			out->deepest_group = i;
		}
	}
}

AGR_API int agr_dispatcher_metrics_get(const agr_dispatcher *d,
				       agr_dispatcher_metrics *out)
{
	int i;

	if (!d || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->dispatcher = d->name;
	out->context = d->context_name;
	out->aggregate = d->aggregate_name;
	agr_dispatcher_stats_get(d, &out->messages);
	read_depths(d, out);
	out->latency_enabled = d->latency != NULL;
	for (i = 0; d->latency && i < agr__scheduler_workers(d->sched); i++) {
		agr__histogram_read(&d->latency[i].queue, &out->queue_latency);
		agr__histogram_read(&d->latency[i].processing,
				    &out->processing_latency);
	}
	return 0;
}
