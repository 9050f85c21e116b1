/* SPDX-License-Identifier: MIT */
/*
 * peer_libuv.c - uv_queue_work driven from a loop thread, with aggring's
 * per-group order (peer_group.h): the send that schedules a group puts
 * it on a ready
 * list and wakes the loop (uv_async_send), the loop queues one work
 * request per ready group, the work callback hands up to
 * PEER_DRAIN_LIMIT messages to the handler on a threadpool thread, and
 * the after-work callback, back on the loop, queues the group again
 * when more remain or lets it go idle (only there: until then the work
 * request is libuv's, and a send must not queue it twice).
 *
 * libuv's threadpool is per process and sized once, from
 * UV_THREADPOOL_SIZE when it is first used: the first create sets it to
 * `workers`; later creates with another count keep the first size.
 */
#include "config.h"

#include "peer.h"
#include "peer_group.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <aggring/group_key.h>

struct group {
	struct peer_group pg;
	int handled; /* by the last work_cb, for after_work_cb */
	struct peer_queue_node ready_node; /* on peer.ready while scheduled */
	uv_work_t work;
	struct peer *peer;
};

struct peer {
	struct group *groups;
	int ngroups;
	peer_handler fn;
	void *arg;
	struct peer_queue ready; /* groups waiting for the loop */
	uv_loop_t loop;
	uv_async_t wake;
	atomic_bool stopping;
	pthread_t thread;
};

static void fail(const char *what, int err)
{
	fprintf(stderr, "peer_libuv: %s: %s\n", what, uv_strerror(err));
	abort();
}

static void after_work_cb(uv_work_t *req, int status);

/* On a threadpool thread: up to PEER_DRAIN_LIMIT to the handler. */
static void work_cb(uv_work_t *req)
{
	struct group *g = req->data;

	g->handled = peer_group_handle(&g->pg, g->peer->fn, g->peer->arg);
}

static void queue_group(struct peer *p, struct group *g)
{
	int ret = uv_queue_work(&p->loop, &g->work, work_cb, after_work_cb);

	if (ret)
		fail("uv_queue_work", ret);
}

/*
 * On the loop, which owns the group until it goes idle: its work
 * request is libuv's until this callback, so the idle transition is
 * made here and a send cannot queue the request twice.
 */
static void after_work_cb(uv_work_t *req, int status)
{
	struct group *g = req->data;

	if (status)
		fail("uv_queue_work", status);
	if (peer_group_finish(&g->pg, g->handled))
		queue_group(g->peer, g); /* fairness: back of the line */
}

/* On the loop: queue work for every group the sends made ready. */
static void wake_cb(uv_async_t *h)
{
	struct peer *p = h->data;
	struct peer_queue_node *n;
	struct group *g;

	while ((n = peer_queue_pop(&p->ready)) != NULL) {
		g = (struct group *)(void *)((char *)n -
					     offsetof(struct group, ready_node));
		queue_group(p, g);
	}
	if (atomic_load(&p->stopping))
		uv_close((uv_handle_t *)h, NULL);
}

static void *loop_thread(void *arg)
{
	struct peer *p = arg;

	/* Returns once the wake handle is closed and no work is pending. */
	uv_run(&p->loop, UV_RUN_DEFAULT);
	return NULL;
}

static struct peer *uv_peer_create(int workers, int groups, peer_handler fn,
				   void *arg)
{
	struct peer *p = calloc(1, sizeof(*p));
	char size[16];
	int i, ret;

	if (!p)
		return NULL;
	if (posix_memalign((void **)&p->groups, 64,
			   (size_t)groups * sizeof(*p->groups))) {
		free(p);
		return NULL;
	}
	memset(p->groups, 0, (size_t)groups * sizeof(*p->groups));
	for (i = 0; i < groups; i++) {
		peer_group_init(&p->groups[i].pg);
		p->groups[i].work.data = &p->groups[i];
		p->groups[i].peer = p;
	}
	p->ngroups = groups;
	p->fn = fn;
	p->arg = arg;
	peer_queue_init(&p->ready);
	atomic_init(&p->stopping, false);
	/* Read once, when the threadpool first starts. */
	snprintf(size, sizeof(size), "%d", workers);
	setenv("UV_THREADPOOL_SIZE", size, 1);
	ret = uv_loop_init(&p->loop);
	if (ret)
		fail("uv_loop_init", ret);
	ret = uv_async_init(&p->loop, &p->wake, wake_cb);
	if (ret)
		fail("uv_async_init", ret);
	p->wake.data = p;
	if (pthread_create(&p->thread, NULL, loop_thread, p))
		abort();
	return p;
}

static void uv_peer_send(struct peer *p, struct peer_msg *msg)
{
	struct group *g = &p->groups[agr_group_key(msg->id, p->ngroups)];

	if (peer_group_send(&g->pg, msg)) {
		peer_queue_push(&p->ready, &g->ready_node);
		/* Coalesces: one wake-up for many sends while the loop runs. */
		uv_async_send(&p->wake);
	}
}

static void uv_peer_destroy(struct peer *p)
{
	atomic_store(&p->stopping, true);
	uv_async_send(&p->wake);
	pthread_join(p->thread, NULL);
	if (uv_loop_close(&p->loop))
		fprintf(stderr, "peer_libuv: loop still busy at close\n");
	free(p->groups);
	free(p);
}

const struct peer_engine peer_libuv = {
	.name = "libuv",
	.create = uv_peer_create,
	.send = uv_peer_send,
	.destroy = uv_peer_destroy,
};
