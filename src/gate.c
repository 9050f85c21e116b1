/* SPDX-License-Identifier: MIT */
/*
 * gate.c - which of a gate's slots a thread counts itself in (gate.h).
 */
#include "gate.h"

_Thread_local unsigned agr__gate_my_slot;

unsigned agr__gate_pick_slot(void)
{
	static atomic_uint next_slot;
	unsigned slot = atomic_fetch_add_explicit(&next_slot, 1,
						  memory_order_relaxed) %
			AGR__GATE_SLOTS;

	agr__gate_my_slot = slot + 1;
	return slot;
}
