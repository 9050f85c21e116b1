/* SPDX-License-Identifier: MIT */
/*
 * ledger_table.c - the account tables: one per group, open addressing
 * with linear probing; each account's balance or string, and the
 * request ids of its last changes (the REQID window). Replay fills them
 * (accounts_apply); the bank's handlers read and change them, each
 * group's table on its own group only (ledger_accounts.c).
 */
#include "ledger_table.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- balances ---- */

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xrealloc(NULL, n), s, n);
}




/* The newest entry of id: a refund comes after its transfer's debit. */
const struct reqid_entry *reqid_find(const struct account *a,
				     const char *id)
{
	unsigned i, k;

	for (i = 1; a && a->ids && i <= REQID_WINDOW; i++) {
		k = (a->ids->next + REQID_WINDOW - i) % REQID_WINDOW;
		if (strcmp(a->ids->e[k].id, id) == 0)
			return &a->ids->e[k];
	}
	return NULL;
}

/* Remembers id; takes `results` ('x', xmalloc'd; else NULL). */
void reqid_remember(struct account *a, const char *id, char reply,
		    long long balance, char *results)
{
	struct reqid_entry *e;

	if (!a->ids)
		a->ids = xcalloc(1, sizeof(*a->ids));
	e = &a->ids->e[a->ids->next];
	a->ids->next = (a->ids->next + 1) % REQID_WINDOW;
	e->balance = balance;
	e->reply = reply;
	free(e->results);
	e->results = results;
	snprintf(e->id, sizeof(e->id), "%s", id);
}

static void reqids_free(struct reqids *ids)
{
	unsigned i;

	for (i = 0; ids && i < REQID_WINDOW; i++)
		free(ids->e[i].results);
	free(ids);
}

/* The key holds a copy of [p, p + len), or a balance when p is NULL. */
void account_set_str(struct account *a, const char *p, unsigned len)
{
	char *copy = NULL;

	if (p) { /* copied first: p may be a->str itself */
		copy = xrealloc(NULL, (size_t)len + 1);
		memcpy(copy, p, len);
		copy[len] = '\0';
	}
	free(a->str);
	a->str = copy;
	a->str_len = p ? len : 0;
}

static void account_free(struct account *a)
{
	if (a) {
		reqids_free(a->ids);
		free(a->str);
	}
	free(a);
}



static uint64_t key_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (*key)
		h = (h ^ (unsigned char)*key++) * 0x100000001b3ull;
	return h;
}

static struct account **table_slot(struct account **slots, size_t mask,
				   const char *key, uint64_t h)
{
	size_t i = (size_t)h & mask;

	while (slots[i] &&
	       (slots[i]->hash != h || strcmp(slots[i]->key, key) != 0))
		i = (i + 1) & mask;
	return &slots[i];
}

static void table_grow(struct table *t)
{
	size_t n = t->slots ? (t->mask + 1) * 2 : 16, i;
	struct account **slots = xcalloc(n, sizeof(*slots));

	for (i = 0; t->slots && i <= t->mask; i++)
		if (t->slots[i])
			*table_slot(slots, n - 1, t->slots[i]->key,
				    t->slots[i]->hash) = t->slots[i];
	free(t->slots);
	t->slots = slots;
	t->mask = n - 1;
}

struct account *table_find(const struct table *t, const char *key)
{
	if (!t->slots)
		return NULL;
	return *table_slot(t->slots, t->mask, key, key_hash(key));
}

/* The account, created with balance 0 if it has none yet. */
struct account *table_get(struct accounts *as, struct table *t,
			  const char *key)
{
	uint64_t h = key_hash(key);
	struct account **slot, *a;
	size_t len;

	if (!t->slots || (t->count + 1) * 4 > (t->mask + 1) * 3)
		table_grow(t);
	slot = table_slot(t->slots, t->mask, key, h);
	a = *slot;
	if (a)
		return a;
	len = strlen(key);
	a = xcalloc(1, sizeof(*a) + len + 1);
	a->hash = h;
	memcpy(a->key, key, len + 1);
	*slot = a;
	t->count++;
	atomic_fetch_add_explicit(&as->count, 1, memory_order_relaxed);
	return a;
}

/*
 * Removes `key` if it is there (backward-shift deletion: the accounts
 * after it in its probe run move up, so no tombstone is needed).
 */
void table_remove(struct accounts *as, struct table *t,
		  const char *key)
{
	struct account **hole;
	size_t i, j, home;

	if (!t->slots)
		return;
	hole = table_slot(t->slots, t->mask, key, key_hash(key));
	if (!*hole)
		return;
	t->removed_seq = ++t->seq;
	account_free(*hole);
	*hole = NULL;
	t->count--;
	atomic_fetch_sub_explicit(&as->count, 1, memory_order_relaxed);
	i = (size_t)(hole - t->slots);
	for (j = (i + 1) & t->mask; t->slots[j]; j = (j + 1) & t->mask) {
		home = (size_t)t->slots[j]->hash & t->mask;
		/* Stays unless the hole lies between its home and it. */
		if (((j - home) & t->mask) < ((j - i) & t->mask))
			continue;
		t->slots[i] = t->slots[j];
		t->slots[j] = NULL;
		i = j;
	}
}

static void table_free(struct table *t)
{
	size_t i;

	for (i = 0; t->slots && i <= t->mask; i++)
		account_free(t->slots[i]);
	free(t->slots);
}

struct accounts *accounts_new(int ngroups)
{
	struct accounts *a = xcalloc(1, sizeof(*a) + (size_t)ngroups *
						     sizeof(a->tables[0]));

	a->ngroups = ngroups;
	return a;
}

void accounts_free(struct accounts *a)
{
	int g;

	if (!a)
		return;
	for (g = 0; g < a->ngroups; g++)
		table_free(&a->tables[g]);
	free(a);
}

/*
 * Whether a record's id is one a retry may name: a request's, a
 * transaction's, a client's transfer on its source; not a credit, nor
 * a transfer of the server's own naming.
 */
static bool record_remembered(const struct record *rec)
{
	if (!rec->reqid[0] || rec->reply == 't')
		return false;
	return (rec->reply != 'd' && rec->reply != 'r') || rec->reqid[0] == '@';
}

bool accounts_apply(struct accounts *a, const struct record *rec)
{
	/* One table (a checkpoint's): no group to hash for. */
	struct table *t = &a->tables[a->ngroups > 1 ?
					     agr_group_key(rec->key,
							   a->ngroups) :
					     0];
	struct account *acct;

	if (rec->kind == RECORD_CLOSE) {
		table_remove(a, t, rec->key);
		return true;
	}
	acct = table_get(a, t, rec->key);
	acct->seq = ++t->seq;
	if (rec->kind == RECORD_STRING) {
		account_set_str(acct, rec->value, rec->value_len);
		acct->balance = 0;
	} else {
		if (acct->str) /* a delta makes a string an account again */
			acct->balance = 0;
		account_set_str(acct, NULL, 0);
		if (__builtin_add_overflow(acct->balance, rec->delta,
					   &acct->balance))
			return false;
	}
	if (record_remembered(rec))
		reqid_remember(acct, rec->reqid, rec->reply, acct->balance,
			       rec->reply == 'x' ? dup_str(rec->results) :
						   NULL);
	return true;
}

uint64_t accounts_count(const struct accounts *a)
{
	return atomic_load_explicit(&a->count, memory_order_relaxed);
}

void accounts_each(const struct accounts *a,
		   void (*fn)(void *arg, const char *key, long long balance),
		   void *arg)
{
	size_t i;
	int g;

	for (g = 0; g < a->ngroups; g++) {
		const struct table *t = &a->tables[g];

		for (i = 0; t->slots && i <= t->mask; i++)
			if (t->slots[i])
				fn(arg, t->slots[i]->key, t->slots[i]->balance);
	}
}
/* A record on `key` with nothing set yet. */
static void dump_record_init(struct record *rec, const char *key)
{
	memset(rec, 0, offsetof(struct record, value));
	rec->results[0] = rec->reqid[0] = rec->peer[0] = '\0';
	snprintf(rec->key, sizeof(rec->key), "%s", key);
}

/*
 * The delta records that take a balance from `from` to `to`, the last
 * one `rec` itself (which may carry a request id): two when the
 * difference does not fit a delta.
 */
static void dump_delta(struct record *rec, long long from, long long to,
		       void (*fn)(void *arg, const struct record *rec),
		       void *arg)
{
	struct record zero;

	rec->kind = RECORD_DELTA;
	if (__builtin_sub_overflow(to, from, &rec->delta)) {
		dump_record_init(&zero, rec->key);
		zero.delta = -from; /* from and to differ in sign here */
		fn(arg, &zero);
		rec->delta = to;
	}
	fn(arg, rec);
}

/*
 * An account as records: its remembered request ids oldest first, each
 * with the balance its reply gave, then its value now.
 */
static void account_as_records(const struct account *a,
			       void (*fn)(void *arg, const struct record *rec),
			       void *arg)
{
	struct record rec;
	long long at = 0;
	unsigned i;

	for (i = 0; a->ids && i < REQID_WINDOW; i++) {
		const struct reqid_entry *e =
			&a->ids->e[(a->ids->next + i) % REQID_WINDOW];

		if (!e->id[0])
			continue;
		dump_record_init(&rec, a->key);
		rec.reply = e->reply;
		snprintf(rec.reqid, sizeof(rec.reqid), "%s", e->id);
		snprintf(rec.peer, sizeof(rec.peer), "%s", a->key);
		if (e->results)
			snprintf(rec.results, sizeof(rec.results), "%s",
				 e->results);
		dump_delta(&rec, at, e->balance, fn, arg);
		at = e->balance;
	}
	dump_record_init(&rec, a->key);
	if (a->str) {
		rec.kind = RECORD_STRING;
		rec.value_len = a->str_len;
		memcpy(rec.value, a->str, a->str_len);
		fn(arg, &rec);
	} else {
		dump_delta(&rec, at, a->balance, fn, arg);
	}
}

void accounts_dump_groups(const struct accounts *a, int first, int step,
			  void (*fn)(void *arg, const struct record *rec),
			  void *arg)
{
	size_t i;
	int g;

	for (g = first; g < a->ngroups; g += step) {
		const struct table *t = &a->tables[g];

		for (i = 0; t->slots && i <= t->mask; i++)
			if (t->slots[i])
				account_as_records(t->slots[i], fn, arg);
	}
}

void accounts_dump(const struct accounts *a,
		   void (*fn)(void *arg, const struct record *rec), void *arg)
{
	accounts_dump_groups(a, 0, 1, fn, arg);
}
