/* SPDX-License-Identifier: MIT */
/*
 * ring.h - setting up a worker's ring (internal).
 */
#ifndef AGR_RING_H
#define AGR_RING_H

#include "internal.h"

#include <liburing.h>

#include <aggring/ring.h>

/* A worker ring's entries unless agr_supplier_options say otherwise. */
#define AGR__RING_SQ_ENTRIES 256
#define AGR__RING_CQ_ENTRIES 4096

/* What a worker asks of its ring (agr_supplier_options). */
struct agr__ring_setup {
	unsigned sq_entries, cq_entries;
	unsigned ring_flags;	 /* AGR_RING_* */
	unsigned sqpoll_idle_ms; /* with AGR_RING_SQPOLL */
	int sqpoll_cpu;		 /* with AGR_RING_SQPOLL; -1: unpinned */
};

/*
 * Creates a worker ring with the preferred flags, falling back step by
 * step on -EINVAL unless AGR_RING_NO_FALLBACK: by default
 * SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL, then
 * COOP_TASKRUN|TASKRUN_FLAG|SUBMIT_ALL, then SUBMIT_ALL, then none;
 * AGR_RING_COOP_TASKRUN starts at the second step; AGR_RING_SQPOLL
 * adds SQPOLL to every step and skips DEFER_TASKRUN, which SQPOLL
 * excludes. Requires IORING_OP_MSG_RING. On failure logs why, in
 * words, and returns the error (-ENOSYS, -EPERM, -ENOMEM, -EINVAL,
 * ...). `*flags_out` gets the setup flags in use. Must run on the
 * thread that will own the ring.
 */
int agr__ring_init(struct io_uring *ring, const struct agr__ring_setup *setup,
		   const char *who, unsigned *flags_out);

/* Logs the likely cause of a ring setup failure `err`. */
void agr__ring_explain(int err, const char *who);

#endif /* AGR_RING_H */
