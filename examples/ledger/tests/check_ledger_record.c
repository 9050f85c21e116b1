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
 * would lose or duplicate accounts). The bank on a real journal
 * (record_bank.c): one
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
#include "record_bank.h"
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
	suite_add_tcase(s, bank_tcase());
	return s;
}

int main(void)
{
	record_init();
	return tu_run(record_suite());
}
