/* SPDX-License-Identifier: MIT */
/*
 * gate.h - a sender gate (internal): a closed flag and a count of the
 * senders inside, spread over several cache lines. Closing waits until
 * nobody is inside, so that whatever the gate protects can be torn down
 * after close returns.
 *
 * Every send enters and leaves a gate. One shared counter would be a
 * line that every producer writes twice per message: with many
 * producers on many cores it would bounce between them on every send.
 * So each thread counts itself in one of AGR__GATE_SLOTS lines, picked
 * once per thread, and the flag lives on a line that only a close
 * writes. Entering is an atomic add on the thread's own slot and a load
 * of the flag; both are seq_cst, as is the closer's store of the flag
 * before it reads the slots, so a sender that saw the gate open is
 * always seen inside by the closer (store-load order on both sides).
 * A zeroed gate is open and empty.
 */
#ifndef AGR_GATE_H
#define AGR_GATE_H

#include "internal.h"

#include <sched.h>

#define AGR__GATE_SLOTS 16

typedef struct agr__gate {
	AGR__ALIGNED_CACHELINE atomic_bool closed;
	struct {
		AGR__ALIGNED_CACHELINE atomic_uint_fast64_t inside;
	} slot[AGR__GATE_SLOTS];
} agr__gate;

/*
 * Which slot the calling thread counts itself in: threads take slots
 * in turn as they first send (gate.c; one definition, so that every
 * file that enters or leaves a gate uses the same slot).
 */
extern _Thread_local unsigned agr__gate_my_slot; /* 0: not picked yet */

unsigned agr__gate_pick_slot(void);

static inline unsigned agr__gate_slot(void)
{
	if (agr__unlikely(agr__gate_my_slot == 0))
		return agr__gate_pick_slot();
	return agr__gate_my_slot - 1;
}

/* Enters the gate; false (nothing entered) once it is closed. */
static inline bool agr__gate_enter(agr__gate *g)
{
	atomic_uint_fast64_t *inside = &g->slot[agr__gate_slot()].inside;

	atomic_fetch_add_explicit(inside, 1, memory_order_seq_cst);
	if (agr__likely(!atomic_load_explicit(&g->closed,
					      memory_order_seq_cst)))
		return true;
	atomic_fetch_sub_explicit(inside, 1, memory_order_release);
	return false;
}

/* Leaves the gate; the same thread that entered it. */
static inline void agr__gate_leave(agr__gate *g)
{
	atomic_fetch_sub_explicit(&g->slot[agr__gate_slot()].inside, 1,
				  memory_order_release);
}

static inline bool agr__gate_closed(agr__gate *g)
{
	return atomic_load(&g->closed);
}

static inline bool agr__gate_empty(agr__gate *g)
{
	unsigned i;

	for (i = 0; i < AGR__GATE_SLOTS; i++)
		if (atomic_load_explicit(&g->slot[i].inside,
					 memory_order_seq_cst))
			return false;
	return true;
}

/* Closes the gate and waits until no sender is inside it. */
static inline void agr__gate_close(agr__gate *g)
{
	unsigned spins = 0;

	atomic_store_explicit(&g->closed, true, memory_order_seq_cst);
	while (!agr__gate_empty(g)) {
		if (++spins < 128)
			agr__cpu_relax();
		else
			sched_yield();
	}
}

#endif /* AGR_GATE_H */
