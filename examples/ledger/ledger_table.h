/* SPDX-License-Identifier: MIT */
/*
 * ledger_table.h - the account tables (ledger_table.c), as the bank
 * (ledger_accounts.c) sees them: private to the two; the rest of the
 * server knows struct accounts only by name (ledger_accounts.h).
 */
#ifndef LEDGER_TABLE_H
#define LEDGER_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ledger_accounts.h"

/* The request ids of an account's last changes, and their replies. */
struct reqid_entry {
	long long balance; /* reply 'c', 'd', 'r': the balance after it */
	char reply;	   /* 'c', 's' (OK), 'x', 'd', 'r' (ledger_record.h) */
	char *results;	   /* 'x': the transaction's results, encoded */
	char id[REQID_MAX + 1];
};

struct reqids {
	unsigned next; /* the oldest, overwritten next */
	struct reqid_entry e[REQID_WINDOW];
};

struct account {
	long long balance;
	uint64_t hash;
	uint64_t seq;	    /* its table's seq at its last change (WATCH) */
	uint64_t batch;	    /* the journal batch of its last change; 0: replay */
	struct reqids *ids; /* NULL until a change carries a request id */
	char *str;	    /* a string's value (xmalloc), or NULL */
	unsigned str_len;
	char key[];
};

/* One group's accounts: open addressing, linear probing. */
struct table {
	struct account **slots;
	size_t mask; /* slots - 1; slots is a power of two */
	size_t count;
	uint64_t seq;	      /* changes applied, for WATCH */
	uint64_t removed_seq; /* seq at the last removal */
	uint64_t batch;	       /* the journal batch of its last change */
	uint64_t closed_batch; /* the journal batch of its last close */
};

struct accounts {
	int ngroups;
	atomic_ullong count; /* over every table: read by INFO, DBSIZE */
	struct table tables[]; /* [ngroups] */
};

/* The newest entry of id: a refund comes after its transfer's debit. */
const struct reqid_entry *reqid_find(const struct account *a, const char *id);

/* Remembers id; takes `results` ('x', xmalloc'd; else NULL). */
void reqid_remember(struct account *a, const char *id, char reply,
		    long long balance, char *results);

/* The key holds a copy of [p, p + len), or a balance when p is NULL. */
void account_set_str(struct account *a, const char *p, unsigned len);

/* The account of `key` in t, or NULL. */
struct account *table_find(const struct table *t, const char *key);

/* The account, created with balance 0 if it has none yet. */
struct account *table_get(struct accounts *as, struct table *t,
			  const char *key);

/* Removes `key` if it is there. */
void table_remove(struct accounts *as, struct table *t, const char *key);

#endif /* LEDGER_TABLE_H */
