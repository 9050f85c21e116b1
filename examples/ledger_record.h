/* SPDX-License-Identifier: MIT */
/*
 * ledger_record.h - the ledger's journal records and account names.
 *
 * A record is one line, "ACCOUNT CHANGE CRC\n", CRC the CRC-32 (IEEE,
 * as zlib) of what precedes it on the line in 8 hex digits. CHANGE is
 * "+AMOUNT" or "-AMOUNT" (AMOUNT > 0; "+0" creates an empty account)
 * or "close" (the account is closed: gone, as if it never was),
 * optionally followed by " #K:ID": the change was made by the request
 * of id ID, whose first reply was the balance after it (K 'c') or OK
 * (K 's'), remembered for its retries (ledger_accounts.h); or
 * " #d:XID:TO" (the debit of transfer XID to account TO), " #t:XID:FROM"
 * (its credit), " #r:XID" (its refund to the debited account). One
 * record is one atomic change: a transaction's commands on one account
 * are journaled as the single record of their net effect. An account
 * name is 1 to KEY_MAX printable ASCII characters without spaces.
 */
#ifndef LEDGER_RECORD_H
#define LEDGER_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#define KEY_MAX 128
#define REQID_MAX 64 /* a request id: printable ASCII, no spaces */
#define RECORD_MAX (2 * KEY_MAX + REQID_MAX + 64)

/* Fills the CRC table; once, before any thread starts. */
void record_init(void);

/* Whether [p, p + len) is a valid account name. */
bool key_valid(const char *p, size_t len);

enum record_kind {
	RECORD_DELTA, /* add delta to the balance, creating the account */
	RECORD_CLOSE, /* remove the account */
};

struct record {
	enum record_kind kind;
	long long delta; /* RECORD_DELTA */
	/*
	 * With reqid: 'c' (reply: the balance) or 's' (OK), a request's;
	 * 'd', 't', 'r': a transfer's debit, credit, refund, reqid its id.
	 */
	char reply;
	char key[KEY_MAX + 1];
	char reqid[REQID_MAX + 1]; /* "" when no request id */
	char peer[KEY_MAX + 1];	   /* 'd': to; 't': from */
};

/* Whether [p, p + len) is a valid request id. */
bool reqid_valid(const char *p, size_t len);

/* Writes rec into dst[RECORD_MAX]; its length. */
size_t record_encode(char *dst, const struct record *rec);

/*
 * Writes `body` (shorter than RECORD_MAX - 10) with its " CRC\n" into
 * dst[RECORD_MAX]; its length. For tests: any line, with a valid CRC.
 */
size_t record_seal(char *dst, const char *body);

/*
 * Parses one whole line (with its '\n') into *rec; false if it is torn
 * or corrupt.
 */
bool record_parse(const char *line, size_t len, struct record *rec);

#endif /* LEDGER_RECORD_H */
