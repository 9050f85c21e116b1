/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger_handler.c - the account logic of bank.Account and nothing
 * else: Wow's processor (aggring/wow_processor.h) reads the state,
 * checks the preconditions, appends, retries, publishes and acks.
 */
#include "wow_ledger_handler.h"
#include "wow_accounts.h"
#include "wow_common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int state_of(int64_t balance, agr_wow_outcome *out)
{
	char state[48];
	int n = snprintf(state, sizeof(state), "{\"balance\":%" PRId64 "}",
			 balance);

	return agr_wow_outcome_state(out, state, (size_t)n, false);
}

int wow_account_on_command(const agr_wow_aggregate_state *st,
			   const agr_wow_command *cmd, agr_wow_outcome *out,
			   void *arg)
{
	int64_t amount, balance = 0;
	char body[96];
	int n, ret;

	(void)arg;
	if (strcmp(cmd->name, WOW_DEPOSIT) ||
	    wow_deposit_amount(cmd->body, &amount) < 0)
		return agr_wow_outcome_error(out, "IllegalArgument",
					     "not a Deposit {amount}");
	if (amount <= 0)
		return agr_wow_outcome_error(out, "IllegalArgument",
					     "amount must be positive");
	/* the state is what state_of() wrote, or "{}" before the first */
	if (st->version > 0 &&
	    sscanf(st->state, "{\"balance\":%" SCNd64 "}", &balance) != 1)
		return -EBADMSG;
	balance += amount;
	n = snprintf(body, sizeof(body),
		     "{\"amount\":%" PRId64 ",\"balance\":%" PRId64 "}", amount,
		     balance);
	ret = agr_wow_outcome_event(out, WOW_DEPOSITED, WOW_DEPOSITED_TYPE,
				    body, (size_t)n, NULL);
	return ret < 0 ? ret : state_of(balance, out);
}

int wow_account_on_sourcing(const agr_wow_aggregate_state *st,
			    const agr_wow_event_stream *s,
			    agr_wow_outcome *out, void *arg)
{
	int64_t amount, balance;

	(void)st, (void)arg;
	if (!s->event_count ||
	    wow_deposited_parse(s->events[s->event_count - 1].body, &amount,
				&balance) < 0)
		return -EBADMSG;
	return state_of(balance, out);
}
