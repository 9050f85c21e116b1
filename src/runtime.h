/* SPDX-License-Identifier: MIT */
/*
 * runtime.h - a runtime and its components (internal), which runtime.c
 * (registration, leases, the report) and runtime_sequence.c (startup,
 * stop and free) share. The lease word of a slot: the number of leases
 * (LEASE_ONE each) above two flags.
 */
#ifndef AGR_RUNTIME_INTERNAL_H
#define AGR_RUNTIME_INTERNAL_H

#include "handle.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <aggring/runtime.h>

#define LEASE_WATCH ((uint_fast64_t)1)
#define LEASE_CLOSED ((uint_fast64_t)2)
#define LEASE_SHIFT 2
#define LEASE_ONE ((uint_fast64_t)1 << LEASE_SHIFT)

struct slot {
	AGR__ALIGNED_CACHELINE atomic_uint_fast64_t word;
	struct agr_runtime *rt;
};

struct component {
	struct slot slot; /* first, for its alignment */
	char *name;
	agr_component_kind kind;
	agr_component_ops ops;
	void *self; /* the dispatcher, the composite, or the user's */
	void *step_arg; /* what ops get: self, or this for owned_ops */

	/* Guarded by the runtime's lock. */
	bool in_step;	       /* one of its steps is running */
	bool force_started;
	bool force_done;       /* the first force_stop returned */
	bool force_overlapped; /* ... and began while a step ran */
	bool compensated;      /* the second force_stop is claimed */

	/* The report; guarded by the runtime's lock. */
	uint64_t in_flight_at_deadline;
	uint64_t quiesce_ns, stop_ns, force_ns;
	int prepare_result, start_result;
	int quiesce_result, stop_result, force_result;
	bool prepare_ran, start_ran;
	bool quiesce_ran, stop_ran, force_ran;
	unsigned force_calls;
};

struct agr_runtime {
	struct slot user; /* agr_runtime_lease_acquire() */
	uint64_t timeout_ns;
	uint64_t quiet_ns;

	/*
	 * `cond` signals any progress of the stop and every watched slot
	 * that empties. The component list never changes once the stop
	 * has begun or been forced.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct component **comps;
	size_t ncomps, cap;
	/*
	 * The components the graceful steps visit: comps[0..nentered).
	 * All of them unless agr_runtime_start() was called; then those
	 * whose prepare began (a prefix, in registration order).
	 */
	size_t nentered;
	agr_runtime_state state;
	bool start_called; /* agr_runtime_start() ran; the list is fixed */
	bool starting;	   /* its loop is still calling components */
	bool cleanup_phase; /* the startup failed; the stop cleans up */
	bool began;	   /* the stop sequence began */
	bool rollback;	   /* ... to undo a failed startup */
	bool admission_closed;
	bool thread_started;
	bool abandoned;	   /* the stop thread calls no more components */
	bool forcing;	   /* the terminal force is claimed */
	bool finished;	   /* `result` is final */
	bool cleanup_failed; /* a step of the stop sequence failed */
	bool deadline_passed;
	pthread_t thread;
	uint64_t zero_events; /* watched slots emptied */
	uint64_t began_ns, deadline_ns;
	uint64_t closed_ns, quiesced_ns, drained_ns, finished_ns;
	int first_error;    /* the primary failure */
	int suppressed[AGR_RUNTIME_MAX_SUPPRESSED]; /* the later ones */
	size_t nsuppressed; /* every later one, even beyond the array */
	int startup_result; /* what agr_runtime_start() returned */
	int cleanup_result; /* the first failure while cleaning up */
	int result;
	agr__magic magic; /* handle.h */
};

/* The leases a slot holds. */
static inline uint64_t slot_count(struct slot *s)
{
	return atomic_load_explicit(&s->word, memory_order_acquire) >>
	       LEASE_SHIFT;
}

/* Leases held by the user and by comps[0..ncomps). */
uint64_t agr__runtime_active_locked(struct agr_runtime *rt, size_t ncomps);

/* Frees a component that agr_runtime_add_*() registered. */
void agr__runtime_free_component(struct component *c);

/* Sets `flags` (LEASE_WATCH, LEASE_CLOSED) in every slot of rt. */
void agr__runtime_set_lease_flags_locked(struct agr_runtime *rt,
					  uint_fast64_t flags);

#endif
