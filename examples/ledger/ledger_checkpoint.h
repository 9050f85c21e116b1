/* SPDX-License-Identifier: MIT */
/*
 * ledger_checkpoint.h - ledger_server's checkpoints: the state replay
 * would rebuild, as of a position in each journal, so that a restart
 * replays only what follows, and the journal before it can go.
 *
 * A checkpoint is the file DIR/checkpoint-SEQ.ckpt (SEQ 1, 2, ...,
 * zero-padded to 20 digits), text:
 *
 *   ledger-checkpoint 1 SEQ NJOURNALS EVENTS
 *                            (EVENTS: the journal records it covers)
 *   pos I OFFSET             one per journal: journal-I.log from OFFSET
 *   s RECORD                 the state, as journal records that rebuild
 *                            it (accounts_dump(): balances, strings,
 *                            the request ids with their replies)
 *   x RECORD                 a transfer's debit, credit or refund whose
 *                            other half the checkpoint has not seen
 *   end LINES CRC            LINES lines before it; CRC the CRC-32 of
 *                            every byte before "end", 8 hex digits
 *
 * It is built one of two ways. By replay: the newest valid checkpoint
 * (or nothing) plus the journals' records from its positions to
 * `ends`, bytes already durable, give the next one (one and the same
 * code path as a restart, accounts_apply()), and no worker stops. Or
 * from the workers' tables (checkpoint_builder_take_state(),
 * ledger_snapshot.h): each worker's accounts as it holds them with its
 * journal at `ends`, durable by then, and the journal read only for
 * the transfers' halves; that pauses each worker while it copies, but
 * costs the accounts, not the events. Either way the checkpoint holds
 * what a replay of the journals up to `ends` builds
 * (examples/ledger/tests/ledger_checkpoint_tables.sh compares them).
 *
 * The cycle, each step durable before the next:
 *   1. checkpoint-N.tmp written, fsync'd;
 *   2. renamed to checkpoint-N.ckpt, the directory fsync'd: N is current;
 *   3. checkpoints older than the previous one, N-1, unlinked (and the
 *      directory fsync'd);
 *   4. the journals' blocks wholly before N-1's positions are freed
 *      (fallocate PUNCH_HOLE: offsets stay; the disk space goes).
 * N-1 and its journal stay, so that if N is ever found torn or corrupt,
 * the restart uses N-1 and replays longer. A crash at any point leaves
 * N or N-1 current with the journal it needs (tests/check_ledger_
 * checkpoint explores every such state).
 */
#ifndef LEDGER_CHECKPOINT_H
#define LEDGER_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger_accounts.h"
#include "ledger_record.h"

/* The longest line of state or transfer a checkpoint holds. */
#define CHECKPOINT_LINE_MAX (RECORD_MAX + 2)

/*
 * A checkpoint's line of `kind` for rec: "s RECORD" (state) or
 * "x RECORD" (a transfer's half), into dst[CHECKPOINT_LINE_MAX]; its
 * length.
 */
static inline size_t checkpoint_line(char *dst, char kind,
				     const struct record *rec)
{
	dst[0] = kind;
	dst[1] = ' ';
	return 2 + record_encode(dst + 2, rec);
}

/* A checkpoint found on disk. */
struct checkpoint {
	uint64_t seq;	  /* 0: none (replay everything) */
	uint64_t *pos;	  /* [npos]: journal-I.log is replayed from pos[I] */
	unsigned npos;
	uint64_t size;	  /* bytes of the file */
	uint64_t records; /* its state and transfer records */
	uint64_t events;  /* journal records it covers, since the first */
	unsigned skipped; /* newer ones found invalid and passed over */
};

/*
 * Loads the newest valid checkpoint of `dir` into `accounts` (empty),
 * passing its transfer records to xfer(arg, rec). Checkpoints that are
 * torn or fail their checksum are reported (a warning each) and passed
 * over for the one before. Returns 0 (cp->seq 0 if there is none) or a
 * negative errno (reading the directory failed). cp->pos is the
 * caller's, to free().
 */
int checkpoint_load(const char *dir, struct accounts *accounts,
		    void (*xfer)(void *arg, const struct record *rec),
		    void *arg, struct checkpoint *cp);

/*
 * The fallback a restart keeps beside checkpoint `seq`, as compaction
 * left it: the newest checkpoint file of `dir` older than `seq`, its
 * header only (seq, positions, events, size; not its CRC: what its
 * positions say is where the journal was freed, valid or not). prev->seq
 * is 0 if there is none, or no readable header. Returns 0 or a negative
 * errno (reading the directory failed); prev->pos is the caller's, to
 * free().
 */
int checkpoint_before(const char *dir, uint64_t seq, struct checkpoint *prev);

/* The position checkpoint cp starts journal `idx` at. */
static inline uint64_t checkpoint_pos(const struct checkpoint *cp,
				      unsigned idx)
{
	return idx < cp->npos ? cp->pos[idx] : 0;
}

/* The sum of cp's positions: the journal it covers, over every file. */
static inline uint64_t checkpoint_pos_sum(const struct checkpoint *cp)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < cp->npos; i++)
		sum += cp->pos[i];
	return sum;
}

/*
 * Whether journal `fd` still holds its bytes from `from` on: false if a
 * compaction freed them (they read as a hole). A restart that would
 * replay from there must not: the checkpoint that covered them is gone.
 */
bool checkpoint_journal_intact(int fd, uint64_t from);

/*
 * Testing: told of each step of a checkpoint cycle that touches the
 * disk, before it is made (tests/check_ledger_checkpoint.c builds the
 * states a crash could leave from them). `data` is the file's bytes for
 * CHECKPOINT_OP_WRITE, else NULL; `len` the bytes punched for
 * CHECKPOINT_OP_PUNCH.
 */
enum checkpoint_op {
	CHECKPOINT_OP_WRITE,	/* path created, data[0, len) written */
	CHECKPOINT_OP_FSYNC,	/* path fsync'd */
	CHECKPOINT_OP_RENAME,	/* path renamed to `to` */
	CHECKPOINT_OP_SYNC_DIR, /* the directory fsync'd */
	CHECKPOINT_OP_UNLINK,	/* path unlinked */
	CHECKPOINT_OP_PUNCH,	/* path's [0, len) freed */
};

struct checkpoint_trace {
	void (*op)(void *arg, enum checkpoint_op op, const char *path,
		   const char *to, const void *data, uint64_t len);
	void *arg;
};

/* Testing: mistakes a test plants, to show it catches them. */
enum checkpoint_bug {
	CHECKPOINT_BUG_NONE,
	CHECKPOINT_BUG_NO_FSYNC,   /* made current without its fsync */
	CHECKPOINT_BUG_EARLY_PUNCH, /* journal freed before N is current */
};

struct checkpoint_options {
	const struct checkpoint_trace *trace; /* NULL: none */
	enum checkpoint_bug bug;
};

/* What a cycle did. */
struct checkpoint_stats {
	uint64_t seq;	      /* the new checkpoint's */
	uint64_t size;	      /* its bytes */
	uint64_t records;     /* its records */
	uint64_t events;      /* journal records it added to the last one */
	uint64_t journal_pos; /* the sum of its positions */
	uint64_t base_pos;    /* ...of the one it was built on, now the
			       * fallback: the journal before is freed */
	uint64_t freed;	      /* journal bytes punched */
	uint64_t duration_ns;
};

/*
 * One checkpoint cycle in `dir`: the newest valid checkpoint plus the
 * records of journal-I.log from its position to ends[I] (I < nends;
 * bytes that are durable, and whole records) become checkpoint SEQ+1,
 * made durable and current; then the older ones and the journal they
 * alone needed go (see above). Journals past nends keep the last one's
 * positions. Returns 0, or a negative errno with a warning saying what
 * failed (the last checkpoint stays current; nothing is lost).
 */
int checkpoint_take(const char *dir, const uint64_t *ends, unsigned nends,
		    const struct checkpoint_options *o,
		    struct checkpoint_stats *st);

/*
 * The same cycles, each going on from the state the one before made
 * current (ledger_checkpoint_build.h): a cycle then reads only the
 * journal after the last checkpoint, not that checkpoint too. The
 * checkpointer's; a builder serves one directory and one thread.
 */
struct checkpoint_builder;

struct checkpoint_builder *checkpoint_builder_new(const char *dir);
void checkpoint_builder_free(struct checkpoint_builder *b);

/* As checkpoint_take(), in b's directory. */
int checkpoint_builder_take(struct checkpoint_builder *b,
			    const uint64_t *ends, unsigned nends,
			    const struct checkpoint_options *o,
			    struct checkpoint_stats *st);

/*
 * The accounts as the workers hold them with every journal at `ends`
 * (ledger_snapshot.h), bytes already durable: their "s" lines, `count`
 * of them.
 */
struct checkpoint_state {
	const char *lines;
	size_t len, count;
};

/*
 * As checkpoint_builder_take(), the accounts taken from `state` rather
 * than replayed: the journal after the last checkpoint is read only for
 * the transfers' halves. The disk steps are the same.
 */
int checkpoint_builder_take_state(struct checkpoint_builder *b,
				  const uint64_t *ends, unsigned nends,
				  const struct checkpoint_state *state,
				  const struct checkpoint_options *o,
				  struct checkpoint_stats *st);

#endif /* LEDGER_CHECKPOINT_H */
