/* SPDX-License-Identifier: MIT */
/*
 * aggring/runtime.h - the process's lifecycle: components registered in
 * order, admission leases, and one graceful stop under one global
 * deadline.
 *
 * A runtime holds components in registration order: dispatchers,
 * composites, and components of your own (agr_component_ops).
 *
 * Startup (agr_runtime_start(), once). A readiness barrier: every
 * component is prepared, in registration order, before any starts
 * (messages may be admitted and wait; none is handled); then each is
 * started, in order; the runtime is AGR_RUNTIME_RUNNING only when all
 * have started. A dispatcher needs no prepare (a new one already parks
 * what it admits); its start is agr_dispatcher_start(), a composite's
 * agr_composite_start(). If a prepare or a start fails, or a component
 * reports a failure (agr_runtime_report_failure()), that failure is
 * primary: no further component is prepared or started, admission
 * closes, and the components the startup reached (those whose prepare
 * began) are rolled back through the same steps as a stop: quiesce in
 * order, drain, stop_gracefully in reverse, under one global deadline
 * (now + the shutdown timeout), with a force of everything if a
 * cleanup step fails or the deadline passes. A rollback that goes
 * through forces nothing but the dispatchers and composites the
 * startup never reached (they may hold messages sent before the start;
 * their force discards them). agr_runtime_start() returns the startup
 * failure once the rollback is over; a cleanup failure is attached in
 * the report (cleanup_result, suppressed). agr_runtime_stop() or
 * agr_runtime_force_stop() during the startup aborts it: the component
 * being prepared or started finishes its call, no other one is, and
 * agr_runtime_start() returns -ECANCELED after the stop.
 *
 * Without agr_runtime_start() (as before it existed), start the
 * components yourself after registering them; a stop then treats every
 * registered component as started. (A registered dispatcher that never
 * starts keeps the leases of the messages it holds, so a stop then
 * waits for its deadline.)
 *
 * Admission leases. Every message a registered dispatcher admits holds
 * a lease from the runtime until its completion callback has returned,
 * so the runtime knows how much work is active. Code of your own can
 * hold leases too (agr_runtime_lease_acquire()). A lease costs an
 * atomic add and a compare-and-swap; a lock only for the release that
 * empties a component's count while a stop waits for it.
 *
 * agr_runtime_stop() takes one absolute deadline, now + the shutdown
 * timeout, and then, on a thread of its own:
 *   1. Quiet boundary. Leases are still granted, so work that active
 *      work sends on (to any registered dispatcher) is admitted and
 *      finishes. Once no lease is held, a quiet period starts; if no
 *      lease was taken when it ends, admission closes (later sends get
 *      -ESHUTDOWN and are not acknowledged: the transport redelivers).
 *   2. Every component's quiesce, in registration order; then it waits
 *      until no lease is held.
 *   3. Every component's stop_gracefully, one at a time, in reverse
 *      registration order. A failure is recorded and the rest still
 *      stop; the first failure is the result.
 *   4. After any failure: every component's force_stop, in reverse
 *      order.
 * If the deadline passes first, admission closes, the sequence is
 * abandoned (no further component is quiesced or stopped gracefully),
 * every component is force-stopped in reverse order, and the result is
 * -ETIMEDOUT (or an earlier failure). A component whose quiesce or
 * stop_gracefully was still running when it was forced is forced once
 * more when that call returns (what it took meanwhile is released
 * too). Messages still queued then complete with AGR_DISCARDED, so
 * their senders can redeliver them, and the ring operations of those
 * in progress are cancelled.
 *
 * Failures. The first failure (a step's error, a reported failure, the
 * deadline, a force_stop's error) is primary and is the result; the
 * later ones are kept, in order, in the report's suppressed list.
 * A component may report a fatal failure at any time
 * (agr_runtime_report_failure()): admission closes and the complete
 * stop begins (skipping the quiet period), ending with a force of every
 * component; the failure is the result.
 *
 * Ownership and teardown. The runtime does not own its components. It
 * calls them until agr_runtime_free() returns, so free them only after
 * that: agr_runtime_stop(), agr_runtime_free(), then the dispatchers,
 * composites and suppliers.
 *
 * Threads: every call may be made from any thread, except that
 * agr_runtime_stop() must not run on an aggring worker (it waits for
 * the work running there) and agr_runtime_free() must be the last call.
 */
#ifndef AGGRING_RUNTIME_H
#define AGGRING_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/composite.h>
#include <aggring/dispatcher.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct agr_runtime agr_runtime;

#define AGR_RUNTIME_DEFAULT_TIMEOUT_NS (60ull * 1000000000ull)
#define AGR_RUNTIME_DEFAULT_QUIET_NS (1ull * 1000000000ull)
/* Failures after the first that the report keeps (it counts them all). */
#define AGR_RUNTIME_MAX_SUPPRESSED 8

/*
 * Initialise with AGR_RUNTIME_OPTIONS_INIT or agr_runtime_options_init()
 * (the defaults), then set what you need. `size` and the reserved words
 * work as agr_dispatcher_options' (aggring/dispatcher.h): a size of 0
 * (a struct built with designated initialisers) reads the fields of this
 * first version; a size smaller than that, or larger than this
 * version's with non-zero bytes beyond, and non-zero reserved words are
 * refused with -EINVAL and a log line.
 */
typedef struct agr_runtime_options {
	size_t size; /* sizeof(agr_runtime_options) */
	/* From agr_runtime_stop() to the deadline; > 0. */
	uint64_t shutdown_timeout_ns;
	/* Idle time that closes admission; < shutdown_timeout_ns; 0 ok. */
	uint64_t quiet_period_ns;
	uint64_t reserved[8];
} agr_runtime_options;

#define AGR_RUNTIME_OPTIONS_INIT                                         \
	{                                                                \
		.size = sizeof(agr_runtime_options),                     \
		.shutdown_timeout_ns = AGR_RUNTIME_DEFAULT_TIMEOUT_NS,   \
		.quiet_period_ns = AGR_RUNTIME_DEFAULT_QUIET_NS,         \
	}

/* Sets `options` to AGR_RUNTIME_OPTIONS_INIT: 60 s timeout, 1 s quiet. */
AGR_API void agr_runtime_options_init(agr_runtime_options *options);

/*
 * Creates a runtime; `options` NULL means the defaults. Returns 0,
 * -EINVAL (NULL out, a zero timeout, a quiet period not shorter than
 * the timeout, or a size or reserved words it cannot read; logged),
 * -ENOMEM.
 */
AGR_API int agr_runtime_new(const agr_runtime_options *options,
			    agr_runtime **out);

/*
 * What the runtime does with a component of your own. Every pointer
 * may be NULL (the step then succeeds at once). Each returns 0 or a
 * negative errno, which is recorded and makes the startup or the stop
 * fail.
 *
 * - prepare(self, rt): get ready to take work without handling any
 *   (agr_runtime_start(), before any component starts). Keep `rt` to
 *   report a fatal failure later (agr_runtime_report_failure()).
 *   Called at most once, on the thread of agr_runtime_start().
 * - start(self): begin handling. Called at most once, after every
 *   component was prepared, on the thread of agr_runtime_start().
 * - quiesce(self): stop taking new work; do not wait. Called at most
 *   once, on the runtime's stop thread.
 * - stop_gracefully(self, deadline_ns): finish the work taken and stop,
 *   returning by `deadline_ns` (absolute CLOCK_MONOTONIC nanoseconds,
 *   see agr_runtime_now_ns()). Called at most once, on the runtime's
 *   stop thread, and only after quiesce.
 * - force_stop(self): stop now without waiting, and make a step in
 *   progress return soon: at the deadline, or on
 *   agr_runtime_force_stop(), it runs on another thread while a step
 *   may still be running. Called once; and once more if a step was
 *   running when it was called, after that step returns (to release
 *   what the step took after the first call). Called even if prepare
 *   never was: it must be safe then. On any thread; must not block.
 *
 * None of them may call agr_runtime_start(), agr_runtime_stop(),
 * agr_runtime_force_stop() or agr_runtime_free() on this runtime
 * (agr_runtime_report_failure() is fine). A step that ignores both its
 * deadline and force_stop keeps its thread inside it:
 * agr_runtime_stop() still returns at the deadline, but
 * agr_runtime_free() waits for that call to return.
 *
 * prepare and start were added after the first three: a
 * designated initializer that leaves them out leaves them NULL.
 * Initialise with AGR_COMPONENT_OPS_INIT; `size` and the reserved words
 * work as agr_dispatcher_options' (aggring/dispatcher.h): a size of 0
 * reads the five steps above, and agr_runtime_add_component() refuses
 * a size it cannot read, or non-zero reserved words, with -EINVAL and a
 * log line. The runtime copies the struct.
 */
typedef struct agr_component_ops {
	size_t size; /* sizeof(agr_component_ops) */
	int (*quiesce)(void *self);
	int (*stop_gracefully)(void *self, uint64_t deadline_ns);
	int (*force_stop)(void *self);
	int (*prepare)(void *self, agr_runtime *rt);
	int (*start)(void *self);
	void *reserved[4]; /* later steps take these */
} agr_component_ops;

#define AGR_COMPONENT_OPS_INIT { .size = sizeof(agr_component_ops) }

/*
 * Registers a dispatcher, which from now on takes a lease for every
 * message it admits. Register it before it starts and before anything
 * is sent to it (messages admitted earlier would release leases they
 * never took). Its steps are agr_dispatcher_quiesce(),
 * agr_dispatcher_stop_gracefully() with the time left, and
 * agr_dispatcher_force_stop(), and agr_dispatcher_start() as its start.
 * Returns 0, -EINVAL, -EEXIST (already registered here, or with another
 * runtime), -EBUSY (already started or quiesced, it has admitted
 * messages, or agr_runtime_start() was called), -ESHUTDOWN (the runtime
 * has begun stopping), -ENOMEM.
 */
AGR_API int agr_runtime_add_dispatcher(agr_runtime *rt, agr_dispatcher *d);

/*
 * Registers a composite: both children take leases, and its steps are
 * agr_composite_quiesce(), agr_composite_stop_gracefully() with the
 * time left, and agr_composite_force_stop(), and agr_composite_start()
 * as its start. Before it starts, as for a dispatcher. Returns 0,
 * -EINVAL, -EEXIST, -EBUSY, -ESHUTDOWN, -ENOMEM.
 */
AGR_API int agr_runtime_add_composite(agr_runtime *rt, agr_composite *c);

/*
 * Registers a component of your own called `name` (copied; for the
 * report and logs). `ops` is copied; `self` is passed to each of them.
 * Returns 0, -EINVAL (NULL rt, name or ops, an empty name, or an ops
 * size or reserved words it cannot read, logged), -EBUSY
 * (agr_runtime_start() was called), -ESHUTDOWN, -ENOMEM.
 */
AGR_API int agr_runtime_add_component(agr_runtime *rt, const char *name,
				      const agr_component_ops *ops,
				      void *self);

/*
 * A lease for work of your own (a poller that has taken a batch, say):
 * while you hold it the stop treats the runtime as active. Returns 0,
 * -ESHUTDOWN (admission has closed), -EINVAL. Lock-free. Every 0 must be
 * matched by one agr_runtime_lease_release(), on any thread.
 */
AGR_API int agr_runtime_lease_acquire(agr_runtime *rt);
AGR_API void agr_runtime_lease_release(agr_runtime *rt);

/* Leases held now, by every component and by you; 0 if `rt` is NULL. */
AGR_API uint64_t agr_runtime_active(agr_runtime *rt);

typedef enum agr_runtime_state {
	AGR_RUNTIME_RUNNING = 0,
	AGR_RUNTIME_QUIET,    /* stop began; admission still open */
	AGR_RUNTIME_DRAINING, /* admission closed; quiescing and draining */
	AGR_RUNTIME_STOPPING, /* stopping components in reverse order */
	AGR_RUNTIME_STOPPED,  /* the result is final */
	AGR_RUNTIME_STARTING, /* agr_runtime_start() is preparing, starting */
} agr_runtime_state;

/*
 * Where the runtime is; AGR_RUNTIME_STOPPED if `rt` is NULL. A new
 * runtime reads AGR_RUNTIME_RUNNING (its components may have been
 * started by hand); during agr_runtime_start() AGR_RUNTIME_STARTING,
 * then AGR_RUNTIME_RUNNING once all started.
 */
AGR_API agr_runtime_state agr_runtime_state_get(agr_runtime *rt);

/* CLOCK_MONOTONIC now, in nanoseconds: the clock of the deadline. */
AGR_API uint64_t agr_runtime_now_ns(void);

/*
 * Starts the runtime, as described at the top: prepares every component
 * in registration order, then starts each, on this thread. Runs once.
 * Returns 0 (every component started; the runtime is RUNNING), or,
 * after the rollback has finished (the runtime is then STOPPED and its
 * report ready): the first error a prepare or start returned, or that
 * was reported; -ECANCELED (agr_runtime_stop() or
 * agr_runtime_force_stop() came during the startup). Other errors, with
 * nothing done: -EINVAL, -EALREADY (a second call), -ESHUTDOWN (the
 * runtime has begun stopping), -EDEADLK (called on an aggring worker).
 * The rollback may take until the deadline plus the force stops.
 */
AGR_API int agr_runtime_start(agr_runtime *rt);

/*
 * Stops gracefully, as described at the top, and waits for the result.
 * The first call begins the stop (during agr_runtime_start(), it aborts
 * the startup first); every call, concurrent or later, waits for the
 * same stop and returns the same result:
 *   0           every component stopped gracefully, or
 *               agr_runtime_force_stop() came and nothing failed (the
 *               report's `forced` tells);
 *   -ETIMEDOUT  the deadline passed first (all were force-stopped);
 *   the primary failure: the first error a component returned or
 *   reported (all were force-stopped), or that a failed
 *   agr_runtime_start() returned;
 *   the error of creating the stop thread (-EAGAIN; all were
 *   force-stopped, and nothing was run inline).
 * It returns by the deadline plus the time the force stops take, even
 * when a component's stop_gracefully blocks. Other errors: -EINVAL,
 * -EDEADLK (called on an aggring worker; nothing begins).
 */
AGR_API int agr_runtime_stop(agr_runtime *rt);

/*
 * Stops now: closes admission, abandons a startup or a graceful stop in
 * progress (no further step runs; its callers return the result, 0 if
 * nothing failed) and force-stops every component in reverse order,
 * without waiting for their work. Messages still queued complete with
 * AGR_DISCARDED. Returns 0 or the first error of a force_stop (which
 * also becomes the result if nothing failed before); a no-op returning
 * 0 once the stop has a result. -EINVAL if `rt` is NULL.
 */
AGR_API int agr_runtime_force_stop(agr_runtime *rt);

/*
 * A component's fatal failure: `error` (a negative errno) is recorded
 * (primary if it is the first), admission closes, and the complete stop
 * begins if it has not (during agr_runtime_start(), as its rollback),
 * ending with a force of every component. Does not wait: callable from
 * any thread, a worker or a component's step included. Returns 0,
 * -EINVAL (NULL rt, or `error` not negative), -EALREADY (the stop
 * already has its result; nothing recorded).
 */
AGR_API int agr_runtime_report_failure(agr_runtime *rt, int error);

/* ---- the drain report ---- */

typedef enum agr_component_kind {
	AGR_COMPONENT_DISPATCHER = 0,
	AGR_COMPONENT_COMPOSITE,
	AGR_COMPONENT_USER,
} agr_component_kind;

/*
 * One component's part of a stop. Message counts come from
 * agr_dispatcher_stats_get() (summed over both children for a
 * composite; zero for your own components) and are read when the
 * report is taken: after a force stop, discards keep arriving until
 * every message has completed. Durations are in nanoseconds; a step
 * that did not run has a duration of 0 and its `*_ran` false, and one
 * still running (a stop_gracefully past the deadline) has the result
 * -EINPROGRESS. force_calls is 2 when a force overlapped a step and was
 * repeated after it (force_result is the first call's). This struct and
 * agr_runtime_report are filled whole by the library; figures added
 * later take their reserved words, so their sizes (the stride of the
 * components array) do not change.
 */
typedef struct agr_component_report {
	const char *name; /* valid until agr_runtime_free() */
	agr_component_kind kind;
	uint64_t handled;   /* completed by their functions (any status) */
	uint64_t failed;    /* of those, with a function's error */
	uint64_t discarded; /* completed with AGR_DISCARDED */
	uint64_t in_flight; /* leases held now */
	/* Leases held when the deadline passed; 0 if it did not. */
	uint64_t in_flight_at_deadline;
	uint64_t quiesce_ns, stop_ns, force_ns;
	int quiesce_result, stop_result, force_result;
	bool quiesce_ran, stop_ran, force_ran;
	/* agr_runtime_start()'s steps; false and 0 without it. */
	bool prepare_ran, start_ran;
	int prepare_result, start_result;
	unsigned force_calls;
	/*
	 * Of `handled`, completed with AGR_INTERRUPTED: their functions'
	 * I/O was cancelled, or a force stop ended them pending.
	 */
	uint64_t interrupted;
	uint64_t reserved[8]; /* later figures take these; 0 now */
} agr_component_report;

typedef struct agr_runtime_report {
	int result;		/* what agr_runtime_stop() returns */
	bool deadline_passed;
	bool forced;		/* components were force-stopped */
	uint64_t quiet_ns;	/* stop began -> admission closed */
	uint64_t drain_ns;	/* quiesced -> no lease held */
	uint64_t total_ns;	/* stop began -> result */
	size_t ncomponents;	/* registered, even beyond `cap` */
	int startup_result;	/* what agr_runtime_start() returned */
	int cleanup_result;	/* first failure of a failed startup's cleanup */
	/* Failures after the primary one, in order; the first
	 * AGR_RUNTIME_MAX_SUPPRESSED are kept, all are counted. */
	size_t nsuppressed;
	int suppressed[AGR_RUNTIME_MAX_SUPPRESSED];
	uint64_t reserved[8]; /* later figures take these; 0 now */
} agr_runtime_report;

/*
 * The report of a finished stop: fills *out and the first `cap`
 * components (registration order) into `components` (NULL when cap is
 * 0). Returns 0, -EINVAL, -EBUSY (the stop has no result yet).
 */
AGR_API int agr_runtime_report_get(agr_runtime *rt, agr_runtime_report *out,
				   agr_component_report *components,
				   size_t cap);

/*
 * Frees the runtime. If the stop has no result yet, force-stops first.
 * Then waits for the stop thread (so it blocks while a component's
 * stop_gracefully ignores its deadline and force_stop) and until no
 * lease is held (so it blocks while a function never finishes). After
 * it returns the runtime calls none of its components again, and they
 * may be freed. NULL is a no-op. Not on an aggring worker.
 */
AGR_API void agr_runtime_free(agr_runtime *rt);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_RUNTIME_H */
