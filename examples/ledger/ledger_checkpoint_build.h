/* SPDX-License-Identifier: MIT */
/*
 * ledger_checkpoint_build.h - what a checkpoint cycle builds in memory
 * before ledger_checkpoint.c writes it: the state of the newest
 * checkpoint plus the journal records after its positions, and the new
 * checkpoint's text. Private to ledger_checkpoint*.c.
 *
 * The builder outlives a cycle (struct checkpoint_builder, kept by the
 * checkpointer): once a cycle has made its text current, the state it
 * built is exactly what that checkpoint holds, so the next cycle goes on
 * from it and reads only the journal after it, never the checkpoint
 * again. Its cost is the journal's new records, not the state's size
 * each time. A cycle that fails drops the state (builder_reset), and
 * the next one loads the newest valid checkpoint from the disk again.
 */
#ifndef LEDGER_CHECKPOINT_BUILD_H
#define LEDGER_CHECKPOINT_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger_checkpoint.h"

#define CHECKPOINT_MAGIC "ledger-checkpoint 1 " /* a checkpoint's start */

/* A transfer's record not yet matched with its other half. */
struct xrec {
	char *line; /* "x RECORD" */
	size_t len;
	bool debit;
	char id[REQID_MAX + 1];
};

struct checkpoint_builder {
	char *dir;
	bool loaded;		/* accounts and x hold `base` */
	struct checkpoint base; /* the newest checkpoint, as loaded or written */
	struct accounts *accounts;
	struct xrec *x;		/* transfers' halves still unmatched */
	size_t nx, x_cap;
	uint64_t events;	/* journal records added by this cycle */
	char *out;		/* the new checkpoint's text */
	size_t len, cap, lines;
	char *rd;		/* journal bytes being read */
	/*
	 * A cycle from the workers' tables: the accounts' lines come from
	 * there, and the journal is read only for the transfers' halves;
	 * the accounts here then fall behind (stale), and the next cycle
	 * that replays loads them again first.
	 */
	const struct checkpoint_state *state;
	bool stale;
};

/* Drops the state (kept: the buffers); the next cycle loads again. */
void builder_reset(struct checkpoint_builder *b);

/* Loads the newest valid checkpoint of b->dir into the empty state. */
int builder_load(struct checkpoint_builder *b);

/*
 * Applies journal-idx.log's records in [from, to) (whole records,
 * durable) to the state; 0, or -EIO with a warning.
 */
int builder_add_journal(struct checkpoint_builder *b, unsigned idx,
			uint64_t from, uint64_t to);

/*
 * Drops each transfer's debit and the credit or refund that ended it:
 * what stays is the transfers still open, and ends whose debit lies in
 * a journal position the checkpoint does not cover yet.
 */
void builder_match_xfers(struct checkpoint_builder *b);

/* The new checkpoint's text, from the state, into b->out. */
void builder_text(struct checkpoint_builder *b, uint64_t seq,
		  uint64_t events, const uint64_t *pos, unsigned npos);

#endif /* LEDGER_CHECKPOINT_BUILD_H */
