/* SPDX-License-Identifier: MIT */
/*
 * record_bank.c - check_ledger_record's bank cases: the accounts on a
 * real dispatcher and journal. One account's changes share durable
 * writes, each completion comes only once its record is durable, in
 * order; a forced stop with records waiting for their write still
 * completes every held reply once, failed; and (with fault injection)
 * a failed write shows none of its changes to a later read.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring.h>
#ifdef AGR_FAULT_INJECTION
#include <aggring/fault.h>
#endif

#include "../ledger_accounts.h"
#include "../ledger_record.h"
#include "record_bank.h"
#include "testutil.h"

#define BANK_MSGS 200

struct bank_rig {
	agr_dispatcher *disp;
	struct bank *bank;
	struct bank_completion done;
	char dir[64], path[96];
	struct account_msg *msgs; /* [BANK_MSGS] */
	unsigned order[BANK_MSGS]; /* completion order: message indexes */
	uint64_t events_at[BANK_MSGS]; /* journal events when completed */
	int status[BANK_MSGS];
	unsigned ncompleted;
	struct tu_latch latch;
};

/* On the worker: note the completion and how much was durable then. */
static void bank_done(agr_message *msg, int status, void *arg)
{
	struct bank_rig *g = arg;
	unsigned i = (unsigned)(account_msg_of(msg) - g->msgs);

	TU_EXPECT(g->ncompleted < BANK_MSGS);
	g->order[g->ncompleted++] = i;
	g->events_at[i] = bank_journal(g->bank, 0)->events;
	g->status[i] = status;
	tu_latch_count_down(&g->latch);
}

/* False (and the test should return) where no ring can be had. */
static bool bank_up(struct bank_rig *g)
{
	agr_supplier *sup;
	agr_dispatcher_options o = {
		.name = "bank-test",
		.named_aggregate = { "bank", "Account" },
		.parallelism = 8,
		.owns_supplier = true,
		.on_complete = bank_completed,
	};

	memset(g, 0, sizeof(*g));
	snprintf(g->dir, sizeof(g->dir), "%s/aggring-bank-XXXXXX",
		 access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(g->dir));
	snprintf(g->path, sizeof(g->path), "%s/journal-0.log", g->dir);
	if (agr_supplier_new("bank", 1, &sup) != 0) {
		fprintf(stderr, "SKIP: no io_uring\n");
		rmdir(g->dir);
		return false;
	}
	g->done = (struct bank_completion){ bank_done, g };
	o.supplier = sup;
	o.complete_arg = &g->done;
	ck_assert_int_eq(agr_dispatcher_new(&o, &g->disp), 0);
	g->bank = bank_new(g->disp, accounts_new(8));
	ck_assert_int_eq(journal_open(bank_journal(g->bank, 0), g->path, 0,
				      JOURNAL_IO_BUFFERED, JOURNAL_SYNC_DSYNC,
				      agr_dispatcher_scheduler(g->disp), 0),
			 0);
	ck_assert_int_eq(agr_dispatcher_start(g->disp), 0);
	g->msgs = calloc(BANK_MSGS, sizeof(*g->msgs));
	ck_assert_ptr_nonnull(g->msgs);
	return true;
}

/*
 * Sends msgs[from, to) in one batch (they reach the group together,
 * however loaded the machine) and waits for their completions.
 */
static void bank_send_wait(struct bank_rig *g, unsigned from, unsigned to)
{
	agr_message *batch[BANK_MSGS];
	unsigned i;

	tu_latch_init(&g->latch, (int)(to - from));
	for (i = from; i < to; i++)
		batch[i - from] = &g->msgs[i].msg;
	ck_assert_int_eq(agr_dispatcher_send_batch(g->disp, batch, to - from,
						   NULL),
			 0);
	ck_assert(tu_latch_wait(&g->latch, TU_LONG_NS));
	tu_latch_destroy(&g->latch);
	tu_assert_no_worker_failure();
}

static void bank_down(struct bank_rig *g)
{
	char cmd[128];

	ck_assert_int_eq(agr_dispatcher_stop_gracefully(g->disp, TU_LONG_NS),
			 0);
	agr_dispatcher_free(g->disp);
	bank_free(g->bank);
	free(g->msgs);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * 199 deposits of 1 on one account and a GET, sent at once: completed
 * in order, each only once the journal held its record durably, in far
 * fewer durable writes than events, and the GET saw them all.
 */
START_TEST(one_accounts_changes_share_durable_writes)
{
	struct bank_rig g;
	unsigned i, n = BANK_MSGS - 1;
	const struct journal *j;

	if (!bank_up(&g))
		return;
	for (i = 0; i < n; i++)
		account_msg_init(&g.msgs[i], OP_DEPOSIT, "hot", 3, 1, NULL);
	account_msg_init(&g.msgs[n], OP_GET, "hot", 3, 0, NULL);
	bank_send_wait(&g, 0, n + 1);
	j = bank_journal(g.bank, 0);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(g.order[i], i);
		ck_assert_int_eq(g.status[i], 0);
		ck_assert(!g.msgs[i].journal_failed);
		ck_assert_int_eq(g.msgs[i].steps[0].result, ACCOUNT_CHANGED);
		ck_assert_int_eq(g.msgs[i].steps[0].balance, (long long)i + 1);
		/* Its record, the (i + 1)th, was durable when it completed. */
		ck_assert_uint_ge(g.events_at[i], i + 1);
	}
	ck_assert_uint_eq(g.order[n], n);
	ck_assert_int_eq(g.msgs[n].steps[0].result, ACCOUNT_FOUND);
	ck_assert_int_eq(g.msgs[n].steps[0].balance, (long long)n);
	ck_assert_uint_eq(j->events, n);
	/* A write per event was the old way; here a handful at most. */
	ck_assert_uint_le(j->syncs * 4, n);
	bank_down(&g);
}
END_TEST

/*
 * A string, a transaction with a request id and their retries on one
 * account, sent at once: each applied before the next runs (the GET
 * sees the string, each retry finds its first run, not yet durable)
 * and answered only once durable; retries journal nothing.
 */
START_TEST(strings_and_retries_in_one_batch)
{
	struct account_step txn[2][3];
	struct bank_rig g;
	unsigned i, k;

	if (!bank_up(&g))
		return;
	for (i = 0; i < 2; i++) {
		account_msg_init(&g.msgs[i], OP_SET, "hot", 3, 0, NULL);
		account_step_set_str(&g.msgs[i].one, "abc", 3);
		account_msg_set_reqid(&g.msgs[i], "set-1", 5);
	}
	account_msg_init(&g.msgs[2], OP_GET, "hot", 3, 0, NULL);
	for (i = 0; i < 2; i++) {
		txn[i][0] = (struct account_step){ .op = OP_SET, .amount = 5 };
		txn[i][1] = (struct account_step){ .op = OP_DEPOSIT,
						   .amount = 3 };
		txn[i][2] = (struct account_step){ .op = OP_GET };
		account_msg_init_steps(&g.msgs[3 + i], "hot", 3, txn[i], 3,
				       NULL);
		account_msg_set_reqid(&g.msgs[3 + i], "txn-1", 5);
	}
	account_msg_init(&g.msgs[5], OP_STRLEN, "hot", 3, 0, NULL);
	bank_send_wait(&g, 0, 6);
	for (i = 0; i < 6; i++) {
		ck_assert_uint_eq(g.order[i], i);
		ck_assert(!g.msgs[i].journal_failed);
		ck_assert_uint_ge(g.events_at[i], i < 3 ? 1 : 2);
	}
	ck_assert_int_eq(g.msgs[1].one.result, ACCOUNT_SET);
	ck_assert_int_eq(g.msgs[2].one.result, ACCOUNT_FOUND);
	ck_assert_uint_eq(g.msgs[2].one.str_len, 3);
	ck_assert_int_eq(memcmp(g.msgs[2].one.str, "abc", 3), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(g.msgs[3 + i].txn_outcome, TXN_RAN);
		ck_assert_int_eq(txn[i][0].result, ACCOUNT_SET);
		ck_assert_int_eq(txn[i][1].result, ACCOUNT_CHANGED);
		ck_assert_int_eq(txn[i][1].balance, 8);
		ck_assert_int_eq(txn[i][2].result, ACCOUNT_FOUND);
		ck_assert_int_eq(txn[i][2].balance, 8);
		ck_assert_ptr_null(txn[i][2].str);
	}
	ck_assert_int_eq(g.msgs[5].one.balance, 1); /* "8" */
	ck_assert_uint_eq(bank_journal(g.bank, 0)->events, 2);
	for (i = 0; i < 6; i++)
		account_steps_free(&g.msgs[i].one, 1);
	for (k = 0; k < 2; k++)
		account_steps_free(txn[k], 3);
	bank_down(&g);
}
END_TEST

/* ---- a forced stop while records wait for their write ---- */

/*
 * Where the worker is held, so that the stop comes at a chosen point:
 * after the first batch's write completed and before its waiters are
 * told (completed), and in the completion of the message `get`.
 */
static struct held {
	struct bank_rig *g;
	unsigned get;
	struct tu_latch issued, written, resume, in_get, go_on;
	bool once;
} held;

static void held_issued(void *arg, enum journal_stream s, const void *p,
			size_t len, uint64_t at, bool dsync)
{
	(void)arg, (void)p, (void)len, (void)at, (void)dsync;
	if (s == JOURNAL_STREAM_BATCH && tu_latch_count(&held.issued) > 0)
		tu_latch_count_down(&held.issued);
}

static void held_completed(void *arg, enum journal_stream s, int res)
{
	(void)arg, (void)res;
	if (s != JOURNAL_STREAM_BATCH || held.once)
		return;
	held.once = true;
	tu_latch_count_down(&held.written);
	TU_EXPECT(tu_latch_wait(&held.resume, TU_LONG_NS));
}

static void held_done(agr_message *msg, int status, void *arg)
{
	bank_done(msg, status, arg);
	if (account_msg_of(msg) != &held.g->msgs[held.get])
		return;
	tu_latch_count_down(&held.in_get);
	TU_EXPECT(tu_latch_wait(&held.go_on, TU_LONG_NS));
}

/*
 * The journal writes into a full pipe from now on: its write stays in
 * flight until the pipe is read. Returns the read end.
 */
static int journal_onto_full_pipe(struct journal *j)
{
	char buf[4096] = { 0 };
	int p[2], flags;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	while (write(p[1], buf, sizeof(buf)) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	flags = fcntl(p[1], F_GETFL);
	ck_assert_int_eq(fcntl(p[1], F_SETFL, flags & ~O_NONBLOCK), 0);
	ck_assert_int_ge(dup3(p[1], j->fd, O_CLOEXEC), 0);
	close(p[1]);
	return p[0];
}

/* Reads the pipe empty (the read end is non-blocking). */
static void drain(int rd)
{
	char buf[4096];

	while (read(rd, buf, sizeof(buf)) > 0)
		;
}

/* Waits until every handler of n messages has returned (replies held). */
static void wait_handled(agr_dispatcher *d, uint64_t n)
{
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;
	agr_dispatcher_stats st;

	for (;;) {
		ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
		if (st.handled >= n)
			return;
		ck_assert_uint_lt(tu_now_ns(), deadline);
		usleep(1000); /* polling a counter, not synchronising */
	}
}

#define HELD_MSGS 20

/*
 * n deposits on one account, msgs[0]'s write in flight into a full
 * pipe (returned: its read end) and the others gathered behind it,
 * every reply held; msgs[n] is a GET of another account, not sent.
 */
static int held_up(struct bank_rig *g, unsigned n)
{
	static const struct journal_trace trace = { held_issued,
						    held_completed, NULL };
	unsigned i;
	int rd;

	held = (struct held){ .g = g, .get = n };
	tu_latch_init(&held.issued, 1);
	tu_latch_init(&held.written, 1);
	tu_latch_init(&held.resume, 1);
	tu_latch_init(&held.in_get, 1);
	tu_latch_init(&held.go_on, 1);
	g->done.fn = held_done;
	rd = journal_onto_full_pipe(bank_journal(g->bank, 0));
	journal_set_trace(bank_journal(g->bank, 0), &trace);
	for (i = 0; i < n; i++)
		account_msg_init(&g->msgs[i], OP_DEPOSIT, "hot", 3, 1, NULL);
	account_msg_init(&g->msgs[n], OP_GET, "cold", 4, 0, NULL);
	ck_assert_int_eq(agr_dispatcher_send(g->disp, &g->msgs[0].msg), 0);
	ck_assert(tu_latch_wait(&held.issued, TU_LONG_NS));
	for (i = 1; i < n; i++)
		ck_assert_int_eq(agr_dispatcher_send(g->disp, &g->msgs[i].msg),
				 0);
	wait_handled(g->disp, n);
	ck_assert_uint_eq(g->ncompleted, 0);
	return rd;
}

/*
 * After the forced stop: waits for `n` completions, frees the bank,
 * and checks that each message completed exactly once (the messages
 * stay for the test to read; held_free() frees them).
 */
static void held_down(struct bank_rig *g, int rd, unsigned n)
{
	unsigned i, seen[HELD_MSGS + 1] = { 0 };

	ck_assert(tu_latch_wait(&g->latch, TU_LONG_NS));
	agr_dispatcher_free(g->disp);
	bank_free(g->bank);
	tu_assert_no_worker_failure();
	ck_assert_uint_eq(g->ncompleted, n); /* none twice, none more */
	for (i = 0; i < n; i++)
		seen[g->order[i]]++;
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(seen[i], 1);
	tu_latch_destroy(&held.issued);
	tu_latch_destroy(&held.written);
	tu_latch_destroy(&held.resume);
	tu_latch_destroy(&held.in_get);
	tu_latch_destroy(&held.go_on);
	tu_latch_destroy(&g->latch);
	close(rd);
}

/* Once the test has read the messages. */
static void held_free(struct bank_rig *g)
{
	char cmd[128];

	free(g->msgs);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/*
 * A forced stop while a write is in flight: it is cancelled, and every
 * held reply completes exactly once, failed (journal_failed), the one
 * of the batch in flight and those gathered behind it.
 */
START_TEST(forced_stop_fails_replies_in_flight)
{
	struct bank_rig g;
	unsigned i, n = HELD_MSGS;
	int rd;

	if (!bank_up(&g))
		return;
	tu_latch_init(&g.latch, (int)n);
	rd = held_up(&g, n);
	held.once = true; /* the write's completion is not held */
	ck_assert_int_eq(agr_dispatcher_force_stop(g.disp), 0);
	held_down(&g, rd, n);
	for (i = 0; i < n; i++)
		ck_assert(g.msgs[i].journal_failed);
	held_free(&g);
}
END_TEST

/*
 * The batch in flight becomes durable, the next one is queued to start,
 * and a forced stop comes first: the kick that would start it is
 * dropped, yet every held reply still completes exactly once, the
 * first durably and the rest failed, and nothing leaks.
 */
START_TEST(forced_stop_fails_replies_not_started)
{
	struct bank_rig g;
	unsigned i, n = HELD_MSGS;
	int rd;

	if (!bank_up(&g))
		return;
	tu_latch_init(&g.latch, (int)n + 1);
	rd = held_up(&g, n);
	/* The write completes; the worker waits before telling anyone. */
	drain(rd);
	ck_assert(tu_latch_wait(&held.written, TU_LONG_NS));
	/* The GET's run is queued ahead of the next batch's start... */
	ck_assert_int_eq(agr_dispatcher_send(g.disp, &g.msgs[n].msg), 0);
	tu_latch_count_down(&held.resume);
	/* ...and the stop comes while it completes. */
	ck_assert(tu_latch_wait(&held.in_get, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_force_stop(g.disp), 0);
	tu_latch_count_down(&held.go_on);
	held_down(&g, rd, n + 1);
	ck_assert(!g.msgs[0].journal_failed); /* durable before the stop */
	for (i = 1; i < n; i++)
		ck_assert(g.msgs[i].journal_failed);
	ck_assert_int_eq(g.msgs[n].steps[0].result, ACCOUNT_MISSING);
	held_free(&g);
}
END_TEST

#ifdef AGR_FAULT_INJECTION
/*
 * A deposit whose write fails: it fails, and so do a GET of that
 * account and a later deposit to it; an account the failed batch did
 * not touch is read as it was durably.
 */
START_TEST(a_failed_write_shows_nothing_it_held)
{
	struct bank_rig g;

	if (!bank_up(&g))
		return;
	account_msg_init(&g.msgs[0], OP_DEPOSIT, "a", 1, 5, NULL);
	account_msg_init(&g.msgs[1], OP_DEPOSIT, "b", 1, 9, NULL);
	bank_send_wait(&g, 0, 2);
	ck_assert(!g.msgs[0].journal_failed && !g.msgs[1].journal_failed);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -EIO, 0, 1), 0);
	account_msg_init(&g.msgs[2], OP_DEPOSIT, "a", 1, 7, NULL);
	bank_send_wait(&g, 2, 3);
	agr_fault_reset();
	ck_assert(g.msgs[2].journal_failed);
	account_msg_init(&g.msgs[3], OP_GET, "a", 1, 0, NULL);
	account_msg_init(&g.msgs[4], OP_GET, "b", 1, 0, NULL);
	account_msg_init(&g.msgs[5], OP_DEPOSIT, "b", 1, 1, NULL);
	bank_send_wait(&g, 3, 6);
	/* Not 12 (never durable), not 5 (no longer what memory holds). */
	ck_assert(g.msgs[3].journal_failed);
	ck_assert(!g.msgs[4].journal_failed);
	ck_assert_int_eq(g.msgs[4].steps[0].result, ACCOUNT_FOUND);
	ck_assert_int_eq(g.msgs[4].steps[0].balance, 9);
	ck_assert(g.msgs[5].journal_failed); /* the journal is dead */
	bank_down(&g);
}
END_TEST
#endif

TCase *bank_tcase(void)
{
	TCase *tc = tcase_create("bank");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, one_accounts_changes_share_durable_writes);
	tcase_add_test(tc, strings_and_retries_in_one_batch);
	tcase_add_test(tc, forced_stop_fails_replies_in_flight);
	tcase_add_test(tc, forced_stop_fails_replies_not_started);
#ifdef AGR_FAULT_INJECTION
	tcase_add_test(tc, a_failed_write_shows_nothing_it_held);
#endif
	return tc;
}
