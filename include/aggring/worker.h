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

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring;
typedef struct agr_worker agr_worker;
typedef struct agr_scheduler agr_scheduler;

/* Ring setup flags (agr_supplier_options.ring_flags). */
#define AGR_RING_SQPOLL 0x1u	    /* a kernel thread polls the SQ
				     * (IORING_SETUP_SQPOLL, Linux 5.11+
				     * unprivileged) */
#define AGR_RING_COOP_TASKRUN 0x2u  /* COOP_TASKRUN instead of the default
				     * SINGLE_ISSUER|DEFER_TASKRUN */
#define AGR_RING_NO_FALLBACK 0x4u   /* fail with the kernel's error rather
				     * than retry with fewer flags */
#define AGR_RING_FLAGS_ALL 0x7u
/*
 * There is no IOPOLL flag, on purpose. A ring set up with
 * IORING_SETUP_IOPOLL gets no completion interrupts: its CQEs appear
 * only while someone polls the driver, so a worker would have to spin
 * whenever polled I/O is in flight and could no longer sleep in the
 * kernel on its ring, where its doorbells and socket completions
 * arrive; and such a ring takes only O_DIRECT reads and writes on a
 * block device with poll queues (NVMe with poll_queues set,
 * /sys/block/DEV/queue/io_poll = 1), refusing sockets, timers, fsync
 * and MSG_RING. A service that has such a device can create its own
 * IOPOLL ring in a worker_init hook and reap it from a task that it
 * reschedules while its I/O is in flight.
 */

/* How an idle worker sleeps (agr_supplier_options.wait_mode). */
typedef enum agr_wait_mode {
	AGR_WAIT_DEFAULT = 0, /* AGR_WAIT_MODE, else enter (eventfd under
			       * Valgrind) */
	AGR_WAIT_ENTER = 1,   /* in io_uring_enter() */
	AGR_WAIT_EVENTFD = 2, /* in poll(2) on an eventfd of the ring */
} agr_wait_mode;

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

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WORKER_H */
