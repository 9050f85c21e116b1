/* SPDX-License-Identifier: MIT */
/*
 * buffer.h - a growable byte buffer: a connection's output.
 */
#ifndef AGGRING_REDIS_BUFFER_H
#define AGGRING_REDIS_BUFFER_H

#include <stddef.h>

struct agr__redis_buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Appends `len` bytes; 0 or -ENOMEM (the buffer unchanged). */
int agr__redis_buf_append(struct agr__redis_buf *b, const void *p, size_t len);
/* Inserts `len` bytes in front; 0 or -ENOMEM. */
int agr__redis_buf_prepend(struct agr__redis_buf *b, const void *p, size_t len);
void agr__redis_buf_swap(struct agr__redis_buf *a, struct agr__redis_buf *b);

/* Empties it, keeping the memory (a send may still be reading it). */
static inline void agr__redis_buf_clear(struct agr__redis_buf *b)
{
	b->len = 0;
}

static inline const char *agr__redis_buf_data(const struct agr__redis_buf *b)
{
	return b->data;
}

static inline size_t agr__redis_buf_len(const struct agr__redis_buf *b)
{
	return b->len;
}
void agr__redis_buf_free(struct agr__redis_buf *b);

#endif /* AGGRING_REDIS_BUFFER_H */
