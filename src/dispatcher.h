/* SPDX-License-Identifier: MIT */
/*
 * dispatcher.h - what the layers above see of a dispatcher (internal).
 */
#ifndef AGR_DISPATCHER_INTERNAL_H
#define AGR_DISPATCHER_INTERNAL_H

#include "internal.h"

#include <aggring/dispatcher.h>

/*
 * Admission leases (the runtime's view of active work). When set, every
 * send asks acquire(arg) first: false means admission is closed and the
 * message is refused with -ESHUTDOWN. Every admitted message releases
 * its lease once, right after its completion callback returned.
 * acquire/release run on any thread and must be lock-free and cheap.
 */
struct agr__lease_ops {
	bool (*acquire)(void *arg);
	void (*release)(void *arg);
	void *arg;
};

/* Installs (or, with NULL, removes) lease hooks; only before start. */
int agr__dispatcher_set_lease(agr_dispatcher *d,
			      const struct agr__lease_ops *ops);

#endif /* AGR_DISPATCHER_INTERNAL_H */
