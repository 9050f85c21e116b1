/* SPDX-License-Identifier: MIT */
/*
 * aggring/redis.h - libaggring-redis, the optional Redis module: link
 * with `pkg-config --libs aggring-redis`.
 *
 * aggring/redis_client.h  a pipelined Redis and Redis Cluster client on
 *                         an aggring worker's ring.
 */
#ifndef AGGRING_REDIS_H
#define AGGRING_REDIS_H

#include <aggring/redis_client.h>

#endif /* AGGRING_REDIS_H */
