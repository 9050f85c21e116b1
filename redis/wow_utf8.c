/* SPDX-License-Identifier: MIT */
/*
 * wow_utf8.c - strict UTF-8, read as the UTF-16 code units Java sees.
 *
 * Wow rejects a String with an unpaired surrogate before it builds a
 * key; in UTF-8 such a String can only arrive as an encoded surrogate
 * (ED A0..BF ..), which, like every other ill-formed sequence, is
 * refused here. Well-formed input then maps one to one onto a Java
 * String, so hashes and hex16 agree with the JVM.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

/* Length of the sequence at s[0..n), or 0 if it is not well formed. */
static size_t sequence(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0], lo = 0x80, hi = 0xbf;
	size_t need, i;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xc2 && b <= 0xdf) {
		need = 2;
		*cp = b & 0x1fu;
	} else if (b >= 0xe0 && b <= 0xef) {
		need = 3;
		*cp = b & 0x0fu;
		if (b == 0xe0)
			lo = 0xa0;
		else if (b == 0xed)
			hi = 0x9f; /* ED A0..BF would be a surrogate */
	} else if (b >= 0xf0 && b <= 0xf4) {
		need = 4;
		*cp = b & 0x07u;
		if (b == 0xf0)
			lo = 0x90;
		else if (b == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (n < need || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 1; i < need; i++) {
		if ((s[i] & 0xc0u) != 0x80u)
			return 0;
		*cp = (*cp << 6) | (s[i] & 0x3fu);
	}
	return need;
}

bool agr__wow_utf8_valid(const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0, k;
	uint32_t cp;

	while (i < len) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		k = sequence(p + i, len - i, &cp);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

void agr__wow_utf16_units(const char *s, size_t len,
			  void (*fn)(uint16_t unit, void *arg), void *arg)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0, k;
	uint32_t cp;

	while (i < len) {
		k = sequence(p + i, len - i, &cp);
		if (!k) { /* not reached for checked input; never loop */
			fn(0xfffdu, arg);
			i++;
			continue;
		}
		i += k;
		if (cp < 0x10000u) {
			fn((uint16_t)cp, arg);
		} else {
			cp -= 0x10000u;
			fn((uint16_t)(0xd800u + (cp >> 10)), arg);
			fn((uint16_t)(0xdc00u + (cp & 0x3ffu)), arg);
		}
	}
}
