/* SPDX-License-Identifier: MIT */
/*
 * scheduler.h - the workers of one named aggregate (internal side).
 */
#ifndef AGR_SCHEDULER_INTERNAL_H
#define AGR_SCHEDULER_INTERNAL_H

#include "gate.h"
#include "internal.h"
#include "worker.h"

#include <aggring/scheduler.h>
#include <aggring/supplier.h>

enum agr__sched_state {
	AGR__SCHED_RUNNING,
	AGR__SCHED_GRACEFUL, /* queued work still runs */
	AGR__SCHED_FORCED,   /* queued work dropped, I/O cancelled */
};

struct agr_scheduler {
	/*
	 * The gate every sender passes (gate.h). Dispose closes it and
	 * waits until no sender is inside, so once a worker is told to
	 * stop no sender can still reach its ring or inbox.
	 */
	AGR__ALIGNED_CACHELINE agr__gate gate;

	AGR__ALIGNED_CACHELINE char *name; /* "<supplier>-<aggregate>" */
	int parallelism;
	struct agr_worker **workers;
	struct agr__worker_settings settings; /* cpus points at cpus_copy */
	int *cpus_copy;
	/*
	 * Threads in agr__scheduler_wait_idle(). Read whenever a dispatcher
	 * group goes idle and written only by waiters, so it sits with
	 * the fields that are never written after start.
	 */
	atomic_int idle_waiters;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	int started;	/* workers whose thread was created */
	int ready;	/* workers that finished ring setup */
	int start_err;	/* first setup error */
	int live;	/* workers still in their loop */
	enum agr__sched_state state;
	/*
	 * Gates of layers above (dispatcher intake) that dispose closes
	 * before its own: a sender inside one of them may skip this
	 * scheduler's gate, since dispose waits for it to leave first.
	 */
	struct attached_gate {
		agr__gate *gate;
		struct attached_gate *next;
	} *attached;
	/* Links of the process-wide list of live schedulers. */
	struct agr_scheduler *registry_prev, *registry_next;
	struct agr__sched_watch *watches; /* under the list's lock */
	/* agr__scheduler_note_idle() wakes idle waiters here. */
	pthread_mutex_t idle_lock;
	pthread_cond_t idle_cond;
};

/*
 * Creates and starts `parallelism` workers named
 * "<supplier_name>-<aggregate_name>-<i>" (cut to 15 bytes). Returns
 * once every ring is set up and every init hook has run, or the first
 * error of either. `settings` (NULL: the defaults) are copied.
 */
int agr__scheduler_new(const char *supplier_name, const char *aggregate_name,
		       int parallelism,
		       const struct agr__worker_settings *settings,
		       struct agr_scheduler **out);

/* Enters the sender gate; false (nothing entered) once closed. */
static inline bool agr__scheduler_enter(struct agr_scheduler *s)
{
	return agr__gate_enter(&s->gate);
}

static inline void agr__scheduler_leave(struct agr_scheduler *s)
{
	agr__gate_leave(&s->gate);
}

/* Worker hint % parallelism. */
static inline struct agr_worker *
agr__scheduler_worker(struct agr_scheduler *s, unsigned hint)
{
	return s->workers[hint % (unsigned)s->parallelism];
}

/* How many workers `s` has. */
static inline int agr__scheduler_workers(const struct agr_scheduler *s)
{
	return s->parallelism;
}

/*
 * Waits until idle(arg) is true, or until the deadline (UINT64_MAX: no
 * deadline): 0 or -ETIMEDOUT. idle() runs under the scheduler's idle
 * lock, so waiters never run it at the same time, and it is asked again
 * after every agr__scheduler_note_idle(). This is how a layer above
 * waits for its work on these workers to end without a count that
 * every activation would have to bump: its work items go idle, then
 * signal the scheduler, which outlives them.
 */
int agr__scheduler_wait_idle(struct agr_scheduler *s, bool (*idle)(void *),
			     void *arg, uint64_t deadline_ns);

void agr__scheduler_wake_idle_waiters(struct agr_scheduler *s);

/*
 * Tells the waiters that some work item of `s` went idle. Call it after
 * the step that makes the item idle, and touch the item no more: a
 * waiter may free it as soon as its idle() sees that step. Costs one
 * load when nobody waits; the load after the step pairs with the
 * waiter's count before its idle(), so that one of the two sees the
 * other.
 */
static inline void agr__scheduler_note_idle(struct agr_scheduler *s)
{
	if (agr__unlikely(atomic_load(&s->idle_waiters) > 0))
		agr__scheduler_wake_idle_waiters(s);
}

/*
 * Attaches `gate`: dispose closes it (waiting for its senders) before
 * closing the scheduler's own gate. Returns 0 or -ENOMEM. Detach before
 * the gate's memory goes.
 */
int agr__scheduler_attach_gate(struct agr_scheduler *s, agr__gate *gate);
void agr__scheduler_detach_gate(struct agr_scheduler *s, agr__gate *gate);

/* Starts a graceful or an immediate dispose; never blocks on tasks. */
void agr__scheduler_dispose(struct agr_scheduler *s, bool immediate);

/* Waits until every worker left its loop; 0 or -ETIMEDOUT. */
int agr__scheduler_await(struct agr_scheduler *s, uint64_t deadline_ns);

/* True once every worker left its loop. */
bool agr__scheduler_terminated(struct agr_scheduler *s);

/*
 * Disposes immediately if still running, joins the threads, closes the
 * rings and frees. Blocks while a task is stuck in a blocking call.
 */
void agr__scheduler_free(struct agr_scheduler *s);

/*
 * A watch a layer above installs on a scheduler: the watchdog runs
 * fn(arg, now_ns, threshold_ns) about four times per threshold, for
 * work of that layer that has waited too long (a message pending for
 * ever, say). The layer owns the struct; fn must not block.
 */
struct agr__sched_watch {
	void (*fn)(void *arg, uint64_t now_ns, uint64_t threshold_ns);
	void *arg;
	struct agr__sched_watch *next;
};

/* Adds `watch` to `s`; remove it before its memory goes. */
void agr__scheduler_watch_add(struct agr_scheduler *s,
			      struct agr__sched_watch *watch);
/* Once this returns, the watchdog no longer runs `watch`. */
void agr__scheduler_watch_remove(struct agr_scheduler *s,
				 struct agr__sched_watch *watch);

/*
 * Runs fn(s, arg) for every live scheduler of the process (from
 * creation until agr__scheduler_free() begins), under a lock that
 * agr__scheduler_free() takes: `fn` must not block, create or free a
 * scheduler. Inside it, the two below may be used on `s`.
 */
void agr__scheduler_for_each(void (*fn)(struct agr_scheduler *s, void *arg),
			     void *arg);

/* Runs fn(w, arg) for every worker of `s` (inside for_each). */
void agr__scheduler_each_worker(struct agr_scheduler *s,
				void (*fn)(struct agr_worker *w, void *arg),
				void *arg);

/* Runs every watch of `s` (inside for_each, the watchdog's thread). */
void agr__scheduler_run_watches_of(struct agr_scheduler *s, uint64_t now_ns,
				   uint64_t threshold_ns);

/* The settings its workers were made with. */
static inline const struct agr__worker_settings *
agr__scheduler_settings(const struct agr_scheduler *s)
{
	return &s->settings;
}

#endif /* AGR_SCHEDULER_INTERNAL_H */
