/* SPDX-License-Identifier: MIT */
/*
 * peer_pthread.c - a well-written hand-rolled pool, written fairly:
 * per-group lock-free MPSC queue and atomic scheduled flag (the same
 * queue aggring uses), one ready-group FIFO under a mutex with a
 * condition variable, N workers, 64 messages per activation.
 */
#include "peer_pthread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/group_key.h>

#define DRAIN_LIMIT 64

enum { IDLE, SCHEDULED };

struct group {
	struct agr__mpsc queue;
	_Alignas(64) atomic_int state;
	struct group *next_ready;
};

struct peer_pool {
	struct group *groups;
	int ngroups;
	peer_handler fn;
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t ready_cond;
	struct group *ready_head, *ready_tail;
	bool stopping;
	pthread_t *threads;
	int nthreads;
};

static void ready_push(struct peer_pool *p, struct group *g)
{
	pthread_mutex_lock(&p->lock);
	g->next_ready = NULL;
	if (p->ready_tail)
		p->ready_tail->next_ready = g;
	else
		p->ready_head = g;
	p->ready_tail = g;
	pthread_cond_signal(&p->ready_cond);
	pthread_mutex_unlock(&p->lock);
}

static struct group *ready_pop(struct peer_pool *p)
{
	struct group *g;

	pthread_mutex_lock(&p->lock);
	while (!p->ready_head && !p->stopping)
		pthread_cond_wait(&p->ready_cond, &p->lock);
	g = p->ready_head;
	if (g) {
		p->ready_head = g->next_ready;
		if (!p->ready_head)
			p->ready_tail = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	return g;
}

static struct peer_msg *pop(struct group *g)
{
	return (struct peer_msg *)(void *)agr__mpsc_pop_wait(&g->queue);
}

/* Drains up to DRAIN_LIMIT; true when the group went idle. */
static bool drain(struct peer_pool *p, struct group *g)
{
	struct peer_msg *m;
	int n = 0, expected;

	while (n < DRAIN_LIMIT) {
		m = pop(g);
		if (!m) {
			atomic_store(&g->state, IDLE);
			expected = IDLE;
			if (!agr__mpsc_maybe_nonempty(&g->queue) ||
			    !atomic_compare_exchange_strong(&g->state,
							    &expected,
							    SCHEDULED))
				return true;
			continue;
		}
		p->fn(m, p->arg);
		n++;
	}
	return false;
}

static void *work(void *arg)
{
	struct peer_pool *p = arg;
	struct group *g;

	while ((g = ready_pop(p)) != NULL)
		if (!drain(p, g))
			ready_push(p, g); /* fairness: back of the line */
	return NULL;
}

struct peer_pool *peer_pool_new(int workers, int groups, peer_handler fn,
				void *arg)
{
	struct peer_pool *p = calloc(1, sizeof(*p));
	int i;

	if (!p)
		return NULL;
	if (posix_memalign((void **)&p->groups, 64,
			   (size_t)groups * sizeof(*p->groups)))
		abort();
	memset(p->groups, 0, (size_t)groups * sizeof(*p->groups));
	for (i = 0; i < groups; i++) {
		agr__mpsc_init(&p->groups[i].queue);
		atomic_init(&p->groups[i].state, IDLE);
	}
	p->ngroups = groups;
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->ready_cond, NULL);
	p->threads = calloc((size_t)workers, sizeof(*p->threads));
	p->nthreads = workers;
	for (i = 0; i < workers; i++)
		pthread_create(&p->threads[i], NULL, work, p);
	return p;
}

void peer_pool_send(struct peer_pool *p, struct peer_msg *msg)
{
	struct group *g = &p->groups[agr_group_key(msg->id, p->ngroups)];
	int expected = IDLE;

	agr__mpsc_push(&g->queue, &msg->node);
	if (atomic_load(&g->state) == IDLE &&
	    atomic_compare_exchange_strong(&g->state, &expected, SCHEDULED))
		ready_push(p, g);
}

void peer_pool_free(struct peer_pool *p)
{
	int i;

	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->ready_cond);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->ready_cond);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p->groups);
	free(p);
}
