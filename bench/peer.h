/* SPDX-License-Identifier: MIT */
/*
 * peer.h - the engines a user would pick instead of aggring, behind one
 * interface so that every workload drives them alike.
 *
 * Each peer keeps aggring's contract: messages are split into `groups`
 * groups by agr_group_key(id, groups); a group's messages are handled
 * strictly one at a time in send order, groups run concurrently on
 * `workers` threads. A handler is called with the messages one
 * activation drained (1..64, in order), so that a handler may commit a
 * group's waiting messages together; peers do handler I/O the only way
 * they can: blocking calls inside the handler.
 */
#ifndef BENCH_PEER_H
#define BENCH_PEER_H

#include <stdint.h>

#include "peer_queue.h"

#define PEER_DRAIN_LIMIT 64

struct peer_msg {
	struct peer_queue_node node; /* owned by the peer while queued */
	const char *id;
	void *user;
};

/* On a pool thread: msgs[0..n) of one group, in order, n >= 1. */
typedef void (*peer_handler)(struct peer_msg **msgs, int n, void *arg);

struct peer;

struct peer_engine {
	const char *name;
	struct peer *(*create)(int workers, int groups, peer_handler fn,
			       void *arg);
	/* Any thread; never blocks on the handlers. */
	void (*send)(struct peer *p, struct peer_msg *msg);
	/* Stops the threads and frees; call once every message was handled. */
	void (*destroy)(struct peer *p);
};

extern const struct peer_engine peer_pthread;
#ifdef HAVE_GLIB
extern const struct peer_engine peer_glib;
#endif
#ifdef HAVE_LIBUV
extern const struct peer_engine peer_libuv;
#endif

/* The peers this build has, NULL-terminated. */
extern const struct peer_engine *const peer_engines[];

/*
 * Fills out[0..max) with the peers named in `list` (comma-separated, as
 * the programs' -p takes them), or all of them if list is NULL; returns
 * how many. Exits(2), naming program and the peers there are, if list
 * names none this build has.
 */
int peer_select(const char *program, const char *list,
		const struct peer_engine **out, int max);

#endif /* BENCH_PEER_H */
