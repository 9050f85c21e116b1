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

#include "resp.h"
#include "util.h"

#include "ledger_table.h"

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
	agr_scheduler *sched;
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

	if (m->answered) /* a retry: its first run took the saga on */
		return;
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
	case OP_TYPE:
	case OP_STRLEN:
	case OP_WATCH:
	case OP_SCAN:
		break; /* not a transfer's */
	}
}

/*
 * What a change is remembered as for its retries (ledger_record.h's
 * K), or 0: only a request with an id, and only what it changed.
 */
static char reply_tag(const struct account_msg *m)
{
	const struct account_step *st = &m->steps[0];

	if (!m->reqid[0])
		return 0;
	if (m->txn)
		return 'x';
	if (m->xfer && st->result != ACCOUNT_CHANGED)
		return 0; /* refused: nothing to remember */
	if (m->xfer)
		return st->op == OP_XFER_DEBIT	? 'd' :
		       st->op == OP_XFER_REFUND ? 'r' :
						  0;
	return st->result == ACCOUNT_SET     ? 's' :
	       st->result == ACCOUNT_CHANGED ? 'c' :
					       0;
}

/*
 * Makes the account what the steps left, once its record is queued in
 * journal batch `batch`: readers of the account wait for that batch
 * (await_state), and WATCH sees the change now, as Redis's does when
 * a change is made. `a`: the account as run_steps found it, or NULL.
 * A remembered transaction takes m->results with its id.
 */
static void apply_after(struct account_msg *m, struct account *a,
			uint64_t batch)
{
	struct accounts *as = m->bank->accounts;
	struct table *t = &as->tables[m->group];
	char tag;

	t->batch = batch;
	if (!m->after_exists) {
		table_remove(as, t, m->key);
		t->closed_batch = batch;
		return;
	}
	if (!a) /* a new account */
		a = table_get(as, t, m->key);
	a->seq = ++t->seq;
	a->batch = batch;
	/* Unchanged, after_str is a->str itself: nothing to copy. */
	if (m->after_str != a->str)
		account_set_str(a, m->after_str, m->after_str_len);
	a->balance = m->after_str ? 0 : m->after_balance;
	tag = reply_tag(m);
	if (tag) {
		reqid_remember(a, m->reqid, tag, m->after_balance, m->results);
		m->results = NULL; /* the entry's now */
	}
}

/*
 * What the message's reply showed is durable now (status 0), or never
 * will be. A transfer's message still holds its group: the saga goes
 * on and the message completes. Any other completed at once; its reply
 * goes on now, or once the dispatcher has completed it (bank_completed).
 * A transaction's results are no longer the message's by now: the
 * account's ids took them when it was applied, or run_steps freed them.
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

/* A deposit or a withdrawal on the state the earlier steps left. */
static void step_move(struct account_step *st, struct account_msg *m,
		      struct bank_worker *bw)
{
	bool out = st->op == OP_WITHDRAW || st->op == OP_XFER_DEBIT;

	if (m->after_str) {
		st->result = ACCOUNT_NOT_INTEGER;
		return;
	}
	if (out && st->amount > m->after_balance) {
		count_one(&bw->overdrafts);
		st->result = ACCOUNT_OVERDRAFT;
		return;
	}
	if (!out && m->after_balance > LLONG_MAX - st->amount) {
		st->result = ACCOUNT_OVERFLOW;
		return;
	}
	m->after_balance += out ? -st->amount : st->amount;
	m->after_exists = true;
	st->result = ACCOUNT_CHANGED;
	st->balance = m->after_balance;
}

/* The number of digits of a balance (>= 0), as STRLEN counts it. */
static long long digits(long long v)
{
	long long n = 1;

	for (; v >= 10; v /= 10)
		n++;
	return n;
}

/* GET, EXISTS, TYPE, STRLEN, WATCH: what the key holds. */
static void step_read(struct account_step *st, const struct account_msg *m)
{
	st->result = m->after_exists ? ACCOUNT_FOUND : ACCOUNT_MISSING;
	st->balance = m->after_balance;
	if (!m->after_exists)
		return;
	if (st->op == OP_GET && m->after_str)
		account_step_set_str(st, m->after_str, m->after_str_len);
	if (st->op == OP_STRLEN)
		st->balance = m->after_str ? (long long)m->after_str_len :
					     digits(m->after_balance);
}

/* Runs one step on the state the earlier steps left. */
static void step_run(struct account_step *st, struct account_msg *m,
		     struct bank_worker *bw)
{
	switch (st->op) {
	case OP_GET:
	case OP_EXISTS:
	case OP_TYPE:
	case OP_STRLEN:
	case OP_WATCH:
	case OP_SCAN:
		step_read(st, m);
		break;
	case OP_DEPOSIT:
	case OP_WITHDRAW:
	case OP_XFER_DEBIT:
	case OP_XFER_CREDIT:
	case OP_XFER_REFUND:
		step_move(st, m, bw);
		break;
	case OP_SET:
		m->after_exists = true;
		m->after_str = st->str; /* NULL: a balance */
		m->after_str_len = st->str_len;
		m->after_balance = st->str ? 0 : st->amount;
		st->result = ACCOUNT_SET;
		st->balance = m->after_balance;
		break;
	case OP_CLOSE:
		st->result = m->after_exists ? ACCOUNT_CLOSED : ACCOUNT_MISSING;
		m->after_exists = false;
		m->after_balance = 0;
		m->after_str = NULL;
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

/* Whether the steps leave the key as it was (nothing to journal). */
static bool unchanged(const struct account_msg *m, const struct account *a)
{
	if (!a || !m->after_exists)
		return !a && !m->after_exists;
	if (!a->str != !m->after_str)
		return false;
	if (a->str)
		return a->str_len == m->after_str_len &&
		       memcmp(a->str, m->after_str, a->str_len) == 0;
	return a->balance == m->after_balance;
}

/*
 * The record of the steps' net effect into rec[RECORD_MAX]: its
 * length, or 0 when they changed nothing (and have no id to journal).
 */
static size_t net_record(const struct account_msg *m, const struct account *a,
			 char *rec)
{
	/* Not zeroed (1.7 KB per change): record_encode reads its kind's. */
	struct record r;
	char tag = reply_tag(m);

	r.kind = RECORD_DELTA;
	r.delta = 0;
	r.reply = '\0';
	r.reqid[0] = r.peer[0] = r.results[0] = '\0';
	if (!m->after_exists) {
		if (!a)
			return 0; /* nothing to close, nowhere to remember */
		r.kind = RECORD_CLOSE;
		tag = 0; /* a closed account forgets its ids */
	} else if (unchanged(m, a) && !tag) {
		return 0;
	} else if (m->after_str) {
		r.kind = RECORD_STRING;
		r.value_len = m->after_str_len;
		memcpy(r.value, m->after_str, m->after_str_len);
	} else {
		r.delta = m->after_balance - (a && !a->str ? a->balance : 0);
	}
	if (tag) {
		r.reply = tag;
		memcpy(r.reqid, m->reqid, sizeof(r.reqid));
		if (tag == 'x') /* results_encode kept it to RESULTS_MAX */
			memcpy(r.results, m->results, strlen(m->results) + 1);
	}
	if (m->xfer)
		transfer_tag(m, &r);
	memcpy(r.key, m->key, sizeof(r.key)); /* no printf per change */
	return record_encode(rec, &r);
}

/* ---- a transaction's results, as its record and its retries keep them ---- */

/*
 * One step: its op and result as letters, then its balance in decimal
 * or "=HEX" for a string; steps separated by ','. False if more than
 * RESULTS_MAX characters.
 */
static bool results_encode(const struct account_step *steps, unsigned n,
			   char *dst)
{
	static const char hex[] = "0123456789abcdef";
	size_t at = 0, need;
	unsigned i, k;

	for (i = 0; i < n; i++) {
		const struct account_step *st = &steps[i];
		bool str = st->result == ACCOUNT_FOUND && st->str;
		bool num = st->result == ACCOUNT_CHANGED ||
			   st->result == ACCOUNT_FOUND;

		need = 3 + (str ? 1 + 2 * (size_t)st->str_len : num ? 20 : 0);
		if (at + need > RESULTS_MAX)
			return false;
		if (i)
			dst[at++] = ',';
		dst[at++] = (char)('a' + st->op);
		dst[at++] = (char)('a' + st->result);
		if (str) {
			dst[at++] = '=';
			for (k = 0; k < st->str_len; k++) {
				dst[at++] = hex[(unsigned char)st->str[k] >> 4];
				dst[at++] = hex[(unsigned char)st->str[k] & 15];
			}
		} else if (num) {
			at += (size_t)snprintf(dst + at, 21, "%lld",
					       st->balance);
		}
	}
	dst[at] = '\0';
	return true;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' :
	       c >= 'a' && c <= 'f' ? c - 'a' + 10 :
				      -1;
}

/* One step's token [p, end) into st. */
static bool result_decode(const char *p, const char *end,
			  struct account_step *st)
{
	size_t n = (size_t)(end - p), i;
	char buf[VALUE_MAX];

	if (n < 2 || p[0] < 'a' || p[0] > 'a' + OP_SCAN || p[1] < 'a' ||
	    p[1] > 'a' + ACCOUNT_NOT_INTEGER)
		return false;
	st->op = (enum account_op)(p[0] - 'a');
	st->result = (enum account_result)(p[1] - 'a');
	free(st->str);
	st->str = NULL;
	if (n > 2 && p[2] == '=') {
		if ((n - 3) % 2 || (n - 3) / 2 > VALUE_MAX)
			return false;
		for (i = 0; i < (n - 3) / 2; i++) {
			int hi = hex_digit(p[3 + 2 * i]);
			int lo = hex_digit(p[4 + 2 * i]);

			if (hi < 0 || lo < 0)
				return false;
			buf[i] = (char)(hi << 4 | lo);
		}
		account_step_set_str(st, buf, (n - 3) / 2);
		return true;
	}
	return n == 2 || resp_parse_ll(p + 2, n - 2, &st->balance);
}

/* The results of a transaction's first run back into its n steps. */
static bool results_decode(const char *s, struct account_step *steps,
			   unsigned n)
{
	const char *end;
	unsigned i;

	for (i = 0; i < n; i++, s = end + 1) {
		end = strchr(s, ',');
		if (!end)
			end = s + strlen(s);
		if (!result_decode(s, end, &steps[i]))
			return false;
		if (!*end)
			return i + 1 == n;
	}
	return false;
}

/*
 * A retry: the request id names a change already made, whose first
 * reply is answered again; nothing is applied. True if so.
 */
static bool answered_before(struct account_msg *m, const struct account *a)
{
	struct account_step *st = &m->steps[0];
	const struct reqid_entry *e;

	/* A refund carries its transfer's id, to be remembered, not found. */
	if (!m->reqid[0] || (m->xfer && st->op != OP_XFER_DEBIT))
		return false;
	e = reqid_find(a, m->reqid);
	if (!e)
		return false;
	if (m->txn) {
		if (e->reply != 'x' || !e->results ||
		    !results_decode(e->results, m->steps, m->nsteps))
			m->txn_outcome = TXN_REQID_REUSED;
		return true;
	}
	st->result = e->reply == 's' ? ACCOUNT_SET : ACCOUNT_CHANGED;
	st->balance = e->balance;
	if (m->xfer) {
		m->xfer->outcome = e->reply == 'r' ? TRANSFER_REFUNDED :
						     TRANSFER_SETTLED;
		m->xfer->refusal = ACCOUNT_NONE;
		m->xfer->from_balance = e->balance;
	}
	return true;
}

/* WATCH: the key's state now, for EXEC to compare with its own. */
static void watch_fill(struct account_msg *m, const struct table *t,
		       const struct account *a)
{
	m->watch->existed = a != NULL;
	m->watch->seq = t->seq;
	m->watch->set = true;
}

/* Whether a key a transaction watches changed since its WATCH ran. */
static bool watch_changed(const struct account_msg *m, const struct table *t,
			  const struct account *a)
{
	unsigned i;

	for (i = 0; i < m->nwatches; i++) {
		const struct watch *w = m->watches[i];

		/* Another key's, or not run: cannot be compared here. */
		if (!w->set || strcmp(w->key, m->key) != 0 ||
		    w->existed != (a != NULL))
			return true;
		if (a ? a->seq > w->seq : t->removed_seq > w->seq)
			return true;
	}
	return false;
}

/* SCAN: every key of the message's group, to the scan's found(). */
static void scan_group(struct bank *b, struct account_msg *m)
{
	const struct table *t = &b->accounts->tables[m->group];
	size_t i;

	for (i = 0; t->slots && i <= t->mask; i++)
		if (t->slots[i])
			m->scan->found(m->scan->arg, t->slots[i]->key);
	m->steps[0].result = ACCOUNT_FOUND;
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
 * A message that journals nothing waits for batch `batch` instead,
 * that of the last change it saw.
 */
static int await_batch(struct account_msg *m, struct journal *j,
		       uint64_t batch)
{
	int ret = journal_wait(j, batch, &m->wait);

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
 * A message that journals nothing (a read, a refusal, a retry answered
 * again, EXEC aborted by a watched change) shows the account as changes
 * not yet durable may have left it: it waits for the batch of the
 * account's last change, or, if it has none, of the group's last close.
 */
static int await_state(struct account_msg *m, struct journal *j,
		       const struct table *t, const struct account *a)
{
	return await_batch(m, j, a ? a->batch : t->closed_batch);
}

static void drop_results(struct account_msg *m)
{
	free(m->results);
	m->results = NULL;
}

/*
 * The steps' net effect as one record, journaled and applied in memory
 * at once (a transaction with REQID remembers its results with it).
 */
static int journal_steps(struct account_msg *m, struct bank_worker *bw,
			 const struct table *t, struct account *a)
{
	char rec[RECORD_MAX];
	uint64_t batch;
	size_t len;
	int ret;

	if (m->txn && m->reqid[0]) {
		m->results = xrealloc(NULL, RESULTS_MAX + 1);
		if (!results_encode(m->steps, m->nsteps, m->results)) {
			drop_results(m);
			m->txn_outcome = TXN_RESULTS_TOO_LONG;
			return await_state(m, &bw->journal, t, a);
		}
	}
	len = net_record(m, a, rec);
	if (len == 0) {
		drop_results(m);
		return await_state(m, &bw->journal, t, a);
	}
	batch = journal_batch_id(&bw->journal); /* the one it joins */
	ret = journal_append(&bw->journal, rec, len, &m->wait);
	if (ret < 0) { /* nothing applied */
		drop_results(m);
		m->journal_failed = true;
		return ret;
	}
	m->journaled = true;
	apply_after(m, a, batch);
	drop_results(m); /* unless remembered: a close forgets ids */
	return wait_for_journal(m);
}

/* A message's state for this run of its handler. */
static void msg_begin(struct account_msg *m, struct bank *b, agr_exchange *ex,
		      unsigned wi)
{
	m->bank = b;
	m->ex = ex;
	m->worker = wi;
	m->group = agr_exchange_group(ex);
	m->awaiting = m->journaled = m->answered = false;
	m->completed = NULL;
	m->wait.durable = entry_durable;
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
	unsigned i;

	msg_begin(m, b, ex, wi);
	t = &b->accounts->tables[m->group];
	if (m->scan) { /* the keys, as of the group's last change */
		scan_group(b, m);
		return await_batch(m, &bw->journal, t->batch);
	}
	a = table_find(t, m->key);
	m->answered = answered_before(m, a);
	if (m->answered)
		return await_state(m, &bw->journal, t, a);
	if (m->txn && watch_changed(m, t, a)) {
		m->txn_outcome = TXN_WATCH_CHANGED;
		return await_state(m, &bw->journal, t, a);
	}
	m->after_exists = a != NULL;
	m->after_balance = a ? a->balance : 0;
	m->after_str = a ? a->str : NULL;
	m->after_str_len = a ? a->str_len : 0;
	for (i = 0; i < m->nsteps; i++)
		step_run(&m->steps[i], m, bw);
	if (m->watch)
		watch_fill(m, t, a);
	return journal_steps(m, bw, t, a);
}

struct bank *bank_new(agr_dispatcher *disp, struct accounts *accounts)
{
	struct bank *b = xcalloc(1, sizeof(*b));
	size_t size;
	int ret;

	b->accounts = accounts;
	transfer_ids_init(); /* unique across restarts */
	b->sched = agr_dispatcher_scheduler(disp);
	b->nworkers = (unsigned)agr_scheduler_parallelism(b->sched);
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

agr_scheduler *bank_scheduler(const struct bank *b)
{
	return b->sched;
}

const struct accounts *bank_tables(const struct bank *b)
{
	return b->accounts;
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
		if (o->id[0] == '@') /* a client's: its refund is remembered */
			snprintf(x->refund.reqid, sizeof(x->refund.reqid), "%s",
				 o->id);
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
