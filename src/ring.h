/* SPDX-License-Identifier: MIT */
/*
 * ring.h - setting up rings and sending doorbells (internal).
 */
#ifndef AGR_RING_H
#define AGR_RING_H

#include "internal.h"

#include <liburing.h>

/*
 * Creates a worker ring with the preferred flags, falling back step by
 * step on -EINVAL: SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL, then
 * COOP_TASKRUN|SUBMIT_ALL, then SUBMIT_ALL, then none. Requires
 * IORING_OP_MSG_RING. On failure logs why, in words, and returns the
 * error (-ENOSYS, -EPERM, -ENOMEM, -EINVAL, ...). `*flags_out` gets the
 * setup flags in use. Must run on the thread that will own the ring.
 */
int agr__ring_init(struct io_uring *ring, unsigned sq_entries,
		   unsigned cq_entries, const char *who, unsigned *flags_out);

/* Logs the likely cause of a ring setup failure `err`. */
void agr__ring_explain(int err, const char *who);

/*
 * Posts a doorbell CQE (user_data `ud`) to the ring `target_fd` from a
 * thread that owns no worker ring: through the ring-less register call
 * where the kernel has it (6.13+), else through a small thread-local
 * ring freed at thread exit. Transient refusals (-EOVERFLOW, -ENOMEM,
 * -EAGAIN, -EBUSY, -EBADFD, -EINTR) are retried with backoff until the
 * kernel takes the doorbell, since a lost doorbell would strand the
 * worker's queued work. Returns 0 or the negative (permanent) error.
 */
int agr__msg_ring_from_thread(int target_fd, uint64_t ud);

#endif /* AGR_RING_H */
