/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memrchr */
#endif
#include "ledger_record.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"

/*
 * CRC-32 by slicing-by-8 (eight bytes per step, Intel's method): a
 * record is checksummed once per change, on the hot path.
 * crc_table[0] is the classic byte table; crc_table[k][b] is the CRC of
 * byte b followed by k zero bytes.
 */
static uint32_t crc_table[8][256];

void record_init(void)
{
	uint32_t c;
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^
					  crc_table[0][crc_table[k - 1][i] &
						       0xff];
}

static uint32_t crc32_of(const char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	for (; n >= 8; p += 8, n -= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
		lo ^= c;
		c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		    crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		    crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		    crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
	}
#endif
	while (n--)
		c = crc_table[0][(c ^ (unsigned char)*p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static bool printable_word(const char *p, size_t len, size_t max)
{
	size_t i;

	if (len == 0 || len > max)
		return false;
	for (i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	return true;
}

bool key_valid(const char *p, size_t len)
{
	return printable_word(p, len, KEY_MAX);
}

bool reqid_valid(const char *p, size_t len)
{
	return printable_word(p, len, REQID_MAX);
}

bool results_valid(const char *p, size_t len)
{
	return printable_word(p, len, RESULTS_MAX) && !memchr(p, ':', len);
}

static const char hex_digits[] = "0123456789abcdef";

/* The value of lower-case hex digit c, or -1 (per byte of a replay). */
static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Encoding without printf: records are written once per change, on the
 * hot path. Every field is bounded (KEY_MAX, REQID_MAX, VALUE_MAX,
 * RESULTS_MAX), so a record always fits in RECORD_MAX.
 */
static size_t put_str(char *dst, size_t n, const char *s, size_t max)
{
	size_t len = strnlen(s, max);

	memcpy(dst + n, s, len);
	return n + len;
}

/* "+N" or "-N", as printf's %+lld. */
static size_t put_signed(char *dst, size_t n, long long v)
{
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v :
				       (unsigned long long)v;
	char digits[20];
	size_t k = 0;

	dst[n++] = v < 0 ? '-' : '+';
	do
		digits[k++] = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	while (k)
		dst[n++] = digits[--k];
	return n;
}

/* "=HEX" of rec's string value, after the n bytes of dst. */
static size_t put_hex_value(char *dst, size_t n, const struct record *rec)
{
	unsigned i;

	dst[n++] = '=';
	for (i = 0; i < rec->value_len && i < VALUE_MAX; i++) {
		dst[n++] = hex_digits[(unsigned char)rec->value[i] >> 4];
		dst[n++] = hex_digits[(unsigned char)rec->value[i] & 15];
	}
	return n;
}

/* Appends " CRC\n" to the n bytes of dst[RECORD_MAX]; the length. */
static size_t seal(char *dst, size_t n)
{
	uint32_t crc = crc32_of(dst, n);
	int shift;

	dst[n++] = ' ';
	for (shift = 28; shift >= 0; shift -= 4)
		dst[n++] = hex_digits[(crc >> shift) & 0xf];
	dst[n++] = '\n';
	return n;
}

uint32_t record_crc32(const char *p, size_t n)
{
	return crc32_of(p, n);
}

size_t record_seal(char *dst, const char *body)
{
	return seal(dst, put_str(dst, 0, body, RECORD_MAX - 10));
}

size_t record_encode(char *dst, const struct record *rec)
{
	size_t n = put_str(dst, 0, rec->key, KEY_MAX);

	dst[n++] = ' ';
	if (rec->kind == RECORD_STRING)
		n = put_hex_value(dst, n, rec);
	else if (rec->kind == RECORD_CLOSE)
		n = put_str(dst, n, "close", 5);
	else
		n = put_signed(dst, n, rec->delta);
	if (rec->reqid[0]) {
		dst[n++] = ' ';
		dst[n++] = '#';
		dst[n++] = rec->reply;
		dst[n++] = ':';
		n = put_str(dst, n, rec->reqid, REQID_MAX);
	}
	if (rec->reqid[0] && (rec->reply == 'd' || rec->reply == 't')) {
		dst[n++] = ':';
		n = put_str(dst, n, rec->peer, KEY_MAX);
	}
	if (rec->reqid[0] && rec->reply == 'x') {
		dst[n++] = ':';
		n = put_str(dst, n, rec->results, RESULTS_MAX);
	}
	return seal(dst, n);
}

/* The optional " #K:ID" of a record, [p, end). */
static bool parse_tag(const char *p, const char *end, struct record *rec)
{
	size_t len = (size_t)(end - p);

	const char *colon;
	size_t idlen;

	/* A record without a tag carries nothing of the one before it. */
	rec->reqid[0] = rec->peer[0] = rec->results[0] = '\0';
	rec->reply = '\0';
	if (len == 0)
		return true;
	if (len < 5 || p[0] != ' ' || p[1] != '#' ||
	    !strchr("cstdrx", p[2]) || p[3] != ':')
		return false;
	rec->reply = p[2];
	idlen = len - 4;
	if (p[2] == 'x') { /* ID:RESULTS; RESULTS has no ':' */
		colon = memrchr(p + 4, ':', len - 4);
		if (!colon ||
		    !results_valid(colon + 1, (size_t)(end - colon - 1)))
			return false;
		idlen = (size_t)(colon - p - 4);
		memcpy(rec->results, colon + 1, (size_t)(end - colon - 1));
		rec->results[end - colon - 1] = '\0';
	}
	if (p[2] == 'd' || p[2] == 't') { /* XID:ACCOUNT; XID has no ':' */
		colon = memchr(p + 4, ':', len - 4);
		if (!colon || !key_valid(colon + 1, (size_t)(end - colon - 1)))
			return false;
		idlen = (size_t)(colon - p - 4);
		memcpy(rec->peer, colon + 1, (size_t)(end - colon - 1));
		rec->peer[end - colon - 1] = '\0';
	}
	if (!reqid_valid(p + 4, idlen))
		return false;
	memcpy(rec->reqid, p + 4, idlen);
	rec->reqid[idlen] = '\0';
	return true;
}

/* The 8 hex digits of [p, p + 8), or false if they are not. */
static bool parse_crc(const char *p, uint32_t *crc)
{
	size_t i;

	*crc = 0;
	for (i = 0; i < 8; i++) {
		int d = hex_value(p[i]);

		if (d < 0)
			return false;
		*crc = *crc << 4 | (uint32_t)d;
	}
	return true;
}

/* "=HEX", [p, end): the string it spells. */
static bool parse_string(const char *p, const char *end, struct record *rec)
{
	size_t n = (size_t)(end - p - 1), i;

	if (n % 2 || n / 2 > VALUE_MAX)
		return false;
	for (i = 0; i < n / 2; i++) {
		int hi = hex_value(p[1 + 2 * i]), lo = hex_value(p[2 + 2 * i]);

		if (hi < 0 || lo < 0)
			return false;
		rec->value[i] = (char)(hi << 4 | lo);
	}
	rec->kind = RECORD_STRING;
	rec->value_len = (unsigned)(n / 2);
	rec->delta = 0;
	return true;
}

/* The CHANGE of a record, [p, end): "+N", "-N", "=HEX" or "close". */
static bool parse_change(const char *p, const char *end, struct record *rec)
{
	long long amount;

	if (end > p && p[0] == '=')
		return parse_string(p, end, rec);
	if ((size_t)(end - p) == 5 && memcmp(p, "close", 5) == 0) {
		rec->kind = RECORD_CLOSE;
		rec->delta = 0;
		rec->value_len = 0;
		return true;
	}
	if (end - p < 2 || (p[0] != '+' && p[0] != '-') ||
	    !resp_parse_ll(p + 1, (size_t)(end - p - 1), &amount) ||
	    amount < 0 || (amount == 0 && p[0] == '-'))
		return false;
	rec->kind = RECORD_DELTA;
	rec->value_len = 0;
	rec->delta = p[0] == '+' ? amount : -amount;
	return true;
}

bool record_parse(const char *line, size_t len, struct record *rec)
{
	size_t body = len - 10, klen;
	const char *sp, *tag;
	uint32_t crc;

	if (len < 13 || len > RECORD_MAX || line[len - 1] != '\n' ||
	    line[body] != ' ')
		return false;
	if (!parse_crc(line + body + 1, &crc) || crc != crc32_of(line, body))
		return false;
	sp = memchr(line, ' ', body);
	if (!sp)
		return false;
	klen = (size_t)(sp - line);
	tag = memchr(sp + 1, ' ', (size_t)(line + body - sp - 1));
	if (!tag)
		tag = line + body;
	if (!key_valid(line, klen) || !parse_change(sp + 1, tag, rec) ||
	    !parse_tag(tag, line + body, rec))
		return false;
	memcpy(rec->key, line, klen);
	rec->key[klen] = '\0';
	return true;
}
