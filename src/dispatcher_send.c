/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_send.c - sending: a message routed to its group, claimed,
 * admitted (or refused, with the reason counted) and its group activated
 * when it was idle; batched sends route ahead (aggring/dispatcher.h).
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

/*
 * Groups a batched send routes ahead of its pushes, asking for their
 * lines for writing: the push's exchange then finds its line at hand
 * instead of waiting, one after the other, for each group's line to
 * come back from the worker that last looked at it.
 */
#define BATCH_ROUTE_AHEAD 16

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
	ex->hand_off.fn = agr__exchange_run_hand_off;
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
