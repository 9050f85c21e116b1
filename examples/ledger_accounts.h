/* SPDX-License-Identifier: MIT */
/*
 * ledger_accounts.h - the account aggregate of ledger_server: the
 * balances, the messages that read and change them, and the bank that
 * handles those messages on the dispatcher's groups.
 *
 * Each account is an aggregate, routed by name to a group; a group
 * reads and writes only its own table of balances, serially, so no lock
 * is needed. A deposit or a withdrawal is journaled (ledger_journal.h)
 * in the journal of the group's worker and applied only once it is
 * durable: nothing unjournaled is ever visible.
 */
#ifndef LEDGER_ACCOUNTS_H
#define LEDGER_ACCOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "ledger_journal.h"
#include "ledger_record.h"

/* ---- balances: one table per group ---- */

struct accounts;

struct accounts *accounts_new(int ngroups);
void accounts_free(struct accounts *a);

/*
 * Replay: adds delta to the balance of `key` in its group's table
 * (agr_group_key), creating the account; false if it would overflow.
 */
bool accounts_add(struct accounts *a, const char *key, long long delta);

/* Calls fn for every account, group by group. */
void accounts_each(const struct accounts *a,
		   void (*fn)(void *arg, const char *key, long long balance),
		   void *arg);

/* ---- messages ---- */

enum account_op { OP_GET, OP_DEPOSIT, OP_WITHDRAW };

/* What became of a message; set by the bank before it completes. */
enum account_result {
	ACCOUNT_NONE,	       /* not handled (discarded, or an error) */
	ACCOUNT_CHANGED,       /* a deposit or withdrawal: now `balance` */
	ACCOUNT_FOUND,	       /* a Get: the account holds `balance` */
	ACCOUNT_MISSING,       /* a Get: the account never had an event */
	ACCOUNT_OVERDRAFT,     /* a withdrawal larger than the balance */
	ACCOUNT_OVERFLOW,      /* the balance would overflow */
	ACCOUNT_JOURNAL_FAILED /* the event could not be made durable */
};

/*
 * A message to an account. The sender fills it with account_msg_init()
 * and keeps it alive until the dispatcher's completion; then it reads
 * `result` and `balance`. The other fields are the bank's while the
 * message runs.
 */
struct account_msg {
	agr_message msg; /* aggregate_id: key; type: op's; user: sender's */
	enum account_op op;
	enum account_result result;
	long long amount;
	long long balance;
	struct bank *bank;
	agr_exchange *ex;
	int group;
	struct commit_wait wait;
	char key[KEY_MAX + 1];
};

/* key[0, len) a valid account name (key_valid), amount > 0. */
void account_msg_init(struct account_msg *m, enum account_op op,
		      const char *key, size_t len, long long amount,
		      void *user);

static inline struct account_msg *account_msg_of(agr_message *msg)
{
	return (struct account_msg *)(void *)((char *)msg -
					      offsetof(struct account_msg,
						       msg));
}

/* ---- the bank: the handlers, and a journal per worker ---- */

struct bank;

/*
 * Registers the handlers of Get, Deposit and Withdraw on `disp` (not
 * started yet) over `accounts` (one table per group of disp; the bank
 * takes them). The journals are opened with bank_journal() before the
 * dispatcher starts. Returns the bank; a failure ends the program.
 */
struct bank *bank_new(agr_dispatcher *disp, struct accounts *accounts);

/* Worker w's journal. */
struct journal *bank_journal(struct bank *b, unsigned w);

/* Withdrawals refused for want of funds, over all workers. */
uint64_t bank_overdrafts(const struct bank *b);

/* Closes the journals, frees the accounts; the workers have ended. */
void bank_free(struct bank *b);

#endif /* LEDGER_ACCOUNTS_H */
