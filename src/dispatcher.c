/* SPDX-License-Identifier: MIT */
/*
 * dispatcher.c - messages routed to groups; each group runs serially on
 * one worker; groups run concurrently.
 *
 * A group is an intrusive MPSC queue of messages plus an atomic state.
 * The send that moves a group from idle to scheduled posts the group's
 * activation (one work item, embedded in the group) to its worker; every
 * other send only pushes. The worker drains the group one message at a
 * time; when the queue is empty it marks the group idle and looks once
 * more, so a message pushed meanwhile is never stranded. A message whose
 * functions return AGR_PENDING keeps the group busy until the last
 * agr_exchange_done(), which re-posts the activation.
 *
 * A worker that drains a group while it is awake does not mark it idle
 * at once: it holds the group (still running, queue empty) and looks at
 * its queue while it polls for work, so that a producer's next message
 * to it is one push, with no activation to post and no state to change
 * (see "held groups" below). Before the worker sleeps, and once intake
 * closes, it lets its held groups go idle as above.
 *
 * A graceful stop closes the gate, waits for senders inside it to
 * leave, then waits for every group to be idle (wait_idle).
 */
#include "dispatcher.h"
#include "fault.h"
#include "handle.h"
#include "histogram.h"
#include "scheduler.h"
#include "settings.h"
#include "util.h"
#include "versioned.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/dispatcher.h>
#include <aggring/group_key.h>

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
 * Groups a batched send routes ahead of its pushes, asking for their
 * lines for writing: the push's exchange then finds its line at hand
 * instead of waiting, one after the other, for each group's line to
 * come back from the worker that last looked at it.
 */
#define BATCH_ROUTE_AHEAD 16

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

/* For log lines: `type "x"` (cut at 32 bytes), or `no type` for NULL. */
static const char *type_phrase(const char *type, char *buf, size_t len)
{
	if (!type)
		return "no type (NULL)";
	snprintf(buf, len, "type \"%.32s\"", type);
	return buf;
}

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
	int idle_from; /* wait_idle(): groups below it are idle for good */

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

/* ---- waiting until idle ---- */

/*
 * A group is busy from the send that schedules it until the step to
 * G_IDLE, which is its worker's last touch of it; that worker then tells
 * the scheduler (agr__scheduler_note_idle), not us, since a waiter may
 * free us the moment it sees the last group idle. No count is kept:
 * one that every activation bumped would move a cache line between
 * the sender and the worker on every message of an idle group.
 */

/* Busy groups or pending sweeps, now; for checks, not for waiting. */
static bool busy(struct agr_dispatcher *d)
{
	int i;

	if (atomic_load(&d->sweeps_pending) > 0)
		return true;
	for (i = 0; i < d->parallelism; i++)
		if (atomic_load(&d->groups[i].state) != G_IDLE)
			return true;
	return false;
}

/*
 * wait_idle()'s question, asked under the scheduler's idle lock. With
 * intake closed no group can become busy again, so the groups found
 * idle are not looked at twice.
 */
static bool idle_for_good(void *arg)
{
	struct agr_dispatcher *d = arg;

	if (atomic_load(&d->sweeps_pending) > 0)
		return false;
	while (d->idle_from < d->parallelism &&
	       atomic_load(&d->groups[d->idle_from].state) == G_IDLE)
		d->idle_from++;
	return d->idle_from == d->parallelism;
}

/* Waits until every group is idle and every sweep ran; after quiesce. */
static int wait_idle(struct agr_dispatcher *d, uint64_t deadline)
{
	return agr__scheduler_wait_idle(d->sched, idle_for_good, d, deadline);
}

/* ---- completion ---- */

/* A counter any sender may bump. */
static void count(atomic_uint_fast64_t *counter)
{
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/*
 * Hands a message back to its caller (ctl to 0), unless an
 * agr_exchange_done() forwarded from another thread is still queued:
 * its item lives in the exchange, so the completion waits for it (the
 * item finishes the message). A plain store suffices: a function that
 * is done cannot be finished from another thread any more, so only a
 * stray call could race with it, and that one is undefined (header).
 */
static bool hand_back(struct agr_exchange *ex)
{
	if (agr__unlikely(atomic_load_explicit(&ex->ctl,
					       memory_order_relaxed) &
			  CTL_FWD_MASK))
		return false;
	atomic_store_explicit(&ex->ctl, 0, memory_order_release);
	return true;
}

/*
 * The same for a message whose functions are still pending (a force
 * stop cancels it): their agr_exchange_done() may come from another
 * thread at this very moment, so the hand-back must be atomic with it.
 */
static bool hand_back_pending(struct agr_exchange *ex)
{
	unsigned expected = CTL_IN_FLIGHT;

	if (atomic_compare_exchange_strong_explicit(&ex->ctl, &expected, 0,
						    memory_order_acq_rel,
						    memory_order_relaxed))
		return true;
	if (expected & CTL_FWD_MASK)
		return false;
	/* Not in flight: the caller wrote internal_ meanwhile. */
	agr__log(AGR_LOG_ERROR,
		 "%s: group %u: the message in progress was changed by its "
		 "caller (internal_ is 0x%x)", ex->group->d->name,
		 ex->group->index, expected);
	atomic_store_explicit(&ex->ctl, 0, memory_order_release);
	return true;
}

/* Runs the completion callback of a message handed back. */
static void complete(struct group *g, struct agr_exchange *ex, int status)
{
	struct agr_dispatcher *d = g->d;

	if (d->count_depth)
		atomic_fetch_sub_explicit(&g->depth, 1, memory_order_relaxed);
	d->on_complete(message_of(ex), status, d->complete_arg);
	if (d->lease.release)
		d->lease.release(d->lease.arg);
}

/* A queued message nobody started: no other thread can touch it. */
static void discard(struct group *g, struct agr_exchange *ex)
{
	ex->flags |= EX_DONE;
	atomic_store_explicit(&ex->ctl, 0, memory_order_release);
	agr__bump(&g->discarded);
	complete(g, ex, AGR_DISCARDED);
}

static struct latency *latency_of(struct group *g)
{
	return &g->d->latency[agr_worker_index(g->worker)];
}

/* The message of g went pending: when, and its type, for reports. */
static void note_pending(struct group *g, const char *type)
{
	char text[PENDING_TYPE_WORDS * sizeof(uint64_t)] = { 0 };
	uint64_t word;
	size_t i;

	/* A NULL type is kept as one byte no type begins with. */
	strncpy(text, type ? type : NULL_TYPE_MARK, sizeof(text) - 1);
	for (i = 0; i < PENDING_TYPE_WORDS; i++) {
		memcpy(&word, text + i * sizeof(word), sizeof(word));
		atomic_store_explicit(&g->pending_type[i], word,
				      memory_order_relaxed);
	}
	atomic_store_explicit(&g->pending_since, agr__now_ns(),
			      memory_order_release);
}

static void clear_current(struct group *g)
{
	set_current(g, NULL);
	if (atomic_load_explicit(&g->pending_since, memory_order_relaxed))
		atomic_store_explicit(&g->pending_since, 0,
				      memory_order_relaxed);
}

/*
 * A function's status, as the completion tells it: I/O cancelled (or,
 * in a force stop, refused because the workers tear down) is
 * AGR_INTERRUPTED, so that AGR_DISCARDED keeps meaning "no function
 * saw it" (the two are told apart for redelivery).
 */
static int function_status(const struct agr_dispatcher *d, int status)
{
	if (status == -ECANCELED ||
	    (status == -ESHUTDOWN && atomic_load(&d->forced)))
		return AGR_INTERRUPTED;
	return status;
}

/*
 * Completes the current message, whose functions have all finished;
 * false (nothing done) while a forwarded agr_exchange_done() is queued.
 */
static bool finish(struct group *g, struct agr_exchange *ex)
{
	int status = ex->status < 0 ? function_status(g->d, ex->status) : 0;

	ex->flags |= EX_DONE;
	if (!hand_back(ex)) {
		ex->flags &= ~(unsigned)EX_DONE;
		return false;
	}
	clear_current(g);
	if (g->d->latency)
		agr__histogram_record(&latency_of(g)->processing,
				      agr__now_ns() - ex->stamp_ns);
	if (!(ex->flags & EX_MATCHED))
		agr__bump(&g->skipped);
	else if (status == AGR_INTERRUPTED)
		agr__bump(&g->interrupted);
	else if (status < 0)
		agr__bump(&g->failed);
	else
		agr__bump(&g->handled);
	complete(g, ex, status);
	return true;
}

/* Says which message a force stop ends pending, as a graceful one would. */
static void log_forced_end(struct group *g, struct agr_exchange *ex)
{
	uint64_t since = atomic_load_explicit(&g->pending_since,
					      memory_order_relaxed);
	uint64_t now = agr__now_ns();
	char tb[TYPE_PHRASE_LEN];

	agr__log(AGR_LOG_WARN,
		 "%s: force stop: group %u (worker %d) ended its message of "
		 "%s, pending for %.1f s: a function returned AGR_PENDING "
		 "and had not called agr_exchange_done(), and no ring "
		 "operation of it is left; it completes with AGR_INTERRUPTED",
		 g->d->name, g->index, agr_worker_index(g->worker),
		 type_phrase(message_of(ex)->type, tb, sizeof(tb)),
		 since && now > since ? (double)(now - since) / 1e9 : 0.0);
}

/*
 * Ends the current message, whose functions are pending, for a force
 * stop: AGR_INTERRUPTED, as a function saw it; false while a forwarded
 * agr_exchange_done() is queued.
 */
static bool discard_pending(struct group *g, struct agr_exchange *ex)
{
	ex->flags |= EX_DONE;
	if (!hand_back_pending(ex)) {
		ex->flags &= ~(unsigned)EX_DONE;
		return false;
	}
	log_forced_end(g, ex);
	clear_current(g);
	if (g->d->latency) /* it started: its time counts */
		agr__histogram_record(&latency_of(g)->processing,
				      agr__now_ns() - ex->stamp_ns);
	agr__bump(&g->interrupted);
	complete(g, ex, AGR_INTERRUPTED);
	return true;
}

static void record_status(struct agr_exchange *ex, int status)
{
	if (status < 0 && ex->status == 0)
		ex->status = status;
}

/* ---- running a group (on its worker) ---- */

/* Asks for every line of `msg` (up to three), for writing. */
static inline void prefetch_message(const agr_message *msg)
{
	const char *p = (const char *)msg;

	__builtin_prefetch(p, 1);
	__builtin_prefetch(p + AGR__CACHELINE, 1);
	__builtin_prefetch(p + sizeof(*msg) - 1, 1);
}

/*
 * Asks for the message after `n`, the one just popped (whose link was
 * just read, so this costs no miss). The sender wrote that message,
 * maybe long ago, and the next pop and its handler read it: fetching it
 * while this message runs hides part of one memory latency per message.
 */
static inline void prefetch_next(struct group *g, struct agr__mpsc_node *n)
{
	struct agr__mpsc_node *next =
		atomic_load_explicit(&n->next, memory_order_relaxed);

	if (next && next != &g->queue.stub)
		prefetch_message(message_of(
			agr__container_of(next, struct agr_exchange, node)));
}

static struct agr_exchange *pop_message(struct group *g)
{
	struct agr__mpsc_node *n = agr__mpsc_pop_wait(&g->queue);

	if (!n)
		return NULL;
	prefetch_next(g, n);
	agr__bump(&g->admitted);
	return agr__container_of(n, struct agr_exchange, node);
}

static bool handler_matches(const struct handler *h, const agr_message *msg)
{
	if (!h->type)
		return true;
	return msg->type && strcmp(h->type, msg->type) == 0;
}

/*
 * A function that called agr_exchange_done() before returning something
 * else than AGR_PENDING had nothing pending: that call is taken back.
 */
static void undo_early_done(struct agr_exchange *ex, int r)
{
	char tb[TYPE_PHRASE_LEN];

	ex->pending++;
	agr__log(AGR_LOG_WARN,
		 "%s: a function for a message of %s called "
		 "agr_exchange_done() before it returned, then returned %d, "
		 "not AGR_PENDING: nothing was pending; the call is ignored",
		 ex->group->d->name,
		 type_phrase(message_of(ex)->type, tb, sizeof(tb)), r);
}

static void call_handler(struct agr_exchange *ex, const struct handler *h)
{
	char tb[TYPE_PHRASE_LEN];
	int r, status_before = ex->status;
	bool early;

	ex->flags |= EX_MATCHED;
	ex->flags &= ~(unsigned)EX_EARLY_DONE;
	ex->pending++;
	r = h->fn(ex, h->arg);
	early = ex->flags & EX_EARLY_DONE;
	ex->flags &= ~(unsigned)EX_EARLY_DONE;
	if (r == AGR_PENDING)
		return; /* an early call finished it: documented */
	if (early) {
		ex->status = status_before; /* nor does its status count */
		undo_early_done(ex, r);
	}
	ex->pending--;
	if (r > 0) {
		agr__log(AGR_LOG_ERROR,
			 "%s: a function for a message of %s returned %d, "
			 "which is neither 0, AGR_PENDING nor a negative errno",
			 ex->group->d->name,
			 type_phrase(message_of(ex)->type, tb, sizeof(tb)), r);
		r = -EINVAL;
	}
	record_status(ex, r);
}

/* Starts every matching function; true if the message finished. */
static bool start_message(struct group *g, struct agr_exchange *ex)
{
	struct agr_dispatcher *d = g->d;
	agr_message *msg = message_of(ex);
	size_t i;

	set_current(g, ex);
	ex->flags = EX_STARTING;
	if (d->latency) {
		uint64_t now = agr__now_ns();

		agr__histogram_record(&latency_of(g)->queue,
				      now - ex->stamp_ns);
		ex->stamp_ns = now;
	}
	if (atomic_load_explicit(&agr__watchdog_on, memory_order_relaxed))
		agr__worker_label(g->worker, d->name, (int)g->index, msg->type);
	agr__worker_set_owner(g->worker, ex); /* its I/O can be cancelled */
	for (i = 0; i < d->nhandlers; i++)
		if (handler_matches(&d->handlers[i], msg))
			call_handler(ex, &d->handlers[i]);
	agr__worker_set_owner(g->worker, NULL);
	ex->flags &= ~(unsigned)EX_STARTING;
	if (ex->pending > 0) {
		/* For the reports; one clock read, on the slow path. */
		note_pending(g, msg->type);
		return false;
	}
	return finish(g, ex);
}

/*
 * Marks the group idle unless a message arrived; true if it is idle,
 * or scheduled again by a sender. The look at the queue after the
 * store pairs with the sender's push-then-load.
 */
static bool go_idle(struct group *g)
{
	struct agr_scheduler *sched = g->d->sched;
	int expected = G_IDLING;

	atomic_store(&g->state, G_IDLING);
	agr__fault_pause(AGR_FAULT_GO_IDLE_PAUSE);
	if (agr__mpsc_maybe_nonempty(&g->queue) &&
	    atomic_compare_exchange_strong(&g->state, &expected, G_RUNNING))
		return false;
	expected = G_IDLING;
	/* Our last touch of g: fails if a sender scheduled it meanwhile. */
	atomic_compare_exchange_strong(&g->state, &expected, G_IDLE);
	agr__scheduler_note_idle(sched);
	return true;
}

static bool hold(struct group *g);

static void drain(struct group *g)
{
	struct agr_exchange *ex;
	unsigned n = 0;

	while (n < DRAIN_LIMIT) {
		if (current_of(g))
			return; /* agr_exchange_done() resumes the group */
		ex = pop_message(g);
		if (!ex) {
			if (hold(g) || go_idle(g))
				return;
			continue;
		}
		n++;
		if (atomic_load_explicit(&g->d->forced, memory_order_relaxed))
			discard(g, ex);
		else
			start_message(g, ex);
	}
	/*
	 * Let other groups of this worker run; our state stays RUNNING.
	 * A message left pending resumes the group itself.
	 */
	if (!current_of(g))
		agr__worker_post(g->worker, &g->work);
}

/* Discards everything queued and leaves the group idle for good. */
static void discard_all(struct group *g)
{
	struct agr_scheduler *sched = g->d->sched;
	struct agr_exchange *ex;

	while ((ex = pop_message(g)) != NULL)
		discard(g, ex);
	atomic_store(&g->state, G_IDLE); /* our last touch of g */
	agr__scheduler_note_idle(sched);
}

static void run_group(struct agr__work *work, struct agr_worker *w,
		      int status)
{
	struct group *g = agr__container_of(work, struct group, work);

	(void)w;
	if (status != 0) {
		/* The scheduler was disposed immediately: nothing will run. */
		discard_all(g);
		return;
	}
	/* Senders read the state on every send: write only a change. */
	if (atomic_load_explicit(&g->state, memory_order_relaxed) != G_RUNNING)
		atomic_store_explicit(&g->state, G_RUNNING,
				      memory_order_relaxed);
	drain(g);
}

/* ---- held groups (on their worker) ---- */

/*
 * Holds the drained group g: it stays G_RUNNING, so senders only push,
 * and its worker looks at its queue while it is awake (poll_held).
 * False, and nothing held, when intake is closing or the set is full.
 */
static bool hold(struct group *g)
{
	struct held *h = g->held;

	if (h->n == h->cap || agr__gate_closed(&g->d->gate) ||
	    atomic_load_explicit(&g->d->forced, memory_order_relaxed))
		return false;
	h->groups[h->n++] = g;
	if (!h->poller.added)
		agr__worker_add_poller(g->worker, &h->poller);
	return true;
}

/*
 * Drains the held groups that have messages, looking at up to
 * HOLD_LOOKS of them from where the last look stopped; true if any had.
 * A drained group leaves its place to the last one, and goes to the end
 * if drain() holds it again.
 */
static bool look_at_held(struct held *h, struct agr_worker *w)
{
	struct group *g;
	unsigned looks, i;
	bool ran = false;

	for (looks = 0; looks < HOLD_LOOKS && looks < h->n; looks++) {
		i = h->turn < h->n ? h->turn : 0;
		g = h->groups[i];
		if (!agr__mpsc_maybe_nonempty(&g->queue)) {
			h->turn = i + 1;
			continue;
		}
		h->groups[i] = h->groups[--h->n];
		h->turn = i;
		if (h->n == 0) {
			/*
			 * The last one: if drain() lets it go idle (intake
			 * closed meanwhile), the dispatcher may go with it.
			 */
			agr__worker_remove_poller(w, &h->poller);
			drain(g);
			return true;
		}
		drain(g); /* the groups still held keep h alive */
		ran = true;
	}
	return ran;
}

/*
 * Lets every held group go: idle, or drained once more if a message
 * came (DROP: its messages discarded, as a dropped activation's are).
 * Letting the last group go idle may let another thread free the
 * dispatcher, and h with it: the poller is removed before, and h is
 * not touched after. Before that, groups still held keep it alive.
 */
static bool let_go(struct held *h, struct agr_worker *w, bool drop)
{
	unsigned left = h->n;
	struct group *g;
	bool ran = false, last;

	while (left-- > 0) {
		g = h->groups[--h->n];
		last = h->n == 0;
		if (last)
			agr__worker_remove_poller(w, &h->poller);
		if (drop)
			discard_all(g);
		else if (!go_idle(g)) {
			drain(g);
			ran = true;
		}
		/*
		 * After the last one nothing may touch h: drain() may
		 * have let it go idle. Held again, it waits for the next
		 * poll, as its poller was added again.
		 */
		if (last)
			break;
	}
	return ran;
}

static bool poll_held(struct agr__poller *p, struct agr_worker *w,
		      enum agr__poll_mode mode)
{
	struct held *h = agr__container_of(p, struct held, poller);
	struct agr_dispatcher *d = h->d;

	if (mode == AGR__POLL_LOOK && !agr__gate_closed(&d->gate) &&
	    !atomic_load_explicit(&d->forced, memory_order_relaxed))
		return look_at_held(h, w);
	return let_go(h, w, mode == AGR__POLL_DROP);
}

/* ---- exchange ---- */

AGR_API agr_message *agr_exchange_message(agr_exchange *ex)
{
	return ex ? message_of(ex) : NULL;
}

AGR_API int agr_exchange_group(agr_exchange *ex)
{
	return ex ? (int)ex->group->index : -EINVAL;
}

AGR_API agr_worker *agr_exchange_worker(agr_exchange *ex)
{
	return ex ? ex->group->worker : NULL;
}

AGR_API agr_dispatcher *agr_exchange_dispatcher(agr_exchange *ex)
{
	return ex ? ex->group->d : NULL;
}

/* The worker takes the group's next message. */
static void take_next(struct group *g)
{
	agr__worker_post(g->worker, &g->work);
}

/* Applies `n` finished functions (with `status`) on the group's worker. */
static void apply_done(struct agr_exchange *ex, unsigned n, int status)
{
	struct group *g = ex->group;

	if (n > (unsigned)ex->pending) {
		char tb[TYPE_PHRASE_LEN];

		agr__log(AGR_LOG_WARN,
			 "%s: agr_exchange_done() called with no function "
			 "pending (group %u, %s); ignored",
			 g->d->name, g->index,
			 type_phrase(message_of(ex)->type, tb, sizeof(tb)));
		n = (unsigned)ex->pending;
	}
	/* Inside a function that has not returned: it decides (above). */
	if (n > 0 && (ex->flags & EX_STARTING) && ex->pending > 0)
		ex->flags |= EX_EARLY_DONE;
	if (n > 0)
		record_status(ex, status);
	ex->pending -= (int)n;
	if (ex->pending > 0 || (ex->flags & EX_STARTING))
		return;
	if (finish(g, ex))
		take_next(g);
}

static void done_on_worker(struct agr_exchange *ex, int status)
{
	if (ex->flags & EX_DONE) {
		agr__log(AGR_LOG_WARN,
			 "%s: agr_exchange_done() after its message completed "
			 "(group %u); ignored",
			 ex->group->d->name, ex->group->index);
		return;
	}
	apply_done(ex, 1, status);
}

/*
 * The item in the exchange that carries calls from other threads. It
 * runs on the group's worker, or once the worker has exited on the
 * thread that adopts its inbox (one at a time): both are the only
 * thread touching the exchange then. Taking the count first lets the
 * next call post the item again: the inbox popped it already.
 */
static void run_hand_off(struct agr__work *work, struct agr_worker *w,
			 int status)
{
	struct agr_exchange *ex =
		agr__container_of(work, struct agr_exchange, hand_off);
	unsigned v = atomic_fetch_and_explicit(&ex->ctl, CTL_IN_FLIGHT,
					       memory_order_acq_rel);

	(void)w;
	(void)status;
	apply_done(ex, (v & CTL_FWD_MASK) >> CTL_FWD_SHIFT,
		   -(int)(v & CTL_ERR_MASK));
}

/* A status as it travels in ctl: -errno, or 0 for none. */
static unsigned ctl_error(const agr_exchange *ex, int status)
{
	if (status >= 0)
		return 0;
	if (status < -(int)CTL_ERR_MASK) {
		agr__log(AGR_LOG_ERROR,
			 "%s: agr_exchange_done() with status %d, which is no "
			 "errno; reported as -EINVAL",
			 ex->group->d->name, status);
		return EINVAL;
	}
	return (unsigned)-status;
}

/*
 * From another thread: counts the call in ctl and, for the first one
 * not yet taken, posts the exchange's own item to the worker; nothing
 * is allocated. A message that completed (a force stop discarded it)
 * has ctl 0: the call is ignored. The worker's ring stays open while
 * the message is in flight, since the dispatcher (and so the
 * scheduler) cannot be freed before it completes.
 */
static void done_from_elsewhere(struct agr_exchange *ex, int status)
{
	unsigned err = ctl_error(ex, status);
	unsigned v = atomic_load_explicit(&ex->ctl, memory_order_relaxed);
	unsigned next;

	do {
		if (!(v & CTL_IN_FLIGHT) ||
		    (v & CTL_FWD_MASK) == CTL_FWD_MASK) {
			agr__log(AGR_LOG_WARN,
				 "%s: agr_exchange_done() from another thread "
				 "%s (group %u); ignored",
				 ex->group->d->name,
				 (v & CTL_IN_FLIGHT) ?
					 "with too many calls queued" :
					 "after its message completed",
				 ex->group->index);
			return;
		}
		next = v + CTL_FWD_ONE;
		if (!(v & CTL_ERR_MASK))
			next |= err;
	} while (!atomic_compare_exchange_weak_explicit(
		&ex->ctl, &v, next, memory_order_acq_rel,
		memory_order_relaxed));
	if (!(v & CTL_FWD_MASK))
		agr__worker_post(ex->group->worker, &ex->hand_off);
}

AGR_API void agr_exchange_done(agr_exchange *ex, int status)
{
	if (!ex) {
		agr__log(AGR_LOG_WARN, "agr_exchange_done(NULL); ignored");
		return;
	}
	if (agr__current_worker == ex->group->worker)
		done_on_worker(ex, status);
	else
		done_from_elsewhere(ex, status);
}

/* ---- creation ---- */

/* Logs why agr_dispatcher_new() refuses its arguments: -EINVAL. */
static int bad_option(const char *name, const char *why)
{
	agr__log(AGR_LOG_ERROR, "agr_dispatcher_new(%s): %s; -EINVAL",
		 name ? name : "NULL", why);
	return -EINVAL;
}

static int check_options(const agr_dispatcher_options *o)
{
	const agr_named_aggregate *n = &o->named_aggregate;
	const char *name = o->name && *o->name ? o->name : NULL;

	if (!name)
		return bad_option(NULL, "options.name is NULL or empty");
	if (!o->supplier)
		return bad_option(name, "options.supplier is NULL");
	if (!o->on_complete)
		return bad_option(name, "options.on_complete is NULL");
	if (!n->context_name || !*n->context_name)
		return bad_option(name, "named_aggregate.context_name is NULL "
					"or empty");
	if (!n->aggregate_name || !*n->aggregate_name)
		return bad_option(name, "named_aggregate.aggregate_name is "
					"NULL or empty");
	if (o->parallelism < 0)
		return bad_option(name, "options.parallelism is negative");
	return 0;
}

static void init_groups(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		agr__mpsc_init(&g->queue);
		atomic_init(&g->state, G_IDLE);
		atomic_init(&g->depth, 0);
		atomic_init(&g->admitted, 0);
		atomic_init(&g->refused, 0);
		atomic_init(&g->handled, 0);
		atomic_init(&g->failed, 0);
		atomic_init(&g->skipped, 0);
		atomic_init(&g->discarded, 0);
		atomic_init(&g->interrupted, 0);
		atomic_init(&g->current, NULL);
		atomic_init(&g->pending_since, 0);
		for (int k = 0; k < PENDING_TYPE_WORDS; k++)
			atomic_init(&g->pending_type[k], 0);
		g->work.fn = run_group;
		g->d = d;
		g->worker = agr__scheduler_worker(d->sched, (unsigned)i);
		g->held = &d->held[i % agr__scheduler_workers(d->sched)];
		g->index = (unsigned)i;
	}
}

static bool poll_held(struct agr__poller *p, struct agr_worker *w,
		      enum agr__poll_mode mode);

static void init_sweeps(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].d = d;
		d->sweeps[i].worker_index = (unsigned)i;
		d->held[i].d = d;
		d->held[i].poller.poll = poll_held;
	}
}

static void free_memory(struct agr_dispatcher *d)
{
	size_t i;

	for (i = 0; i < d->nhandlers; i++)
		free(d->handlers[i].type);
	free(d->handlers);
	free(d->sweeps);
	for (i = 0; i < d->nheld; i++)
		free(d->held[i].groups);
	free(d->held);
	free(d->latency);
	free(d->groups);
	free(d->name);
	free(d->context_name);
	free(d->aggregate_name);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int alloc_dispatcher(const agr_dispatcher_options *o, int parallelism,
			    struct agr_dispatcher **out)
{
	struct agr_dispatcher *d;

	if (posix_memalign((void **)&d, AGR__CACHELINE, sizeof(*d)) != 0)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	atomic_init(&d->started, false);
	atomic_init(&d->forced, false);
	atomic_init(&d->sweeps_pending, 0);
	pthread_mutex_init(&d->lock, NULL);
	d->parallelism = parallelism;
	d->name = strdup(o->name);
	d->context_name = strdup(o->named_aggregate.context_name);
	d->aggregate_name = strdup(o->named_aggregate.aggregate_name);
	if (posix_memalign((void **)&d->groups, AGR__CACHELINE,
			   (size_t)parallelism * sizeof(*d->groups)) != 0)
		d->groups = NULL;
	if (!d->name || !d->context_name || !d->aggregate_name ||
	    !d->groups) {
		free_memory(d);
		return -ENOMEM;
	}
	memset(d->groups, 0, (size_t)parallelism * sizeof(*d->groups));
	*out = d;
	return 0;
}

/* Room for each worker to hold all its groups, up to HOLD_MAX. */
static int alloc_held(struct agr_dispatcher *d, size_t workers)
{
	size_t i, groups;

	d->held = calloc(workers, sizeof(*d->held));
	if (!d->held)
		return -ENOMEM;
	d->nheld = workers;
	for (i = 0; i < workers; i++) {
		groups = ((size_t)d->parallelism + workers - 1 - i) / workers;
		d->held[i].cap = (unsigned)(groups < HOLD_MAX ? groups :
								HOLD_MAX);
		if (d->held[i].cap == 0)
			continue;
		d->held[i].groups =
			calloc(d->held[i].cap, sizeof(*d->held[i].groups));
		if (!d->held[i].groups)
			return -ENOMEM;
	}
	return 0;
}

static int alloc_latency(struct agr_dispatcher *d)
{
	size_t size = (size_t)agr__scheduler_workers(d->sched) * sizeof(*d->latency);

	if (posix_memalign((void **)&d->latency, AGR__CACHELINE, size) != 0) {
		d->latency = NULL;
		return -ENOMEM;
	}
	memset(d->latency, 0, size);
	return 0;
}

static void watch_stuck(void *arg, uint64_t now, uint64_t threshold_ns);

static const struct agr__layout options_layout =
	AGR__LAYOUT(agr_dispatcher_options, AGR_DISPATCHER_OPTIONS_INIT);

AGR_API int agr_dispatcher_new(const agr_dispatcher_options *opts,
			       agr_dispatcher **out)
{
	agr_dispatcher_options local = AGR_DISPATCHER_OPTIONS_INIT;
	const agr_dispatcher_options *o = &local;
	struct agr_dispatcher *d;
	int parallelism, ret;

	if (!opts || !out) {
		agr__log(AGR_LOG_ERROR, "agr_dispatcher_new: %s is NULL; "
			 "-EINVAL", opts ? "out" : "options");
		return -EINVAL;
	}
	if ((ret = agr__read_versioned(&local, opts, &options_layout,
				       "agr_dispatcher_new")) ||
	    (ret = check_options(o)))
		return ret;
	parallelism = agr__setting_count(AGR__SETTING_PARALLELISM,
					 o->parallelism,
					 64 * agr__online_cpus());
	if (parallelism < 0)
		return parallelism;
	ret = alloc_dispatcher(o, parallelism, &d);
	if (ret)
		return ret;
	ret = agr_supplier_get_or_init(o->supplier, &o->named_aggregate,
				       &d->sched);
	if (!ret) {
		size_t workers = (size_t)agr__scheduler_workers(d->sched);

		d->sweeps = calloc(workers, sizeof(*d->sweeps));
		ret = d->sweeps ? alloc_held(d, workers) : -ENOMEM;
	}
	if (!ret && o->metrics)
		ret = alloc_latency(d);
	if (!ret)
		ret = agr__scheduler_attach_gate(d->sched, &d->gate);
	if (ret) {
		free_memory(d);
		return ret;
	}
	d->supplier = o->supplier;
	d->owns_supplier = o->owns_supplier;
	d->on_complete = o->on_complete;
	d->complete_arg = o->complete_arg;
	d->group_key = o->group_key;
	d->group_key_arg = o->group_key_arg;
	d->queue_limit = o->queue_limit;
	d->count_depth = o->queue_limit || o->metrics;
	d->lifecycle = D_NEW;
	init_groups(d);
	init_sweeps(d);
	d->stuck_watch.fn = watch_stuck;
	d->stuck_watch.arg = d;
	agr__scheduler_watch_add(d->sched, &d->stuck_watch);
	agr__handle_claim(&d->magic, AGR__H_DISPATCHER);
	*out = d;
	return 0;
}

AGR_API int agr_dispatcher_register(agr_dispatcher *d, const char *type,
				    agr_handler_fn fn, void *arg)
{
	struct handler *h;
	char *copy = NULL;
	int ret = 0;

	if (!d || !fn) {
		agr__log(AGR_LOG_ERROR, "agr_dispatcher_register: %s is NULL; "
			 "-EINVAL", d ? "fn" : "the dispatcher");
		return -EINVAL;
	}
	if (type && !(copy = strdup(type)))
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	if (d->lifecycle != D_NEW || atomic_load(&d->started)) {
		ret = -EBUSY;
	} else {
		h = realloc(d->handlers, (d->nhandlers + 1) * sizeof(*h));
		if (!h) {
			ret = -ENOMEM;
		} else {
			d->handlers = h;
			h[d->nhandlers++] = (struct handler){ copy, fn, arg };
			/* The array owns the copy now (freed with it). */
			// cppcheck-suppress memleak
			copy = NULL;
		}
	}
	pthread_mutex_unlock(&d->lock);
	free(copy);
	return ret;
}

int agr__dispatcher_set_lease(agr_dispatcher *d,
			      const struct agr__lease_ops *ops)
{
	int ret = 0;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	/* Messages already admitted hold no lease to release. */
	if (d->lifecycle != D_NEW || busy(d))
		ret = -EBUSY;
	else if (ops && d->lease.acquire)
		ret = -EEXIST;
	else if (ops)
		d->lease = *ops;
	else
		memset(&d->lease, 0, sizeof(d->lease));
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* ---- sending ---- */

static int route(const struct agr_dispatcher *d, const agr_message *msg)
{
	int key;

	if (!d->group_key)
		return agr_group_key(msg->aggregate_id, d->parallelism);
	key = d->group_key(msg, d->parallelism, d->group_key_arg);
	if (key < 0 || key >= d->parallelism) {
		agr__log(AGR_LOG_ERROR,
			 "%s: custom group key %d is outside [0, %d)", d->name,
			 key, d->parallelism);
		return -EINVAL;
	}
	return key;
}

AGR_API int agr_dispatcher_group_of(const agr_dispatcher *d,
				    const agr_message *msg)
{
	if (!d || !msg || !msg->aggregate_id)
		return -EINVAL;
	return route(d, msg);
}

/*
 * Moves an idle group to scheduled; true if this call did, and so owes
 * the group its activation.
 */
static bool schedule_if_idle(struct group *g)
{
	int state = atomic_load(&g->state);

	while (state == G_IDLE || state == G_IDLING)
		if (atomic_compare_exchange_weak(&g->state, &state,
						 G_SCHEDULED))
			return true;
	return false;
}

/*
 * Claims `msg` for a send: its ctl goes from 0 (the caller zeroed
 * internal_, or it completed) to in flight. One compare-exchange on a
 * line the send writes anyway; it also stops two threads that send the
 * same message at once.
 */
static bool claim(agr_message *msg)
{
	unsigned expected = 0;

	return atomic_compare_exchange_strong_explicit(
		&exchange_of(msg)->ctl, &expected, CTL_IN_FLIGHT,
		memory_order_acquire, memory_order_relaxed);
}

/* Gives a claimed message back untouched: it was not admitted. */
static void unclaim(agr_message *msg)
{
	atomic_store_explicit(&exchange_of(msg)->ctl, 0, memory_order_release);
}

/* Checks and claims `msg` for `fn`: 0, -EINVAL or -EBUSY (logged). */
static int claim_valid(const struct agr_dispatcher *d, agr_message *msg,
		       const char *fn)
{
	if (!msg || !msg->aggregate_id) {
		agr__log(AGR_LOG_ERROR, "%s: %s: %s is NULL; -EINVAL",
			 d->name, fn,
			 msg ? "the message's aggregate_id" : "the message");
		return -EINVAL;
	}
	if (agr__likely(claim(msg)))
		return 0;
	agr__log(AGR_LOG_ERROR,
		 "%s: %s: message %p (aggregate id \"%s\") is still in "
		 "flight (sent and not yet completed, or internal_ not "
		 "zeroed); -EBUSY",
		 d->name, fn, (void *)msg, msg->aggregate_id);
	return -EBUSY;
}

/*
 * Pushes the claimed msg to group `key` (route()'s answer for it);
 * returns the group, or NULL with *err set.
 */
static struct group *admit_to(struct agr_dispatcher *d, agr_message *msg,
			      int key, int *err)
{
	struct agr_exchange *ex;
	struct group *g;

	if (key < 0) {
		unclaim(msg);
		*err = key;
		return NULL;
	}
	g = &d->groups[key];
	if (d->count_depth &&
	    atomic_fetch_add_explicit(&g->depth, 1, memory_order_relaxed) >=
		    (d->queue_limit ? d->queue_limit : UINT_MAX)) {
		atomic_fetch_sub_explicit(&g->depth, 1, memory_order_relaxed);
		unclaim(msg);
		count(&g->refused);
		*err = -EAGAIN;
		return NULL;
	}
	if (d->lease.acquire && !d->lease.acquire(d->lease.arg)) {
		if (d->count_depth)
			atomic_fetch_sub_explicit(&g->depth, 1,
						  memory_order_relaxed);
		unclaim(msg);
		count(&g->refused);
		*err = -ESHUTDOWN;
		return NULL;
	}
	ex = exchange_of(msg);
	ex->group = g;
	ex->pending = 0;
	ex->status = 0;
	ex->flags = 0;
	ex->hand_off.fn = run_hand_off;
	if (d->latency)
		ex->stamp_ns = agr__now_ns();
	agr__mpsc_push(&g->queue, &ex->node);
	return g;
}

static struct group *admit(struct agr_dispatcher *d, agr_message *msg,
			   int *err)
{
	return admit_to(d, msg, route(d, msg), err);
}

/*
 * The group of msgs[i] for a batched send, and its line asked for; -1
 * when it is left to admit() (a custom group key, which must be called
 * once per message offered, or a message send will refuse).
 */
static int route_ahead(const struct agr_dispatcher *d, agr_message **msgs,
		       size_t i)
{
	agr_message *msg = msgs[i];
	int key;

	if (d->group_key || !msg || !msg->aggregate_id)
		return -1;
	key = agr_group_key(msg->aggregate_id, d->parallelism);
	__builtin_prefetch(&d->groups[key].state, 1);
	prefetch_message(msg);
	return key;
}

/*
 * Before start an activation waits (parked); start posts it. The
 * re-check after parking pairs with start's store-then-scan.
 */
static bool park_unless_started(struct group *g)
{
	int expected = G_SCHEDULED;

	if (atomic_load(&g->d->started))
		return false;
	atomic_compare_exchange_strong(&g->state, &expected, G_PARKED);
	if (!atomic_load(&g->d->started))
		return true;
	expected = G_PARKED;
	return !atomic_compare_exchange_strong(&g->state, &expected,
					       G_SCHEDULED);
}

static void activate(struct group *g)
{
	if (!park_unless_started(g))
		agr__worker_post(g->worker, &g->work);
}

/*
 * The intake gate alone: it is attached to the scheduler, whose dispose
 * closes it and waits for us before it closes its own, so a sender
 * inside it may post to the workers without entering theirs.
 */
static int enter(struct agr_dispatcher *d)
{
	return agr__gate_enter(&d->gate) ? 0 : -ESHUTDOWN;
}

static void leave(struct agr_dispatcher *d)
{
	agr__gate_leave(&d->gate);
}

static int refuse_message(struct agr_dispatcher *d, agr_message *msg, int err)
{
	/* Count against the message's group, if it has one. */
	int key = err == -ESHUTDOWN ? route(d, msg) : -1;

	if (key >= 0)
		count(&d->groups[key].refused);
	return err;
}

AGR_API int agr_dispatcher_send(agr_dispatcher *d, agr_message *msg)
{
	struct group *g;
	int ret;

	if (!d) {
		agr__log(AGR_LOG_ERROR,
			 "agr_dispatcher_send: the dispatcher is NULL; -EINVAL");
		return -EINVAL;
	}
	ret = claim_valid(d, msg, __func__);
	if (ret)
		return ret;
	ret = enter(d);
	if (ret) {
		unclaim(msg);
		return refuse_message(d, msg, ret);
	}
	g = admit(d, msg, &ret);
	if (g && schedule_if_idle(g))
		activate(g);
	leave(d);
	return g ? 0 : ret;
}

AGR_API int agr_dispatcher_send_batch(agr_dispatcher *d, agr_message **msgs,
				      size_t n, size_t *admitted)
{
	int keys[BATCH_ROUTE_AHEAD];
	struct group *g;
	size_t i;
	int ret = 0, key;

	if (admitted)
		*admitted = 0;
	if (!d || (!msgs && n)) {
		agr__log(AGR_LOG_ERROR, "agr_dispatcher_send_batch: %s is "
			 "NULL; -EINVAL", d ? "msgs" : "the dispatcher");
		return -EINVAL;
	}
	if (n == 0)
		return 0;
	/* The first message is offered as agr_dispatcher_send() would. */
	ret = claim_valid(d, msgs[0], __func__);
	if (ret)
		return ret;
	ret = enter(d);
	if (ret) {
		/* One refusal, the first message's: the rest not offered. */
		unclaim(msgs[0]);
		return refuse_message(d, msgs[0], ret);
	}
	/*
	 * One doorbell per sleeping worker covers the whole batch: a
	 * worker's bell stays rung until it runs out of work. Messages and
	 * their groups are fetched a few ahead, so that their cache misses
	 * overlap instead of stalling each push in turn.
	 */
	for (i = 0; i < n && i < BATCH_ROUTE_AHEAD; i++)
		keys[i] = route_ahead(d, msgs, i);
	for (i = 0; i < n; i++) {
		key = keys[i % BATCH_ROUTE_AHEAD];
		if (i + BATCH_ROUTE_AHEAD < n)
			keys[i % BATCH_ROUTE_AHEAD] =
				route_ahead(d, msgs, i + BATCH_ROUTE_AHEAD);
		if (i > 0 && (ret = claim_valid(d, msgs[i], __func__)) != 0)
			break;
		g = key >= 0 ? admit_to(d, msgs[i], key, &ret) :
			       admit(d, msgs[i], &ret);
		if (!g)
			break;
		if (schedule_if_idle(g))
			activate(g);
	}
	leave(d);
	if (admitted)
		*admitted = i;
	return ret;
}

/* ---- lifecycle ---- */

AGR_API int agr_dispatcher_start(agr_dispatcher *d)
{
	int i, expected, ret = 0;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	if (d->lifecycle == D_QUIESCED) {
		ret = -ESHUTDOWN;
	} else if (d->lifecycle == D_NEW) {
		d->lifecycle = D_RUNNING;
		atomic_store(&d->started, true);
		for (i = 0; i < d->parallelism; i++) {
			expected = G_PARKED;
			if (atomic_compare_exchange_strong(&d->groups[i].state,
							   &expected,
							   G_SCHEDULED))
				agr__worker_post(d->groups[i].worker,
						 &d->groups[i].work);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Never started: parked messages are discarded here, on this thread. */
static void discard_parked(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < d->parallelism; i++)
		if (atomic_load(&d->groups[i].state) == G_PARKED)
			discard_all(&d->groups[i]);
}

/*
 * Closes intake. Returns true when the dispatcher never started: the
 * caller then discards the parked messages, after dropping the lock
 * (completion callbacks must not run under it).
 */
static bool quiesce_locked(struct agr_dispatcher *d)
{
	bool never_started = d->lifecycle == D_NEW;

	if (d->lifecycle == D_QUIESCED)
		return false;
	agr__gate_close(&d->gate);
	d->lifecycle = D_QUIESCED;
	return never_started;
}

AGR_API int agr_dispatcher_quiesce(agr_dispatcher *d)
{
	bool discard;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	discard = quiesce_locked(d);
	pthread_mutex_unlock(&d->lock);
	if (discard)
		discard_parked(d);
	return 0;
}

/* ---- naming what holds a stop ---- */

#define REPORT_GROUPS 8 /* groups named per report */
#define REPORT_EVERY_NS (5ull * 1000000000ull)
#define RESCUE_POLL_NS (50ull * 1000000ull)

/*
 * One group that holds a stop. The type is read from the message,
 * which its group holds while it is reported: a report races only with
 * the message's completion at that very moment.
 */
static void report_group(struct agr_dispatcher *d, struct group *g,
			 const char *what, uint64_t waited_ns)
{
	struct agr_exchange *ex =
		atomic_load_explicit(&g->current, memory_order_acquire);
	uint64_t since = atomic_load_explicit(&g->pending_since,
					      memory_order_relaxed);
	uint64_t now = agr__now_ns();
	unsigned worker = (unsigned)agr_worker_index(g->worker);
	int inflight = agr__worker_inflight(g->worker);
	char tb[TYPE_PHRASE_LEN];
	const char *type = ex ? type_phrase(message_of(ex)->type, tb,
					    sizeof(tb)) : NULL;

	if (!ex)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) has work its worker "
			 "has not run yet; the worker has %d ring "
			 "operation(s) in flight (one torn down by a force "
			 "stop names what it waits for)", d->name, what,
			 g->index, worker, inflight);
	else if (since && now > since && inflight > 0)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) holds a message of "
			 "%s, pending for %.1f s: a function returned "
			 "AGR_PENDING, and its worker has %d ring "
			 "operation(s) in flight that may be its own I/O, "
			 "still running", d->name, what, g->index, worker,
			 type, (double)(now - since) / 1e9, inflight);
	else if (since && now > since)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) holds a message of "
			 "%s, pending for %.1f s: a function returned "
			 "AGR_PENDING and has not called agr_exchange_done(), "
			 "and its worker has no I/O in flight", d->name, what,
			 g->index, worker, type, (double)(now - since) / 1e9);
	else
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) runs a function for a "
			 "message of %s, for %.1f s or more (blocked in a "
			 "call?)", d->name, what, g->index, worker, type,
			 (double)waited_ns / 1e9);
}

/*
 * The pending message of g as the watchdog sees it: its type copy and
 * since when, or false when none, or when it changed while we read.
 */
static bool read_pending(struct group *g, uint64_t *since, char *type,
			 size_t len)
{
	char text[PENDING_TYPE_WORDS * sizeof(uint64_t)];
	char phrase[TYPE_PHRASE_LEN];
	uint64_t word, again;
	size_t i;

	*since = atomic_load_explicit(&g->pending_since, memory_order_acquire);
	if (!*since)
		return false;
	for (i = 0; i < PENDING_TYPE_WORDS; i++) {
		word = atomic_load_explicit(&g->pending_type[i],
					    memory_order_acquire);
		memcpy(text + i * sizeof(word), &word, sizeof(word));
	}
	again = atomic_load_explicit(&g->pending_since, memory_order_relaxed);
	if (again != *since)
		return false;
	text[sizeof(text) - 1] = '\0';
	snprintf(type, len, "%s",
		 type_phrase(strcmp(text, NULL_TYPE_MARK) ? text : NULL,
			     phrase, sizeof(phrase)));
	return true;
}

/*
 * The watchdog's look at this dispatcher (a scheduler watch): a message
 * pending for `threshold_ns` or more is named once, and counted.
 */
static void watch_stuck(void *arg, uint64_t now, uint64_t threshold_ns)
{
	struct agr_dispatcher *d = arg;
	char type[TYPE_PHRASE_LEN];
	uint64_t since;
	int i;

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		if (!read_pending(g, &since, type, sizeof(type)) ||
		    now <= since || now - since < threshold_ns ||
		    g->stuck_reported_since == since)
			continue;
		g->stuck_reported_since = since;
		atomic_fetch_add_explicit(&d->stuck_detected, 1,
					  memory_order_relaxed);
		agr__log(AGR_LOG_WARN,
			 "stuck message: %s group %u (worker %d) has held a "
			 "message of %s for %llu ms: a function "
			 "returned AGR_PENDING and has not called "
			 "agr_exchange_done()", d->name, g->index,
			 agr_worker_index(g->worker), type,
			 (unsigned long long)((now - since) / 1000000u));
	}
}

/* Logs every group (up to REPORT_GROUPS) that keeps us from idle. */
static void report_holders(struct agr_dispatcher *d, const char *what,
			   uint64_t waited_ns)
{
	int i, held = 0, sweeps = atomic_load(&d->sweeps_pending);

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		if (atomic_load(&g->state) == G_IDLE &&
		    !atomic_load(&g->current))
			continue;
		if (held++ < REPORT_GROUPS)
			report_group(d, g, what, waited_ns);
	}
	if (held > REPORT_GROUPS)
		agr__log(AGR_LOG_WARN, "%s: %s: and %d more groups", d->name,
			 what, held - REPORT_GROUPS);
	if (sweeps > 0)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: the force stop has yet to visit %d "
			 "worker(s) (blocked in a call?)", d->name, what,
			 sweeps);
}

static void run_sweep(struct agr__work *work, struct agr_worker *w,
		      int status);

/*
 * Once the workers exited (a dispose tore them down), sweeps on this
 * thread what their own sweeps had to leave: messages left pending
 * whose I/O was still being cancelled when the dispose dropped them.
 */
static void sweep_exited_workers(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].work.fn = run_sweep;
		atomic_fetch_add(&d->sweeps_pending, 1);
		agr__worker_post(agr__scheduler_worker(d->sched, (unsigned)i),
				 &d->sweeps[i].work);
	}
}

/*
 * wait_idle() for a stop. A forced dispatcher whose workers exited is
 * swept here (looked at every RESCUE_POLL_NS: their exit tells no one
 * above). With `what`, says every REPORT_EVERY_NS what it waits for:
 * only a function blocked in a call (or I/O the kernel will not
 * cancel) can hold a forced dispatcher.
 */
static int wait_idle_for_stop(struct agr_dispatcher *d, uint64_t deadline,
			      const char *what)
{
	uint64_t start = agr__now_ns(), report_at = start + REPORT_EVERY_NS;
	uint64_t now = start, until;

	for (;;) {
		until = now + RESCUE_POLL_NS;
		if (what && until > report_at)
			until = report_at;
		if (until > deadline)
			until = deadline;
		if (wait_idle(d, until) == 0)
			return 0;
		if (atomic_load(&d->forced) &&
		    agr__scheduler_terminated(d->sched))
			sweep_exited_workers(d);
		now = agr__now_ns();
		if (now >= deadline)
			return wait_idle(d, now);
		if (what && now >= report_at) {
			report_holders(d, what, now - start);
			report_at = now + REPORT_EVERY_NS;
		}
	}
}

AGR_API int agr_dispatcher_stop_gracefully(agr_dispatcher *d,
					   uint64_t timeout_ns)
{
	uint64_t deadline = agr__deadline_after(timeout_ns);
	uint64_t now;
	int ret;

	if (!d)
		return -EINVAL;
	agr_dispatcher_quiesce(d);
	ret = wait_idle_for_stop(d, deadline, NULL);
	if (ret) {
		report_holders(d, "agr_dispatcher_stop_gracefully() ran out",
			       timeout_ns);
		return ret;
	}
	if (!d->owns_supplier)
		return 0;
	now = agr__now_ns();
	ret = agr_supplier_stop_gracefully(d->supplier,
					   deadline > now ? deadline - now : 0);
	if (ret == -ETIMEDOUT)
		agr__log(AGR_LOG_WARN,
			 "%s: agr_dispatcher_stop_gracefully() ran out: every "
			 "message completed, but the workers of supplier %s "
			 "have not all ended", d->name,
			 agr_supplier_name(d->supplier));
	return ret;
}

/* Looks again after this long while I/O of a message is being cancelled. */
#define SWEEP_RECHECK_NS 1000000ull

/* The sweep is over: our last touch of d. */
static void end_sweep(struct sweep *s)
{
	struct agr_scheduler *sched = s->d->sched;

	atomic_fetch_sub(&s->d->sweeps_pending, 1);
	agr__scheduler_note_idle(sched);
}

/*
 * Ends the current message of g if the force allows it: true once g
 * holds none. On a live worker its I/O is cancelled first, and the
 * message is discarded only once none is left (a buffer of it may be
 * the kernel's until then); on a worker that exited no I/O is left.
 */
static bool settle_group(struct group *g, struct agr_worker *w, bool live)
{
	struct agr_exchange *ex = current_of(g);

	if (!ex)
		return true;
	if (ex->pending == 0)
		return false; /* finishing: a forwarded call is queued */
	if (live && agr__worker_cancel_owner(w, ex, NULL, NULL) != 0)
		return false;
	if (!discard_pending(g, ex))
		return false; /* a forwarded call is queued: it goes first */
	if (live)
		take_next(g); /* discards the queue, then goes idle */
	else
		discard_all(g);
	return true;
}

/* Dropped by a dispose that is tearing `w` down with I/O in flight. */
static bool io_may_remain(struct agr_worker *w)
{
	if (agr__worker_exited(w))
		return false;
	return agr__current_worker != w || agr__worker_inflight(w) > 0;
}

static void sweep_fired(int res, void *arg)
{
	struct sweep *s = arg;

	run_sweep(&s->work, agr__current_worker,
		  res == -ECANCELED &&
				  agr__worker_closing(agr__current_worker) ?
			  -ECANCELED :
			  0);
}

/*
 * Runs on the worker, or (status != 0) while a dispose drops its inbox,
 * or on the thread that adopts the inbox of the exited worker, which
 * agr_dispatcher_free() makes sure of: a message left pending ends then
 * at the latest.
 */
static void run_sweep(struct agr__work *work, struct agr_worker *w,
		      int status)
{
	struct sweep *s = agr__container_of(work, struct sweep, work);
	struct agr_dispatcher *d = s->d;
	int i, step = agr__scheduler_workers(d->sched);
	bool live = status == 0, settled = true;

	if (!live && io_may_remain(w)) {
		end_sweep(s); /* agr_dispatcher_free() sweeps once it exited */
		return;
	}
	for (i = (int)s->worker_index; i < d->parallelism; i += step)
		if (!settle_group(&d->groups[i], w, live))
			settled = false;
	if (settled) {
		end_sweep(s);
		return;
	}
	/* I/O still being cancelled, or a forwarded call queued first. */
	if (live && agr_io_timeout(w, SWEEP_RECHECK_NS, sweep_fired, s) == 0)
		return;
	agr__worker_post(w, &s->work);
}

/* Asks each worker to cancel the I/O of this dispatcher's messages. */
static void post_sweeps(struct agr_dispatcher *d)
{
	int i;

	if (!agr__scheduler_enter(d->sched))
		return; /* disposed: its workers cancel everything */
	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].work.fn = run_sweep;
		atomic_fetch_add(&d->sweeps_pending, 1);
		agr__worker_post(agr__scheduler_worker(d->sched, (unsigned)i),
				 &d->sweeps[i].work);
	}
	agr__scheduler_leave(d->sched);
}

AGR_API int agr_dispatcher_force_stop(agr_dispatcher *d)
{
	bool first, discard;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	discard = quiesce_locked(d);
	first = !atomic_exchange(&d->forced, true);
	pthread_mutex_unlock(&d->lock);
	if (discard)
		discard_parked(d);
	else if (first && atomic_load(&d->started))
		post_sweeps(d);
	if (d->owns_supplier)
		agr_supplier_force_stop(d->supplier);
	return 0;
}

AGR_API void agr_dispatcher_free(agr_dispatcher *d)
{
	if (!d)
		return;
	if (!agr__handle_retire(&d->magic, AGR__H_DISPATCHER, __func__, d))
		return;
	if (!agr__gate_closed(&d->gate) || busy(d))
		agr_dispatcher_force_stop(d);
	else
		agr_dispatcher_quiesce(d);
	wait_idle_for_stop(d, UINT64_MAX, "agr_dispatcher_free() waits");
	agr__scheduler_watch_remove(d->sched, &d->stuck_watch);
	agr__scheduler_detach_gate(d->sched, &d->gate);
	if (d->owns_supplier)
		agr_supplier_free(d->supplier);
	free_memory(d);
}

/* ---- introspection ---- */

AGR_API const char *agr_dispatcher_name(const agr_dispatcher *d)
{
	return d ? d->name : NULL;
}

AGR_API int agr_dispatcher_parallelism(const agr_dispatcher *d)
{
	return d ? d->parallelism : -EINVAL;
}

AGR_API agr_scheduler *agr_dispatcher_scheduler(const agr_dispatcher *d)
{
	return d ? d->sched : NULL;
}

static uint64_t load(const atomic_uint_fast64_t *counter)
{
	return atomic_load_explicit(counter, memory_order_relaxed);
}

AGR_API int agr_dispatcher_stats_get(const agr_dispatcher *d,
				     agr_dispatcher_stats *out)
{
	int i;

	if (!d || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (i = 0; i < d->parallelism; i++) {
		const struct group *g = &d->groups[i];

		out->admitted += load(&g->admitted);
		out->refused += load(&g->refused);
		out->handled += load(&g->handled);
		out->failed += load(&g->failed);
		out->skipped += load(&g->skipped);
		out->discarded += load(&g->discarded);
		out->interrupted += load(&g->interrupted);
	}
	out->stuck = atomic_load_explicit(&d->stuck_detected,
					  memory_order_relaxed);
	return 0;
}

static void read_depths(const struct agr_dispatcher *d,
			agr_dispatcher_metrics *out)
{
	unsigned depth;
	int i;

	out->deepest_group = -1;
	out->depth_enabled = d->count_depth;
	if (!d->count_depth)
		return;
	for (i = 0; i < d->parallelism; i++) {
		depth = atomic_load_explicit(&d->groups[i].depth,
					     memory_order_relaxed);
		out->queue_depth += depth;
		if (depth > out->deepest_group_depth) {
			out->deepest_group_depth = depth;
			out->deepest_group = i;
		}
	}
}

AGR_API int agr_dispatcher_metrics_get(const agr_dispatcher *d,
				       agr_dispatcher_metrics *out)
{
	int i;

	if (!d || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->dispatcher = d->name;
	out->context = d->context_name;
	out->aggregate = d->aggregate_name;
	agr_dispatcher_stats_get(d, &out->messages);
	read_depths(d, out);
	out->latency_enabled = d->latency != NULL;
	for (i = 0; d->latency && i < agr__scheduler_workers(d->sched); i++) {
		agr__histogram_read(&d->latency[i].queue, &out->queue_latency);
		agr__histogram_read(&d->latency[i].processing,
				    &out->processing_latency);
	}
	return 0;
}
