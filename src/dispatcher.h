/* SPDX-License-Identifier: MIT */
/*
 * dispatcher.h - a dispatcher inside the library (internal): the
 * admission leases the layers above install, then its groups and
 * exchanges, which its files share: dispatcher.c (completion, running a
 * group, held groups, the exchange), dispatcher_new.c (creation),
 * dispatcher_send.c (sending), dispatcher_life.c (start, quiesce, the
 * stops, free), dispatcher_report.c (naming what holds a stop) and
 * dispatcher_stats.c (introspection).
 */
#ifndef AGR_DISPATCHER_INTERNAL_H
#define AGR_DISPATCHER_INTERNAL_H

#include "handle.h"
#include "histogram.h"
#include "internal.h"
#include "scheduler.h"
#include "util.h"

#include <stddef.h>
#include <stdio.h>

#include <aggring/dispatcher.h>

/*
 * Admission leases (the runtime's view of active work). When set, every
 * send asks acquire(arg) first: false means admission is closed and the
 * message is refused with -ESHUTDOWN. Every admitted message releases
 * its lease once, right after its completion callback returned.
 * acquire/release run on any thread and must be lock-free and cheap.
 */
struct agr__lease_ops {
	bool (*acquire)(void *arg);
	void (*release)(void *arg);
	void *arg;
};

/* Installs (or, with NULL, removes) lease hooks; only before start. */
int agr__dispatcher_set_lease(agr_dispatcher *d,
			      const struct agr__lease_ops *ops);

/* ---- the dispatcher's own files ---- */

#define DRAIN_LIMIT 64 /* messages per activation, for fairness */
/*
 * Groups a worker holds per dispatcher (see "held groups"): up to all
 * of its groups, at most HOLD_MAX (groups drained while the set is full
 * go idle as usual), and a poll looks at HOLD_LOOKS of them, taking
 * turns, so that a large set does not make each poll long.
 */
#define HOLD_MAX 1024
#define HOLD_LOOKS 32

/*
 * G_IDLING: the worker has drained the group and looks at its queue once
 * more; senders schedule it as if it were G_IDLE. Only the step to
 * G_IDLE ends the worker's business with the group (go_idle()).
 */
#define PENDING_TYPE_WORDS 4 /* 31 bytes of a pending message's type */

enum group_state { G_IDLE, G_SCHEDULED, G_RUNNING, G_PARKED, G_IDLING };

enum ex_flags {
	EX_STARTING = 1u,
	EX_DONE = 2u,
	EX_MATCHED = 4u,
	EX_EARLY_DONE = 8u /* agr_exchange_done() inside the running function */
};


#define TYPE_PHRASE_LEN 48
/* How note_pending() keeps a NULL type for the watchdog's report. */
#define NULL_TYPE_MARK "\x01"

/*
 * The exchange's word that other threads touch (ctl): whether the
 * message is in flight, and the agr_exchange_done() calls made from
 * other threads that its worker has not applied yet, with the first
 * error among them. A send claims the message by moving ctl from 0 to
 * CTL_IN_FLIGHT (a second send of it then sees the bit: -EBUSY); the
 * completion hands it back by moving it to 0, which it may do only
 * while no forwarded call is queued (their work item lives in the
 * exchange).
 */
#define CTL_IN_FLIGHT 0x80000000u
#define CTL_FWD_SHIFT 12
#define CTL_FWD_ONE (1u << CTL_FWD_SHIFT)
#define CTL_FWD_MASK (CTL_IN_FLIGHT - CTL_FWD_ONE)
#define CTL_ERR_MASK (CTL_FWD_ONE - 1u) /* -errno, up to 4095 */

/* Lives in agr_message.internal_ while the message is in flight. */
struct agr_exchange {
	/*
	 * The queue's link until the worker pops the message; from the
	 * start on, the item that carries agr_exchange_done() calls made
	 * on other threads to the worker (hand_off.node is the same word).
	 */
	union {
		struct agr__mpsc_node node;
		struct agr__work hand_off;
	};
	struct group *group;
	/* Enqueued, then started: with metrics only. */
	uint64_t stamp_ns;
	int pending; /* functions not yet finished */
	int status;  /* first error */
	atomic_uint ctl;
	unsigned flags;
};

_Static_assert(sizeof(struct agr_exchange) <=
		       sizeof(((agr_message *)0)->internal_),
	       "agr_message.internal_ is too small for the exchange");
_Static_assert(offsetof(struct agr_exchange, hand_off.node) ==
		       offsetof(struct agr_exchange, node),
	       "the hand-off item's link must be the queue's link");

struct group {
	/*
	 * Written by senders, and on the line of the queue's producer end
	 * (queue.head) that follows them: a send that schedules the group
	 * then takes one line from the worker, not two. The queue's
	 * consumer end starts a line of its own (mpsc.h's padding).
	 */
	AGR__ALIGNED_CACHELINE atomic_int state;
	atomic_uint depth; /* only with a queue limit or metrics */
	atomic_uint_fast64_t refused;
	struct agr__mpsc queue;
	/* Written by the worker. */
	AGR__ALIGNED_CACHELINE struct agr__work work; /* the activation */
	struct agr_dispatcher *d;
	struct agr_worker *worker;
	struct held *held; /* the set its worker holds it in */
	/*
	 * The message that started and has not completed (waiting for
	 * agr_exchange_done(), or running). Atomic only so that a stop's
	 * report may read it; the worker alone writes it.
	 */
	_Atomic(struct agr_exchange *) current;
	/* When current's functions went pending; 0: not pending. */
	atomic_uint_fast64_t pending_since;
	/*
	 * Its type, copied when it went pending, for the watchdog: the
	 * message may complete (and its memory go) while it looks.
	 * pending_since, read before and after, tells a torn copy.
	 */
	atomic_uint_fast64_t pending_type[PENDING_TYPE_WORDS];
	uint64_t stuck_reported_since; /* the watchdog's own */
	unsigned index;
	/*
	 * One writer at a time (the worker, or a stopping thread when no
	 * worker can run the group), so a plain bump suffices; atomic only
	 * so that agr_dispatcher_stats_get() may read them meanwhile.
	 * Admissions are counted when the worker dequeues: a lock-free
	 * send then pays no extra atomic operation.
	 */
	atomic_uint_fast64_t admitted, handled, failed, skipped, discarded;
	atomic_uint_fast64_t interrupted; /* handled, cut short by a stop */
};

#define LINE_OF(member) (offsetof(struct group, member) / AGR__CACHELINE)
_Static_assert(LINE_OF(state) == LINE_OF(queue.head) &&
		       LINE_OF(queue.head) != LINE_OF(queue.tail),
	       "a group's state must share the queue head's line, not its "
	       "tail's");
#undef LINE_OF

struct handler {
	char *type; /* NULL: every message */
	agr_handler_fn fn;
	void *arg;
};

/*
 * The groups one worker holds for one dispatcher, and the poller that
 * makes the worker look at them: that worker alone touches it.
 */
struct held {
	struct agr__poller poller;
	struct agr_dispatcher *d;
	unsigned n, cap;
	unsigned turn; /* where the next look starts */
	struct group **groups;
};

/* Latency histograms of one worker's groups: that worker writes them. */
struct latency {
	AGR__ALIGNED_CACHELINE struct agr__histogram queue;
	struct agr__histogram processing;
};

/*
 * A force stop's visit to one worker: cancels the I/O of its groups'
 * messages in progress and discards those left pending with no I/O.
 */
struct sweep {
	struct agr__work work;
	struct agr_dispatcher *d;
	unsigned worker_index;
};

enum lifecycle { D_NEW, D_RUNNING, D_QUIESCED };

struct agr_dispatcher {
	AGR__ALIGNED_CACHELINE agr__gate gate; /* intake */

	/*
	 * Read on every send and every message, written once or twice per
	 * lifetime: kept apart from the gate so that reading them never
	 * misses.
	 */
	AGR__ALIGNED_CACHELINE atomic_bool started;
	atomic_bool forced;
	agr__magic magic; /* handle.h */
	char *name;
	char *context_name, *aggregate_name;
	int parallelism;
	struct group *groups;
	agr_supplier *supplier;
	bool owns_supplier;
	agr_scheduler *sched;
	agr_complete_fn on_complete;
	void *complete_arg;
	agr_group_key_fn group_key;
	void *group_key_arg;
	unsigned queue_limit;
	bool count_depth; /* a queue limit or metrics */
	struct latency *latency; /* per worker; NULL without metrics */
	struct handler *handlers;
	size_t nhandlers;
	struct sweep *sweeps;
	struct held *held; /* per worker */
	size_t nheld;	   /* workers: the scheduler may be gone at free */
	atomic_int sweeps_pending; /* posted by a force stop, not yet run */
	struct agr__sched_watch stuck_watch; /* the watchdog's look */
	atomic_uint_fast64_t stuck_detected;
	struct agr__lease_ops lease; /* acquire NULL: no leases */
	/* agr__dispatcher_wait_idle(): groups below it are idle for good */
	int idle_from;

	pthread_mutex_t lock; /* lifecycle */
	enum lifecycle lifecycle;
};

static inline struct agr_exchange *exchange_of(agr_message *msg)
{
	return (struct agr_exchange *)(void *)&msg->internal_;
}

static inline agr_message *message_of(struct agr_exchange *ex)
{
	return agr__container_of(ex, agr_message, internal_);
}

static inline struct agr_exchange *current_of(struct group *g)
{
	return atomic_load_explicit(&g->current, memory_order_relaxed);
}

static inline void set_current(struct group *g, struct agr_exchange *ex)
{
	atomic_store_explicit(&g->current, ex, memory_order_release);
}

/* Asks for every line of `msg` (up to three), for writing. */
static inline void prefetch_message(const agr_message *msg)
{
	const char *p = (const char *)msg;

	__builtin_prefetch(p, 1);
	__builtin_prefetch(p + AGR__CACHELINE, 1);
	__builtin_prefetch(p + sizeof(*msg) - 1, 1);
}

/* For log lines: `type "x"` (cut at 32 bytes), or `no type` for NULL. */
static inline const char *type_phrase(const char *type, char *buf, size_t len)
{
	if (!type)
		return "no type (NULL)";
	snprintf(buf, len, "type \"%.32s\"", type);
	return buf;
}

/* A counter any sender may bump. */
static inline void count(atomic_uint_fast64_t *counter)
{
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* ---- dispatcher.c ---- */

/* Busy groups or pending sweeps, now; for checks, not for waiting. */
bool agr__dispatcher_busy(struct agr_dispatcher *d);
/* Waits until every group is idle and every sweep ran; after quiesce. */
int agr__dispatcher_wait_idle(struct agr_dispatcher *d, uint64_t deadline);
/* A queued message nobody started: no other thread can touch it. */
void agr__group_discard(struct group *g, struct agr_exchange *ex);
/* Ends the current, pending message for a force stop: false while a
 * forwarded agr_exchange_done() is queued. */
bool agr__group_discard_pending(struct group *g, struct agr_exchange *ex);
/* Discards everything queued and leaves the group idle for good. */
void agr__group_discard_all(struct group *g);
/* The worker takes the group's next message. */
void agr__group_take_next(struct group *g);
/* A group's activation, run on its worker (its work item). */
void agr__group_run(struct agr__work *work, struct agr_worker *w, int status);
/* An agr_exchange_done() forwarded to the exchange's worker. */
void agr__exchange_run_hand_off(struct agr__work *work,
				struct agr_worker *w, int status);
/* The held groups' poller of a worker (see "held groups"). */
bool agr__held_poll(struct agr__poller *p, struct agr_worker *w,
		    enum agr__poll_mode mode);

/* ---- dispatcher_new.c ---- */

void agr__dispatcher_free_memory(struct agr_dispatcher *d);

/* ---- dispatcher_report.c ---- */

/* The watchdog's look at a dispatcher (a scheduler watch). */
void agr__dispatcher_watch_stuck(void *arg, uint64_t now,
				 uint64_t threshold_ns);
/* Logs every group (up to a few) that keeps d from idle, and the
 * sweeps a force stop has yet to run. */
void agr__dispatcher_report_holders(struct agr_dispatcher *d,
				    const char *what, uint64_t waited_ns);

#endif /* AGR_DISPATCHER_INTERNAL_H */
