/* SPDX-License-Identifier: MIT */
/*
 * aggring/supplier.h - one scheduler per named aggregate, and their
 * lifecycle.
 *
 * A supplier creates a scheduler on the first lookup of a named
 * aggregate (context name + aggregate name) and returns the same one on
 * every later lookup. It owns the schedulers: stopping the supplier
 * disposes all of them, and freeing it frees them. One lock covers the
 * lookups and the stop's snapshot, so a scheduler either is created
 * before the stop (and is disposed by it) or is refused (-ESHUTDOWN).
 *
 * Threads: every call may be made from any thread, concurrently, except
 * agr_supplier_free(), which must be the last call on the handle and
 * must not run on one of its own workers.
 */
#ifndef AGGRING_SUPPLIER_H
#define AGGRING_SUPPLIER_H

#include <aggring/common.h>
#include <aggring/ring.h>
#include <aggring/scheduler.h>
#include <aggring/wait.h>
#include <aggring/worker.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A type of aggregate: bounded context plus aggregate name. */
typedef struct agr_named_aggregate {
	const char *context_name;
	const char *aggregate_name;
} agr_named_aggregate;

typedef struct agr_supplier agr_supplier;

/* ---- shaping the rings (agr_supplier_new_opts) ---- */

/*
 * Settings of a supplier's schedulers and their workers. Initialise
 * with AGR_SUPPLIER_OPTIONS_INIT or agr_supplier_options_init(), then
 * set what you need: every field left as initialised means "the
 * default", which is the environment variable named, when set. `size`
 * lets later versions add fields at the end without breaking callers
 * built against this one; `reserved` must stay zero.
 */
typedef struct agr_supplier_options {
	size_t size;	  /* sizeof(agr_supplier_options) */
	int parallelism;  /* workers per scheduler; 0: online CPUs, or
			   * AGR_SCHEDULER_POOL_SIZE */
	unsigned sq_entries; /* SQ size, a power of two up to 32768;
			      * 0: 256 */
	unsigned cq_entries; /* CQ size, a power of two >= sq_entries, up
			      * to 65536; 0: 4096 or 2 x sq_entries if
			      * larger */
	unsigned ring_flags; /* AGR_RING_* */
	unsigned sqpoll_idle_ms; /* with AGR_RING_SQPOLL: idle time before
				  * the poller sleeps; 0: the kernel's */
	int sqpoll_cpu;	  /* with AGR_RING_SQPOLL: the poller's CPU;
			   * -1: unpinned */
	const int *worker_cpus; /* worker i runs on worker_cpus[i % n], and
				 * so do its ring's io-wq threads; NULL:
				 * AGR_WORKER_CPUS, or unpinned */
	int nworker_cpus;
	int idle_spin_us; /* how long an idle worker watches for work
			   * before sleeping, 0..1000000; -1:
			   * AGR_IDLE_SPIN_US, or 20; 100 where the
			   * online CPUs are at least the process's
			   * workers + 2 */
	int submit_batch; /* prepared SQEs that are handed to the kernel
			   * before the loop's turn ends, 0 (all wait) ..
			   * sq_entries; -1: AGR_SUBMIT_BATCH, or 4 */
	agr_wait_mode wait_mode;
	agr_worker_init_fn worker_init; /* NULL: none */
	agr_worker_exit_fn worker_exit; /* NULL: none */
	void *hook_arg;
	/*
	 * Log hook for what this supplier's workers log (every handler,
	 * task and callback runs there); NULL: the process-wide hook
	 * (agr_set_log_hook). Lines logged by calls on other threads go
	 * to the process-wide hook.
	 */
	agr_log_fn log_fn;
	void *log_arg;
	/*
	 * > 0: a watchdog of this supplier's own (aggring/watchdog.h): its
	 * workers are watched for handlers that block and messages pending
	 * longer than this, whether or not agr_watchdog_start() was
	 * called, and the reports go to log_fn when set. 0: the
	 * process-wide watchdog's, when it runs.
	 */
	uint64_t watchdog_threshold_ns;
	uint64_t reserved[8];
} agr_supplier_options;

#define AGR_SUPPLIER_OPTIONS_INIT                                        \
	{                                                                \
		.size = sizeof(agr_supplier_options), .sqpoll_cpu = -1,  \
		.idle_spin_us = -1, .submit_batch = -1,                  \
	}

/* Sets `o` to AGR_SUPPLIER_OPTIONS_INIT. */
AGR_API void agr_supplier_options_init(agr_supplier_options *o);

/*
 * agr_supplier_new() with settings. Each bad field is refused with
 * -EINVAL and a log line naming it: a size smaller than the first
 * version's, or larger than this one's with non-zero bytes beyond;
 * entries that are not a power of two or too big; cq_entries below
 * sq_entries; an unknown ring flag; sqpoll_cpu or sqpoll_idle_ms
 * without AGR_RING_SQPOLL; nworker_cpus that does not match
 * worker_cpus, or a CPU number out of range; spin or batch out of
 * range; an unknown wait mode; non-zero reserved words. What only the
 * kernel can judge comes at the first agr_supplier_get_or_init(), which
 * returns its error and logs why: ring settings it refuses (say an
 * SQPOLL CPU it does not have: -EINVAL, after the fallback ladder
 * unless AGR_RING_NO_FALLBACK) or -EPERM. A worker CPU the thread may
 * not run on is logged and the worker runs unpinned. The options and
 * worker_cpus are copied; the supplier's own watchdog is started here
 * (-EAGAIN if its thread cannot be).
 */
AGR_API int agr_supplier_new_opts(const char *name,
				  const agr_supplier_options *opts,
				  agr_supplier **out);

/*
 * Creates a supplier called `name` whose schedulers have `parallelism`
 * workers each; 0 means the default: the number of online CPUs, or the
 * environment variable AGR_SCHEDULER_POOL_SIZE when set.
 *
 * Returns 0, -EINVAL (NULL or empty name, NULL out, negative
 * parallelism, or an invalid AGR_SCHEDULER_POOL_SIZE; logged, naming
 * which), -ENOMEM.
 * No ring is created until the first lookup.
 */
AGR_API int agr_supplier_new(const char *name, int parallelism,
			     agr_supplier **out);

/*
 * A borrowed view of `owner`: lookups go to the owner, stop and force
 * on the view do nothing, and freeing the view leaves the owner alone.
 * The owner must outlive the view. Returns 0, -EINVAL, -ENOMEM.
 */
AGR_API int agr_supplier_borrow(agr_supplier *owner, agr_supplier **out);

/* The name given at creation (the owner's, for a view). */
AGR_API const char *agr_supplier_name(const agr_supplier *sup);

/* Workers per scheduler, resolved from the default; -EINVAL if NULL. */
AGR_API int agr_supplier_parallelism(const agr_supplier *sup);

/* True for a view made by agr_supplier_borrow(). */
AGR_API bool agr_supplier_is_borrowed(const agr_supplier *sup);

/*
 * The scheduler of `named`, created on first use. Concurrent first
 * lookups of one named aggregate create exactly one scheduler. The
 * cache key is the pair (context_name, aggregate_name); the scheduler
 * and its threads are named after the supplier and the aggregate name.
 *
 * Returns 0, -EINVAL (NULL argument, NULL or empty names; logged,
 * naming which), -ESHUTDOWN
 * (the supplier has begun stopping), -ENOMEM, -EAGAIN (no thread could
 * be created), or the error that kept io_uring from starting (-ENOSYS,
 * -EPERM, -ENOMEM, -EINVAL), whose likely cause is logged in words.
 */
AGR_API int agr_supplier_get_or_init(agr_supplier *sup,
				     const agr_named_aggregate *named,
				     agr_scheduler **out);

/* Number of schedulers created so far; -EINVAL if NULL. */
AGR_API int agr_supplier_size(agr_supplier *sup);

/*
 * Stops gracefully: the first call closes creation, takes the snapshot
 * of every scheduler and disposes each gracefully (queued tasks still
 * run; new ones get -ESHUTDOWN); then every caller waits up to
 * `timeout_ns` nanoseconds for all workers to end. A worker ends once
 * its queue is empty and its in-flight ring operations have completed,
 * so a long timer or a recv that never gets data holds the stop until
 * it completes or agr_supplier_force_stop() cancels it.
 *
 * Returns 0 once every worker has ended (also when a force stop took
 * over), or -ETIMEDOUT if this caller's wait ran out: the stop goes on
 * and a later call waits again. -EINVAL if `sup` is NULL. On a borrowed
 * view it returns 0 at once and stops nothing.
 */
AGR_API int agr_supplier_stop_gracefully(agr_supplier *sup,
					 uint64_t timeout_ns);

/*
 * Stops immediately, with the same snapshot: queued tasks are dropped
 * (their cancel callbacks run), in-flight ring operations are cancelled
 * and reaped (their callbacks get -ECANCELED), and running tasks see
 * agr_worker_interrupted() become true. Takes over a graceful stop in
 * progress. Does not wait for threads to end. Idempotent; a no-op on a
 * borrowed view. Returns 0 or -EINVAL.
 */
AGR_API int agr_supplier_force_stop(agr_supplier *sup);

/*
 * Frees the supplier. If it was not stopped, forces a stop first. Joins
 * every worker thread (so it blocks while a task is stuck in a blocking
 * call, and while the kernel has not ended a cancelled operation; it
 * names every 5 s each worker that has not ended and why, a task that
 * has not returned or the kernel's I/O, and each such worker names the
 * I/O it waits for; a zero-copy send's notification is given up on
 * 10 s into the force stop, see agr_io_send_zc()), closes the rings and
 * frees every scheduler: no scheduler handle may be used after it.
 * Freeing a view frees only the view. NULL is a no-op.
 */
AGR_API void agr_supplier_free(agr_supplier *sup);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_SUPPLIER_H */
