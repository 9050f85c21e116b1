/* SPDX-License-Identifier: MIT */
/*
 * ledger_account_msg.c - the messages the requests build for the
 * accounts (ledger_accounts.h): one step or a transaction's, WATCH's
 * shared keys, the group a message goes to, and a transfer's three
 * messages with its id. The bank runs them (ledger_accounts.c).
 */
#include "ledger_accounts.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* ---- messages ---- */

static const char *const op_type[] = {
	"Get", "Exists", "Deposit", "Withdraw", "Set", "Close",
	"TransferDebit", "TransferCredit", "TransferRefund",
	"Type", "Strlen", "Watch", "Scan",
};

void account_steps_free(struct account_step *steps, unsigned n)
{
	unsigned i;

	for (i = 0; steps && i < n; i++) {
		free(steps[i].str);
		steps[i].str = NULL;
	}
}

void account_step_set_str(struct account_step *st, const char *p,
			  size_t len)
{
	free(st->str);
	st->str = xrealloc(NULL, len + 1);
	memcpy(st->str, p, len);
	st->str[len] = '\0';
	st->str_len = (unsigned)len;
}

struct watch *watch_new(const char *key, size_t len)
{
	struct watch *w = xcalloc(1, sizeof(*w));

	atomic_init(&w->refs, 1);
	memcpy(w->key, key, len);
	w->key[len] = '\0';
	return w;
}

struct watch *watch_get(struct watch *w)
{
	atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
	return w;
}

void watch_put(struct watch *w)
{
	/* acq_rel: the last one sees what every holder wrote. */
	if (w && atomic_fetch_sub_explicit(&w->refs, 1,
					   memory_order_acq_rel) == 1)
		free(w);
}

int bank_group_key(const agr_message *msg, int parallelism, void *arg)
{
	const struct account_msg *m = (const struct account_msg *)(const void *)
		((const char *)msg - offsetof(struct account_msg, msg));

	(void)arg;
	if (m->scan)
		return m->scan->group % parallelism;
	return agr_group_key(msg->aggregate_id, parallelism);
}

static void msg_init_key(struct account_msg *m, const char *key, size_t len,
			 void *user)
{
	memcpy(m->key, key, len);
	m->key[len] = '\0';
	m->msg.aggregate_id = m->key;
	m->msg.user = user;
	m->journal_failed = false;
	m->awaiting = false; /* a message discarded unrun is passed on */
	m->answered = false;
	m->completed = NULL;
	m->reqid[0] = '\0';
	m->xfer = NULL;
	m->txn = false;
	m->txn_outcome = TXN_RAN;
	m->watch = NULL;
	m->watches = NULL;
	m->nwatches = 0;
	m->scan = NULL;
	m->results = NULL;
	m->after_str = NULL;
	m->after_str_len = 0;
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
	m->txn = true;
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

void transfer_ids_init(void)
{
	xfer_epoch = realtime_ns();
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

void transfer_set_reqid(struct transfer *x, const char *id, size_t len)
{
	snprintf(x->id, sizeof(x->id), "@%.*s", (int)len, id);
	/* Remembered on the source: its debit, and a refund after it. */
	snprintf(x->debit.reqid, sizeof(x->debit.reqid), "%s", x->id);
	snprintf(x->refund.reqid, sizeof(x->refund.reqid), "%s", x->id);
}

bool transfer_message_done(struct transfer *x)
{
	/* acq_rel: the last one sees what every handler of x wrote. */
	return atomic_fetch_sub_explicit(&x->inflight, 1,
					 memory_order_acq_rel) == 1;
}
