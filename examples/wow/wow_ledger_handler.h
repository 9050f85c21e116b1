/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger_handler.h - the bank.Account aggregate: Deposit ->
 * Deposited {amount, balance}; state {"balance": B}. Wow's command
 * processor (aggring/wow_processor.h) runs it.
 */
#ifndef EXAMPLES_WOW_LEDGER_HANDLER_H
#define EXAMPLES_WOW_LEDGER_HANDLER_H

#include <aggring/wow_processor.h>

/* agr_wow_command_fn: a Deposit of a positive amount. */
int wow_account_on_command(const agr_wow_aggregate_state *st,
			   const agr_wow_command *cmd, agr_wow_outcome *out,
			   void *arg);
/* agr_wow_sourcing_fn: the balance after a stored stream. */
int wow_account_on_sourcing(const agr_wow_aggregate_state *st,
			    const agr_wow_event_stream *s,
			    agr_wow_outcome *out, void *arg);

#endif
