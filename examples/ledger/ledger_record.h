/* SPDX-License-Identifier: MIT */
/*
 * ledger_record.h - the ledger's journal records and account names.
 *
 * A record is one line, "ACCOUNT CHANGE CRC\n", CRC the CRC-32 (IEEE,
 * as zlib) of what precedes it on the line in 8 hex digits. CHANGE is
 * "+AMOUNT" or "-AMOUNT" (AMOUNT > 0; "+0" creates an empty account),
 * "=HEX" (the key holds the string of bytes HEX spells, two lower-case
 * hex digits a byte, at most VALUE_MAX bytes; "=" is the empty string)
 * or "close" (the account is closed: gone, as if it never was). A key
 * holding a string has the balance 0 for a delta: a delta record makes
 * it an account again. CHANGE is optionally followed by " #K:ID": the
 * change was made by the request of id ID, whose first reply was the
 * balance after it (K 'c') or OK (K 's'), remembered for its retries
 * (ledger_accounts.h); " #x:ID:RESULTS" (a transaction's, RESULTS the
 * results of its commands as ledger_accounts.c spells them, up to
 * RESULTS_MAX printable characters without ':' or spaces; ID is what
 * precedes the last ':'); or " #d:XID:TO" (the debit of transfer XID to
 * account TO), " #t:XID:FROM" (its credit), " #r:XID" (its refund to the
 * debited account); XID has no ':', and starts with '@' when it is a
 * client's request id. One record is one atomic change: a transaction's
 * commands on one account are journaled as the single record of their
 * net effect. An account name is 1 to KEY_MAX printable ASCII characters
 * without spaces.
 */
#ifndef LEDGER_RECORD_H
#define LEDGER_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#define KEY_MAX 128
#define REQID_MAX 64 /* a request id: printable ASCII, no spaces */
#define VALUE_MAX 256 /* the longest string value, in bytes */
#define RESULTS_MAX 1024 /* a transaction's results in its record */
#define RECORD_MAX \
	(2 * KEY_MAX + REQID_MAX + 2 * VALUE_MAX + RESULTS_MAX + 64)

/* Fills the CRC table; once, before any thread starts. */
void record_init(void);

/* Whether [p, p + len) is a valid account name. */
bool key_valid(const char *p, size_t len);

enum record_kind {
	RECORD_DELTA, /* add delta to the balance, creating the account */
	RECORD_CLOSE, /* remove the account */
	RECORD_STRING, /* the key holds value[0, value_len) */
};

struct record {
	enum record_kind kind;
	long long delta; /* RECORD_DELTA */
	/*
	 * With reqid: 'c' (reply: the balance) or 's' (OK), a request's;
	 * 'x' a transaction's (results: what it answered); 'd', 't', 'r':
	 * a transfer's debit, credit, refund, reqid its id.
	 */
	char reply;
	unsigned value_len;	   /* RECORD_STRING */
	char value[VALUE_MAX];	   /* RECORD_STRING, not terminated */
	char results[RESULTS_MAX + 1]; /* 'x' */
	char key[KEY_MAX + 1];
	char reqid[REQID_MAX + 1]; /* "" when no request id */
	char peer[KEY_MAX + 1];	   /* 'd': to; 't': from */
};

/* Whether [p, p + len) is a valid request id. */
bool reqid_valid(const char *p, size_t len);

/* Whether [p, p + len) is a valid transaction's RESULTS. */
bool results_valid(const char *p, size_t len);

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
