/* SPDX-License-Identifier: MIT */
/*
 * slot.c - Redis Cluster key slots: CRC16 (XMODEM: polynomial 0x1021,
 * initial value 0, no reflection) of the key, or of its hash tag, mod
 * 16384, as the cluster specification defines it.
 */
#include "redis_internal.h"

#include <string.h>

static uint16_t crc16_table[256];

static void crc16_table_fill(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t crc = (uint16_t)(i << 8);

		for (int bit = 0; bit < 8; bit++)
			crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
					     : (uint16_t)(crc << 1);
		crc16_table[i] = crc;
	}
}

uint16_t agr__redis_crc16(const void *buf, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const unsigned char *p = buf;
	uint16_t crc = 0;

	pthread_once(&once, crc16_table_fill);
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)((crc << 8) ^ crc16_table[((crc >> 8) ^ p[i]) & 0xff]);
	return crc;
}

/*
 * The hash tag is what lies between the first '{' and the first '}'
 * after it, if that is not empty; otherwise the whole key is hashed.
 */
AGR_API unsigned agr_redis_key_slot(const char *key, size_t len)
{
	const char *open, *close;

	if (!key)
		return 0;
	open = memchr(key, '{', len);
	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;

		close = memchr(open + 1, '}', rest);
		if (close && close > open + 1)
			return agr__redis_crc16(open + 1,
						(size_t)(close - open - 1)) &
			       (AGR_REDIS_SLOTS - 1);
	}
	return agr__redis_crc16(key, len) & (AGR_REDIS_SLOTS - 1);
}
