/* SPDX-License-Identifier: MIT */
/*
 * vg.h - telling Valgrind memcheck what the kernel writes (internal).
 *
 * Memcheck sees system calls, not io_uring: bytes the kernel writes
 * through a ring (a read, a recv) would stay "uninitialised" in its
 * eyes. Buffers handed to such an operation are marked defined when it
 * is prepared; the cost is that memcheck cannot flag bytes past a short
 * read. Without <valgrind/memcheck.h> at build time, and outside
 * Valgrind, this does nothing.
 */
#ifndef AGR_VG_H
#define AGR_VG_H

#include <stddef.h>
#include <sys/uio.h>

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define AGR__HAVE_MEMCHECK 1
#endif
#endif

static inline void agr__vg_kernel_writes(const void *p, size_t len)
{
#ifdef AGR__HAVE_MEMCHECK
	if (p && len)
		(void)VALGRIND_MAKE_MEM_DEFINED(p, len);
#else
	(void)p;
	(void)len;
#endif
}

static inline void agr__vg_kernel_writes_iov(const struct iovec *iov,
					     unsigned n)
{
	unsigned i;

	for (i = 0; iov && i < n; i++)
		agr__vg_kernel_writes(iov[i].iov_base, iov[i].iov_len);
}

#endif /* AGR_VG_H */
