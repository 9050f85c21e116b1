/* SPDX-License-Identifier: MIT */
/*
 * ledger_snapshot.h - a copy of the accounts as the workers hold them,
 * for a checkpoint (ledger_checkpointer.c): each worker copies its own
 * groups on its own thread, at once, and notes where its journal ends
 * then. A worker applies each change in memory as it journals it, in
 * the same handler, so its groups are then exactly what a replay of its
 * journal up to that end builds. The copy may hold records not yet
 * durable: a checkpoint made from it must wait for them
 * (snapshot_wait_durable()).
 *
 * The copy pauses the worker for as long as it takes, about 150 ns an
 * account; the checkpointer takes one only where that is small beside
 * replaying the journal (ledger_checkpointer.h).
 */
#ifndef LEDGER_SNAPSHOT_H
#define LEDGER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "ledger_accounts.h"

struct snapshot {
	char *lines;	/* "s RECORD" lines, as a checkpoint holds them */
	size_t len, cap;
	size_t count;	/* lines */
	uint64_t *ends; /* [nworkers]: journal-W.log's end at W's copy */
	unsigned nworkers;
};

/*
 * Copies every worker's groups, one worker after the other (each copy
 * is a task on that worker, agr_scheduler_call_on()), into s, which it
 * (re)fills. Not from a worker. Returns 0, or a negative errno with a
 * warning: a journal failed (its sticky error), or the call failed (the
 * workers are stopping).
 */
int snapshot_take(struct bank *b, struct snapshot *s);

/*
 * Waits until every journal is durable up to s->ends, for at most
 * timeout_ns. Returns 0, or with a warning -EIO (a journal failed: the
 * copy holds what can never become durable) or -ETIMEDOUT.
 */
int snapshot_wait_durable(struct bank *b, const struct snapshot *s,
			  uint64_t timeout_ns);

/* Frees what s holds (s itself is the caller's). */
void snapshot_release(struct snapshot *s);

#endif /* LEDGER_SNAPSHOT_H */
