/* SPDX-License-Identifier: MIT */
/*
 * aggring/redis.h - libaggring-redis, the optional Redis module: link
 * with `pkg-config --libs aggring-redis`.
 *
 * aggring/redis_client.h  a pipelined Redis and Redis Cluster client on
 *                         an aggring worker's ring.
 * aggring/wow_codec.h      Wow's Redis names and JSON messages.
 * aggring/wow_event_store.h Wow's Redis event store on that client.
 */
#ifndef AGGRING_REDIS_H
#define AGGRING_REDIS_H

#include <aggring/redis_client.h>
#include <aggring/wow_codec.h>
#include <aggring/wow_event_store.h>

#endif /* AGGRING_REDIS_H */
