/* SPDX-License-Identifier: MIT */
#include "ledger_accounts.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- balances ---- */

struct account {
	long long balance;
	uint64_t hash;
	char key[];
};

/* One group's accounts: open addressing, linear probing. */
struct table {
	struct account **slots;
	size_t mask; /* slots - 1; slots is a power of two */
	size_t count;
};

struct accounts {
	int ngroups;
	struct table tables[]; /* [ngroups] */
};

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

static struct account *table_find(const struct table *t, const char *key)
{
	if (!t->slots)
		return NULL;
	return *table_slot(t->slots, t->mask, key, key_hash(key));
}

/* The account, created with balance 0 if it has none yet. */
static struct account *table_get(struct table *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct account **slot, *a;
	size_t len = strlen(key);

	if (!t->slots || (t->count + 1) * 4 > (t->mask + 1) * 3)
		table_grow(t);
	slot = table_slot(t->slots, t->mask, key, h);
	a = *slot;
	if (a)
		return a;
	a = xcalloc(1, sizeof(*a) + len + 1);
	a->hash = h;
	memcpy(a->key, key, len + 1);
	*slot = a;
	t->count++;
	return a;
}

static void table_free(struct table *t)
{
	size_t i;

	for (i = 0; t->slots && i <= t->mask; i++)
		free(t->slots[i]);
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

bool accounts_add(struct accounts *a, const char *key, long long delta)
{
	struct account *acct =
		table_get(&a->tables[agr_group_key(key, a->ngroups)], key);

	return !__builtin_add_overflow(acct->balance, delta, &acct->balance);
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

/* ---- messages ---- */

static const char *const op_type[] = { "Get", "Deposit", "Withdraw" };

void account_msg_init(struct account_msg *m, enum account_op op,
		      const char *key, size_t len, long long amount,
		      void *user)
{
	memcpy(m->key, key, len);
	m->key[len] = '\0';
	m->op = op;
	m->amount = amount;
	m->msg.aggregate_id = m->key;
	m->msg.type = op_type[op];
	m->msg.user = user;
}

/* ---- the bank ---- */

/*
 * A worker's share; touched only by its thread until it has ended.
 * Cache-line aligned: neighbours are written by other workers.
 */
struct bank_worker {
	_Alignas(64) struct journal journal;
	uint64_t overdrafts;
};

struct bank {
	struct accounts *accounts;
	struct bank_worker *workers; /* [nworkers] */
	unsigned nworkers;
};

static void entry_durable(struct commit_wait *w, int status)
{
	struct account_msg *m = container_of(w, struct account_msg, wait);
	agr_exchange *ex = m->ex;

	if (status == 0) {
		/* Applied only now: nothing unjournaled is ever visible. */
		table_get(&m->bank->accounts->tables[m->group], m->key)
			->balance = m->balance;
		m->result = ACCOUNT_CHANGED;
	} else {
		m->result = ACCOUNT_JOURNAL_FAILED;
	}
	agr_exchange_done(ex, status);
}

/* The balance after the event, or false with the refusal as result. */
static bool next_balance(struct account_msg *m, long long balance,
			 struct bank_worker *bw)
{
	if (m->op == OP_WITHDRAW) {
		if (m->amount > balance) {
			bw->overdrafts++;
			m->result = ACCOUNT_OVERDRAFT;
			return false;
		}
		m->balance = balance - m->amount;
	} else {
		if (balance > 0 && m->amount > LLONG_MAX - balance) {
			m->result = ACCOUNT_OVERFLOW;
			return false;
		}
		m->balance = balance + m->amount;
	}
	return true;
}

/* Deposit and Withdraw: journal the event, complete once it is durable. */
static int post_entry(agr_exchange *ex, void *arg)
{
	struct bank *b = arg;
	struct account_msg *m = account_msg_of(agr_exchange_message(ex));
	struct bank_worker *bw =
		&b->workers[agr_worker_index(agr_exchange_worker(ex))];
	const struct account *a;
	char rec[RECORD_MAX];
	size_t len;
	int ret;

	m->bank = b;
	m->group = agr_exchange_group(ex);
	a = table_find(&b->accounts->tables[m->group], m->key);
	if (!next_balance(m, a ? a->balance : 0, bw))
		return 0;
	len = record_encode(rec, m->key,
			    m->op == OP_DEPOSIT ? m->amount : -m->amount);
	m->ex = ex;
	m->wait.durable = entry_durable;
	ret = journal_append(&bw->journal, rec, len, &m->wait);
	if (ret < 0) {
		m->result = ACCOUNT_JOURNAL_FAILED;
		return ret;
	}
	return AGR_PENDING;
}

/* Get: serial with the account's events, so it sees every ack'd one. */
static int get_balance(agr_exchange *ex, void *arg)
{
	struct bank *b = arg;
	struct account_msg *m = account_msg_of(agr_exchange_message(ex));
	const struct account *a =
		table_find(&b->accounts->tables[agr_exchange_group(ex)],
			   m->key);

	if (!a) {
		m->result = ACCOUNT_MISSING;
		return 0;
	}
	m->balance = a->balance;
	m->result = ACCOUNT_FOUND;
	return 0;
}

struct bank *bank_new(agr_dispatcher *disp, struct accounts *accounts)
{
	struct bank *b = xcalloc(1, sizeof(*b));
	size_t size;
	int ret;

	b->accounts = accounts;
	b->nworkers = (unsigned)agr_scheduler_parallelism(
		agr_dispatcher_scheduler(disp));
	size = b->nworkers * sizeof(*b->workers);
	b->workers = aligned_alloc(_Alignof(struct bank_worker), size);
	if (!b->workers)
		die("out of memory");
	memset(b->workers, 0, size);
	if ((ret = agr_dispatcher_register(disp, "Get", get_balance, b)) ||
	    (ret = agr_dispatcher_register(disp, "Deposit", post_entry, b)) ||
	    (ret = agr_dispatcher_register(disp, "Withdraw", post_entry, b)))
		die("agr_dispatcher_register: %s", agr_strerror(ret));
	return b;
}

struct journal *bank_journal(struct bank *b, unsigned w)
{
	return &b->workers[w].journal;
}

uint64_t bank_overdrafts(const struct bank *b)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < b->nworkers; i++)
		n += b->workers[i].overdrafts;
	return n;
}

void bank_free(struct bank *b)
{
	unsigned i;

	for (i = 0; i < b->nworkers; i++)
		journal_close(&b->workers[i].journal);
	free(b->workers);
	accounts_free(b->accounts);
	free(b);
}
