/* SPDX-License-Identifier: MIT */
/*
 * check_ledger_journal.c - ledger_server's journal (examples/
 * ledger_journal.c) on its own: in both I/O modes and both ways to make
 * a batch durable, records land in order and whole, in one batch or
 * many, across block boundaries and across a reopen; the direct mode
 * writes zeros ahead of them; and, with --enable-fault-injection, a
 * short write is finished, a failed write fails its batch and every
 * later append, a failed zero fill costs nothing but speed, and direct
 * writes refused after an O_DIRECT open fall back to the page cache.
 *
 * Appends and durable callbacks run on the journal's worker; they are
 * recorded there and asserted on the test thread after a latch.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring.h>
#ifdef AGR_FAULT_INJECTION
#include <aggring/fault.h>
#endif

#include "../ledger_journal.h"
#include "testutil.h"

#define MAX_RECORDS 512	 /* in one append task */
#define MAX_EXPECTED 65536 /* in one journal */
#define RECORD_LEN 40 /* bytes, newline included */

/* ---- a journal on worker 0 of its own scheduler ---- */

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
	struct journal j;
	char dir[PATH_MAX], path[PATH_MAX + 32];
	char *expected; /* every record appended, in order */
	size_t expected_len;
};

/* On a disk when it can: tmpfs may refuse O_DIRECT. */
static const char *tmp_root(void)
{
	const char *dir = getenv("TMPDIR");

	if (dir && *dir)
		return dir;
	return access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
}

/* A supplier with one worker: the journal's. */
static void start_worker(struct rig *g)
{
	agr_named_aggregate named = { "bank", "Journal" };

	ck_assert_int_eq(agr_supplier_new("journal", 1, &g->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &named, &g->s), 0);
}

static void rig_up(struct rig *g)
{
	int n;

	memset(g, 0, sizeof(*g));
	n = snprintf(g->dir, sizeof(g->dir), "%s/aggring-journal-XXXXXX",
		     tmp_root());
	ck_assert(n > 0 && (size_t)n < sizeof(g->dir));
	ck_assert_ptr_nonnull(mkdtemp(g->dir));
	n = snprintf(g->path, sizeof(g->path), "%s/journal-0.log", g->dir);
	ck_assert(n > 0 && (size_t)n < sizeof(g->path));
	start_worker(g);
	g->expected = calloc(MAX_EXPECTED, RECORD_LEN);
	ck_assert_ptr_nonnull(g->expected);
}

static void open_journal(struct rig *g, uint64_t end, enum journal_io io,
			 enum journal_sync sync)
{
	ck_assert_int_eq(journal_open(&g->j, g->path, end, io, sync, g->s, 0),
			 0);
}

/*
 * Stops the worker (a graceful stop waits for a zero fill still in
 * flight), then closes the journal, as ledger_server does.
 */
static void stop_and_close(struct rig *g)
{
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
	g->sup = NULL;
	journal_close(&g->j);
}

static void rig_down(struct rig *g);

/*
 * Opens the journal for direct I/O; false (and the rig is down) where
 * the file system refuses O_DIRECT, for a test about the direct mode.
 */
static bool open_direct_or_skip(struct rig *g)
{
	open_journal(g, 0, JOURNAL_IO_DIRECT, JOURNAL_SYNC_DSYNC);
	if (g->j.direct)
		return true;
	fprintf(stderr, "SKIP: %s refuses O_DIRECT\n", g->dir);
	rig_down(g);
	return false;
}

static void rig_down(struct rig *g)
{
	char cmd[PATH_MAX + 32];

	if (g->sup)
		stop_and_close(g);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->dir);
	ck_assert_int_eq(system(cmd), 0);
	free(g->expected);
}

/* ---- appending on the worker ---- */

struct wait {
	struct commit_wait w; /* first: the callback's argument */
	struct tu_latch *done;
	int status;
	atomic_int calls;
};

struct append {
	struct rig *g;
	struct wait *waits;
	unsigned first, n; /* record numbers */
	int ret;	   /* the first failed journal_append's */
	struct tu_latch appended, durable;
};

static void durable(struct commit_wait *cw, int status)
{
	struct wait *w = (struct wait *)(void *)cw;

	w->status = status;
	atomic_fetch_add(&w->calls, 1);
	tu_latch_count_down(w->done);
}

/* Record k: fixed length, its number in it, so any misplacement shows. */
static void record(char *buf, unsigned k)
{
	snprintf(buf, RECORD_LEN + 1, "acct:%06u +%026u\n", k, k);
}

static void append_task(void *arg)
{
	struct append *a = arg;
	char rec[RECORD_LEN + 1];
	unsigned i;
	int ret;

	for (i = 0; i < a->n; i++) {
		struct wait *w = &a->waits[i];

		record(rec, a->first + i);
		w->w.durable = durable;
		w->done = &a->durable;
		ret = journal_append(&a->g->j, rec, RECORD_LEN, &w->w);
		if (ret < 0) {
			if (a->ret == 0)
				a->ret = ret;
			tu_latch_count_down(&a->durable); /* never called */
		}
	}
	tu_latch_count_down(&a->appended);
}

/*
 * Appends records first..first+n-1 in one task (so one batch, or two
 * when a write is in flight) and waits until each has been told. Returns
 * the first journal_append() error, or 0; `status` gets each record's.
 */
static int append_and_wait(struct rig *g, unsigned first, unsigned n,
			   int *status)
{
	struct append a = { .g = g, .first = first, .n = n };
	unsigned i;

	a.waits = calloc(n, sizeof(*a.waits));
	ck_assert_ptr_nonnull(a.waits);
	tu_latch_init(&a.appended, 1);
	tu_latch_init(&a.durable, (int)n);
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, append_task, &a), 0);
	ck_assert(tu_latch_wait(&a.appended, TU_LONG_NS));
	ck_assert(tu_latch_wait(&a.durable, TU_LONG_NS));
	tu_assert_no_worker_failure();
	for (i = 0; i < n; i++) {
		ck_assert_int_le(atomic_load(&a.waits[i].calls), 1);
		status[i] = atomic_load(&a.waits[i].calls) ?
				    a.waits[i].status : 1;
		if (status[i] == 0)
			record(g->expected + g->expected_len +
				       (size_t)i * RECORD_LEN,
			       first + i);
	}
	for (i = 0; i < n && status[i] == 0; i++)
		;
	g->expected_len += (size_t)i * RECORD_LEN;
	tu_latch_destroy(&a.appended);
	tu_latch_destroy(&a.durable);
	free(a.waits);
	return a.ret;
}

/* Appends and expects every record durable. */
static void append_ok(struct rig *g, unsigned first, unsigned n)
{
	int status[MAX_RECORDS];
	unsigned i;

	ck_assert_uint_le(n, MAX_RECORDS);
	ck_assert_uint_le(g->expected_len / RECORD_LEN + n, MAX_EXPECTED);
	ck_assert_int_eq(append_and_wait(g, first, n, status), 0);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(status[i], 0);
}

/*
 * The file holds exactly the expected records, then zeros (direct) or
 * nothing; returns its size.
 */
static off_t assert_file(const struct rig *g, bool direct)
{
	int fd = open(g->path, O_RDONLY | O_CLOEXEC);
	char *buf = malloc(g->expected_len + 1);
	struct stat st;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(pread(fd, buf, g->expected_len, 0),
			 (ssize_t)g->expected_len);
	ck_assert(memcmp(buf, g->expected, g->expected_len) == 0);
	if (direct)
		ck_assert_int_eq(journal_zeros_after(fd, g->expected_len,
						     (uint64_t)st.st_size),
				 1);
	else
		ck_assert_int_eq(st.st_size, (off_t)g->expected_len);
	free(buf);
	close(fd);
	return st.st_size;
}

/* ---- both modes, both syncs ---- */

static const enum journal_io ios[] = { JOURNAL_IO_DIRECT,
				       JOURNAL_IO_BUFFERED };
static const enum journal_sync syncs[] = { JOURNAL_SYNC_DSYNC,
					   JOURNAL_SYNC_FDATASYNC };

/* _i: 0..3, the I/O mode and the sync of this run. */
#define IO_OF(i) ios[(i) / 2]
#define SYNC_OF(i) syncs[(i) % 2]

START_TEST(records_land_in_order)
{
	struct rig g;
	bool direct;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	direct = g.j.direct;
	if (IO_OF(_i) == JOURNAL_IO_BUFFERED)
		ck_assert(!direct);
	append_ok(&g, 0, 3);
	append_ok(&g, 3, 1);
	append_ok(&g, 4, 200); /* past the first block */
	ck_assert_uint_eq(g.j.events, 204);
	ck_assert_uint_eq(g.j.syncs, 3);
	ck_assert_uint_eq(g.j.bytes, g.expected_len);
	ck_assert_uint_eq(g.j.offset, g.expected_len);
	stop_and_close(&g);
	if (direct)
		ck_assert_int_ge(assert_file(&g, true), JOURNAL_ZERO_CHUNK);
	else
		assert_file(&g, false);
	rig_down(&g);
}
END_TEST

/* Many small batches: the shared block is rewritten each time. */
START_TEST(batches_share_blocks)
{
	struct rig g;
	bool direct;
	unsigned k;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	direct = g.j.direct;
	for (k = 0; k < 300; k += 3)
		append_ok(&g, k, 3); /* 120 bytes: 34 batches a block */
	ck_assert_uint_eq(g.j.syncs, 100);
	stop_and_close(&g);
	assert_file(&g, direct);
	rig_down(&g);
}
END_TEST

/*
 * A reopen writes right after the records it is given, in either mode,
 * whatever mode wrote them: the direct mode reads back the partial
 * block it must write again, the buffered one overwrites the zeros.
 */
START_TEST(reopen_continues_after_the_records)
{
	enum journal_io first = IO_OF(_i), second = IO_OF(3 - _i);
	bool direct_once = false;
	struct rig g;

	rig_up(&g);
	open_journal(&g, 0, first, SYNC_OF(_i));
	direct_once |= g.j.direct;
	append_ok(&g, 0, 7); /* 280 bytes: a partial block */
	stop_and_close(&g);

	start_worker(&g);
	open_journal(&g, g.expected_len, second, SYNC_OF(_i));
	direct_once |= g.j.direct;
	append_ok(&g, 7, 150); /* into the next block */
	stop_and_close(&g);

	start_worker(&g);
	open_journal(&g, g.expected_len, first, SYNC_OF(_i));
	append_ok(&g, 157, 1);
	stop_and_close(&g);
	assert_file(&g, direct_once);
	rig_down(&g);
}
END_TEST

/* The direct mode writes zeros ahead, and more once they run short. */
START_TEST(zeros_are_written_ahead)
{
	unsigned per_task = MAX_RECORDS, k, n;
	struct rig g;
	off_t size;

	rig_up(&g);
	if (!open_direct_or_skip(&g))
		return;
	append_ok(&g, 0, 1);
	ck_assert_uint_eq(g.j.zero_fills, 1);
	ck_assert_uint_eq(g.j.zeroed, JOURNAL_ZERO_CHUNK);
	/* Past half a chunk of records. */
	n = JOURNAL_ZERO_CHUNK / 2 / RECORD_LEN + 2 * per_task;
	for (k = 1; k < n; k += per_task)
		append_ok(&g, k, per_task);
	stop_and_close(&g);
	size = assert_file(&g, true);
	ck_assert_int_ge(size, 2 * JOURNAL_ZERO_CHUNK);
	rig_down(&g);
}
END_TEST

/*
 * With a budget, a chunk is an eighth of it: 1 MiB of bytes (_i 0), or
 * 40,960 events at the 40 bytes a record this journal writes (_i 1),
 * which it knows only after its first batch; and the zeros ahead stay
 * under one and a half chunks.
 */
START_TEST(zeros_ahead_follow_the_budget)
{
	uint64_t first = _i ? JOURNAL_ZERO_MIN : 131072;
	uint64_t chunk = _i ? 204800 : 131072;
	unsigned k;
	struct rig g;

	rig_up(&g);
	if (!open_direct_or_skip(&g))
		return;
	journal_set_zero_budget(&g.j, _i ? 0 : 1u << 20, _i ? 40960 : 0);
	append_ok(&g, 0, 1);
	ck_assert_uint_eq(g.j.zeroed, first);
	for (k = 1; k < 50 * MAX_RECORDS; k += MAX_RECORDS - 1)
		append_ok(&g, k, MAX_RECORDS - 1);
	stop_and_close(&g);
	ck_assert_uint_eq((uint64_t)assert_file(&g, true), g.j.zeroed);
	ck_assert_uint_gt(g.j.zero_fills, 5);
	ck_assert_uint_eq((g.j.zeroed - first) % chunk, 0);
	ck_assert_uint_lt(g.j.zeroed - g.j.offset, chunk * 3 / 2);
	rig_down(&g);
}
END_TEST

/* ---- waiting for a batch (journal_wait) ---- */

/*
 * What a worker saw, in order: 'r' a record told durable, 'w' a wait
 * told, 'n' a wait that returned "durable already"; with the status of
 * each told one.
 */
struct order {
	struct rig *g;
	struct commit_wait rec[2], wait[2];
	char seen[8];
	int status[8];
	unsigned nseen;
	uint64_t id;	  /* the batch of rec[0] */
	int ret[3];	  /* journal_wait's */
	struct tu_latch step, told;
};

static void order_note(struct order *o, char c, int status)
{
	if (o->nseen < sizeof(o->seen) - 1) {
		o->status[o->nseen] = status;
		o->seen[o->nseen++] = c;
	}
}

static struct order *order_of_rec(struct commit_wait *w, unsigned i)
{
	return (struct order *)(void *)((char *)(w - i) -
					offsetof(struct order, rec));
}

static void rec0_durable(struct commit_wait *w, int status)
{
	struct order *o = order_of_rec(w, 0);

	order_note(o, 'r', status);
	tu_latch_count_down(&o->told);
}

static void rec1_durable(struct commit_wait *w, int status)
{
	struct order *o = order_of_rec(w, 1);

	order_note(o, 'R', status);
	tu_latch_count_down(&o->told);
}

static struct order *order_of_wait(struct commit_wait *w, unsigned i)
{
	return (struct order *)(void *)((char *)(w - i) -
					offsetof(struct order, wait));
}

static void wait0_told(struct commit_wait *w, int status)
{
	struct order *o = order_of_wait(w, 0);

	order_note(o, 'w', status);
	tu_latch_count_down(&o->told);
}

static void wait1_told(struct commit_wait *w, int status)
{
	struct order *o = order_of_wait(w, 1);

	order_note(o, 'W', status);
	tu_latch_count_down(&o->told);
}

/* A wait whose batch is durable already counts as told at once. */
static void order_wait(struct order *o, unsigned i, int *ret)
{
	*ret = journal_wait(&o->g->j, o->id, &o->wait[i]);
	if (*ret != 0) {
		order_note(o, i ? 'N' : 'n', *ret == 1 ? 0 : *ret);
		tu_latch_count_down(&o->told);
	}
}

/* In one task: record 0, a wait for its batch (joins it). */
static void order_first(void *arg)
{
	struct order *o = arg;
	char rec[RECORD_LEN + 1];

	record(rec, 0);
	o->rec[0].durable = rec0_durable;
	o->rec[1].durable = rec1_durable;
	o->wait[0].durable = wait0_told;
	o->wait[1].durable = wait1_told;
	o->ret[0] = journal_wait(&o->g->j, 0, &o->wait[0]); /* nothing */
	if (journal_append(&o->g->j, rec, RECORD_LEN, &o->rec[0]) < 0)
		o->ret[0] = -1;
	o->id = journal_batch_id(&o->g->j);
	order_wait(o, 0, &o->ret[1]);
	tu_latch_count_down(&o->step);
}

/*
 * In a later task: a wait for the same batch, which is still gathering,
 * in flight or durable by now, then record 1.
 */
static void order_second(void *arg)
{
	struct order *o = arg;
	char rec[RECORD_LEN + 1];

	order_wait(o, 1, &o->ret[2]);
	record(rec, 1);
	if (journal_append(&o->g->j, rec, RECORD_LEN, &o->rec[1]) < 0)
		o->ret[0] = -1;
	tu_latch_count_down(&o->step);
}

static void order_run(struct rig *g, struct order *o)
{
	memset(o, 0, sizeof(*o));
	o->g = g;
	tu_latch_init(&o->step, 2);
	tu_latch_init(&o->told, 4);
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, order_first, o), 0);
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, order_second, o), 0);
	ck_assert(tu_latch_wait(&o->step, TU_LONG_NS));
	ck_assert(tu_latch_wait(&o->told, TU_LONG_NS));
	tu_assert_no_worker_failure();
	tu_latch_destroy(&o->step);
	tu_latch_destroy(&o->told);
}

/*
 * A wait is told once its batch is durable, after the batch's records
 * and before any later one's; a wait for a batch durable already, or
 * for none (id 0), returns 1.
 */
START_TEST(a_wait_is_told_after_its_batch)
{
	struct order o;
	struct rig g;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	order_run(&g, &o);
	ck_assert_int_eq(o.ret[0], 1);
	ck_assert_int_eq(o.ret[1], 0); /* the batch was still gathering */
	ck_assert_uint_eq(o.id, 1);
	/* r, w in that order; W (told) or N (durable already) after r. */
	ck_assert_uint_eq(o.nseen, 4);
	ck_assert_int_eq(o.seen[0], 'r');
	ck_assert_int_eq(o.seen[1], 'w');
	if (o.ret[2] == 0)
		ck_assert_int_eq(o.seen[2], 'W');
	else
		ck_assert(o.ret[2] == 1 && o.seen[2] == 'N');
	ck_assert_int_eq(o.seen[3], 'R');
	ck_assert_int_eq(o.status[0] | o.status[1] | o.status[2] | o.status[3],
			 0);
	/* Record 1 joined batch 1 (still gathering) or batch 2. */
	ck_assert_uint_eq(g.j.durable_id, g.j.syncs);
	ck_assert_uint_le(g.j.durable_id, 2);
	stop_and_close(&g);
	rig_down(&g);
}
END_TEST

#ifdef AGR_FAULT_INJECTION

/* A write that comes back short is finished, not failed. */
START_TEST(a_short_write_is_finished)
{
	struct rig g;
	bool direct;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	direct = g.j.direct;
	append_ok(&g, 0, 1); /* the zeros, if direct, are written now */
	/* 200 records: 8000 bytes, two blocks; the write returns one. */
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_SHORT,
				       direct ? (int)JOURNAL_BLOCK : 1000, 0,
				       1),
			 0);
	append_ok(&g, 1, 200);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_SHORT), 1);
	agr_fault_reset();
	append_ok(&g, 201, 2);
	stop_and_close(&g);
	assert_file(&g, direct);
	rig_down(&g);
}
END_TEST

/* A failed write fails its batch and every append after it. */
START_TEST(a_failed_write_fails_for_good)
{
	char buf[2 * RECORD_LEN];
	int status[3], ret, fd;
	struct rig g;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	append_ok(&g, 0, 2);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -EIO, 0, 1), 0);
	ret = append_and_wait(&g, 2, 3, status);
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(status[0], -EIO);
	ck_assert_int_eq(status[1], -EIO);
	ck_assert_int_eq(status[2], -EIO);
	agr_fault_reset();
	ck_assert_int_eq(append_and_wait(&g, 5, 1, status), -EIO);
	ck_assert_int_eq(status[0], 1); /* never called */
	ck_assert_int_eq(g.j.error, -EIO);
	stop_and_close(&g);
	/*
	 * What was acknowledged is there. The failed batch may be too (the
	 * fault hid a write that happened), never acknowledged.
	 */
	ck_assert_uint_eq(g.expected_len, 2 * RECORD_LEN);
	fd = open(g.path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert(memcmp(buf, g.expected, sizeof(buf)) == 0);
	close(fd);
	rig_down(&g);
}
END_TEST

/*
 * A failed batch: its waits are told the error, a later wait for it
 * gets the error at once, one for a batch durable before returns 1.
 */
static void wait_failed_task(void *arg)
{
	struct order *o = arg;

	o->ret[2] = journal_wait(&o->g->j, o->id - 1, &o->wait[1]);
	o->ret[0] = journal_wait(&o->g->j, o->id, &o->wait[1]);
	tu_latch_count_down(&o->step);
}

START_TEST(a_wait_for_a_failed_batch_fails)
{
	struct order o;
	struct rig g;

	rig_up(&g);
	open_journal(&g, 0, IO_OF(_i), SYNC_OF(_i));
	append_ok(&g, 0, 1); /* batch 1 durable (and the zeros, if direct) */
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -EIO, 0, 1), 0);
	memset(&o, 0, sizeof(o));
	o.g = &g;
	tu_latch_init(&o.step, 1);
	tu_latch_init(&o.told, 2);
	ck_assert_int_eq(agr_scheduler_schedule(g.s, 0, order_first, &o), 0);
	ck_assert(tu_latch_wait(&o.told, TU_LONG_NS));
	ck_assert(tu_latch_wait(&o.step, TU_LONG_NS));
	agr_fault_reset();
	ck_assert_uint_eq(o.id, 2);
	ck_assert_int_eq(o.ret[1], 0);
	ck_assert_uint_eq(o.nseen, 2);
	ck_assert(o.seen[0] == 'r' && o.status[0] == -EIO);
	ck_assert(o.seen[1] == 'w' && o.status[1] == -EIO);
	tu_latch_destroy(&o.step);
	tu_latch_init(&o.step, 1);
	ck_assert_int_eq(agr_scheduler_schedule(g.s, 0, wait_failed_task, &o),
			 0);
	ck_assert(tu_latch_wait(&o.step, TU_LONG_NS));
	ck_assert_int_eq(o.ret[2], 1);
	ck_assert_int_eq(o.ret[0], -EIO);
	tu_latch_destroy(&o.step);
	tu_latch_destroy(&o.told);
	stop_and_close(&g);
	rig_down(&g);
}
END_TEST

/* A zero fill that fails: batches extend the file themselves. */
START_TEST(a_failed_zero_fill_costs_only_speed)
{
	struct rig g;

	rig_up(&g);
	if (!open_direct_or_skip(&g))
		return;
	/* The first completion is the zero fill's write. */
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -ENOSPC, 0, 1),
			 0);
	append_ok(&g, 0, 3);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_RESULT), 1);
	agr_fault_reset();
	ck_assert_uint_eq(g.j.zero_fills, 0);
	ck_assert_int_eq(g.j.error, 0);
	/* It failed before any record: no retry before a chunk of them. */
	ck_assert_uint_eq(g.j.zero_retry_at, JOURNAL_ZERO_CHUNK);
	append_ok(&g, 3, 120);
	ck_assert_uint_eq(g.j.zero_fills, 0);
	stop_and_close(&g);
	/* (The fault hid a write that happened: the zeros are there.) */
	assert_file(&g, true);
	rig_down(&g);
}
END_TEST

/*
 * A file system that takes O_DIRECT at open but refuses the writes: the
 * first batch goes on through the page cache, and so does the rest.
 */
START_TEST(refused_direct_writes_fall_back_to_the_page_cache)
{
	struct rig g;

	rig_up(&g);
	if (!open_direct_or_skip(&g))
		return;
	/* Past the zero fill's write and fdatasync: the batch, twice. */
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -EINVAL, 2, 2),
			 0);
	append_ok(&g, 0, 3);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_RESULT), 2);
	agr_fault_reset();
	ck_assert(!g.j.direct);
	ck_assert(g.j.no_dsync);
	append_ok(&g, 3, 150);
	stop_and_close(&g);
	assert_file(&g, true); /* the zeros written ahead stay */
	rig_down(&g);
}
END_TEST

#endif /* AGR_FAULT_INJECTION */

static Suite *journal_suite(void)
{
	Suite *s = suite_create("ledger_journal");
	TCase *tc = tcase_create("journal");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, records_land_in_order, 0, 4);
	tcase_add_loop_test(tc, batches_share_blocks, 0, 4);
	tcase_add_loop_test(tc, reopen_continues_after_the_records, 0, 4);
	tcase_add_test(tc, zeros_are_written_ahead);
	tcase_add_loop_test(tc, zeros_ahead_follow_the_budget, 0, 2);
	tcase_add_loop_test(tc, a_wait_is_told_after_its_batch, 0, 4);
#ifdef AGR_FAULT_INJECTION
	tcase_add_loop_test(tc, a_wait_for_a_failed_batch_fails, 0, 4);
	tcase_add_loop_test(tc, a_short_write_is_finished, 0, 4);
	tcase_add_loop_test(tc, a_failed_write_fails_for_good, 0, 4);
	tcase_add_test(tc, a_failed_zero_fill_costs_only_speed);
	tcase_add_test(tc, refused_direct_writes_fall_back_to_the_page_cache);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(journal_suite());
}
