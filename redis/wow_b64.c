/* SPDX-License-Identifier: MIT */
/*
 * wow_b64.c - Base64URL without padding, Wow's key component codec.
 *
 * Decoding accepts only what encoding produces (Wow checks that the
 * decoded value encodes back to the input), so one value has exactly
 * one key.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stdlib.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void agr__wow_buf_b64(struct agr__wow_buf *b, const char *s, size_t n)
{
	const uint8_t *p = (const uint8_t *)s;
	char q[4];
	size_t i;
	uint32_t v;

	if (b->err)
		return;
	if (!agr__wow_utf8_valid(s, n)) {
		b->err = -EILSEQ;
		return;
	}
	for (i = 0; i + 3 <= n; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		q[0] = alphabet[v >> 18];
		q[1] = alphabet[(v >> 12) & 63];
		q[2] = alphabet[(v >> 6) & 63];
		q[3] = alphabet[v & 63];
		agr__wow_buf_bytes(b, q, 4);
	}
	if (n - i == 1) {
		v = (uint32_t)p[i] << 16;
		q[0] = alphabet[v >> 18];
		q[1] = alphabet[(v >> 12) & 63];
		agr__wow_buf_bytes(b, q, 2);
	} else if (n - i == 2) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		q[0] = alphabet[v >> 18];
		q[1] = alphabet[(v >> 12) & 63];
		q[2] = alphabet[(v >> 6) & 63];
		agr__wow_buf_bytes(b, q, 3);
	}
}

AGR_API int agr_wow_b64_encode(const char *s, size_t len, char **out,
			       size_t *out_len)
{
	struct agr__wow_buf b = { 0 };

	if ((!s && len) || !out)
		return -EINVAL;
	agr__wow_buf_b64(&b, s ? s : "", len);
	return agr__wow_buf_finish(&b, out, out_len);
}

static int sextet(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

AGR_API int agr_wow_b64_decode(const char *s, size_t len, char **out,
			       size_t *out_len)
{
	struct agr__wow_buf b = { 0 };
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t i;
	int v;

	if ((!s && len) || !out)
		return -EINVAL;
	if (len % 4 == 1)
		return -EILSEQ;
	for (i = 0; i < len && !b.err; i++) {
		v = sextet(s[i]);
		if (v < 0) {
			b.err = -EILSEQ;
			break;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			uint8_t byte = (uint8_t)(acc >> (bits - 8));

			agr__wow_buf_bytes(&b, &byte, 1);
			bits -= 8;
			acc &= (1u << bits) - 1;
		}
	}
	if (!b.err && acc) /* unused bits must be zero: one text per value */
		b.err = -EILSEQ;
	if (!b.err && !agr__wow_utf8_valid(b.data ? b.data : "", b.len))
		b.err = -EILSEQ;
	return agr__wow_buf_finish(&b, out, out_len);
}
