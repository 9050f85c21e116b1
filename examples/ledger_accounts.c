/* SPDX-License-Identifier: MIT */
#include "ledger_accounts.h"

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#include "util.h"

/* ---- balances ---- */

/* The request ids of an account's last changes, and their replies. */
struct reqid_entry {
	long long balance; /* reply 'c': the balance after the change */
	char reply;	   /* 'c' or 's' (OK), as in ledger_record.h */
	char id[REQID_MAX + 1];
};

struct reqids {
	unsigned next; /* the oldest, overwritten next */
	struct reqid_entry e[REQID_WINDOW];
};

struct account {
	long long balance;
	uint64_t hash;
	uint64_t batch; /* the journal batch of its last change; 0: replay */
	struct reqids *ids; /* NULL until a change carries a request id */
	char key[];
};

static const struct reqid_entry *reqid_find(const struct account *a,
					    const char *id)
{
	unsigned i;

	for (i = 0; a && a->ids && i < REQID_WINDOW; i++)
		if (strcmp(a->ids->e[i].id, id) == 0)
			return &a->ids->e[i];
	return NULL;
}

static void reqid_remember(struct account *a, const char *id, char reply,
			   long long balance)
{
	struct reqid_entry *e;

	if (!a->ids)
		a->ids = xcalloc(1, sizeof(*a->ids));
	e = &a->ids->e[a->ids->next];
	a->ids->next = (a->ids->next + 1) % REQID_WINDOW;
	e->balance = balance;
	e->reply = reply;
	snprintf(e->id, sizeof(e->id), "%s", id);
}

static void account_free(struct account *a)
{
	if (a)
		free(a->ids);
	free(a);
}

/* One group's accounts: open addressing, linear probing. */
struct table {
	struct account **slots;
	size_t mask; /* slots - 1; slots is a power of two */
	size_t count;
	uint64_t closed_batch; /* the journal batch of its last close */
};

struct accounts {
	int ngroups;
	atomic_ullong count; /* over every table: read by INFO, DBSIZE */
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
static struct account *table_get(struct accounts *as, struct table *t,
				 const char *key)
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
	atomic_fetch_add_explicit(&as->count, 1, memory_order_relaxed);
	return a;
}

/*
 * Removes `key` if it is there (backward-shift deletion: the accounts
 * after it in its probe run move up, so no tombstone is needed).
 */
static void table_remove(struct accounts *as, struct table *t,
			 const char *key)
{
	struct account **hole;
	size_t i, j, home;

	if (!t->slots)
		return;
	hole = table_slot(t->slots, t->mask, key, key_hash(key));
	if (!*hole)
		return;
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

bool accounts_apply(struct accounts *a, const struct record *rec)
{
	struct table *t = &a->tables[agr_group_key(rec->key, a->ngroups)];
	struct account *acct;

	if (rec->kind == RECORD_CLOSE) {
		table_remove(a, t, rec->key);
		return true;
	}
	acct = table_get(a, t, rec->key);
	if (__builtin_add_overflow(acct->balance, rec->delta, &acct->balance))
		return false;
	if (rec->reqid[0])
		reqid_remember(acct, rec->reqid, rec->reply, acct->balance);
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

/* ---- messages ---- */

static const char *const op_type[] = {
	"Get", "Exists", "Deposit", "Withdraw", "Set", "Close",
	"TransferDebit", "TransferCredit", "TransferRefund",
};

static void msg_init_key(struct account_msg *m, const char *key, size_t len,
			 void *user)
{
	memcpy(m->key, key, len);
	m->key[len] = '\0';
	m->msg.aggregate_id = m->key;
	m->msg.user = user;
	m->journal_failed = false;
	m->awaiting = false; /* a message discarded unrun is passed on */
	m->completed = NULL;
	m->reqid[0] = '\0';
	m->xfer = NULL;
}

void account_msg_init(struct account_msg *m, enum account_op op,
		      const char *key, size_t len, long long amount,
		      void *user)
{
	msg_init_key(m, key, len, user);
	m->one = (struct account_step){ .op = op, .amount = amount };
	m->steps = &m->one;
	m->nsteps = 1;
	m->msg.type = op_type[op];
}

void account_msg_set_reqid(struct account_msg *m, const char *id, size_t len)
{
	memcpy(m->reqid, id, len);
	m->reqid[len] = '\0';
}

void account_msg_init_steps(struct account_msg *m, const char *key,
			    size_t len, struct account_step *steps,
			    unsigned n, void *user)
{
	msg_init_key(m, key, len, user);
	m->steps = steps;
	m->nsteps = n;
	m->msg.type = "Transaction";
}

/* ---- transfers ---- */

/* Transfer ids: this process's start, then a sequence number. */
static uint64_t xfer_epoch;
static atomic_ullong xfer_seq;

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void transfer_init(struct transfer *x, const char *from, size_t flen,
		   const char *to, size_t tlen, long long amount, void *user)
{
	account_msg_init(&x->debit, OP_XFER_DEBIT, from, flen, amount, user);
	account_msg_init(&x->credit, OP_XFER_CREDIT, to, tlen, amount, user);
	account_msg_init(&x->refund, OP_XFER_REFUND, from, flen, amount,
			 user);
	x->debit.xfer = x->credit.xfer = x->refund.xfer = x;
	atomic_init(&x->inflight, 1); /* the debit, about to be sent */
	x->outcome = TRANSFER_PENDING;
	x->recovery = false;
	snprintf(x->id, sizeof(x->id), "%llx.%llx",
		 (unsigned long long)xfer_epoch,
		 (unsigned long long)atomic_fetch_add_explicit(
			 &xfer_seq, 1, memory_order_relaxed));
}

bool transfer_message_done(struct transfer *x)
{
	/* acq_rel: the last one sees what every handler of x wrote. */
	return atomic_fetch_sub_explicit(&x->inflight, 1,
					 memory_order_acq_rel) == 1;
}

/* ---- the bank ---- */

/*
 * A worker's share; touched only by its thread until it has ended
 * (the counters are read by INFO on other threads: relaxed atomics,
 * written only by this one). Cache-line aligned: neighbours are
 * written by other workers.
 */
struct bank_worker {
	_Alignas(64) struct journal journal;
	atomic_ullong overdrafts, changes;
};

struct bank {
	struct accounts *accounts;
	struct bank_worker *workers; /* [nworkers] */
	unsigned nworkers;
	enum crash_point crash_at;
};

static void crash_if(const struct bank *b, enum crash_point here)
{
	if (b->crash_at == here) {
		warnf("--crash-after: killing myself");
		kill(getpid(), SIGKILL);
	}
}

/* Sends the transfer's next message from a handler (ex's). */
static void transfer_forward(agr_exchange *ex, struct transfer *x,
			     struct account_msg *next)
{
	atomic_fetch_add_explicit(&x->inflight, 1, memory_order_relaxed);
	if (agr_dispatcher_send(agr_exchange_dispatcher(ex), &next->msg) < 0) {
		atomic_fetch_sub_explicit(&x->inflight, 1,
					  memory_order_relaxed);
		x->outcome = TRANSFER_UNFINISHED; /* stopping: replay ends it */
	}
}

/*
 * The saga's next step, once a transfer's message has done its part
 * (durably, or refused); on its group's worker, before it completes.
 */
static void transfer_step(struct bank *b, agr_exchange *ex,
			  struct account_msg *m)
{
	struct transfer *x = m->xfer;
	const struct account_step *st = &m->steps[0];
	bool changed = !m->journal_failed && st->result == ACCOUNT_CHANGED;

	switch (st->op) {
	case OP_XFER_DEBIT:
		if (!changed) {
			x->outcome = m->journal_failed ? TRANSFER_PENDING :
							 TRANSFER_REFUSED;
			x->refusal = st->result;
			return;
		}
		x->from_balance = st->balance;
		crash_if(b, CRASH_AFTER_DEBIT);
		transfer_forward(ex, x, &x->credit);
		break;
	case OP_XFER_CREDIT:
		if (changed) {
			crash_if(b, CRASH_AFTER_CREDIT);
			x->outcome = TRANSFER_SETTLED;
		} else if (!m->journal_failed) {
			x->refusal = st->result;
			crash_if(b, CRASH_AFTER_REFUSAL);
			transfer_forward(ex, x, &x->refund);
		}
		break;
	case OP_XFER_REFUND:
		if (changed)
			x->outcome = TRANSFER_REFUNDED;
		break;
	case OP_GET:
	case OP_EXISTS:
	case OP_DEPOSIT:
	case OP_WITHDRAW:
	case OP_SET:
	case OP_CLOSE:
		break; /* not a transfer's */
	}
}

/* A plain increment that another thread may read: one writer only. */
static void count_one(atomic_ullong *c)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/*
 * Makes the account what the steps left, once its record is queued in
 * journal batch `batch`: readers of the account wait for that batch
 * (await_state). `a`: the account as run_steps found it, or NULL.
 */
static void apply_after(struct account_msg *m, struct account *a,
			uint64_t batch)
{
	struct accounts *as = m->bank->accounts;
	struct table *t = &as->tables[m->group];

	if (!m->after_exists) {
		table_remove(as, t, m->key);
		t->closed_batch = batch;
		return;
	}
	if (!a) /* a new account */
		a = table_get(as, t, m->key);
	a->balance = m->after_balance;
	a->batch = batch;
	if (m->reqid[0])
		reqid_remember(a, m->reqid,
			       m->steps[0].result == ACCOUNT_SET ? 's' : 'c',
			       m->after_balance);
}

/*
 * What the message's reply showed is durable now (status 0), or never
 * will be. A transfer's message still holds its group: the saga goes
 * on and the message completes. Any other completed at once; its reply
 * goes on now, or once the dispatcher has completed it (bank_completed).
 */
static void entry_durable(struct commit_wait *w, int status)
{
	struct account_msg *m = container_of(w, struct account_msg, wait);
	const struct bank_completion *c = m->completed;

	if (status == 0 && m->journaled)
		count_one(&m->bank->workers[m->worker].changes);
	else if (status < 0)
		m->journal_failed = true;
	if (m->xfer) {
		transfer_step(m->bank, m->ex, m);
		agr_exchange_done(m->ex, status);
		return;
	}
	m->awaiting = false;
	if (c)
		c->fn(&m->msg, m->completed_status, c->arg);
}

void bank_completed(agr_message *msg, int status, void *arg)
{
	struct account_msg *m = account_msg_of(msg);
	const struct bank_completion *c = arg;

	if (m->awaiting) { /* its reply waits for the journal */
		m->completed = c;
		m->completed_status = status;
		return;
	}
	c->fn(msg, status, c->arg);
}

/* A deposit or a withdrawal on the state *exists, *balance. */
static void step_move(struct account_step *st, bool *exists,
		      long long *balance, struct bank_worker *bw)
{
	bool out = st->op == OP_WITHDRAW || st->op == OP_XFER_DEBIT;

	if (out && st->amount > *balance) {
		count_one(&bw->overdrafts);
		st->result = ACCOUNT_OVERDRAFT;
		return;
	}
	if (!out && *balance > LLONG_MAX - st->amount) {
		st->result = ACCOUNT_OVERFLOW;
		return;
	}
	*balance += out ? -st->amount : st->amount;
	*exists = true;
	st->result = ACCOUNT_CHANGED;
	st->balance = *balance;
}

/* Runs one step on the state the earlier steps left. */
static void step_run(struct account_step *st, bool *exists,
		     long long *balance, struct bank_worker *bw)
{
	switch (st->op) {
	case OP_GET:
	case OP_EXISTS:
		st->result = *exists ? ACCOUNT_FOUND : ACCOUNT_MISSING;
		st->balance = *balance;
		break;
	case OP_DEPOSIT:
	case OP_WITHDRAW:
	case OP_XFER_DEBIT:
	case OP_XFER_CREDIT:
	case OP_XFER_REFUND:
		step_move(st, exists, balance, bw);
		break;
	case OP_SET:
		*exists = true;
		*balance = st->amount;
		st->result = ACCOUNT_SET;
		st->balance = *balance;
		break;
	case OP_CLOSE:
		st->result = *exists ? ACCOUNT_CLOSED : ACCOUNT_MISSING;
		*exists = false;
		*balance = 0;
		break;
	}
}

/* A transfer's record names the transfer, and the other account. */
static void transfer_tag(const struct account_msg *m, struct record *r)
{
	const struct transfer *x = m->xfer;

	r->reply = m->steps[0].op == OP_XFER_DEBIT  ? 'd' :
		   m->steps[0].op == OP_XFER_CREDIT ? 't' :
						      'r';
	snprintf(r->reqid, sizeof(r->reqid), "%s", x->id);
	snprintf(r->peer, sizeof(r->peer), "%s",
		 r->reply == 'd' ? x->credit.key : x->debit.key);
}

/*
 * The record of the steps' net effect into rec[RECORD_MAX]: its
 * length, or 0 when they changed nothing.
 */
static size_t net_record(const struct account_msg *m, const struct account *a,
			 char *rec)
{
	long long before = a ? a->balance : 0;
	struct record r; /* not zeroed: record_encode reads only the strings */
	bool tagged = m->reqid[0] && (m->steps[0].result == ACCOUNT_CHANGED ||
				      m->steps[0].result == ACCOUNT_SET);

	if (!m->after_exists && !a)
		return 0;
	r.kind = m->after_exists ? RECORD_DELTA : RECORD_CLOSE;
	r.delta = m->after_balance - before;
	r.reply = '\0';
	r.reqid[0] = r.peer[0] = '\0';
	if (m->after_exists && a && r.delta == 0 && !tagged)
		return 0; /* a request id is journaled even so */
	if (tagged) {
		r.reply = m->steps[0].result == ACCOUNT_SET ? 's' : 'c';
		memcpy(r.reqid, m->reqid, sizeof(r.reqid));
	}
	if (m->xfer)
		transfer_tag(m, &r);
	memcpy(r.key, m->key, sizeof(r.key)); /* no printf per change */
	return record_encode(rec, &r);
}

/*
 * A retry: the request id names a change already made, whose first
 * reply is answered again; nothing is applied. True if so.
 */
static bool answered_before(struct account_msg *m, const struct account *a)
{
	const struct reqid_entry *e =
		m->reqid[0] ? reqid_find(a, m->reqid) : NULL;

	if (!e)
		return false;
	m->steps[0].result = e->reply == 's' ? ACCOUNT_SET : ACCOUNT_CHANGED;
	m->steps[0].balance = e->balance;
	return true;
}

/*
 * The message waits for the journal (entry_durable). A transfer's holds
 * its group: the saga's next step is sent from its handler. Any other
 * completes now and lets the group run the account's next message at
 * once, so that one hot account's changes share a batch; its reply
 * waits (bank_completed).
 */
static int wait_for_journal(struct account_msg *m)
{
	if (m->xfer)
		return AGR_PENDING;
	m->awaiting = true;
	return 0;
}

/*
 * A message that journals nothing (a read, a refusal, a retry answered
 * again) shows the account as changes not yet durable may have left it:
 * it waits for the batch of the account's last change, or, if it has
 * none, of the group's last close.
 */
static int await_state(struct account_msg *m, struct journal *j,
		       const struct table *t, const struct account *a)
{
	int ret = journal_wait(j, a ? a->batch : t->closed_batch, &m->wait);

	if (ret == 0)
		return wait_for_journal(m);
	if (ret < 0) {
		m->journal_failed = true;
		return ret;
	}
	if (m->xfer) /* refused: the saga goes on, or ends, now */
		transfer_step(m->bank, m->ex, m);
	return 0;
}

/*
 * Every message: run its steps on the account as it is, journal their
 * net effect as one record and apply it in memory at once; the reply
 * waits until the record, and every one the steps read, is durable.
 */
static int run_steps(agr_exchange *ex, void *arg)
{
	struct bank *b = arg;
	struct account_msg *m = account_msg_of(agr_exchange_message(ex));
	unsigned wi = (unsigned)agr_worker_index(agr_exchange_worker(ex));
	struct bank_worker *bw = &b->workers[wi];
	struct account *a;
	const struct table *t;
	char rec[RECORD_MAX];
	size_t len;
	unsigned i;
	int ret;

	m->bank = b;
	m->ex = ex;
	m->worker = wi;
	m->group = agr_exchange_group(ex);
	m->awaiting = m->journaled = false;
	m->completed = NULL;
	m->wait.durable = entry_durable;
	t = &b->accounts->tables[m->group];
	a = table_find(t, m->key);
	if (answered_before(m, a))
		return await_state(m, &bw->journal, t, a);
	m->after_exists = a != NULL;
	m->after_balance = a ? a->balance : 0;
	for (i = 0; i < m->nsteps; i++)
		step_run(&m->steps[i], &m->after_exists, &m->after_balance,
			 bw);
	len = net_record(m, a, rec);
	if (len == 0)
		return await_state(m, &bw->journal, t, a);
	ret = journal_append(&bw->journal, rec, len, &m->wait);
	if (ret < 0) { /* nothing applied */
		m->journal_failed = true;
		return ret;
	}
	m->journaled = true;
	apply_after(m, a, journal_batch_id(&bw->journal));
	return wait_for_journal(m);
}

struct bank *bank_new(agr_dispatcher *disp, struct accounts *accounts)
{
	struct bank *b = xcalloc(1, sizeof(*b));
	size_t size;
	int ret;

	b->accounts = accounts;
	xfer_epoch = realtime_ns(); /* ids unique across restarts */
	b->nworkers = (unsigned)agr_scheduler_parallelism(
		agr_dispatcher_scheduler(disp));
	size = b->nworkers * sizeof(*b->workers);
	b->workers = aligned_alloc(_Alignof(struct bank_worker), size);
	if (!b->workers)
		die("out of memory");
	memset(b->workers, 0, size);
	/*
	 * Every message of this dispatcher is the bank's, and run_steps
	 * serves every type: one function for all (type NULL) spares the
	 * dispatcher a strcmp per registered type per message. The types
	 * still name the messages in logs.
	 */
	ret = agr_dispatcher_register(disp, NULL, run_steps, b);
	if (ret)
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
		n += atomic_load_explicit(&b->workers[i].overdrafts,
					  memory_order_relaxed);
	return n;
}

uint64_t bank_changes(const struct bank *b)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < b->nworkers; i++)
		n += atomic_load_explicit(&b->workers[i].changes,
					  memory_order_relaxed);
	return n;
}

unsigned bank_resume_transfers(struct bank *b, agr_dispatcher *disp,
			       const struct open_transfer *open, unsigned n)
{
	unsigned i, sent = 0;

	(void)b;
	for (i = 0; i < n; i++) {
		struct transfer *x = xcalloc(1, sizeof(*x));
		const struct open_transfer *o = &open[i];

		transfer_init(x, o->from, strlen(o->from), o->to, strlen(o->to),
			      o->amount, NULL);
		snprintf(x->id, sizeof(x->id), "%s", o->id);
		x->recovery = true;
		if (agr_dispatcher_send(disp, &x->credit.msg) < 0) {
			free(x);
			continue;
		}
		sent++;
	}
	return sent;
}

void bank_set_crash(struct bank *b, enum crash_point at)
{
	b->crash_at = at;
}

uint64_t bank_accounts(const struct bank *b)
{
	return accounts_count(b->accounts);
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
