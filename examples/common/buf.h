/* SPDX-License-Identifier: MIT */
/*
 * buf.h - a growable byte buffer: bytes [0, len) of p are in use, cap
 * are allocated. Running out of memory ends the program (util.h).
 */
#ifndef EXAMPLES_BUF_H
#define EXAMPLES_BUF_H

#include <stddef.h>

struct buf {
	char *p;
	size_t len, cap;
};

/* Room for `extra` more bytes; a first allocation is at least `min`. */
void buf_reserve(struct buf *b, size_t extra, size_t min);
void buf_append(struct buf *b, const void *p, size_t n);
/* Drops the first n bytes. */
void buf_consume(struct buf *b, size_t n);
void buf_free(struct buf *b);

#endif /* EXAMPLES_BUF_H */
