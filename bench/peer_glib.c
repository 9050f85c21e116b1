/* SPDX-License-Identifier: MIT */
/*
 * peer_glib.c - GLib's GThreadPool with aggring's per-group order
 * (peer_group.h): the send that schedules a group pushes the group to
 * the pool, the pool function hands up to PEER_DRAIN_LIMIT of its
 * messages to the handler and pushes the group again when more remain.
 */
#include "config.h"

#include "peer.h"
#include "peer_group.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include <aggring/group_key.h>

struct group {
	struct peer_group pg;
};

struct peer {
	struct group *groups;
	int ngroups;
	peer_handler fn;
	void *arg;
	GThreadPool *pool;
};

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
 * locks; the acquire and release on the group's count (peer_group_run)
 * make that order explicit, so that it does not rest on GLib's
 * internals and -fsanitize=thread, which cannot see inside GLib, sees
 * it too.
 */
static void run_group(gpointer data, gpointer user_data)
{
	struct peer *p = user_data;
	struct group *g = data;

	if (peer_group_run(&g->pg, p->fn, p->arg))
		push_group(p->pool, g); /* fairness: back of the line */
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
	for (i = 0; i < groups; i++)
		peer_group_init(&p->groups[i].pg);
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

	if (peer_group_send(&g->pg, msg))
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
		while (!peer_group_idle(&p->groups[i].pg))
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
