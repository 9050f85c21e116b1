/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger_handler.h - the bank.Account command handler: Deposit,
 * applied through Wow's event store and published on :event.
 */
#ifndef EXAMPLES_WOW_LEDGER_HANDLER_H
#define EXAMPLES_WOW_LEDGER_HANDLER_H

#include <stdatomic.h>
#include <stdint.h>

#include "wow_common.h"

struct wow_ledger {
	struct wow_workers *workers;
	const char *event_topic;
	uint64_t retry_for_ms; /* transient failures are retried this long */
	_Atomic uint64_t applied, duplicates, conflicts, retries, failed;
};

/* An agr_handler_fn for "Deposit"; arg is the struct wow_ledger. */
int wow_ledger_deposit(agr_exchange *ex, void *arg);

#endif
