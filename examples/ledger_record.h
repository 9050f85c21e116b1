/* SPDX-License-Identifier: MIT */
/*
 * ledger_record.h - the ledger's journal records and account names.
 *
 * A record is "ACCOUNT +AMOUNT CRC\n" or "ACCOUNT -AMOUNT CRC\n", CRC
 * the CRC-32 (IEEE, as zlib) of what precedes it on the line in 8 hex
 * digits. An account name is 1 to KEY_MAX printable ASCII characters
 * without spaces.
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

/* Writes the record of `delta` to `key` into dst[RECORD_MAX]; its length. */
size_t record_encode(char *dst, const char *key, long long delta);

/*
 * Parses one whole line (with its '\n') into key[KEY_MAX + 1] and
 * *delta; false if it is torn or corrupt.
 */
bool record_parse(const char *line, size_t len, char *key,
		  long long *delta);

#endif /* LEDGER_RECORD_H */
