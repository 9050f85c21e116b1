/* SPDX-License-Identifier: MIT */
/*
 * peer_pthread.h - the peer most C services hand-roll: a pthread pool
 * with the same per-group serial order as aggring's dispatcher.
 */
#ifndef BENCH_PEER_PTHREAD_H
#define BENCH_PEER_PTHREAD_H

#include <stdint.h>

#include "mpsc.h"

struct peer_msg {
	struct agr__mpsc_node node;
	const char *id;
	void *user;
};

struct peer_pool;

/* Called on a pool thread for each message, in per-group order. */
typedef void (*peer_handler)(struct peer_msg *msg, void *arg);

/* `workers` threads, `groups` groups keyed like agr_group_key(). */
struct peer_pool *peer_pool_new(int workers, int groups, peer_handler fn,
				void *arg);
void peer_pool_send(struct peer_pool *p, struct peer_msg *msg);
/* Stops the threads and frees; call once every message was handled. */
void peer_pool_free(struct peer_pool *p);

#endif /* BENCH_PEER_PTHREAD_H */
