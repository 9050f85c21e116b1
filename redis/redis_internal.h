/* SPDX-License-Identifier: MIT */
/*
 * redis_internal.h - what the files of libaggring-redis share; not
 * installed.
 */
#ifndef AGGRING_REDIS_INTERNAL_H
#define AGGRING_REDIS_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/redis_client.h>

#define AGR_REDIS_SLOTS 16384u

/* CRC16/XMODEM, the checksum Redis Cluster's key slots use. */
uint16_t agr__redis_crc16(const void *buf, size_t len);

#endif /* AGGRING_REDIS_INTERNAL_H */
