/* SPDX-License-Identifier: MIT */
/*
 * ledger_checkpointer.h - when ledger_server takes its checkpoints
 * (ledger_checkpoint.h): on a thread of its own, once the journal after
 * the current checkpoint has grown to half of --checkpoint-bytes or
 * --checkpoint-events or the journal kept on disk to a whole one, and a
 * last time at a clean stop.
 *
 * The journal kept is what follows the fallback checkpoint's positions
 * (the one before the current one, kept for a current one found
 * damaged; before there is one, the journals' start): a cycle frees the
 * journal before them. Cycles half a threshold apart keep the journal
 * on disk under one threshold (plus what is journaled while a cycle is
 * noticed and written), so that the disk holds about two checkpoints
 * (three while one is written), one threshold of journal and the zeros
 * the journals write ahead. The price: a checkpoint is written about
 * twice per threshold (each replays only the records since the one
 * before, so the replay work is the same; the state's size is written
 * twice as often). A restart replays at most about half a threshold,
 * and after a damaged current checkpoint about one.
 *
 * A cycle builds the checkpoint one of two ways (enum checkpoint_from).
 * The replay reads only what the journals have made durable (each
 * journal's durable_end) and the files; it never touches a worker's
 * state, so the workers go on while it replays and writes. It keeps
 * the state of the last checkpoint it made from one cycle to the next
 * (checkpoint_builder_take), so that a cycle replays only the records
 * journaled since, once each, on this thread at nice 10, so that
 * workers short of CPU come first; still, on a small machine that CPU
 * comes out of the request rate (bench/RESULTS.md). The copy asks each
 * worker for its accounts (a short pause of that worker), waits until
 * the journals are durable as far as the copy goes, and reads the
 * journal only for the transfers' halves.
 */
#ifndef LEDGER_CHECKPOINTER_H
#define LEDGER_CHECKPOINTER_H

#include <stdbool.h>
#include <stdint.h>

#include "ledger_accounts.h"
#include "ledger_checkpoint.h"
#include "ledger_replay.h"

/*
 * Defaults: a restart replays at most about this much (replay runs at
 * some 400,000 events/s on a small machine: well under a second), and
 * the cycles replay as much once more on the checkpoint's thread.
 */
#define CHECKPOINT_BYTES_DEFAULT (16ull << 20) /* --checkpoint-bytes */
#define CHECKPOINT_EVENTS_DEFAULT 100000ull    /* --checkpoint-events */

/* Tests (--crash-after): where a cycle kills the server (SIGKILL). */
enum checkpoint_crash {
	CHECKPOINT_CRASH_NEVER,
	CHECKPOINT_CRASH_WRITTEN, /* the new one written, not yet fsync'd */
	CHECKPOINT_CRASH_RENAMED, /* renamed, the directory not fsync'd */
	CHECKPOINT_CRASH_COMPACTING, /* one journal freed, not the next */
};

/*
 * What a cycle builds the checkpoint from (--checkpoint-from): a copy
 * of the workers' accounts (ledger_snapshot.h: O(accounts), paid as a
 * pause on each worker) or a replay of the journal since the last
 * checkpoint on the checkpointer's thread (O(events), no pause). The
 * last one, at a stop, once the workers have ended, always replays.
 */
enum checkpoint_from {
	CHECKPOINT_FROM_AUTO,	 /* the tables where cheaper (below) */
	CHECKPOINT_FROM_JOURNAL, /* always the replay */
	CHECKPOINT_FROM_TABLES,	 /* always the copy */
};

/*
 * auto takes the copy when the accounts are at most half the events
 * since the last checkpoint (a copy costs about as much an account as
 * a replay an event), and at most this many a worker (a pause of about
 * 10 ms).
 */
#define CHECKPOINT_TABLES_MAX 65536u

struct checkpointer_options {
	uint64_t bytes;	 /* journal bytes kept; 0: never by size */
	uint64_t events; /* events kept; 0: never by count */
	enum checkpoint_from from;
	enum checkpoint_crash crash; /* tests */
};

/* What INFO and /metrics show; any thread. */
struct checkpointer_stats {
	uint64_t taken, failed;	 /* cycles since the start */
	uint64_t from_tables;	 /* ...of the taken, from the workers' copy */
	uint64_t seq;		 /* the current checkpoint's; 0: none */
	uint64_t position;	 /* the sum of its journal positions */
	uint64_t size;		 /* its bytes */
	uint64_t duration_ns;	 /* the last cycle's */
	uint64_t age_ns;	 /* since it was taken; 0 with seq 0 */
	uint64_t journal_bytes;	 /* durable journal bytes after it */
	uint64_t journal_kept;	 /* ...after the fallback, the one before
				  * it: the journal kept, which the
				  * thresholds count */
	uint64_t freed;		 /* journal bytes freed, since the start */
	bool running;		 /* a cycle is in progress */
};

struct checkpointer;

/*
 * Starts the thread for `dir`, whose journals 0 to nworkers - 1 are the
 * bank's, from what replay found there (r): each journal-I.log's end
 * (the position a journal not written by this run stays at), the
 * checkpoint replay started from and the records after it. A failure
 * ends the program.
 */
struct checkpointer *checkpointer_start(const char *dir, struct bank *bank,
					unsigned nworkers,
					const struct replay_result *r,
					const struct checkpointer_options *o);

/* A snapshot of the counters; any thread. */
void checkpointer_get_stats(struct checkpointer *c,
			    struct checkpointer_stats *st);

/*
 * Ends the thread (waiting for a cycle in progress), before the workers
 * stop: a cycle may be waiting on them. Again, or after it, or with
 * c NULL (no checkpoints), nothing.
 */
void checkpointer_halt(struct checkpointer *c);

/*
 * Ends the thread if checkpointer_halt() has not; with `final`, once
 * the workers have ended and every journal is intact, takes the last
 * checkpoint, of everything journaled. Fills *st as it is then, and
 * frees c.
 */
void checkpointer_stop(struct checkpointer *c, bool final,
		       struct checkpointer_stats *st);

#endif /* LEDGER_CHECKPOINTER_H */
