/* SPDX-License-Identifier: MIT */
/*
 * aggring/dispatcher_stats.h - a dispatcher's handle type and its
 * counters, apart so that aggring/metrics.h can name them without the
 * dispatcher's header.
 */
#ifndef AGGRING_DISPATCHER_STATS_H
#define AGGRING_DISPATCHER_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A dispatcher (aggring/dispatcher.h). */
typedef struct agr_dispatcher agr_dispatcher;

/*
 * Counters since creation. Exact once the dispatcher has stopped; while
 * it runs they may lag: admitted counts a message when its group's
 * worker takes it from the queue, so that sending stays cheap.
 */
typedef struct agr_dispatcher_stats {
	uint64_t admitted;  /* send returned 0 */
	uint64_t refused;   /* a send returned -ESHUTDOWN or -EAGAIN for it */
	uint64_t handled;   /* completed with status 0 by a function */
	uint64_t failed;    /* completed with a function's error */
	uint64_t skipped;   /* no function matched; completed with 0 */
	uint64_t discarded; /* completed with AGR_DISCARDED */
	/*
	 * Messages the watchdog (agr_watchdog_start) found pending longer
	 * than its threshold (a function returned AGR_PENDING and has not
	 * called agr_exchange_done()); each is also logged, once, with
	 * the dispatcher, group, worker, type and age. Not an outcome:
	 * the message still completes once.
	 */
	uint64_t stuck;
	/*
	 * Completed with AGR_INTERRUPTED: a function handled the message
	 * but its work was cut short (its I/O cancelled, or still pending
	 * when a force stop ended it). Apart from failed and discarded.
	 */
	uint64_t interrupted;
} agr_dispatcher_stats;

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_DISPATCHER_STATS_H */
