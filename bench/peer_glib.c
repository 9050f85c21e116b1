/* SPDX-License-Identifier: MIT */
/*
 * peer_glib.c - GLib's GThreadPool with aggring's per-group order: each
 * group has a lock-free MPSC queue and an atomic scheduled flag; the
 * send that schedules a group pushes the group to the pool, the pool
 * function hands up to PEER_DRAIN_LIMIT of its messages to the handler
 * and pushes the group again when more remain.
 */
#include "config.h"

#include "peer.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include <aggring/group_key.h>

enum { IDLE, SCHEDULED };

struct group {
	struct agr__mpsc queue;
	_Alignas(64) atomic_int state;
};

struct peer {
	struct group *groups;
	int ngroups;
	peer_handler fn;
	void *arg;
	GThreadPool *pool;
};

/*
 * After the consumer found q empty and gave the group up: did a send
 * push since? Reads only the producers' end: once the group is given
 * up, another thread may already be consuming (and moving q->tail).
 */
static bool pushed_since_empty(struct agr__mpsc *q)
{
	return atomic_load_explicit(&q->head, memory_order_seq_cst) !=
	       &q->stub;
}

/*
 * Hands up to PEER_DRAIN_LIMIT to the handler, then gives the group up
 * if that emptied it; true when it went idle. The handler runs first:
 * once the group is idle, another thread may take its next messages.
 */
static bool drain(struct peer *p, struct group *g)
{
	struct peer_msg *batch[PEER_DRAIN_LIMIT];
	struct agr__mpsc_node *m;
	int n = 0, expected = IDLE;

	while (n < PEER_DRAIN_LIMIT &&
	       (m = agr__mpsc_pop_wait(&g->queue)) != NULL)
		batch[n++] = (struct peer_msg *)(void *)m;
	if (n)
		p->fn(batch, n, p->arg);
	if (n == PEER_DRAIN_LIMIT)
		return false; /* maybe more */
	/* Idle, then look again: a send may have seen SCHEDULED. */
	atomic_store(&g->state, IDLE);
	return !pushed_since_empty(&g->queue) ||
	       !atomic_compare_exchange_strong(&g->state, &expected,
					       SCHEDULED);
}

static void push_group(GThreadPool *pool, struct group *g)
{
	GError *err = NULL;

	if (!g_thread_pool_push(pool, g, &err)) {
		fprintf(stderr, "peer_glib: g_thread_pool_push: %s\n",
			err ? err->message : "failed");
		abort();
	}
}

/*
 * The pool hands a group from thread to thread, ordered by GLib's own
 * locks; the acquire and release on the group's state make that order
 * explicit, so that it does not rest on GLib's internals and
 * -fsanitize=thread, which cannot see inside GLib, sees it too.
 */
static void run_group(gpointer data, gpointer user_data)
{
	struct peer *p = user_data;
	struct group *g = data;
	GThreadPool *pool;

	(void)atomic_load_explicit(&g->state, memory_order_acquire);
	pool = p->pool;
	if (drain(p, g))
		return;
	atomic_store_explicit(&g->state, SCHEDULED, memory_order_release);
	push_group(pool, g); /* fairness: back of the line */
}

static struct peer *glib_create(int workers, int groups, peer_handler fn,
				void *arg)
{
	struct peer *p = calloc(1, sizeof(*p));
	GError *err = NULL;
	int i;

	if (!p)
		return NULL;
	if (posix_memalign((void **)&p->groups, 64,
			   (size_t)groups * sizeof(*p->groups))) {
		free(p);
		return NULL;
	}
	memset(p->groups, 0, (size_t)groups * sizeof(*p->groups));
	for (i = 0; i < groups; i++) {
		agr__mpsc_init(&p->groups[i].queue);
		atomic_init(&p->groups[i].state, IDLE);
	}
	p->ngroups = groups;
	p->fn = fn;
	p->arg = arg;
	/* Exclusive: `workers` threads of its own, started now. */
	p->pool = g_thread_pool_new(run_group, p, workers, TRUE, &err);
	if (!p->pool) {
		fprintf(stderr, "peer_glib: g_thread_pool_new: %s\n",
			err ? err->message : "failed");
		g_clear_error(&err);
		free(p->groups);
		free(p);
		return NULL;
	}
	return p;
}

static void glib_send(struct peer *p, struct peer_msg *msg)
{
	struct group *g = &p->groups[agr_group_key(msg->id, p->ngroups)];
	int expected = IDLE;

	agr__mpsc_push(&g->queue, &msg->node);
	if (atomic_load(&g->state) == IDLE &&
	    atomic_compare_exchange_strong(&g->state, &expected, SCHEDULED))
		push_group(p->pool, g);
}

static void glib_destroy(struct peer *p)
{
	int i;

	/*
	 * Every message was handled, but a group may still be on its last
	 * activation, which finds it empty; the pool refuses pushes once
	 * freeing starts, so wait until every group is idle.
	 */
	for (i = 0; i < p->ngroups; i++)
		while (atomic_load(&p->groups[i].state) != IDLE)
			sched_yield();
	g_thread_pool_free(p->pool, FALSE, TRUE);
	free(p->groups);
	free(p);
}

const struct peer_engine peer_glib = {
	.name = "glib",
	.create = glib_create,
	.send = glib_send,
	.destroy = glib_destroy,
};
