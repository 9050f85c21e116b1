/* SPDX-License-Identifier: MIT */
/*
 * wow_accounts.h - the bank.Account aggregate's state as one worker
 * caches it: version and balance by account id. A cache only: the
 * event store is the truth, and a version conflict reloads from it.
 */
#ifndef EXAMPLES_WOW_ACCOUNTS_H
#define EXAMPLES_WOW_ACCOUNTS_H

#include <stdbool.h>
#include <stdint.h>

struct wow_account {
	char *id;
	int32_t version; /* last version applied; 0: none */
	int64_t balance;
	bool loaded;	 /* read from the event store at least once */
	struct wow_account *next;
};

struct wow_accounts;

struct wow_accounts *wow_accounts_new(void);
void wow_accounts_free(void *accounts);
/* The account, made (not loaded, version 0) if it was not cached. */
struct wow_account *wow_accounts_get(struct wow_accounts *a, const char *id);
/* Calls fn for every account. */
void wow_accounts_each(struct wow_accounts *a,
		       void (*fn)(struct wow_account *acct, void *arg),
		       void *arg);

/* The Deposit command's body {"amount": N}: 0, or -EBADMSG. */
int wow_deposit_amount(const char *body, int64_t *amount);
/* The Deposited event's body {"amount": N, "balance": B}. */
int wow_deposited_parse(const char *body, int64_t *amount, int64_t *balance);

#endif
