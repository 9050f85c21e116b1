/* SPDX-License-Identifier: MIT */
/*
 * peer_pthread.c - a well-written hand-rolled pool, written fairly:
 * per-group lock-free MPSC queue and atomic scheduled flag (the same
 * queue aggring uses), one ready-group queue shared by N workers, 64
 * messages per activation.
 *
 * Sends never lock: a group that becomes ready is pushed onto the
 * ready queue with one atomic exchange, and a send takes the mutex
 * only to wake a worker that said it sleeps. Workers pop under a mutex
 * of their own, so any idle worker takes the next ready group (a worker
 * that is preempted holds up nobody); a worker that finds nothing spins
 * briefly, then sleeps on a condition variable.
 */
#include "peer.h"

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

enum { IDLE, SCHEDULED };

struct group {
	struct agr__mpsc queue;
	_Alignas(64) atomic_int state;
	struct agr__mpsc_node ready_node; /* on the ready queue */
};

struct peer {
	struct agr__mpsc ready;	 /* groups with messages */
	pthread_mutex_t pop_lock; /* one worker pops at a time */
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

static struct group *group_of(struct agr__mpsc_node *n)
{
	return (struct group *)(void *)((char *)n -
					offsetof(struct group, ready_node));
}

/*
 * Anyone may ask: is q certainly empty? The consumer's end is not
 * ours to read, but an empty Vyukov queue has its head on the stub and
 * a non-empty one never does.
 */
static bool looks_empty(struct agr__mpsc *q)
{
	return atomic_load_explicit(&q->head, memory_order_seq_cst) ==
	       &q->stub;
}

/* Any thread: queues g and wakes a worker if one sleeps. */
static void ready_push(struct peer *p, struct group *g)
{
	struct agr__mpsc_node *prev;

	/*
	 * agr__mpsc_push(), with a seq_cst exchange (the same instruction
	 * on x86): with the seq_cst increment and load in worker_wait(),
	 * either we see the sleeper or it sees the group.
	 */
	atomic_store_explicit(&g->ready_node.next, NULL, memory_order_relaxed);
	prev = atomic_exchange_explicit(&p->ready.head, &g->ready_node,
					memory_order_seq_cst);
	atomic_store_explicit(&prev->next, &g->ready_node,
			      memory_order_release);
	if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) == 0)
		return;
	pthread_mutex_lock(&p->sleep_lock);
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->sleep_lock);
}

static struct group *ready_pop(struct peer *p)
{
	struct agr__mpsc_node *n;

	if (looks_empty(&p->ready))
		return NULL;
	pthread_mutex_lock(&p->pop_lock);
	n = agr__mpsc_pop_wait(&p->ready);
	pthread_mutex_unlock(&p->pop_lock);
	return n ? group_of(n) : NULL;
}

/*
 * After the consumer found q empty and gave the group up: did a send
 * push since? Reads only the producers' end: once the group is given
 * up, another thread may already be consuming (and moving q->tail).
 */
static bool pushed_since_empty(struct agr__mpsc *q)
{
	return !looks_empty(q);
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

/* Spins, then sleeps until a group is ready; false once stopping. */
static bool worker_wait(struct peer *p)
{
	int i;

	for (i = 0; i < SPIN_POLLS; i++) {
		if (!looks_empty(&p->ready))
			return true;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	pthread_mutex_lock(&p->sleep_lock);
	atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
	while (looks_empty(&p->ready) && !atomic_load(&p->stopping))
		pthread_cond_wait(&p->wake, &p->sleep_lock);
	atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
	pthread_mutex_unlock(&p->sleep_lock);
	return !looks_empty(&p->ready) || !atomic_load(&p->stopping);
}

static void *work(void *arg)
{
	struct peer *p = arg;
	struct group *g;

	do {
		while ((g = ready_pop(p)) != NULL)
			if (!drain(p, g))
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
	for (i = 0; i < groups; i++) {
		agr__mpsc_init(&p->groups[i].queue);
		atomic_init(&p->groups[i].state, IDLE);
	}
	agr__mpsc_init(&p->ready);
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
	int expected = IDLE;

	agr__mpsc_push(&g->queue, &msg->node);
	if (atomic_load(&g->state) == IDLE &&
	    atomic_compare_exchange_strong(&g->state, &expected, SCHEDULED))
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
