/* SPDX-License-Identifier: MIT */
/*
 * peer_pthread.c - a well-written hand-rolled pool, written fairly:
 * per-group lock-free MPSC queue and pending count (peer_group.h; the
 * queue is aggring's algorithm, peer_queue.h), one ready-group queue
 * shared by N workers, 64 messages per activation.
 *
 * Sends never lock: a group that becomes ready is pushed onto the
 * ready queue with one atomic exchange, and a send takes the mutex
 * only to wake a worker that said it sleeps. Workers pop under a mutex
 * of their own, so any idle worker takes the next ready group (a worker
 * that is preempted holds up nobody); a worker that finds nothing spins
 * briefly, then sleeps on a condition variable.
 */
#include "peer.h"
#include "peer_group.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/group_key.h>

/* Polls before sleeping: a few microseconds of pause. */
#define SPIN_POLLS 64

struct group {
	struct peer_group pg;
	struct peer_queue_node ready_node; /* on the ready queue */
};

struct peer {
	struct peer_queue ready;	 /* groups with messages */
	pthread_mutex_t pop_lock; /* one worker pops at a time */
	_Alignas(64) atomic_long nready; /* groups on `ready` */
	_Alignas(64) atomic_int sleepers;
	atomic_bool stopping;
	pthread_mutex_t sleep_lock;
	pthread_cond_t wake;
	_Alignas(64) struct group *groups;
	int ngroups;
	peer_handler fn;
	void *arg;
	pthread_t *threads;
	int nthreads;
};

static struct group *group_of(struct peer_queue_node *n)
{
	return (struct group *)(void *)((char *)n -
					offsetof(struct group, ready_node));
}

/* Anyone may ask: is a group ready? */
static bool none_ready(struct peer *p)
{
	return atomic_load_explicit(&p->nready, memory_order_seq_cst) == 0;
}

/* Any thread: queues g and wakes a worker if one sleeps. */
static void ready_push(struct peer *p, struct group *g)
{
	/*
	 * The push, then the count; with the seq_cst increment and load in
	 * worker_wait(), either we see the sleeper or it sees the group.
	 */
	peer_queue_push(&p->ready, &g->ready_node);
	atomic_fetch_add_explicit(&p->nready, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) == 0)
		return;
	pthread_mutex_lock(&p->sleep_lock);
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->sleep_lock);
}

static struct group *ready_pop(struct peer *p)
{
	struct peer_queue_node *n;

	if (none_ready(p))
		return NULL;
	pthread_mutex_lock(&p->pop_lock);
	n = peer_queue_pop(&p->ready);
	if (n)
		atomic_fetch_sub_explicit(&p->nready, 1, memory_order_relaxed);
	pthread_mutex_unlock(&p->pop_lock);
	return n ? group_of(n) : NULL;
}

/* Spins, then sleeps until a group is ready; false once stopping. */
static bool worker_wait(struct peer *p)
{
	int i;

	for (i = 0; i < SPIN_POLLS; i++) {
		if (!none_ready(p))
			return true;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	pthread_mutex_lock(&p->sleep_lock);
	atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
	while (none_ready(p) && !atomic_load(&p->stopping))
		pthread_cond_wait(&p->wake, &p->sleep_lock);
	atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
	pthread_mutex_unlock(&p->sleep_lock);
	return !none_ready(p) || !atomic_load(&p->stopping);
}

static void *work(void *arg)
{
	struct peer *p = arg;
	struct group *g;

	do {
		while ((g = ready_pop(p)) != NULL)
			if (peer_group_run(&g->pg, p->fn, p->arg))
				ready_push(p, g); /* fairness: back of the line */
	} while (worker_wait(p));
	return NULL;
}

static struct peer *pool_create(int workers, int groups, peer_handler fn,
				void *arg)
{
	struct peer *p;
	int i;

	if (posix_memalign((void **)&p, 64, sizeof(*p)) ||
	    posix_memalign((void **)&p->groups, 64,
			   (size_t)groups * sizeof(*p->groups)))
		abort();
	memset(p->groups, 0, (size_t)groups * sizeof(*p->groups));
	for (i = 0; i < groups; i++)
		peer_group_init(&p->groups[i].pg);
	peer_queue_init(&p->ready);
	atomic_init(&p->nready, 0);
	pthread_mutex_init(&p->pop_lock, NULL);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->stopping, false);
	pthread_mutex_init(&p->sleep_lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	p->ngroups = groups;
	p->fn = fn;
	p->arg = arg;
	p->threads = calloc((size_t)workers, sizeof(*p->threads));
	if (!p->threads)
		abort();
	p->nthreads = workers;
	for (i = 0; i < workers; i++)
		if (pthread_create(&p->threads[i], NULL, work, p))
			abort();
	return p;
}

static void pool_send(struct peer *p, struct peer_msg *msg)
{
	struct group *g = &p->groups[agr_group_key(msg->id, p->ngroups)];

	if (peer_group_send(&g->pg, msg))
		ready_push(p, g);
}

static void pool_destroy(struct peer *p)
{
	int i;

	pthread_mutex_lock(&p->sleep_lock);
	atomic_store(&p->stopping, true);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->sleep_lock);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->sleep_lock);
	pthread_mutex_destroy(&p->pop_lock);
	free(p->threads);
	free(p->groups);
	free(p);
}

const struct peer_engine peer_pthread = {
	.name = "pthread",
	.create = pool_create,
	.send = pool_send,
	.destroy = pool_destroy,
};
