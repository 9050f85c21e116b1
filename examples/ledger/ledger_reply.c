/* SPDX-License-Identifier: MIT */
#include "ledger_reply.h"

#include <string.h>

#include "resp.h"

/* A header ("$123\r\n", ":-9\r\n") never takes more than this. */
#define HEADER_MAX 32

void reply_simple(struct buf *b, const char *s)
{
	size_t n = strlen(s) + 3;

	buf_reserve(b, n, 256);
	b->len += resp_encode_simple(b->p + b->len, n, s);
}

void reply_error(struct buf *b, const char *msg)
{
	size_t n = strlen(msg) + 3;

	buf_reserve(b, n, 256);
	b->len += resp_encode_error(b->p + b->len, n, msg);
}

void reply_integer(struct buf *b, long long v)
{
	buf_reserve(b, HEADER_MAX, 256);
	b->len += resp_encode_integer(b->p + b->len, HEADER_MAX, v);
}

void reply_bulk(struct buf *b, const char *p, size_t len)
{
	buf_reserve(b, len + HEADER_MAX, 256);
	b->len += resp_encode_bulk(b->p + b->len, len + HEADER_MAX, p, len);
}

void reply_bulk_str(struct buf *b, const char *s)
{
	reply_bulk(b, s, strlen(s));
}

void reply_nil(struct buf *b)
{
	buf_reserve(b, HEADER_MAX, 256);
	b->len += resp_encode_nil(b->p + b->len, HEADER_MAX);
}

void reply_array(struct buf *b, size_t n)
{
	buf_reserve(b, HEADER_MAX, 256);
	b->len += resp_encode_array(b->p + b->len, HEADER_MAX, n);
}
