/* SPDX-License-Identifier: MIT */
/*
 * group_key.c - Java's String.hashCode over UTF-8 input, and floorMod.
 *
 * The decoder never builds the UTF-16 string: it feeds each code unit
 * straight into the hash, so hashing allocates nothing and reads each
 * byte once. The rule it follows is stated in aggring/group_key.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <aggring/group_key.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define REPLACEMENT_CHAR 0xfffdu

/*
 * Java's int arithmetic wraps; C's signed arithmetic must not overflow.
 * So the hash is kept in a uint32_t, where wrapping is defined.
 */
static inline uint32_t hash_unit(uint32_t h, uint32_t unit)
{
	return h * 31u + unit;
}

/* A code point above U+FFFF is two UTF-16 code units in Java. */
static inline uint32_t hash_code_point(uint32_t h, uint32_t cp)
{
	if (cp < 0x10000u)
		return hash_unit(h, cp);
	cp -= 0x10000u;
	h = hash_unit(h, 0xd800u + (cp >> 10));
	return hash_unit(h, 0xdc00u + (cp & 0x3ffu));
}

static inline bool is_continuation(uint8_t b)
{
	return (b & 0xc0u) == 0x80u;
}

/*
 * Length of the sequence lead byte `b` starts and the range its second
 * byte must fall in; 0 for a byte that cannot lead. The narrow second-byte
 * ranges are what reject overlong forms (E0 80..9F, F0 80..8F) and code
 * points above U+10FFFF (F4 90..BF). ED keeps the full 80..BF range:
 * Java lets an encoded surrogate through as a prefix and replaces the
 * decoded unit afterwards, see decode_one().
 */
static unsigned int sequence_length(uint8_t b, uint8_t *lo, uint8_t *hi)
{
	*lo = 0x80;
	*hi = 0xbf;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef) {
		if (b == 0xe0)
			*lo = 0xa0;
		return 3;
	}
	if (b >= 0xf0 && b <= 0xf4) {
		if (b == 0xf0)
			*lo = 0x90;
		else if (b == 0xf4)
			*hi = 0x8f;
		return 4;
	}
	return 0;
}

/*
 * Decodes one non-ASCII code point, or one maximal ill-formed subpart,
 * from the `n` >= 1 bytes at `s`. Stores the code point (U+FFFD for an
 * ill-formed part) in `*cp` and returns how many bytes it consumed, at
 * least 1, so the caller always makes progress.
 */
static size_t decode_one(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t lo, hi;
	unsigned int need = sequence_length(s[0], &lo, &hi);
	uint32_t c;
	size_t i;

	*cp = REPLACEMENT_CHAR;
	if (need == 0)
		return 1;
	if (n < 2 || s[1] < lo || s[1] > hi)
		return 1;
	/* Drop the lead byte's length marker: 110x xxxx, 1110 xxxx, ... */
	c = s[0] & (0x7fu >> need);
	for (i = 1; i < need; i++) {
		/*
		 * Stop at the byte that breaks the sequence; it is not
		 * part of this subpart and gets decoded on its own.
		 */
		if (i >= n || !is_continuation(s[i]))
			return i;
		c = (c << 6) | (s[i] & 0x3fu);
	}
	/* Only ED A0..BF xx lands here; Java replaces all three bytes. */
	if (c >= 0xd800u && c <= 0xdfffu)
		return need;
	*cp = c;
	return need;
}

/*
 * The two's complement reading of `h` without relying on the
 * implementation-defined conversion of an out-of-range uint32_t.
 */
static inline int32_t to_int32(uint32_t h)
{
	if (h <= (uint32_t)INT32_MAX)
		return (int32_t)h;
	return -(int32_t)~h - 1;
}

AGR_API int32_t agr_java_string_hash(const char *utf8, size_t len)
{
	const uint8_t *s = (const uint8_t *)utf8;
	uint32_t h = 0;
	uint32_t cp;
	size_t i = 0;

	if (!s)
		return 0;
	while (i < len) {
		/* Ids are mostly ASCII: keep that path a plain loop. */
		if (s[i] < 0x80u) {
			h = hash_unit(h, s[i++]);
			continue;
		}
		i += decode_one(s + i, len - i, &cp);
		h = hash_code_point(h, cp);
	}
	return to_int32(h);
}

/*
 * Java's Math.floorMod for a positive divisor. C's % truncates toward
 * zero, so a negative hash leaves a negative remainder; adding the
 * divisor once brings it into [0, parallelism). No overflow is possible:
 * the divisor is positive, so INT32_MIN % parallelism is defined, and the
 * remainder is above -parallelism.
 */
static inline int floor_mod(int32_t hash, int parallelism)
{
	int r = hash % parallelism;

	return r < 0 ? r + parallelism : r;
}

AGR_API int agr_group_key_n(const char *aggregate_id, size_t len,
			    int parallelism)
{
	if (!aggregate_id || parallelism <= 0)
		return -EINVAL;
	return floor_mod(agr_java_string_hash(aggregate_id, len), parallelism);
}

AGR_API int agr_group_key(const char *aggregate_id, int parallelism)
{
	if (!aggregate_id)
		return -EINVAL;
	return agr_group_key_n(aggregate_id, strlen(aggregate_id),
			       parallelism);
}
