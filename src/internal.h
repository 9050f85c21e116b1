/* SPDX-License-Identifier: MIT */
/*
 * internal.h - helpers shared by every source file of the library.
 * Nothing here is part of the public API; non-static symbols are
 * prefixed agr__ and hidden from the shared object.
 */
#ifndef AGR_INTERNAL_H
#define AGR_INTERNAL_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <aggring/common.h>

#define AGR__CACHELINE 64
#define AGR__ALIGNED_CACHELINE _Alignas(AGR__CACHELINE)

#define agr__likely(x) __builtin_expect(!!(x), 1)
#define agr__unlikely(x) __builtin_expect(!!(x), 0)

#define agr__container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/*
 * Adds to a counter that has one writer at a time: a plain load and
 * store (no locked instruction); atomic only so readers may look.
 */
static inline void agr__bump_by(atomic_uint_fast64_t *c, uint64_t by)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) +
				      by, memory_order_relaxed);
}

static inline void agr__bump(atomic_uint_fast64_t *c)
{
	agr__bump_by(c, 1);
}

/* printf-style logging through the user's hook (common.h). */
void agr__log(agr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

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

/* Keeps the first error of a sequence that goes on past errors. */
static inline void agr__keep_first(int *first, int ret)
{
	if (ret < 0 && *first == 0)
		*first = ret;
}

static inline void agr__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
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

#endif /* AGR_INTERNAL_H */
