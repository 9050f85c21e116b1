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

/*
 * printf-style logging through the user's hook (common.h), or through
 * the calling thread's own hook when one is set.
 */
void agr__log(agr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Sets the calling thread's hook (a supplier's workers); NULL: none. */
void agr__log_set_thread_hook(agr_log_fn fn, void *arg);

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

#endif /* AGR_INTERNAL_H */
