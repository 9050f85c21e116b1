/* SPDX-License-Identifier: MIT */
/*
 * aggring/fault.h - fault injection, for tests only.
 *
 * Exists only in a library configured with --enable-fault-injection,
 * and is installed only then; a normal build has neither this header
 * nor these functions, and its fault points compile to nothing.
 *
 * Each point is one place where the engine meets the kernel or libc.
 * Arming a point makes that place fail as if the kernel had said so, so
 * that a test can check how the engine reports it and recovers. One
 * point (AGR_FAULT_GO_IDLE_PAUSE) fails nothing: it widens a race
 * window, so that a test can show the engine wins the race. Faults are
 * process-wide: every thread that reaches an armed point counts.
 */
#ifndef AGGRING_FAULT_H
#define AGGRING_FAULT_H

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum agr_fault_point {
	/* io_uring_setup of a worker ring returns `value` (-ENOMEM, ...). */
	AGR_FAULT_RING_SETUP = 0,
	/* pthread_create of a worker thread fails; the engine sees `value`. */
	AGR_FAULT_THREAD_CREATE = 1,
	/*
	 * A doorbell sent from a thread that owns no ring (or the retry of
	 * a failed one) fails with `value`; the target hears nothing.
	 */
	AGR_FAULT_DOORBELL = 2,
	/*
	 * A doorbell a worker sends to a peer as an SQE on its own ring
	 * completes with `value` (a NOP stands in for the MSG_RING).
	 */
	AGR_FAULT_DOORBELL_SQE = 3,
	/* io_uring_get_sqe() on a worker ring returns NULL; no `value`. */
	AGR_FAULT_SQ_FULL = 4,
	/* An I/O completion reaches its callback with `value` instead. */
	AGR_FAULT_IO_RESULT = 5,
	/*
	 * An I/O completion of more than `value` bytes (value >= 0)
	 * reaches its callback as `value`: a short read or write.
	 */
	AGR_FAULT_IO_SHORT = 6,
	/*
	 * A worker that drained a dispatcher group and marked it as going
	 * idle sleeps `value` microseconds (value > 0) before its last look
	 * at the group's queue: the window in which a stop that frees the
	 * dispatcher must still wait for it.
	 */
	AGR_FAULT_GO_IDLE_PAUSE = 7,
	AGR_FAULT_POINTS
} agr_fault_point;

/*
 * Arms `point`: the next `skip` times it is reached pass, then the
 * following `count` times fail with `value`; after that it is disarmed.
 * Re-arming replaces the plan and zeroes the point's counters. Returns
 * 0, or -EINVAL (unknown point, count 0, or a `value` the point cannot
 * take: a negative errno for the points that fail with one, >= 0 for
 * AGR_FAULT_IO_SHORT, > 0 for AGR_FAULT_GO_IDLE_PAUSE; AGR_FAULT_SQ_FULL
 * ignores it).
 */
AGR_API int agr_fault_arm(agr_fault_point point, int value, unsigned skip,
			  unsigned count);

/* Disarms every point and zeroes every counter. */
AGR_API void agr_fault_reset(void);

/* Times `point` failed since it was armed; 0 for an unknown point. */
AGR_API unsigned agr_fault_fired(agr_fault_point point);

/* Times `point` was reached while armed (passed or failed). */
AGR_API unsigned agr_fault_reached(agr_fault_point point);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_FAULT_H */
