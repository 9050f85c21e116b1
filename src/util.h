/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers of the library's own: the monotonic clock and
 * timed waits on it, the CPU count, and settings read from the
 * environment (internal).
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

/*
 * Reads environment variable `name` as a decimal integer in min..max
 * into `*out`. Returns 1 when set and valid, 0 when unset or empty, or
 * -EINVAL (and logs the variable, its value and the range) otherwise.
 */
int agr__env_long(const char *name, long min, long max, long *out);

/* agr__env_long(), with `dflt` for unset and (logged) bad values. */
long agr__env_long_or(const char *name, long dflt, long min, long max);

/*
 * Reads a positive int from environment variable `name`. Returns the
 * value, 0 when unset, or -EINVAL (and logs) when set but not a
 * positive integer.
 */
int agr__env_positive_int(const char *name);

/*
 * A parallelism from the caller: > 0 as given, 0 for the environment
 * variable `env` when set, else `fallback`; < 0 (or a bad variable)
 * is -EINVAL.
 */
int agr__resolve_parallelism(int parallelism, const char *env, int fallback);

#endif /* AGR_UTIL_H */
