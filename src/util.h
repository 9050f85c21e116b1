/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers of the library's own: the monotonic clock and
 * timed waits on it, and the CPU count (internal). Settings read from
 * the environment are in settings.h.
 */
#ifndef AGR_UTIL_H
#define AGR_UTIL_H

#include "internal.h"

#include <pthread.h>
#include <time.h>

/* Monotonic clock in nanoseconds. */
static inline uint64_t agr__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline `timeout_ns` from now, saturating. */
static inline uint64_t agr__deadline_after(uint64_t timeout_ns)
{
	uint64_t now = agr__now_ns();

	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

/* Converts an absolute monotonic deadline for pthread_cond_timedwait. */
static inline struct timespec agr__timespec_of(uint64_t abs_ns)
{
	struct timespec ts;

	if (abs_ns > (uint64_t)INT64_MAX)
		abs_ns = (uint64_t)INT64_MAX;
	ts.tv_sec = (time_t)(abs_ns / 1000000000u);
	ts.tv_nsec = (long)(abs_ns % 1000000000u);
	return ts;
}

/* Nanoseconds from now until the absolute `deadline_ns`; 0 once past. */
static inline uint64_t agr__time_left(uint64_t deadline_ns)
{
	uint64_t now = agr__now_ns();

	return deadline_ns > now ? deadline_ns - now : 0;
}

/*
 * Initialises `cond` on CLOCK_MONOTONIC, the clock of every deadline
 * here (agr__timespec_of), so that wall-clock jumps cannot shorten or
 * stretch a timed wait.
 */
void agr__cond_init_monotonic(pthread_cond_t *cond);

/* Online CPUs, at least 1. */
int agr__online_cpus(void);

#endif /* AGR_UTIL_H */
