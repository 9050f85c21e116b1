/* SPDX-License-Identifier: MIT */
/*
 * ledger_account_reply.c - what a command answers once its account
 * messages have run (ledger_commands.h): one step's reply, a
 * transaction's array, a transfer's outcome, a refused send's error,
 * and what EXISTS and DEL count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_commands.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_command_ctx.h"
#include "ledger_record.h"
#include "util.h"

static size_t fit(size_t n)
{
	return n <= REPLY_MAX ? n : 0;
}

static size_t error_reply(char *dst, const char *msg)
{
	return fit(resp_encode_error(dst, REPLY_MAX, msg));
}

/* The reply of one step of a message. */
static size_t step_reply(const struct account_step *st, char *dst)
{
	char num[RESP_LL_MAX];
	size_t n;

	switch (st->result) {
	case ACCOUNT_CHANGED:
		return fit(resp_encode_integer(dst, REPLY_MAX, st->balance));
	case ACCOUNT_SET:
		return fit(resp_encode_simple(dst, REPLY_MAX, "OK"));
	case ACCOUNT_FOUND:
		if (st->op == OP_EXISTS)
			return fit(resp_encode_integer(dst, REPLY_MAX, 1));
		if (st->op == OP_TYPE) /* as Redis calls an integer too */
			return fit(resp_encode_simple(dst, REPLY_MAX,
						      "string"));
		if (st->op == OP_STRLEN)
			return fit(resp_encode_integer(dst, REPLY_MAX,
						       st->balance));
		if (st->str)
			return fit(resp_encode_bulk(dst, REPLY_MAX, st->str,
						    st->str_len));
		n = resp_format_ll(num, st->balance);
		return fit(resp_encode_bulk(dst, REPLY_MAX, num, n));
	case ACCOUNT_MISSING:
		if (st->op == OP_GET)
			return fit(resp_encode_nil(dst, REPLY_MAX));
		if (st->op == OP_TYPE)
			return fit(resp_encode_simple(dst, REPLY_MAX, "none"));
		return fit(resp_encode_integer(dst, REPLY_MAX, 0));
	case ACCOUNT_CLOSED:
		return fit(resp_encode_integer(dst, REPLY_MAX, 1));
	case ACCOUNT_OVERDRAFT:
		return error_reply(dst, "ERR insufficient funds");
	case ACCOUNT_OVERFLOW:
		return error_reply(dst, "ERR increment or decrement would "
				   "overflow");
	case ACCOUNT_NOT_INTEGER:
		return error_reply(dst, "ERR value is not an integer or out "
				   "of range");
	case ACCOUNT_NONE:
		break;
	}
	return error_reply(dst, "ERR internal error");
}

size_t command_account_reply(const struct account_msg *m, int status,
			     char *dst)
{
	if (m->journal_failed)
		return error_reply(dst, "ERR journal write failed");
	if (status == AGR_DISCARDED || status == AGR_INTERRUPTED)
		return error_reply(dst, "ERR server is shutting down");
	if (status < 0)
		return error_reply(dst, "ERR internal error");
	return step_reply(&m->steps[0], dst);
}

void command_txn_reply(const struct account_msg *m, int status,
		       struct buf *dst)
{
	char one[REPLY_MAX];
	size_t n;
	unsigned i;

	if (m->journal_failed || status < 0) {
		n = command_account_reply(m, status, one);
		buf_append(dst, one, n);
		return;
	}
	switch (m->txn_outcome) {
	case TXN_WATCH_CHANGED: /* as Redis: a nil array, nothing applied */
		buf_append(dst, "*-1\r\n", 5);
		return;
	case TXN_RESULTS_TOO_LONG:
		reply_error(dst, "ERR the replies of a transaction with a "
			    "REQID must fit in 1024 bytes; nothing was "
			    "applied");
		return;
	case TXN_REQID_REUSED:
		reply_error(dst, "ERR REQID names another request; nothing "
			    "was applied");
		return;
	case TXN_RAN:
		break;
	}
	reply_array(dst, m->nsteps);
	for (i = 0; i < m->nsteps; i++) {
		n = step_reply(&m->steps[i], one);
		buf_append(dst, one, n);
	}
}

size_t command_transfer_reply(const struct transfer *x, char *dst)
{
	switch (x->outcome) {
	case TRANSFER_SETTLED:
		return fit(resp_encode_integer(dst, REPLY_MAX,
					       x->from_balance));
	case TRANSFER_REFUSED:
		return x->refusal == ACCOUNT_OVERDRAFT ?
			       error_reply(dst, "ERR insufficient funds") :
		       x->refusal == ACCOUNT_NOT_INTEGER ?
			       error_reply(dst, "ERR value is not an integer "
					   "or out of range") :
			       error_reply(dst, "ERR internal error");
	case TRANSFER_REFUNDED: /* a retry knows only that it was */
		return error_reply(dst, x->refusal == ACCOUNT_OVERFLOW ?
			"ERR transfer refused by the destination (its "
			"balance would overflow); refunded" :
			x->refusal == ACCOUNT_NOT_INTEGER ?
			"ERR transfer refused by the destination (it holds "
			"a string); refunded" :
			"ERR transfer refused by the destination; refunded");
	case TRANSFER_UNFINISHED:
		return error_reply(dst, "ERR server is shutting down; the "
				   "transfer completes at restart");
	case TRANSFER_PENDING:
		break;
	}
	return error_reply(dst, "ERR journal write failed; the transfer "
			   "completes at restart if it was debited");
}

void command_msg_release(struct account_msg *m)
{
	unsigned i;

	account_steps_free(m->steps, m->nsteps);
	watch_put(m->watch);
	m->watch = NULL;
	for (i = 0; i < m->nwatches; i++)
		watch_put(m->watches[i]);
	free(m->watches);
	m->watches = NULL;
	m->nwatches = 0;
}

bool command_account_counts(const struct account_msg *m, int status)
{
	return status == 0 && !m->journal_failed &&
	       (m->steps[0].result == ACCOUNT_FOUND ||
		m->steps[0].result == ACCOUNT_CLOSED);
}

size_t command_refused_reply(int err, char *dst)
{
	return error_reply(dst, err == -ESHUTDOWN ?
					"ERR server is shutting down" :
					"ERR server busy");
}
