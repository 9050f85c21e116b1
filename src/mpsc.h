/* SPDX-License-Identifier: MIT */
/*
 * mpsc.h - intrusive multi-producer single-consumer FIFO (Vyukov).
 *
 * Producers never wait: a push is one atomic exchange and one store.
 * The consumer may briefly see a push half done (the exchange happened,
 * the link is not yet visible); agr__mpsc_pop() then returns NULL while
 * agr__mpsc_maybe_nonempty() is still true, and the caller retries.
 * No allocation: the node lives inside the element.
 */
#ifndef AGR_MPSC_H
#define AGR_MPSC_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct agr__mpsc_node {
	_Atomic(struct agr__mpsc_node *) next;
};

/*
 * The stub sits on the producers' line: a push onto an empty queue
 * links behind the stub, and with the stub there that push writes one
 * line, not two (the consumer's end is written by the consumer alone).
 */
struct agr__mpsc {
	_Atomic(struct agr__mpsc_node *) head; /* producers' end */
	struct agr__mpsc_node stub;
	char pad_[64 - sizeof(void *) - sizeof(struct agr__mpsc_node)];
	struct agr__mpsc_node *tail; /* consumer's end */
};

static inline void agr__mpsc_init(struct agr__mpsc *q)
{
	atomic_init(&q->stub.next, NULL);
	atomic_init(&q->head, &q->stub);
	q->tail = &q->stub;
}

static inline void agr__mpsc_push(struct agr__mpsc *q,
				  struct agr__mpsc_node *n)
{
	struct agr__mpsc_node *prev;

	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	/*
	 * seq_cst: a producer that then looks at a sleep flag (a doorbell)
	 * and a consumer that sets that flag and then looks at the queue
	 * must not both miss. On x86 it is the same instruction.
	 */
	prev = atomic_exchange_explicit(&q->head, n, memory_order_seq_cst);
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/*
 * True unless the queue is certainly empty. Consumer only; a push that
 * has done its exchange already counts, so a consumer that re-checks
 * after announcing it is idle cannot miss a message.
 */
static inline bool agr__mpsc_maybe_nonempty(struct agr__mpsc *q)
{
	return q->tail != &q->stub ||
	       atomic_load_explicit(&q->head, memory_order_seq_cst) !=
		       &q->stub;
}

/* Consumer only. NULL: empty, or a push is still linking (retry). */
static inline struct agr__mpsc_node *agr__mpsc_pop(struct agr__mpsc *q)
{
	struct agr__mpsc_node *tail = q->tail;
	struct agr__mpsc_node *next =
		atomic_load_explicit(&tail->next, memory_order_acquire);

	if (tail == &q->stub) {
		if (!next)
			return NULL;
		q->tail = next;
		tail = next;
		next = atomic_load_explicit(&next->next, memory_order_acquire);
	}
	if (next) {
		q->tail = next;
		return tail;
	}
	if (tail != atomic_load_explicit(&q->head, memory_order_acquire))
		return NULL;
	agr__mpsc_push(q, &q->stub);
	next = atomic_load_explicit(&tail->next, memory_order_acquire);
	if (next) {
		q->tail = next;
		return tail;
	}
	return NULL;
}

/*
 * Consumer only: the next node, or NULL when the queue is empty. A push
 * caught between its exchange and its link is waited out: it finishes
 * within a few instructions unless its thread was preempted.
 */
static inline struct agr__mpsc_node *agr__mpsc_pop_wait(struct agr__mpsc *q)
{
	struct agr__mpsc_node *n;
	unsigned spins = 0;

	for (;;) {
		n = agr__mpsc_pop(q);
		if (n || !agr__mpsc_maybe_nonempty(q))
			return n;
		if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else {
			sched_yield();
		}
	}
}

#endif /* AGR_MPSC_H */
