/* SPDX-License-Identifier: MIT */
/*
 * peer_group.h - the per-group serial order every peer shares: a
 * lock-free MPSC queue plus a count of messages sent and not yet
 * handled. The count is the scheduling token: the send that raises it
 * from 0 schedules the group, and the activation that brings it back to
 * 0 leaves it idle; so a group is scheduled exactly once while it has
 * messages, and never lost. (Looking at the queue's ends to tell
 * "empty" misses a message pushed while the consumer re-links the
 * queue's stub; a count cannot.)
 */
#ifndef BENCH_PEER_GROUP_H
#define BENCH_PEER_GROUP_H

#include <stdatomic.h>
#include <stdbool.h>

#include "peer.h"

struct peer_group {
	struct peer_queue queue;
	_Alignas(64) atomic_long pending; /* sent, not yet handled */
};

static inline void peer_group_init(struct peer_group *g)
{
	peer_queue_init(&g->queue);
	atomic_init(&g->pending, 0);
}

/* Any thread: queues msg; true if the caller must schedule g. */
static inline bool peer_group_send(struct peer_group *g, struct peer_msg *msg)
{
	peer_queue_push(&g->queue, &msg->node);
	return atomic_fetch_add_explicit(&g->pending, 1,
					 memory_order_acq_rel) == 0;
}

/*
 * The scheduled group's owner: hands up to PEER_DRAIN_LIMIT messages
 * to fn and returns how many. Every message counted is pushed already,
 * so each pop finds one (it may wait for a push to finish linking).
 */
static inline int peer_group_handle(struct peer_group *g, peer_handler fn,
				    void *arg)
{
	struct peer_msg *batch[PEER_DRAIN_LIMIT];
	long want = atomic_load_explicit(&g->pending, memory_order_acquire);
	int n;

	if (want > PEER_DRAIN_LIMIT)
		want = PEER_DRAIN_LIMIT;
	for (n = 0; n < want; n++)
		batch[n] = (struct peer_msg *)(void *)peer_queue_pop(
			&g->queue);
	fn(batch, n, arg);
	return n;
}

/*
 * The owner, after handling n: true if more remain (it keeps the group
 * and reschedules it), false if the group went idle (a send may
 * schedule it again at once).
 */
static inline bool peer_group_finish(struct peer_group *g, int n)
{
	return atomic_fetch_sub_explicit(&g->pending, n,
					 memory_order_acq_rel) != n;
}

/* Both: true if g must be rescheduled. */
static inline bool peer_group_run(struct peer_group *g, peer_handler fn,
				  void *arg)
{
	return peer_group_finish(g, peer_group_handle(g, fn, arg));
}

/* True once g has nothing left to run (all its messages handled). */
static inline bool peer_group_idle(struct peer_group *g)
{
	return atomic_load_explicit(&g->pending, memory_order_acquire) == 0;
}

#endif /* BENCH_PEER_GROUP_H */
