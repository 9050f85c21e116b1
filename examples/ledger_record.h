/* SPDX-License-Identifier: MIT */
/*
 * ledger_record.h - the ledger's journal records and account names.
 *
 * A record is one line, "ACCOUNT CHANGE CRC\n", CRC the CRC-32 (IEEE,
 * as zlib) of what precedes it on the line in 8 hex digits. CHANGE is
 * "+AMOUNT" or "-AMOUNT" (AMOUNT > 0; "+0" creates an empty account)
 * or "close" (the account is closed: gone, as if it never was). One
 * record is one atomic change: a transaction's commands on one account
 * are journaled as the single record of their net effect. An account
 * name is 1 to KEY_MAX printable ASCII characters without spaces.
 */
#ifndef LEDGER_RECORD_H
#define LEDGER_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#define KEY_MAX 128
#define RECORD_MAX (KEY_MAX + 64)

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
	char key[KEY_MAX + 1];
};

/* Writes the record of `delta` to `key` into dst[RECORD_MAX]; its length. */
size_t record_encode(char *dst, const char *key, long long delta);

/* Writes the record closing `key` into dst[RECORD_MAX]; its length. */
size_t record_encode_close(char *dst, const char *key);

/*
 * Parses one whole line (with its '\n') into *rec; false if it is torn
 * or corrupt.
 */
bool record_parse(const char *line, size_t len, struct record *rec);

#endif /* LEDGER_RECORD_H */
