/* SPDX-License-Identifier: MIT */
/*
 * aggring/worker.h - the worker a task or handler runs on.
 *
 * A worker is one thread that owns one io_uring ring. Everything that
 * runs on it (tasks, dispatcher handlers, I/O callbacks) runs on that
 * thread, one thing at a time.
 */
#ifndef AGGRING_WORKER_H
#define AGGRING_WORKER_H

#include <stdbool.h>

#include <aggring/common.h>
#include <aggring/ring.h> /* AGR_RING_*, once declared here */
#include <aggring/wait.h> /* agr_wait_mode, once declared here */

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring;
typedef struct agr_worker agr_worker;
typedef struct agr_scheduler agr_scheduler;

/*
 * Runs on each worker's thread once its ring exists, before the worker
 * runs any task or message: the place to register files
 * (io_uring_register_files on agr_worker_ring(w)), buffers or buffer
 * rings, or to open per-worker state. agr_io_* may be called. Returns
 * 0, or a negative errno that fails the scheduler's creation with it
 * (agr_supplier_get_or_init returns it); then the exit hook does not
 * run for that worker, and no thread or ring of the scheduler is left.
 */
typedef int (*agr_worker_init_fn)(agr_worker *w, void *arg);

/*
 * Runs on each worker's thread after its loop ended (every task,
 * message and I/O callback has run; no I/O may be submitted), before
 * the ring closes: the place to unregister and free what init made.
 */
typedef void (*agr_worker_exit_fn)(agr_worker *w, void *arg);

/* The worker the calling thread is, or NULL on any other thread. */
AGR_API agr_worker *agr_worker_current(void);

/*
 * The worker's ring, for registering files or buffers from that worker
 * only. The caller must never submit on it nor reap from it: the
 * worker's loop submits, and reads every CQE's user_data as its own
 * record (a CQE reaped elsewhere loses its callback, and a graceful
 * stop then waits for it forever). Submit operations through
 * aggring/io.h (agr_io_sqe() for a raw one) so that their completions
 * are routed back to a callback; a raw SQE's user_data must not be set
 * by the caller. NULL when `w` is NULL.
 */
AGR_API struct io_uring *agr_worker_ring(agr_worker *w);

/* Index of `w` in its scheduler, 0 .. parallelism-1; -EINVAL if NULL. */
AGR_API int agr_worker_index(const agr_worker *w);

/* The scheduler `w` belongs to; NULL if `w` is NULL. */
AGR_API agr_scheduler *agr_worker_scheduler(const agr_worker *w);

/*
 * True when the calling thread's worker is being disposed immediately
 * (agr_supplier_force_stop). A long task polls it and returns early.
 * This flag is the only interruption C allows: a task stuck in a
 * blocking system call is not woken by it, and its worker thread (and
 * the scheduler's memory) stays alive until that call returns.
 * False off a worker thread.
 */
AGR_API bool agr_worker_interrupted(void);

/*
 * One worker's loop, as agr_scheduler_worker_metrics copies it out.
 * Counters only grow; `inflight` is a gauge. Filled whole by the
 * library; figures added later take the reserved words, so its size
 * does not change.
 */
typedef struct agr_worker_metrics {
	uint64_t iterations;	  /* turns of the event loop */
	uint64_t doorbells;	  /* MSG_RING wake-up completions */
	uint64_t items;		  /* tasks and group activations run */
	uint64_t io_completions;  /* CQEs of agr_io_* operations */
	uint64_t blocked_ns;	  /* asleep in io_uring_submit_and_wait */
	uint64_t running_ns;	  /* the rest of the loop's life */
	uint64_t sq_full;	  /* SQ found full, flushed and retried */
	uint64_t cq_overflow;	  /* CQ overflow seen (kernel kept CQEs) */
	uint64_t early_submits;	  /* submits before the turn ended, each
				   * of AGR_SUBMIT_BATCH prepared SQEs */
	uint64_t blocking_detected; /* handlers over the threshold of the
				     * watchdog (aggring/watchdog.h) */
	int inflight;		  /* operations in the kernel now */
	uint64_t reserved[8]; /* later figures take these; 0 now */
} agr_worker_metrics;

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WORKER_H */
