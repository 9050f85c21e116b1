/* SPDX-License-Identifier: MIT */
/*
 * ledger_replay.h - rebuilding the balances from the journals, at a
 * restart and for --verify.
 *
 * Replay sums each account's amounts over every journal-I.log in the
 * directory, so it does not depend on the worker or group count; in
 * each file it stops at the first line that is incomplete or fails its
 * CRC (ledger_record.h). What follows must be the zeros a direct
 * journal wrote ahead; anything else is a torn batch, never
 * acknowledged: reported, and cut off (with everything after it) when
 * repairing, before the journal is written again, so that no record of
 * it can count later. It also finds the transfers a crash left open
 * (ledger_accounts.h): a debit without its credit or refund.
 */
#ifndef LEDGER_REPLAY_H
#define LEDGER_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "ledger_accounts.h"

/* What a replay found; the caller's, `ends` to free(). */
struct replay_result {
	unsigned journals;
	uint64_t events, torn_bytes;
	uint64_t accounts, negative; /* accounts, those below zero */
	long long total;	     /* the sum of the balances */
	bool total_overflow;	     /* ...which does not fit total */
	uint64_t *ends; /* [nends]: journal-I.log's whole records end here */
	unsigned nends;
	/* Transfers debited but neither credited nor refunded: */
	struct open_transfer *open; /* [nopen], to free() */
	unsigned nopen;
	long long in_flight; /* the sum of their amounts */
	bool interrupted; /* SIGTERM or SIGINT pending: stopped, repaired
			   * nothing; the rest of the result is partial */
};

/*
 * Replays the journals in `dir` into `accounts`; with `repair`, cuts
 * off torn tails (a server), else only reports them (--verify).
 * Failures end the program. A pending SIGTERM or SIGINT (checked every
 * 65,536 records) stops it with r->interrupted, the journals untouched.
 * Only the open transfers are kept, in an array of their size.
 */
void replay_journals(const char *dir, struct accounts *accounts,
		     bool repair, struct replay_result *r);

/*
 * --verify: what a restart would serve, printed on stdout; with `dump`,
 * "account balance" lines written there. Reads, never writes the
 * journals. Returns the exit status: 1 if a balance is negative.
 */
int replay_verify(const char *dir, const char *dump);

#endif /* LEDGER_REPLAY_H */
