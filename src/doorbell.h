/* SPDX-License-Identifier: MIT */
/*
 * doorbell.h - waking a worker (internal).
 *
 * A worker that runs out of work arms its bell, looks at its inbox once
 * more and sleeps in the kernel; a producer that pushes work rings the
 * bell and, when it was armed, sends a doorbell: an IORING_OP_MSG_RING
 * completion (user_data AGR__DOORBELL_UD) posted to the worker's ring,
 * which wakes it. The worker's look after arming pairs with the
 * producer's push before ringing (both seq_cst), so a wake-up cannot be
 * lost; while the worker is awake its bell stays rung and producers
 * push without a system call.
 *
 * A doorbell goes out as an SQE on the sender's own ring when the
 * sender is a worker that may use one (agr__doorbell_prep; the caller
 * decides, as only the worker knows its ring), else now from the
 * calling thread (agr__doorbell_send_now, doorbell.c).
 *
 * Hot path: the bell's functions are inline and cost what they did
 * when they lived in worker.c.
 */
#ifndef AGR_DOORBELL_H
#define AGR_DOORBELL_H

#include "internal.h"

#include "fault.h"

#include <liburing.h>

/* The user_data of a doorbell's completion on the woken ring. */
#define AGR__DOORBELL_UD 1
/*
 * The low bits of the user_data of a doorbell SQE whose send failed;
 * the rest is the sender's note of its target (aligned, so these bits
 * are free).
 */
#define AGR__DOORBELL_FAILED_TAG 3

enum { AGR__BELL_ARMED = 0, AGR__BELL_RUNG = 1 };

/* A worker's bell: written when it goes to sleep and when it is rung. */
struct agr__bell {
	atomic_int state;
};

/* A starting worker is not asleep: its bell is rung. */
static inline void agr__bell_init(struct agr__bell *b)
{
	atomic_init(&b->state, AGR__BELL_RUNG);
}

/*
 * Rings the bell, after the caller pushed its work. True when it was
 * armed: the caller must then send the doorbell. An awake worker keeps
 * its bell rung: a load then suffices, and the line stays shared
 * instead of bouncing on every post.
 */
static inline bool agr__bell_ring(struct agr__bell *b)
{
	if (atomic_load_explicit(&b->state, memory_order_seq_cst) ==
	    AGR__BELL_RUNG)
		return false;
	return atomic_exchange_explicit(&b->state, AGR__BELL_RUNG,
					memory_order_seq_cst) ==
	       AGR__BELL_ARMED;
}

/* The worker, before its last look at the inbox and its sleep. */
static inline void agr__bell_arm(struct agr__bell *b)
{
	atomic_store_explicit(&b->state, AGR__BELL_ARMED, memory_order_seq_cst);
}

/* The worker, when its last look found work: it will not sleep. */
static inline void agr__bell_unarm(struct agr__bell *b)
{
	atomic_exchange_explicit(&b->state, AGR__BELL_RUNG,
				 memory_order_seq_cst);
}

/* The worker, awake again: producers need not ring until it arms. */
static inline void agr__bell_awake(struct agr__bell *b)
{
	atomic_store_explicit(&b->state, AGR__BELL_RUNG, memory_order_seq_cst);
}

/*
 * Prepares `sqe`, on the sender's own ring, as the doorbell to the ring
 * `target_fd`. Success posts no completion to the sender; a failure
 * posts one with user_data `failed_ud` (tagged AGR__DOORBELL_FAILED_TAG)
 * so that the sender can send it again with agr__doorbell_send_now().
 */
static inline void agr__doorbell_prep(struct io_uring_sqe *sqe, int target_fd,
				      uint64_t failed_ud)
{
	io_uring_prep_msg_ring(sqe, target_fd, 0, AGR__DOORBELL_UD, 0);
	io_uring_sqe_set_flags(sqe, IOSQE_CQE_SKIP_SUCCESS);
	agr__fault_doorbell_sqe(sqe);
	io_uring_sqe_set_data64(sqe, failed_ud);
}

/*
 * Posts a doorbell CQE (user_data `ud`) to the ring `target_fd` from a
 * thread that owns no worker ring: through the ring-less register call
 * where the kernel has it (6.13+, unless AGR_NO_SYNC_MSG), else through
 * a small thread-local ring freed at thread exit. Transient refusals
 * (-EOVERFLOW, -ENOMEM, -EAGAIN, -EBUSY, -EBADFD, -EINTR) are retried
 * with backoff until the kernel takes the doorbell, since a lost
 * doorbell would strand the worker's queued work. Returns 0 or the
 * negative (permanent) error.
 */
int agr__doorbell_from_thread(int target_fd, uint64_t ud);

/*
 * Rings the worker of bell `b` and ring `target_fd` now, retrying
 * transient errors until it is heard. If it fails for good (the target
 * is gone), the bell is armed again so that the next producer rings
 * instead of assuming one is on its way.
 */
static inline void agr__doorbell_send_now(struct agr__bell *b, int target_fd)
{
	if (agr__doorbell_from_thread(target_fd, AGR__DOORBELL_UD) < 0)
		atomic_store(&b->state, AGR__BELL_ARMED);
}

#endif /* AGR_DOORBELL_H */
