/* SPDX-License-Identifier: MIT */
/*
 * aggring/scheduler.h - the workers of one named aggregate.
 *
 * A scheduler is `parallelism` worker threads, each with its own ring.
 * Schedulers are made and owned by a supplier (aggring/supplier.h):
 * there is no public constructor or destructor, and a scheduler handle
 * stays valid until its supplier is freed.
 *
 * Tasks reach a worker through its lock-free inbox; a worker that may
 * be asleep is woken with an IORING_OP_MSG_RING completion on its ring.
 */
#ifndef AGGRING_SCHEDULER_H
#define AGGRING_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A task; runs on the chosen worker thread. */
typedef void (*agr_task_fn)(void *arg);

/*
 * Told instead of running when a task is dropped by an immediate
 * dispose; `reason` is -ECANCELED. Runs on a worker of the scheduler or
 * on the thread that disposes it; must not block.
 */
typedef void (*agr_task_cancel_fn)(void *arg, int reason);

/* "<supplier name>-<aggregate name>"; valid as long as the scheduler. */
AGR_API const char *agr_scheduler_name(const agr_scheduler *s);

/* Number of workers; -EINVAL if `s` is NULL. */
AGR_API int agr_scheduler_parallelism(const agr_scheduler *s);

/*
 * Runs fn(arg) on worker `hint % parallelism`. Tasks sent to one
 * worker from one thread run in the order they were scheduled.
 *
 * Returns 0 (fn will run, or on an immediate dispose be dropped),
 * -EINVAL (NULL `s` or `fn`), -ESHUTDOWN (disposal has begun: fn will
 * never run), -ENOMEM.
 */
AGR_API int agr_scheduler_schedule(agr_scheduler *s, unsigned hint,
				   agr_task_fn fn, void *arg);

/*
 * As agr_scheduler_schedule(), and if the task is dropped by an
 * immediate dispose before it starts, on_cancel(arg, -ECANCELED) runs
 * instead of fn: exactly one of the two runs for every task admitted.
 */
AGR_API int agr_scheduler_schedule_cancellable(agr_scheduler *s,
					       unsigned hint, agr_task_fn fn,
					       agr_task_cancel_fn on_cancel,
					       void *arg);

/* Run by agr_scheduler_call_on(); its return value is handed back. */
typedef int (*agr_call_fn)(void *arg);

/*
 * Runs fn(arg) on worker `worker` (0 .. parallelism - 1) of `s` and
 * waits until it has returned: then stores its return value in
 * `*result` (if `result` is not NULL) and returns 0. For work that
 * must happen on one worker's thread (arm a receive on its ring, read
 * its own counters) from any other thread. fn runs as a task, after
 * the tasks and groups queued before it on that worker, and should
 * not block. The caller blocks meanwhile, and logs a warning every
 * 5 s while it still waits. A call from another worker blocks that
 * worker: two workers calling each other deadlock.
 *
 * Returns 0, -EINVAL (NULL `s` or `fn`, `worker` out of range),
 * -EDEADLK (called from worker `worker` itself: it would wait for
 * itself), -ESHUTDOWN (disposal has begun: fn did not run),
 * -ECANCELED (an immediate dispose dropped it before it ran), -ENOMEM.
 */
AGR_API int agr_scheduler_call_on(agr_scheduler *s, int worker,
				  agr_call_fn fn, void *arg, int *result);

/* True once disposal began (new tasks get -ESHUTDOWN). */
AGR_API bool agr_scheduler_is_disposed(agr_scheduler *s);

/* True once every worker thread has left its event loop. */
AGR_API bool agr_scheduler_is_terminated(agr_scheduler *s);

/*
 * Snapshot of worker `index` of `s` (agr_worker_metrics is declared in
 * aggring/worker.h), from any thread; each field is read on its own
 * (relaxed), so two fields may be a moment apart.
 * Returns 0 or -EINVAL (NULL `s` or `out`, index out of range).
 */
AGR_API int agr_scheduler_worker_metrics(agr_scheduler *s, int index,
					 agr_worker_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_SCHEDULER_H */
