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
#include <aggring/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A type of aggregate: bounded context plus aggregate name. */
typedef struct agr_named_aggregate {
	const char *context_name;
	const char *aggregate_name;
} agr_named_aggregate;

typedef struct agr_supplier agr_supplier;

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
 * call), closes the rings and frees every scheduler: no scheduler
 * handle may be used after it. Freeing a view frees only the view.
 * NULL is a no-op.
 */
AGR_API void agr_supplier_free(agr_supplier *sup);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_SUPPLIER_H */
