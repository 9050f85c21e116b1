/* SPDX-License-Identifier: MIT */
#include "ledger_record.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"

static uint32_t crc_table[256];

void record_init(void)
{
	uint32_t c;
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_of(const char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--)
		c = crc_table[(c ^ (unsigned char)*p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

bool key_valid(const char *p, size_t len)
{
	size_t i;

	if (len == 0 || len > KEY_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	return true;
}

size_t record_encode(char *dst, const char *key, long long delta)
{
	int n = snprintf(dst, RECORD_MAX, "%s %+lld", key, delta);

	n += snprintf(dst + n, RECORD_MAX - (size_t)n, " %08" PRIx32 "\n",
		      crc32_of(dst, (size_t)n));
	return (size_t)n;
}

/* The 8 hex digits of [p, p + 8), or false if they are not. */
static bool parse_crc(const char *p, uint32_t *crc)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	*crc = 0;
	for (i = 0; i < 8; i++) {
		const char *d = p[i] ? strchr(hex, p[i]) : NULL;

		if (!d)
			return false;
		*crc = *crc << 4 | (uint32_t)(d - hex);
	}
	return true;
}

bool record_parse(const char *line, size_t len, char *key,
		  long long *delta)
{
	size_t body = len - 10, klen;
	const char *sp;
	uint32_t crc;
	long long amount;

	if (len < 14 || len > RECORD_MAX || line[len - 1] != '\n' ||
	    line[body] != ' ')
		return false;
	if (!parse_crc(line + body + 1, &crc) || crc != crc32_of(line, body))
		return false;
	sp = memchr(line, ' ', body);
	if (!sp)
		return false;
	klen = (size_t)(sp - line);
	if (!key_valid(line, klen) || sp + 2 >= line + body ||
	    (sp[1] != '+' && sp[1] != '-') ||
	    !resp_parse_ll(sp + 2, (size_t)(line + body - sp - 2), &amount) ||
	    amount <= 0)
		return false;
	memcpy(key, line, klen);
	key[klen] = '\0';
	*delta = sp[1] == '+' ? amount : -amount;
	return true;
}
