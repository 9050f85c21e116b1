/* SPDX-License-Identifier: MIT */
/*
 * gate.h - a sender gate (internal): bit 0 = closed, the rest counts
 * the senders inside. Closing waits until nobody is inside, so that
 * whatever the gate protects can be torn down after close returns,
 * while entering and leaving stay one atomic add each.
 */
#ifndef AGR_GATE_H
#define AGR_GATE_H

#include "internal.h"

#include <sched.h>

typedef atomic_uint_fast64_t agr__gate;

/* Enters the gate; false (nothing entered) once it is closed. */
static inline bool agr__gate_enter(agr__gate *g)
{
	uint_fast64_t v = atomic_fetch_add_explicit(g, 2,
						    memory_order_acquire);

	if (agr__likely(!(v & 1)))
		return true;
	atomic_fetch_sub_explicit(g, 2, memory_order_release);
	return false;
}

static inline void agr__gate_leave(agr__gate *g)
{
	atomic_fetch_sub_explicit(g, 2, memory_order_release);
}

static inline bool agr__gate_closed(agr__gate *g)
{
	return atomic_load(g) & 1;
}

/* Closes the gate and waits until no sender is inside it. */
static inline void agr__gate_close(agr__gate *g)
{
	unsigned spins = 0;

	atomic_fetch_or(g, 1);
	while (atomic_load(g) >> 1) {
		if (++spins < 128)
			agr__cpu_relax();
		else
			sched_yield();
	}
}

#endif /* AGR_GATE_H */
