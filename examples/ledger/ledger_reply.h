/* SPDX-License-Identifier: MIT */
/*
 * ledger_reply.h - RESP2 replies appended to a growable buffer
 * (buf.h): what ledger_server's commands build their answers with. The
 * buffer is the caller's and is reused, so a reply costs no allocation
 * once it has grown.
 */
#ifndef LEDGER_REPLY_H
#define LEDGER_REPLY_H

#include <stddef.h>

#include "buf.h"

void reply_simple(struct buf *b, const char *s);
/* "-msg\r\n"; CR and LF in msg become spaces. */
void reply_error(struct buf *b, const char *msg);
void reply_integer(struct buf *b, long long v);
void reply_bulk(struct buf *b, const char *p, size_t len);
/* A NUL-terminated string as a bulk string. */
void reply_bulk_str(struct buf *b, const char *s);
void reply_nil(struct buf *b);
/* The header of an array of n elements, which follow. */
void reply_array(struct buf *b, size_t n);

#endif /* LEDGER_REPLY_H */
