/* SPDX-License-Identifier: MIT */
/*
 * peer_queue.h - the peers' own intrusive multi-producer single-consumer
 * FIFO: Vyukov's queue, the algorithm (and the memory orders, layout and
 * back-off) of the library's internal src/mpsc.h, so that the peers
 * queue exactly as cheaply as aggring does, without bench/ reaching into
 * the library's internals.
 *
 * A push is one atomic exchange and one store and never waits. A
 * consumer may catch a push half done (exchanged, not yet linked); its
 * pop waits that out: a few instructions, unless the pushing thread was
 * preempted.
 */
#ifndef BENCH_PEER_QUEUE_H
#define BENCH_PEER_QUEUE_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>

struct peer_queue_node {
	_Atomic(struct peer_queue_node *) next;
};

struct peer_queue {
	_Atomic(struct peer_queue_node *) head; /* producers' end */
	char pad_[64 - sizeof(void *)];
	struct peer_queue_node *tail; /* consumer's end */
	struct peer_queue_node stub;
};

static inline void peer_queue_init(struct peer_queue *q)
{
	atomic_init(&q->stub.next, NULL);
	atomic_init(&q->head, &q->stub);
	q->tail = &q->stub;
}

/*
 * Any thread. seq_cst: a producer that then looks at a sleep flag and
 * a consumer that sets the flag and then looks at the queue cannot
 * both miss.
 */
static inline void peer_queue_push(struct peer_queue *q,
				   struct peer_queue_node *n)
{
	struct peer_queue_node *prev;

	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	prev = atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* Consumer: moves the tail past `to` and hands `from` out. */
static inline struct peer_queue_node *
peer_queue_advance(struct peer_queue *q, struct peer_queue_node *from,
		   struct peer_queue_node *to)
{
	q->tail = to;
	return from;
}

/* Consumer: one try; NULL if empty or a push is still linking. */
static inline struct peer_queue_node *peer_queue_try(struct peer_queue *q)
{
	struct peer_queue_node *tail = q->tail, *next;

	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (tail == &q->stub) { /* step over the stub */
		if (!next)
			return NULL;
		q->tail = tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next)
		return peer_queue_advance(q, tail, next);
	if (tail != atomic_load_explicit(&q->head, memory_order_acquire))
		return NULL; /* a push is linking behind tail */
	/* tail is the last node: put the stub behind it to take it. */
	peer_queue_push(q, &q->stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	return next ? peer_queue_advance(q, tail, next) : NULL;
}

/* Consumer: false only if the queue is certainly empty. */
static inline int peer_queue_busy(struct peer_queue *q)
{
	return q->tail != &q->stub ||
	       atomic_load_explicit(&q->head, memory_order_seq_cst) !=
		       &q->stub;
}

/* Consumer: the oldest node, or NULL when the queue is empty. */
static inline struct peer_queue_node *peer_queue_pop(struct peer_queue *q)
{
	struct peer_queue_node *n;
	unsigned spins = 0;

	while (!(n = peer_queue_try(q)) && peer_queue_busy(q)) {
		if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else {
			sched_yield();
		}
	}
	return n;
}

#endif /* BENCH_PEER_QUEUE_H */
