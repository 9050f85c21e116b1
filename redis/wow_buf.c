/* SPDX-License-Identifier: MIT */
/*
 * wow_buf.c - the growing buffer names and JSON documents are built in.
 *
 * The first failure sticks and later appends do nothing, so a builder
 * appends its pieces and checks once, in agr__wow_buf_finish().
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(struct agr__wow_buf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->err)
		return false;
	if (b->cap - b->len > n)
		return true;
	cap = b->cap ? b->cap : 64;
	while (cap - b->len <= n) {
		if (cap > SIZE_MAX / 2) {
			b->err = -ENOMEM;
			return false;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p) {
		b->err = -ENOMEM;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void agr__wow_buf_hint(struct agr__wow_buf *b, size_t n)
{
	if (!b->cap)
		reserve(b, n);
}

void agr__wow_buf_bytes(struct agr__wow_buf *b, const void *p, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void agr__wow_buf_str(struct agr__wow_buf *b, const char *s)
{
	agr__wow_buf_bytes(b, s, strlen(s));
}


static void hex16_unit(uint16_t unit, void *arg)
{
	static const char hex[] = "0123456789abcdef";
	struct agr__wow_buf *b = arg;
	char d[4] = { hex[unit >> 12], hex[(unit >> 8) & 15],
		      hex[(unit >> 4) & 15], hex[unit & 15] };

	agr__wow_buf_bytes(b, d, sizeof(d));
}

void agr__wow_buf_hex16(struct agr__wow_buf *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (!agr__wow_utf8_valid(s, n)) {
		b->err = -EILSEQ;
		return;
	}
	agr__wow_utf16_units(s, n, hex16_unit, b);
}

int agr__wow_buf_finish(struct agr__wow_buf *b, char **out, size_t *len)
{
	if (!b->err && !b->data)
		reserve(b, 0);
	if (b->err) {
		int err = b->err;

		free(b->data);
		*b = (struct agr__wow_buf){ 0 };
		return err;
	}
	b->data[b->len] = '\0';
	*out = b->data;
	if (len)
		*len = b->len;
	*b = (struct agr__wow_buf){ 0 };
	return 0;
}
