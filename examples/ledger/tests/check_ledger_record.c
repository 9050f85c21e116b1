/* SPDX-License-Identifier: MIT */
/*
 * check_ledger_record.c - ledger_server's journal records and account
 * tables on their own (examples/ledger_record.c, ledger_accounts.c):
 * every kind of record (a delta, "+0", a close, a string, a request
 * id, a transaction's results, a transfer's debit, credit and refund,
 * a client's transfer id) encodes and parses back; a
 * changed byte, a bad CRC or a malformed tag is refused; and the
 * tables, under random deltas and closes, hold exactly what a simple
 * model holds (closing uses backward-shift deletion, whose mistakes
 * would lose or duplicate accounts). The bank on a real journal: one
 * account's changes share durable writes, each completion comes only
 * once its record is durable, in order, a forced stop with records
 * waiting for their write still completes every held reply once,
 * failed, and (with fault injection) a failed write shows none of its
 * changes to a later read.
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
#include "testutil.h"

static struct record make(enum record_kind kind, const char *key,
			  long long delta, char reply, const char *id,
			  const char *peer)
{
	struct record r = { .kind = kind, .delta = delta, .reply = reply };

	snprintf(r.key, sizeof(r.key), "%s", key);
	snprintf(r.reqid, sizeof(r.reqid), "%s", id);
	snprintf(r.peer, sizeof(r.peer), "%s", peer);
	return r;
}

static void round_trip(const struct record *in, const char *want_body)
{
	char line[RECORD_MAX];
	struct record out;
	size_t n = record_encode(line, in);

	ck_assert_uint_le(n, RECORD_MAX);
	ck_assert_int_eq(line[n - 1], '\n');
	ck_assert_int_eq(strncmp(line, want_body, strlen(want_body)), 0);
	ck_assert_uint_eq(n, strlen(want_body) + 10); /* " CRC\n" */
	ck_assert(record_parse(line, n, &out));
	ck_assert_int_eq(out.kind, in->kind);
	ck_assert_str_eq(out.key, in->key);
	ck_assert_str_eq(out.reqid, in->reqid);
	if (in->kind == RECORD_DELTA)
		ck_assert_int_eq(out.delta, in->delta);
	if (in->reqid[0])
		ck_assert_int_eq(out.reply, in->reply);
	if (in->reply == 'd' || in->reply == 't')
		ck_assert_str_eq(out.peer, in->peer);
}

START_TEST(every_kind_round_trips)
{
	struct record r;

	r = make(RECORD_DELTA, "alice", 100, 0, "", "");
	round_trip(&r, "alice +100");
	r = make(RECORD_DELTA, "alice", -7, 0, "", "");
	round_trip(&r, "alice -7");
	r = make(RECORD_DELTA, "empty", 0, 0, "", "");
	round_trip(&r, "empty +0");
	r = make(RECORD_CLOSE, "gone", 0, 0, "", "");
	round_trip(&r, "gone close");
	r = make(RECORD_DELTA, "a", 5, 'c', "pay-1", "");
	round_trip(&r, "a +5 #c:pay-1");
	r = make(RECORD_DELTA, "a", 0, 's', "set:9", "");
	round_trip(&r, "a +0 #s:set:9");
	r = make(RECORD_DELTA, "from", -30, 'd', "x.1", "to");
	round_trip(&r, "from -30 #d:x.1:to");
	r = make(RECORD_DELTA, "to", 30, 't', "x.1", "from");
	round_trip(&r, "to +30 #t:x.1:from");
	r = make(RECORD_DELTA, "from", 30, 'r', "x.1", "");
	round_trip(&r, "from +30 #r:x.1");
}
END_TEST

static struct record make_string(const char *key, const void *v, size_t n)
{
	struct record r = make(RECORD_STRING, key, 0, 0, "", "");

	memcpy(r.value, v, n);
	r.value_len = (unsigned)n;
	return r;
}

/* Any bytes, spaces and newlines included, as two hex digits each. */
START_TEST(strings_round_trip)
{
	char line[RECORD_MAX], big[VALUE_MAX];
	struct record r, out;
	size_t n;

	r = make_string("key:1", "xxx", 3);
	round_trip(&r, "key:1 =787878");
	r = make_string("e", "", 0);
	round_trip(&r, "e =");
	r = make_string("bin", "a b\n\0\xff", 6);
	round_trip(&r, "bin =6120620a00ff");
	n = record_encode(line, &r);
	ck_assert(record_parse(line, n, &out));
	ck_assert_int_eq(out.kind, RECORD_STRING);
	ck_assert_uint_eq(out.value_len, 6);
	ck_assert_int_eq(memcmp(out.value, "a b\n\0\xff", 6), 0);
	r = make_string("s", "OK", 2);
	r.reply = 's';
	snprintf(r.reqid, sizeof(r.reqid), "set-1");
	round_trip(&r, "s =4f4b #s:set-1");
	/* The longest value fits a record, and comes back whole. */
	memset(big, 0xa5, sizeof(big));
	r = make_string("big", big, sizeof(big));
	n = record_encode(line, &r);
	ck_assert_uint_le(n, RECORD_MAX);
	ck_assert(record_parse(line, n, &out));
	ck_assert_uint_eq(out.value_len, VALUE_MAX);
	ck_assert_int_eq(memcmp(out.value, big, VALUE_MAX), 0);
	/* A delta after a string carries none of it. */
	ck_assert(record_parse(line, record_seal(line, "big +1"), &out));
	ck_assert_int_eq(out.kind, RECORD_DELTA);
	ck_assert_uint_eq(out.value_len, 0);
}
END_TEST

/*
 * A transaction's id may hold ':' (its results cannot); a client's
 * transfer id is its own, after '@'.
 */
START_TEST(transaction_and_client_transfer_tags_round_trip)
{
	char line[RECORD_MAX];
	struct record r, out;
	size_t n;

	r = make(RECORD_DELTA, "a", 5, 'x', "txn:1:b", "");
	snprintf(r.results, sizeof(r.results), "cc5,ad5,eg=787878");
	round_trip(&r, "a +5 #x:txn:1:b:cc5,ad5,eg=787878");
	n = record_encode(line, &r);
	ck_assert(record_parse(line, n, &out));
	ck_assert_str_eq(out.reqid, "txn:1:b");
	ck_assert_str_eq(out.results, "cc5,ad5,eg=787878");
	r = make(RECORD_DELTA, "from:1", -3, 'd', "@pay-7", "to:2");
	round_trip(&r, "from:1 -3 #d:@pay-7:to:2");
	r = make(RECORD_DELTA, "from:1", 3, 'r', "@pay-7", "");
	round_trip(&r, "from:1 +3 #r:@pay-7");
}
END_TEST

/*
 * The encoder (no printf) writes what printf would: signed amounts at
 * both ends of long long, the CRC in 8 lowercase hex digits (CRC-32 of
 * "123456789" is cbf43926), and the longest record fits RECORD_MAX.
 */
START_TEST(encoding_matches_printf)
{
	const long long amounts[] = { 1, 9, 10, -10, 123456789, LLONG_MAX,
				      -LLONG_MAX, LLONG_MIN };
	char line[RECORD_MAX], want[RECORD_MAX], key[KEY_MAX + 1];
	char id[REQID_MAX + 1];
	struct record r, out;
	size_t i, n;

	n = record_seal(line, "123456789");
	ck_assert_uint_eq(n, 19);
	ck_assert(memcmp(line, "123456789 cbf43926\n", n) == 0);
	for (i = 0; i < sizeof(amounts) / sizeof(amounts[0]); i++) {
		r = make(RECORD_DELTA, "k", amounts[i], 0, "", "");
		snprintf(want, sizeof(want), "k %+lld", amounts[i]);
		n = record_encode(line, &r);
		ck_assert_uint_eq(n, strlen(want) + 10);
		ck_assert(memcmp(line, want, strlen(want)) == 0);
	}
	memset(key, 'k', KEY_MAX);
	key[KEY_MAX] = '\0';
	memset(id, 'i', REQID_MAX);
	id[REQID_MAX] = '\0';
	r = make(RECORD_DELTA, key, -LLONG_MAX, 'd', id, key);
	snprintf(want, sizeof(want), "%s %+lld #d:%s:%s", key, -LLONG_MAX, id,
		 key);
	round_trip(&r, want);
	/* The longest of all: a whole string, a transaction's results. */
	r = make_string(key, "", 0);
	memset(r.value, 0xfe, VALUE_MAX);
	r.value_len = VALUE_MAX;
	r.reply = 'x';
	snprintf(r.reqid, sizeof(r.reqid), "%s", id);
	memset(r.results, 'r', RESULTS_MAX);
	r.results[RESULTS_MAX] = '\0';
	n = record_encode(line, &r);
	ck_assert_uint_le(n, RECORD_MAX);
	ck_assert(record_parse(line, n, &out));
	ck_assert_uint_eq(out.value_len, VALUE_MAX);
	ck_assert_int_eq(memcmp(out.value, r.value, VALUE_MAX), 0);
	ck_assert_str_eq(out.reqid, id);
	ck_assert_str_eq(out.results, r.results);
}
END_TEST

START_TEST(damage_is_refused)
{
	struct record r = make(RECORD_DELTA, "bob", 42, 'c', "id", ""), out;
	char line[RECORD_MAX], bad[RECORD_MAX];
	size_t n = record_encode(line, &r), i;

	for (i = 0; i + 1 < n; i++) { /* any byte changed: the CRC says so */
		memcpy(bad, line, n);
		bad[i] = bad[i] == 'x' ? 'y' : 'x';
		ck_assert_msg(!record_parse(bad, n, &out), "byte %zu", i);
	}
	ck_assert(!record_parse(line, n - 1, &out)); /* torn: no newline */
}
END_TEST

START_TEST(malformed_lines_are_refused)
{
	const char *const bodies[] = {
		"a -0",	      "a +",	      "a 5",	      "a +5 #x:id",
		"a +5 #c:",   "a +5 #d:id",   "a +5 #d:id:",  "a +5 #c:id x",
		"a +5 c:id",  "a closed",     "two words +1", " +1",
		"a +1 #t:id", "a +9223372036854775808",
		"a =7",	      "a =7G",	      "a =4F4B",      "a =78 x",
		"a +5 #x:id:", "a +5 #x::cc1", "a +5 #x:id:c c",
	};
	char line[RECORD_MAX];
	struct record out;
	size_t i;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
		ck_assert_msg(!record_parse(line, record_seal(line, bodies[i]),
					    &out),
			      "'%s' parsed", bodies[i]);
	ck_assert(record_parse(line, record_seal(line, "a +5 #c:id"), &out));
	ck_assert_str_eq(out.reqid, "id");
}
END_TEST

/*
 * One record struct parses a whole journal: a plain record after a
 * transfer's debit keeps nothing of it. (Replay took every plain record
 * after a debit for another open transfer.)
 */
START_TEST(plain_record_after_a_tagged_one_has_no_tag)
{
	char line[RECORD_MAX];
	struct record out;

	ck_assert(record_parse(line, record_seal(line,
						 "acct:1 -5 #d:x.1:acct:2"),
			       &out));
	ck_assert_int_eq(out.reply, 'd');
	ck_assert(record_parse(line, record_seal(line, "acct:3 +7"), &out));
	ck_assert_int_eq(out.reply, '\0');
	ck_assert_str_eq(out.reqid, "");
	ck_assert_str_eq(out.peer, "");
}
END_TEST

struct tally {
	long n;
	long long sum;
};

static void count(void *arg, const char *key, long long balance)
{
	struct tally *t = arg;

	(void)key;
	t->n++;
	t->sum += balance;
}

/* Random deltas and closes on 3000 accounts, against a model. */
START_TEST(tables_match_a_model)
{
	enum { KEYS = 3000, STEPS = 200000 };
	static long long model[KEYS];
	static bool open[KEYS];
	struct accounts *a = accounts_new(4);
	struct tally t = { 0, 0 }, want = { 0, 0 };
	uint64_t rng = 88172645463325252ull;
	struct record r;
	long i;
	int k;

	memset(model, 0, sizeof(model));
	memset(open, 0, sizeof(open));
	for (i = 0; i < STEPS; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		k = (int)(rng % KEYS);
		r = make(rng >> 32 & 1 && (rng >> 33) % 3 == 0 ? RECORD_CLOSE :
								  RECORD_DELTA,
			 "", (long long)(rng >> 40 & 15), 0, "", "");
		snprintf(r.key, sizeof(r.key), "k%d", k);
		ck_assert(accounts_apply(a, &r));
		open[k] = r.kind == RECORD_DELTA;
		model[k] = open[k] ? model[k] + r.delta : 0;
	}
	/* Every open account is found again (a +0 creates nothing new). */
	for (k = 0; k < KEYS; k++) {
		r = make(open[k] ? RECORD_DELTA : RECORD_CLOSE, "", 0, 0, "", "");
		snprintf(r.key, sizeof(r.key), "k%d", k);
		ck_assert(accounts_apply(a, &r));
		want.n += open[k];
		want.sum += open[k] ? model[k] : 0;
	}
	accounts_each(a, count, &t);
	ck_assert_int_eq(t.n, want.n);
	ck_assert_int_eq(t.sum, want.sum);
	ck_assert_uint_eq(accounts_count(a), (uint64_t)want.n);
	accounts_free(a);
}
END_TEST

/*
 * A key holds a string or a balance: a string's balance is 0, a delta
 * makes it an account again, a close removes it.
 */
START_TEST(strings_in_the_tables)
{
	struct accounts *a = accounts_new(4);
	struct tally t = { 0, 0 };
	struct record r;

	r = make(RECORD_DELTA, "k", 40, 0, "", "");
	ck_assert(accounts_apply(a, &r));
	r = make_string("k", "hello", 5);
	ck_assert(accounts_apply(a, &r));
	accounts_each(a, count, &t);
	ck_assert_int_eq(t.n, 1);
	ck_assert_int_eq(t.sum, 0); /* a string holds no money */
	r = make(RECORD_DELTA, "k", 7, 0, "", "");
	ck_assert(accounts_apply(a, &r));
	t = (struct tally){ 0, 0 };
	accounts_each(a, count, &t);
	ck_assert_int_eq(t.sum, 7); /* from 0, not 40 */
	r = make_string("s", "x", 1);
	ck_assert(accounts_apply(a, &r));
	ck_assert_uint_eq(accounts_count(a), 2);
	r = make(RECORD_CLOSE, "s", 0, 0, "", "");
	ck_assert(accounts_apply(a, &r));
	ck_assert_uint_eq(accounts_count(a), 1);
	accounts_free(a);
}
END_TEST

/* ---- the bank on a dispatcher and a journal ---- */

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

static Suite *record_suite(void)
{
	Suite *s = suite_create("ledger_record");
	TCase *tc = tcase_create("record");

	tcase_add_test(tc, every_kind_round_trips);
	tcase_add_test(tc, strings_round_trip);
	tcase_add_test(tc, transaction_and_client_transfer_tags_round_trip);
	tcase_add_test(tc, encoding_matches_printf);
	tcase_add_test(tc, damage_is_refused);
	tcase_add_test(tc, malformed_lines_are_refused);
	tcase_add_test(tc, plain_record_after_a_tagged_one_has_no_tag);
	tcase_add_test(tc, tables_match_a_model);
	tcase_add_test(tc, strings_in_the_tables);
	suite_add_tcase(s, tc);
	tc = tcase_create("bank");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, one_accounts_changes_share_durable_writes);
	tcase_add_test(tc, strings_and_retries_in_one_batch);
	tcase_add_test(tc, forced_stop_fails_replies_in_flight);
	tcase_add_test(tc, forced_stop_fails_replies_not_started);
#ifdef AGR_FAULT_INJECTION
	tcase_add_test(tc, a_failed_write_shows_nothing_it_held);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	record_init();
	return tu_run(record_suite());
}
