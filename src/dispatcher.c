/* SPDX-License-Identifier: MIT */
/*
 * dispatcher.c - messages routed to groups; each group runs serially on
 * one worker; groups run concurrently. This file runs the groups and
 * completes their messages; dispatcher_send.c admits messages,
 * dispatcher_new.c makes a dispatcher, dispatcher_life.c starts and
 * stops it, dispatcher_report.c names what holds it and
 * dispatcher_stats.c reads its figures (dispatcher.h: what they share).
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
 * leave, then waits for every group to be idle (agr__dispatcher_wait_idle).
 */
#include "dispatcher.h"
#include "fault.h"
#include "settings.h"
#include "versioned.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/dispatcher.h>
#include <aggring/group_key.h>


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
bool agr__dispatcher_busy(struct agr_dispatcher *d)
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
 * The question of agr__dispatcher_wait_idle(), asked under the
 * scheduler's idle lock. With intake closed no group can become busy
 * again, so the groups found idle are not looked at twice.
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
int agr__dispatcher_wait_idle(struct agr_dispatcher *d, uint64_t deadline)
{
	return agr__scheduler_wait_idle(d->sched, idle_for_good, d, deadline);
}

/* ---- completion ---- */

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
void agr__group_discard(struct group *g, struct agr_exchange *ex)
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
bool agr__group_discard_pending(struct group *g, struct agr_exchange *ex)
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
			agr__group_discard(g, ex);
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
void agr__group_discard_all(struct group *g)
{
	struct agr_scheduler *sched = g->d->sched;
	struct agr_exchange *ex;

	while ((ex = pop_message(g)) != NULL)
		agr__group_discard(g, ex);
	atomic_store(&g->state, G_IDLE); /* our last touch of g */
	agr__scheduler_note_idle(sched);
}

void agr__group_run(struct agr__work *work, struct agr_worker *w, int status)
{
	struct group *g = agr__container_of(work, struct group, work);

	(void)w;
	if (status != 0) {
		/* The scheduler was disposed immediately: nothing will run. */
		agr__group_discard_all(g);
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
 * and its worker looks at its queue while it is awake (agr__held_poll).
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
			agr__group_discard_all(g);
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

bool agr__held_poll(struct agr__poller *p, struct agr_worker *w,
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
void agr__group_take_next(struct group *g)
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
		agr__group_take_next(g);
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
void agr__exchange_run_hand_off(struct agr__work *work,
				struct agr_worker *w, int status)
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
