/* SPDX-License-Identifier: MIT */
/*
 * aggring/composite.h - the composite event dispatcher: an event-stream
 * dispatcher and a state-event dispatcher for one named aggregate, on
 * one scheduler, stopped as one.
 *
 * The composite creates both children itself. Each gets its own
 * borrowed view of the supplier (agr_supplier_borrow()), so both run on
 * the same scheduler of the named aggregate, and stopping a child never
 * stops the supplier: only the composite does, when it owns it.
 *
 * Order. The children are kept as [event-stream ("domain"),
 * state-event], the reference's order:
 *   start            domain, then state; if the domain child fails to
 *                    start, the state child is not started and the
 *                    composite returns that error (a stop then cleans
 *                    both up: the unstarted child discards what it
 *                    holds);
 *   quiesce          domain, then state: each child's intake closes and
 *                    its processing-quiescence step ("close:domain",
 *                    "close:state") is traced. The close steps belong to
 *                    quiesce, not to stop: a composite that is only
 *                    quiesced shows the two closes and nothing else;
 *   stop_gracefully  quiesces first if that has not happened, then
 *                    stops the state child, then the domain child, then
 *                    the owned supplier ("stop:scheduler");
 *   force_stop       state, domain, then the owned supplier, once.
 * A runtime stop therefore shows close:domain, close:state (its quiesce
 * step), then the children's stops in reverse, then stop:scheduler.
 *
 * Threads: every call may be made from any thread except a worker of
 * the composite's scheduler (stop_gracefully and free wait for those
 * workers). agr_composite_free() must be the last call on the handle.
 */
#ifndef AGGRING_COMPOSITE_H
#define AGGRING_COMPOSITE_H

#include <stdbool.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/dispatcher.h>
#include <aggring/supplier.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct agr_composite agr_composite;

/*
 * Told each lifecycle step just before the composite takes it. `step`
 * is one of "start:domain", "start:state", "close:domain",
 * "close:state" (quiesce), "stop:state", "stop:domain",
 * "stop:scheduler", "force:state", "force:domain", "force:scheduler"
 * (the scheduler steps only with owns_supplier). Runs on the thread that called the
 * lifecycle function; must not block and must not call the composite's
 * lifecycle functions. For tracing and tests.
 */
typedef void (*agr_composite_step_fn)(const char *step, void *arg);

/*
 * Initialise with AGR_COMPOSITE_OPTIONS_INIT (which initialises both
 * children's options too), then set what you need. `size` and the
 * reserved words work as agr_dispatcher_options' (aggring/dispatcher.h):
 * a size of 0 (a zero-initialised struct) reads the fields of this
 * first version; a size smaller than that, or larger than this
 * version's with non-zero bytes beyond, and non-zero reserved words are
 * refused with -EINVAL and a log line. Each child's options are read
 * by their own size.
 */
typedef struct agr_composite_options {
	size_t size;	  /* sizeof(agr_composite_options) */
	const char *name; /* for logs; not NULL or empty */
	/* The aggregate both children serve (their own field is ignored). */
	agr_named_aggregate named_aggregate;
	/*
	 * The supplier the children borrow from (a borrowed view works
	 * too: stopping it is then a no-op). With owns_supplier, the
	 * composite stops it after its children and frees it in
	 * agr_composite_free() (only once agr_composite_new() has
	 * succeeded); otherwise it must outlive the composite, and its
	 * owner stops it.
	 */
	agr_supplier *supplier;
	bool owns_supplier;
	/*
	 * Options of each child, as for agr_dispatcher_new(), except that
	 * `supplier`, `owns_supplier` and `named_aggregate` are replaced
	 * (a borrowed view, false, the composite's aggregate). A NULL name
	 * becomes "<name>.domain" or "<name>.state". on_complete is
	 * required for each child.
	 */
	agr_dispatcher_options event_stream;
	agr_dispatcher_options state_event;
	agr_composite_step_fn on_step; /* may be NULL */
	void *step_arg;
	uint64_t reserved[8];
} agr_composite_options;

#define AGR_COMPOSITE_OPTIONS_INIT                                       \
	{                                                                \
		.size = sizeof(agr_composite_options),                   \
		.event_stream = AGR_DISPATCHER_OPTIONS_INIT,             \
		.state_event = AGR_DISPATCHER_OPTIONS_INIT,              \
	}

/*
 * Creates the composite and both children (which get or create the
 * scheduler of the named aggregate). Returns 0, -EINVAL (NULL options
 * or out, a size or reserved words it cannot read, NULL or empty name,
 * no supplier, or a child's options that agr_dispatcher_new() rejects),
 * -ENOMEM, -ESHUTDOWN (the supplier is stopping), or the error that
 * kept the scheduler's rings from starting. On failure nothing is left
 * behind and the supplier stays the caller's.
 */
AGR_API int agr_composite_new(const agr_composite_options *options,
			      agr_composite **out);

/*
 * The children, for registering functions and sending. They belong to
 * the composite: do not stop or free them directly. NULL if `c` is NULL.
 */
AGR_API agr_dispatcher *agr_composite_event_stream(agr_composite *c);
/* The state-event child, as agr_composite_event_stream() is the other. */
AGR_API agr_dispatcher *agr_composite_state_event(agr_composite *c);

/* The name from the options (a copy, valid until free); NULL if NULL. */
AGR_API const char *agr_composite_name(const agr_composite *c);

/*
 * Starts the children in order (event-stream, then state-event); stops
 * at the first error, so a failing event-stream child leaves the
 * state-event child unstarted. Returns 0, -EINVAL, or a child's error
 * (-ESHUTDOWN once quiesced or stopped). Under a runtime, call
 * agr_runtime_start() instead, which calls this.
 */
AGR_API int agr_composite_start(agr_composite *c);

/*
 * Closes the intake of both children, in order (event-stream, then
 * state-event), continuing past errors; traces "close:domain" and
 * "close:state". Admitted messages still complete. Only the first call
 * acts. Returns 0 or the first error (-EINVAL).
 */
AGR_API int agr_composite_quiesce(agr_composite *c);

/*
 * Within one deadline of `timeout_ns` from now: quiesces if not yet
 * quiesced, stops the state-event child gracefully, then the
 * event-stream child, then, with
 * owns_supplier and unless agr_composite_force_stop() was called by
 * the time that step is reached, the supplier. A failure does not
 * skip the later steps. Returns 0 or the first error: -ETIMEDOUT (a
 * step ran out of time; the stop goes on, see
 * agr_dispatcher_stop_gracefully()), -EINVAL. Every call runs the
 * steps again, which is harmless: each waits for what is left.
 */
AGR_API int agr_composite_stop_gracefully(agr_composite *c,
					  uint64_t timeout_ns);

/*
 * Stops now without waiting: force-stops the state-event child, the
 * event-stream child and, with owns_supplier, the supplier, continuing
 * past errors. Only the first call acts (so the supplier is forced
 * exactly once); it returns 0 or the first error, later calls 0.
 * -EINVAL if `c` is NULL.
 */
AGR_API int agr_composite_force_stop(agr_composite *c);

/*
 * Frees both children (each force-stops if still running and waits
 * until its admitted messages have completed), their views and, with
 * owns_supplier, the supplier (which joins its threads). Blocks while a
 * function never finishes. Not from a worker. NULL is a no-op.
 */
AGR_API void agr_composite_free(agr_composite *c);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_COMPOSITE_H */
