/* SPDX-License-Identifier: MIT */
/*
 * buffer.c - a growable byte buffer: a connection's output.
 */
#include "buffer.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int buf_reserve(struct agr__redis_buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->len + more <= b->cap)
		return 0;
	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int agr__redis_buf_append(struct agr__redis_buf *b, const void *p, size_t len)
{
	int ret = buf_reserve(b, len);

	if (ret < 0)
		return ret;
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return 0;
}

int agr__redis_buf_prepend(struct agr__redis_buf *b, const void *p, size_t len)
{
	int ret = buf_reserve(b, len);

	if (ret < 0)
		return ret;
	memmove(b->data + len, b->data, b->len);
	memcpy(b->data, p, len);
	b->len += len;
	return 0;
}

void agr__redis_buf_swap(struct agr__redis_buf *a, struct agr__redis_buf *b)
{
	struct agr__redis_buf t = *a;

	*a = *b;
	*b = t;
}

void agr__redis_buf_free(struct agr__redis_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
