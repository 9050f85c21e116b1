/* SPDX-License-Identifier: MIT */
/*
 * ledger_journal.c - group commit of ledger_server's records; see
 * ledger_journal.h for the file's layout and the two ways to the disk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>

#define BATCH_MIN (64 * 1024)

/*
 * Testing only (tests/check_crash_states_planted): a planted bug that
 * tells a batch's waiters once its write completes, with no RWF_DSYNC
 * and no fdatasync, so that the crash-state checker must catch it.
 */
#ifdef JOURNAL_PLANT_EARLY_ACK
#define EARLY_ACK true
#else
#define EARLY_ACK false
#endif

/*
 * The zeros a direct journal writes ahead, shared by every journal:
 * opened and closed on the main thread, only read by the workers.
 */
static void *zeros;
static unsigned zeros_users;

static uint64_t round_down(uint64_t n)
{
	return n & ~(uint64_t)(JOURNAL_BLOCK - 1);
}

static uint64_t round_up(uint64_t n)
{
	return round_down(n + JOURNAL_BLOCK - 1);
}

static void batch_reset(struct journal_batch *b)
{
	b->len = 0;
	b->head = NULL;
	b->tail = &b->head;
	b->count = 0;
}

static void journal_written(int res, void *arg);
static void journal_synced(int res, void *arg);
static void journal_schedule(struct journal *j);

static void trace_issued(const struct journal *j, enum journal_stream s,
			 const void *p, size_t len, uint64_t at, bool dsync)
{
	if (j->trace)
		j->trace->issued(j->trace->arg, s, p, len, at, dsync);
}

static void trace_completed(const struct journal *j, enum journal_stream s,
			    int res)
{
	if (j->trace)
		j->trace->completed(j->trace->arg, s, res);
}

/* ---- zeros ahead of the records (direct only) ---- */

_Static_assert(JOURNAL_ZERO_MIN % JOURNAL_BLOCK == 0 &&
		       JOURNAL_ZERO_CHUNK % JOURNAL_BLOCK == 0 &&
		       JOURNAL_ZERO_MIN <= JOURNAL_ZERO_CHUNK,
	       "zero chunks are whole blocks, the least below the most");

static void zero_filled(int res, void *arg);

void journal_set_zero_budget(struct journal *j, uint64_t bytes,
			     uint64_t events)
{
	j->keep_bytes = bytes;
	j->keep_events = events;
}

/* An eighth of what the journal keeps (ledger_journal.h), in blocks. */
static uint64_t zero_chunk(const struct journal *j)
{
	uint64_t keep = UINT64_MAX, mean;

	if (j->keep_bytes)
		keep = j->keep_bytes;
	if (j->keep_events) {
		mean = j->events ? j->bytes / j->events : 0;
		if (mean <= UINT64_MAX / j->keep_events &&
		    j->keep_events * mean < keep)
			keep = j->keep_events * mean;
	}
	if (keep / 8 <= JOURNAL_ZERO_MIN)
		return JOURNAL_ZERO_MIN;
	if (keep / 8 >= JOURNAL_ZERO_CHUNK)
		return JOURNAL_ZERO_CHUNK;
	return round_down(keep / 8);
}

/*
 * A zero fill is over. If it failed, batches past `zeroed` extend the
 * file themselves (slower, as correct), and the next try waits until
 * the records have grown by a chunk: a full disk is not hammered with
 * a zero fill at every batch.
 */
static void zero_fill_over(struct journal *j, bool failed)
{
	j->zeroing = false;
	if (failed)
		j->zero_retry_at = j->offset + j->zero_len;
	if (j->waiting) {
		j->waiting = false;
		journal_schedule(j);
	}
}

static void zero_written(int res, void *arg)
{
	struct journal *j = arg;

	trace_completed(j, JOURNAL_STREAM_ZEROS, res);
	if (res < 0 || (uint64_t)res != j->zero_len ||
	    agr_io_fsync(agr_worker_current(), j->fd, AGR_IO_DATASYNC,
			 zero_filled, j) < 0)
		zero_fill_over(j, true);
	else
		trace_issued(j, JOURNAL_STREAM_ZEROS, NULL, 0, 0, false);
}

static void zero_filled(int res, void *arg)
{
	struct journal *j = arg;

	trace_completed(j, JOURNAL_STREAM_ZEROS, res);
	if (res == 0) {
		j->zeroed = j->zero_at + j->zero_len;
		j->zero_fills++;
	}
	zero_fill_over(j, res != 0);
}

/*
 * Writes the next chunk of zeros once less than half a chunk is left
 * ahead of the records; between batches only, so that it starts past
 * any block a batch wrote, on a block boundary at or after `zeroed`,
 * where no batch writes until it is over (journal_kick).
 */
static void zero_fill_maybe(struct journal *j)
{
	uint64_t chunk;

	if (!j->direct || j->zeroing || j->error || j->flushing ||
	    j->offset < j->zero_retry_at)
		return;
	chunk = zero_chunk(j);
	if (j->zeroed >= j->offset + chunk / 2)
		return;
	j->zero_at = round_up(j->zeroed > j->offset ? j->zeroed : j->offset);
	j->zero_len = chunk;
	if (agr_io_write(agr_worker_current(), j->fd, zeros,
			 (unsigned)chunk, j->zero_at, zero_written, j) == 0) {
		j->zeroing = true;
		trace_issued(j, JOURNAL_STREAM_ZEROS, zeros, chunk, j->zero_at,
			     false);
	} else {
		zero_fill_over(j, true);
	}
}

/* ---- batches ---- */

/* The bytes the write in flight must cover. */
static size_t write_size(const struct journal *j)
{
	return j->direct ? j->staged : j->flushing->len;
}

/*
 * Direct: lays out the batch in flight as whole blocks, after the
 * records it shares its first block with, padded with zeros.
 */
static int stage_batch(struct journal *j)
{
	const struct journal_batch *b = j->flushing;
	size_t len = j->tail_len + b->len, size = round_up(len);

	if (size > j->stage_cap) {
		void *p;

		if (agr_dio_alloc(size * 2, JOURNAL_BLOCK, &p) < 0)
			return -ENOMEM;
		agr_dio_free(j->stage);
		j->stage = p;
		j->stage_cap = size * 2;
	}
	memcpy(j->stage, j->tail, j->tail_len);
	memcpy(j->stage + j->tail_len, b->data, b->len);
	memset(j->stage + len, 0, size - len);
	j->staged = size;
	return 0;
}

/*
 * Writes the rest of the batch in flight. One write with RWF_DSYNC is
 * durable when it completes, like write + fdatasync but in one trip;
 * where the kernel or file system refuses the flag, a write and then an
 * fdatasync.
 */
static int write_more(struct journal *j)
{
	agr_worker *w = agr_worker_current();
	const char *p;
	uint64_t at;
	unsigned len = (unsigned)(write_size(j) - j->written);
	bool dsync = !j->no_dsync && !EARLY_ACK;
	struct io_uring_sqe *sqe;
	int ret;

	if (j->direct) {
		p = j->stage + j->written;
		at = j->offset - j->tail_len + j->written;
	} else {
		p = j->flushing->data + j->written;
		at = j->offset + j->written;
	}
	if (!dsync) {
		ret = agr_io_write(w, j->fd, p, len, at, journal_written, j);
	} else if ((ret = agr_io_sqe(w, journal_written, j, &sqe)) == 0) {
		io_uring_prep_write(sqe, j->fd, p, len, at);
		sqe->rw_flags = RWF_DSYNC;
		ret = agr_io_sqe_commit(w); /* prepared: may go early */
	}
	if (ret == 0)
		trace_issued(j, JOURNAL_STREAM_BATCH, p, len, at, dsync);
	return ret;
}

/* Makes the gathered batch the one in flight and writes it. */
static int start_batch(struct journal *j)
{
	int ret;

	j->flushing = j->filling;
	j->filling = j->filling == &j->batches[0] ? &j->batches[1] :
						    &j->batches[0];
	j->filling->id = j->flushing->id + 1;
	j->written = 0;
	if (j->direct && (ret = stage_batch(j)) < 0)
		return ret;
	return write_more(j);
}

/* Direct: the next batch would write where the zero fill writes. */
static bool must_wait_for_zeros(const struct journal *j)
{
	return j->direct && j->zeroing &&
	       round_up(j->offset + j->filling->len) > j->zero_at;
}

static void journal_kick(void *arg);

/* Fails every waiter of `b`, detached first: a waiter may append. */
static void fail_batch(struct journal *j, struct journal_batch *b)
{
	struct commit_wait *w = b->head, *next;

	batch_reset(b);
	for (; w; w = next) {
		next = w->next;
		w->durable(w, j->error);
	}
}

/*
 * A forced stop dropped the kick before it ran: the gathered batch will
 * never be written, so its waiters are told now (their held replies go
 * out failed) and the journal takes nothing more. The worker is tearing
 * down, or has ended: nothing else touches the journal.
 */
static void journal_kick_dropped(void *arg, int reason)
{
	struct journal *j = arg;

	j->kicked = false;
	if (!j->error)
		j->error = reason;
	fail_batch(j, j->filling);
}

/*
 * Starts the gathered batch at the end of this turn of the worker's
 * loop rather than now: the kick task queues behind the groups that are
 * ready to run, so each of them adds its record first. Starting at once
 * would send the first record alone and make the rest wait a whole
 * write for the next batch.
 */
static void journal_schedule(struct journal *j)
{
	if (j->kicked || j->flushing || j->filling->count == 0)
		return;
	j->kicked = true;
	if (agr_scheduler_schedule_cancellable(j->sched, j->worker,
					       journal_kick,
					       journal_kick_dropped, j) < 0)
		journal_kick(j); /* the scheduler is stopping: go now */
}

static void journal_kick(void *arg)
{
	struct journal *j = arg;
	int ret;

	j->kicked = false;
	if (j->flushing || j->filling->count == 0)
		return;
	if (j->error) {
		fail_batch(j, j->filling);
		return;
	}
	zero_fill_maybe(j);
	if (must_wait_for_zeros(j)) {
		j->waiting = true; /* zero_fill_over() kicks again */
		return;
	}
	ret = start_batch(j);
	if (ret < 0) {
		struct journal_batch *b = j->flushing;

		j->error = ret;
		j->flushing = NULL;
		fail_batch(j, b);
	}
}

/* The batch in flight is over: tell its waiters, then start the next. */
static void finish_batch(struct journal *j, int status)
{
	struct commit_wait *w = j->flushing->head, *next;

	batch_reset(j->flushing);
	j->flushing = NULL;
	for (; w; w = next) {
		next = w->next;
		w->durable(w, status);
	}
	if (j->error)
		fail_batch(j, j->filling);
	else
		journal_schedule(j);
}

/*
 * A batch failed. What of it reached the file (a short write before the
 * error, a write whose fsync failed) must not outlive the error its
 * clients are answered: replayed at restart, a retry without a request
 * id would count twice. So the file is cut back to the end of the last
 * durable batch, synchronously: this is the failure path, once.
 */
static void undo_batch(struct journal *j)
{
	size_t n;

	if (!j->flushing || j->fd < 0)
		return;
	if (ftruncate(j->fd, (off_t)j->offset) == 0 && fdatasync(j->fd) == 0)
		return;
	n = strlen(j->why);
	snprintf(j->why + n, sizeof(j->why) - n, "%sthe failed batch could "
		 "not be cut off (%s): its records may replay at restart",
		 n ? "; " : "", strerror(errno));
}

static void journal_fail(struct journal *j, int err)
{
	if (err == -ECANCELED) { /* a forced stop: not the disk's doing */
		fprintf(stderr, "ledger_server: journal: a forced stop "
			"cancelled the write in flight; its events fail\n");
		snprintf(j->why, sizeof(j->why), "a forced stop cancelled a "
			 "write");
	} else if (!j->why[0])
		snprintf(j->why, sizeof(j->why), "%s: write failed: %s",
			 j->path ? j->path : "journal", strerror(-err));
	undo_batch(j);
	if (err != -ECANCELED)
		fprintf(stderr, "ledger_server: journal failed: %s; no more "
			"events are accepted: restart the server once the "
			"cause is fixed\n", j->why);
	j->error = err;
	atomic_store_explicit(&j->failed, true, memory_order_release);
	finish_batch(j, err);
}

/*
 * Direct: the file system took O_DIRECT at open but refuses the writes
 * (with and without RWF_DSYNC). Before any direct batch was durable,
 * the same descriptor goes on through the page cache. The buffers stay
 * until journal_close(): a zero fill may still be writing from them.
 */
static bool fall_back_to_buffered(struct journal *j)
{
	int flags;

	if (!j->direct || j->syncs > 0 || j->written != 0)
		return false;
	flags = fcntl(j->fd, F_GETFL);
	if (flags < 0 || fcntl(j->fd, F_SETFL, flags & ~O_DIRECT) < 0)
		return false;
	fprintf(stderr, "ledger_server: journal: O_DIRECT writes refused; "
		"going through the page cache\n");
	j->direct = false;
	return true;
}

/*
 * A write was refused in a way the other way of writing may not be:
 * RWF_DSYNC (then write + fdatasync), or O_DIRECT (then the page
 * cache). True if the journal switched.
 */
static bool switch_way(struct journal *j, int res)
{
	if ((res == -EINVAL || res == -EOPNOTSUPP) && !j->no_dsync &&
	    j->written == 0) {
		j->no_dsync = true;
		return true;
	}
	return res == -EINVAL && fall_back_to_buffered(j);
}

/* The fdatasync after a batch's write is over. */
static void batch_fsynced(int res, void *arg)
{
	trace_completed(arg, JOURNAL_STREAM_BATCH, res);
	journal_synced(res, arg);
}

static void journal_written(int res, void *arg)
{
	struct journal *j = arg;
	size_t before = j->written;
	int ret;

	trace_completed(j, JOURNAL_STREAM_BATCH, res);
	if (switch_way(j, res)) {
		ret = write_more(j); /* the same bytes, the other way */
		if (ret < 0)
			journal_fail(j, ret);
		return;
	}
	if (res <= 0) {
		journal_fail(j, res < 0 ? res : -EIO);
		return;
	}
	j->written += (size_t)res;
	if (j->direct) /* a short direct write: redo its last block */
		j->written = round_down(j->written);
	if (j->written == before)
		ret = -EIO;
	else if (j->written < write_size(j))
		ret = write_more(j); /* a short write: go on */
	else if (!j->no_dsync || EARLY_ACK) {
		journal_synced(0, j); /* RWF_DSYNC: durable already */
		return;
	} else if ((ret = agr_io_fsync(agr_worker_current(), j->fd,
				       AGR_IO_DATASYNC, batch_fsynced, j)) == 0)
		trace_issued(j, JOURNAL_STREAM_BATCH, NULL, 0, 0, false);
	if (ret < 0)
		journal_fail(j, ret);
}

/* Direct: keeps the records of the new last partial block. */
static void keep_tail(struct journal *j)
{
	size_t len = j->tail_len + j->flushing->len;
	size_t tail = (j->offset + j->flushing->len) % JOURNAL_BLOCK;
	uint64_t end = j->offset - j->tail_len + j->staged;

	memcpy(j->tail, j->stage + len - tail, tail);
	j->tail_len = tail;
	if (end > j->zeroed)
		j->zeroed = end; /* the batch extended the file */
}

/*
 * Whether the file written is still the journal: not unlinked, not
 * replaced, still writable. Else a negative errno, and j->why says why.
 */
static int check_file(struct journal *j)
{
	struct stat fd_st, path_st;

	if (!j->path)
		return 0;
	if (stat(j->path, &path_st) < 0) {
		int err = errno;

		if (fstat(j->fd, &fd_st) == 0 && fd_st.st_nlink == 0)
			snprintf(j->why, sizeof(j->why), "%s was unlinked "
				 "(removed while open): what it holds would be "
				 "lost", j->path);
		else
			snprintf(j->why, sizeof(j->why), "%s: %s (moved or "
				 "removed while open)", j->path, strerror(err));
		return -err;
	}
	if (path_st.st_dev != j->dev || path_st.st_ino != j->ino) {
		snprintf(j->why, sizeof(j->why), "%s was replaced by another "
			 "file while open: a restart would not replay what "
			 "this one holds", j->path);
		return -ESTALE;
	}
	if (access(j->path, W_OK) < 0) {
		int err = errno;

		snprintf(j->why, sizeof(j->why), "%s is no longer writable "
			 "(%s): a restart could not open it", j->path,
			 strerror(err));
		return -err;
	}
	return 0;
}

static void journal_synced(int res, void *arg)
{
	struct journal *j = arg;

	if (res < 0) {
		/* After a failed fsync the page cache cannot be trusted. */
		journal_fail(j, res);
		return;
	}
	if ((res = check_file(j)) < 0) {
		journal_fail(j, res);
		return;
	}
	if (j->direct)
		keep_tail(j);
	j->offset += j->flushing->len;
	atomic_store_explicit(&j->durable_end, j->offset,
			      memory_order_release);
	j->durable_id = j->flushing->id; /* before its waiters are told */
	j->bytes += j->flushing->len;
	j->events += j->flushing->count;
	j->syncs++;
	finish_batch(j, 0);
}

static void batch_add_waiter(struct journal_batch *b, struct commit_wait *w)
{
	w->next = NULL;
	*b->tail = w;
	b->tail = &w->next;
}

int journal_wait(struct journal *j, uint64_t id, struct commit_wait *w)
{
	if (id <= j->durable_id)
		return 1;
	if (j->error)
		return j->error;
	if (id == j->filling->id && j->filling->count > 0)
		batch_add_waiter(j->filling, w);
	else if (j->flushing && id <= j->flushing->id)
		batch_add_waiter(j->flushing, w);
	else
		return 1; /* not a batch that holds records: nothing to wait */
	return 0;
}

int journal_append(struct journal *j, const char *rec, size_t len,
		   struct commit_wait *w)
{
	struct journal_batch *b = j->filling;

	if (j->error)
		return j->error;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : BATCH_MIN;
		char *p;

		while (cap < b->len + len)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, rec, len);
	b->len += len;
	batch_add_waiter(b, w);
	b->count++;
	journal_schedule(j);
	return 0;
}

/* ---- opening and closing ---- */

/* Direct: reads the records of the last partial block before `end`. */
static int read_tail(struct journal *j)
{
	uint64_t at = round_down(j->offset);
	ssize_t n;

	j->tail_len = (size_t)(j->offset - at);
	if (j->tail_len == 0)
		return 0;
	n = pread(j->fd, j->stage, JOURNAL_BLOCK, (off_t)at);
	if (n < 0)
		return -errno;
	if ((size_t)n < j->tail_len)
		return -EIO;
	memcpy(j->tail, j->stage, j->tail_len);
	return 0;
}

static int open_direct(struct journal *j, const char *path)
{
	int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, ret;
	size_t mem, off;
	void *stage = NULL;

	j->fd = open(path, flags, 0644);
	if (j->fd < 0)
		return -errno;
	/* Whole blocks must do for the file: else the page cache. */
	ret = agr_io_dio_alignment(j->fd, &mem, &off);
	if (ret == -EOPNOTSUPP || (ret == 0 && (mem > JOURNAL_BLOCK ||
						off > JOURNAL_BLOCK)))
		return -EINVAL;
	if (ret < 0)
		return ret;
	agr_dio_alloc(JOURNAL_BLOCK, JOURNAL_BLOCK, &stage);
	j->stage = stage;
	j->tail = malloc(JOURNAL_BLOCK);
	if (!zeros &&
	    agr_dio_alloc(JOURNAL_ZERO_CHUNK, JOURNAL_BLOCK, &zeros) == 0)
		memset(zeros, 0, JOURNAL_ZERO_CHUNK);
	if (!j->stage || !j->tail || !zeros)
		return -ENOMEM;
	zeros_users++;
	j->holds_zeros = true;
	j->stage_cap = JOURNAL_BLOCK;
	j->direct = true;
	ret = read_tail(j);
	if (ret < 0)
		return ret;
	return 0;
}

static void free_direct(struct journal *j)
{
	if (j->holds_zeros && --zeros_users == 0) {
		agr_dio_free(zeros);
		zeros = NULL;
	}
	j->holds_zeros = false;
	agr_dio_free(j->stage);
	free(j->tail);
	j->stage = j->tail = NULL;
	j->direct = false;
}

int journal_open(struct journal *j, const char *path, uint64_t end,
		 enum journal_io io, enum journal_sync sync,
		 agr_scheduler *sched, unsigned worker)
{
	struct stat st;
	int ret;

	*j = (struct journal){ .fd = -1, .offset = end, .sched = sched,
			       .worker = worker,
			       .no_dsync = sync == JOURNAL_SYNC_FDATASYNC };
	batch_reset(&j->batches[0]);
	batch_reset(&j->batches[1]);
	j->filling = &j->batches[0];
	j->filling->id = 1;
	ret = io == JOURNAL_IO_DIRECT ? open_direct(j, path) : -EINVAL;
	if (ret == -EINVAL) { /* buffered asked for, or no O_DIRECT here */
		free_direct(j);
		if (j->fd >= 0)
			close(j->fd);
		j->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		ret = j->fd < 0 ? -errno : 0;
	}
	if (ret == 0 && fstat(j->fd, &st) < 0)
		ret = -errno;
	if (ret == 0 && !(j->path = strdup(path)))
		ret = -ENOMEM;
	if (ret < 0) {
		journal_close(j);
		return ret;
	}
	j->zeroed = (uint64_t)st.st_size;
	atomic_store_explicit(&j->durable_end, end, memory_order_relaxed);
	j->dev = st.st_dev;
	j->ino = st.st_ino;
	return 0;
}

void journal_set_trace(struct journal *j, const struct journal_trace *t)
{
	j->trace = t;
}

void journal_close(struct journal *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	free_direct(j);
	free(j->batches[0].data);
	free(j->batches[1].data);
	j->batches[0].data = j->batches[1].data = NULL;
	free(j->path);
	j->path = NULL;
}

int journal_zeros_after(int fd, uint64_t from, uint64_t size)
{
	char buf[16384];
	size_t i;

	while (from < size) {
		size_t want = size - from < sizeof(buf) ? (size_t)(size - from) :
							  sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)from);

		if (n < 0)
			return -errno;
		if (n == 0)
			return 1; /* shorter than it was: nothing more */
		for (i = 0; i < (size_t)n; i++)
			if (buf[i])
				return 0;
		from += (uint64_t)n;
	}
	return 1;
}
