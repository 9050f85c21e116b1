/* SPDX-License-Identifier: MIT */
/*
 * handle.h - a magic word in each public handle, so that a second free
 * is caught when it can be (internal).
 *
 * Freeing a handle twice is undefined behaviour: after the first free
 * the memory may be reused, and even reading the word is a use after
 * free (AddressSanitizer reports it as such). What this catches
 * reliably is a second free that comes while the first one is still
 * running (it waits for messages or threads, so the handle is alive),
 * and often one that comes later, as long as the allocator has not
 * reused the memory. The word sits away from the start of the object,
 * where allocators keep their free-list pointers. The free functions
 * return void, so a caught double free is logged and the second call
 * returns without touching anything: the first free finishes the job.
 */
#ifndef AGR_HANDLE_H
#define AGR_HANDLE_H

#include "internal.h"

#include <stdbool.h>

enum agr__handle_kind {
	AGR__H_SUPPLIER = 0x53555050u,	 /* "SUPP" */
	AGR__H_DISPATCHER = 0x44495350u, /* "DISP" */
	AGR__H_COMPOSITE = 0x434f4d50u,	 /* "COMP" */
	AGR__H_RUNTIME = 0x52554e54u,	 /* "RUNT" */
	AGR__H_FREED = 0x46524545u,	 /* "FREE" */
};

typedef atomic_uint agr__magic;

static inline void agr__handle_claim(agr__magic *m, enum agr__handle_kind k)
{
	atomic_init(m, (unsigned)k);
}

/*
 * At the top of a free: true if the handle was a live one of kind `k`,
 * now marked freed; false (logged) if the caller must return at once.
 * One atomic compare-exchange, so of two threads freeing at once only
 * one gets through, and a word that is not ours is left as it was.
 */
static inline bool agr__handle_retire(agr__magic *m, enum agr__handle_kind k,
				      const char *fn, const void *h)
{
	unsigned was = (unsigned)k;

	if (agr__likely(atomic_compare_exchange_strong(
		    m, &was, (unsigned)AGR__H_FREED)))
		return true;
	agr__log(AGR_LOG_ERROR, "%s(%p): %s; ignored", fn, h,
		 was == (unsigned)AGR__H_FREED ?
			 "the handle was already freed (double free)" :
			 "not a live handle (freed and reused, or never "
			 "created)");
	return false;
}

#endif /* AGR_HANDLE_H */
