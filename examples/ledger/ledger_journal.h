/* SPDX-License-Identifier: MIT */
/*
 * ledger_journal.h - ledger_server's journal: group commit of records to
 * one file per worker, on that worker's ring.
 *
 * A journal has one durable write in flight at a time; records appended
 * meanwhile gather in the next batch, which starts once the current one
 * is durable, at the end of the worker's turn. A record's waiter is
 * told, on the journal's worker, once the record is durable or cannot
 * become so. A forced stop tells every waiter still pending, with
 * -ECANCELED, as the worker tears down (or, for a batch whose start
 * was queued after it ended, on the thread that drops that task): the
 * write in flight is cancelled, a batch not started yet is failed.
 *
 * Two ways to the disk (enum journal_io):
 *
 * - direct (the default): the file is opened with O_DIRECT and every
 *   batch is written as whole 4 KiB blocks, its first block rewritten
 *   with the records of the previous batch that share it, the last one
 *   padded with zeros, with RWF_DSYNC. The journal writes zeros ahead of
 *   its records (a chunk at a time, fdatasync'd) so that a batch
 *   overwrites blocks that exist already: such a write changes no
 *   metadata, runs without a kernel worker thread, and is made durable
 *   by a single cache flush. This is what a write-ahead log does on a
 *   disk without FUA (PostgreSQL's zeroed WAL segments). The zeros take
 *   disk space, so their chunk follows what the journal is meant to
 *   keep (journal_set_zero_budget()).
 * - buffered: through the page cache; each batch appends and the file
 *   grows, so every durable write also writes the inode. Chosen when
 *   asked, or when the file system refuses O_DIRECT (tmpfs before 6.6).
 *
 * Either way the file is whole records ("...\n"), then zeros or nothing;
 * a crash can tear only the last batch, whose records nobody has seen
 * acknowledged. Rewriting a shared block is safe: its acknowledged bytes
 * are written again unchanged, so whichever of its sectors reach the
 * disk, they hold them.
 */
#ifndef LEDGER_JOURNAL_H
#define LEDGER_JOURNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <aggring.h>

#define JOURNAL_BLOCK 4096u		  /* O_DIRECT offsets, sizes, memory */
/*
 * The zeros written ahead at a time: at most JOURNAL_ZERO_CHUNK (all of
 * it without a budget), at least JOURNAL_ZERO_MIN; the next chunk once
 * less than half a chunk is left. A test may build the journal with
 * smaller ones (whole blocks).
 */
#ifndef JOURNAL_ZERO_CHUNK
#define JOURNAL_ZERO_CHUNK (4u << 20)
#endif
#ifndef JOURNAL_ZERO_MIN
#define JOURNAL_ZERO_MIN (64u << 10)
#endif

enum journal_io {
	JOURNAL_IO_DIRECT,   /* O_DIRECT into zeroed blocks; the default */
	JOURNAL_IO_BUFFERED, /* page cache; the file grows with each batch */
};

/* How a batch is made durable. */
enum journal_sync {
	JOURNAL_SYNC_DSYNC,	/* one write with RWF_DSYNC; the default */
	JOURNAL_SYNC_FDATASYNC, /* a write, then an fdatasync */
};

/* Someone waiting for records to become durable. */
struct commit_wait {
	struct commit_wait *next;
	void (*durable)(struct commit_wait *w, int status);
};

struct journal_batch {
	char *data;
	size_t len, cap;
	struct commit_wait *head, **tail;
	unsigned count;	 /* records */
	uint64_t id;	 /* 1, 2, ...: the order batches become durable */
};

/*
 * Testing: told, on the journal's worker, of every write and fdatasync
 * the journal issues and of their results, so that a test can build
 * every state a crash could leave on the disk (tests/
 * check_crash_states.c). A journal has at most one operation in flight
 * per stream: the batches', and the zeros written ahead. `p` stays
 * valid only during the call; an fdatasync has p NULL and len 0.
 */
enum journal_stream { JOURNAL_STREAM_BATCH, JOURNAL_STREAM_ZEROS };

struct journal_trace {
	void (*issued)(void *arg, enum journal_stream s, const void *p,
		       size_t len, uint64_t at, bool dsync);
	void (*completed)(void *arg, enum journal_stream s, int res);
	void *arg;
};

/* A worker's journal file; touched only by that worker's thread. */
struct journal {
	int fd;
	int error;	 /* sticky: once a write or sync failed */
	bool direct;	 /* O_DIRECT: whole blocks from `stage` */
	bool no_dsync;	 /* RWF_DSYNC refused: write, then fdatasync */
	bool kicked;	 /* a journal_kick() task is queued */
	bool zeroing;	 /* a zero fill is in flight */
	bool waiting;	 /* the next batch waits for the zero fill */
	bool holds_zeros; /* counted among the users of the zero buffer */
	uint64_t offset; /* end of what is durable */
	_Atomic uint64_t durable_end; /* offset, for other threads (acquire) */
	uint64_t durable_id; /* the last batch made durable; 0: none */
	uint64_t zeroed; /* below this the file holds records or zeros */
	uint64_t zero_at; /* where the zero fill in flight writes */
	uint64_t zero_len; /* ...and how much */
	uint64_t keep_bytes, keep_events; /* journal_set_zero_budget() */
	uint64_t zero_retry_at; /* after a failed zero fill: not before */
	struct journal_batch batches[2];
	struct journal_batch *filling;	/* gathers the next batch */
	struct journal_batch *flushing; /* written and synced now, or NULL */
	size_t written;			/* bytes of the write in flight done */
	char *stage;	   /* direct: tail block + batch + zero padding */
	size_t staged;	   /* bytes of `stage` to write: whole blocks */
	size_t stage_cap;
	char *tail;	   /* direct: the records of the last partial block */
	size_t tail_len;
	agr_scheduler *sched;
	unsigned worker; /* the worker that owns this journal */
	uint64_t events, syncs, bytes, zero_fills;
	const struct journal_trace *trace; /* testing; NULL: none */
	char *path;	   /* as opened: checked after each batch */
	dev_t dev;	   /* the file opened, which must still be there */
	ino_t ino;
	char why[256];	   /* with error: what failed, for the log and INFO */
	atomic_bool failed; /* error is set and why written: any thread */
};

/*
 * A batch whose write or sync fails fails whole, and the file is cut
 * back (ftruncate, fdatasync) to the end of the last durable batch
 * before its waiters are told, so that none of it replays; the error is
 * sticky until a restart, and j->why says what failed.
 *
 * After each batch's write, before its waiters are told, the journal
 * checks that its file is still the one at `path` and can be written:
 * a file unlinked (link count 0, or no file at path), replaced (another
 * inode at path) or made read-only would lose or refuse what is
 * acknowledged. Then the batch fails, with the sticky error -ENOENT,
 * -ESTALE or the error of access(2) (-EROFS, -EACCES), and j->why
 * names the cause.
 *
 * Opens (creating) the journal at `path` for `worker` of `sched`, to
 * write after its first `end` bytes: the whole records replay found;
 * whatever follows them must be zeros or cut off. With
 * JOURNAL_IO_DIRECT, falls back to buffered I/O (j->direct false) where
 * O_DIRECT is refused (at open, or by the first batch's write); with
 * JOURNAL_SYNC_DSYNC, to a write and an fdatasync where RWF_DSYNC is.
 * Returns 0 or a negative errno.
 */
int journal_open(struct journal *j, const char *path, uint64_t end,
		 enum journal_io io, enum journal_sync sync,
		 agr_scheduler *sched, unsigned worker);

/*
 * Queues a record; on the journal's worker only. w->durable() runs
 * later, on this worker, once the record is durable (status 0) or
 * cannot become so (an error). Returns 0, or the journal's sticky error
 * or -ENOMEM, and then w is never called.
 */
int journal_append(struct journal *j, const char *rec, size_t len,
		   struct commit_wait *w);

/*
 * The batch the next journal_append() joins: once journal_wait() says
 * it is durable, so is every record appended before.
 */
static inline uint64_t journal_batch_id(const struct journal *j)
{
	return j->filling->id;
}

/*
 * Where the journal ends with every record appended so far, durable or
 * not (the position a copy of the state taken now corresponds to); on
 * the journal's worker only.
 */
static inline uint64_t journal_appended_end(const struct journal *j)
{
	return j->offset + (j->flushing ? j->flushing->len : 0) +
	       j->filling->len;
}

/*
 * Waits, on the journal's worker, for batch `id` (a journal_batch_id()
 * taken when something was appended) and every batch before it to be
 * durable: a reader of state that records not yet durable made waits
 * for them. Returns 1 if they are durable already (w is never called),
 * 0 if w->durable() will be called as for journal_append() (with the
 * error if the batch fails), or the journal's sticky error (then some
 * of them can never become durable, and w is never called).
 */
int journal_wait(struct journal *j, uint64_t id, struct commit_wait *w);

/*
 * Sizes the zeros a direct journal writes ahead to what it keeps
 * between two checkpoints: `bytes` of records or `events` records,
 * whichever comes first (0: no limit by that), its share of the
 * checkpoint thresholds. A chunk is an eighth of that (events at the
 * mean record size this journal has written; JOURNAL_ZERO_MIN until it
 * has written one), within [JOURNAL_ZERO_MIN, JOURNAL_ZERO_CHUNK], so
 * that the zeros ahead, half a chunk to one and a half, stay a small
 * part of the disk a checkpoint bounds. Smaller chunks mean more
 * fills, each a write and an fdatasync beside the batches. Without a
 * budget (the default) every chunk is JOURNAL_ZERO_CHUNK. On the
 * journal's worker, or before it writes.
 */
void journal_set_zero_budget(struct journal *j, uint64_t bytes,
			     uint64_t events);

/* Testing: reports the journal's I/O to `t` from now on (NULL: stop). */
void journal_set_trace(struct journal *j, const struct journal_trace *t);

/* Closes the file and frees the buffers; the worker must have ended. */
void journal_close(struct journal *j);

/*
 * Whether the bytes of fd from `from` to `size` are all zeros (the
 * space a direct journal wrote ahead): 1 if so, 0 if not, or a negative
 * errno.
 */
int journal_zeros_after(int fd, uint64_t from, uint64_t size);

#endif /* LEDGER_JOURNAL_H */
