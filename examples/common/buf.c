/* SPDX-License-Identifier: MIT */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void buf_reserve(struct buf *b, size_t extra, size_t min)
{
	size_t cap = b->cap ? b->cap : min;

	if (b->len + extra <= b->cap)
		return;
	while (cap < b->len + extra)
		cap *= 2;
	b->p = xrealloc(b->p, cap);
	b->cap = cap;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return; /* b->p may still be NULL */
	buf_reserve(b, n, 256);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n == 0)
		return;
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

void buf_free(struct buf *b)
{
	free(b->p);
	*b = (struct buf){ 0 };
}
