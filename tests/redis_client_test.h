/* SPDX-License-Identifier: MIT */
/*
 * redis_client_test.h - what the files of check_redis_client share:
 * the servers' ports, one worker with a client on it, and the phases
 * that run on that worker while the test thread waits
 * (check_redis_client.c; the cluster's tests in redis_client_cluster.c).
 */
#ifndef AGGRING_TESTS_REDIS_CLIENT_TEST_H
#define AGGRING_TESTS_REDIS_CLIENT_TEST_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>

#include "testutil.h"

#define MS 1000000ull

extern int run_id; /* the process id: keys of this run */
extern int single_port, cluster_port;
extern const char *cluster_dir, *cluster_sh;
extern agr_scheduler *sched; /* the one worker's, once rig_up() ran */

/*
 * What one test's callbacks saw. `left` counts the callbacks a phase
 * waits for; the last one opens the latch.
 */
struct ctx {
	agr_redis *r;
	agr_redis_options o;
	struct tu_latch latch;
	long left;
	long calls, ok, errors, failures, canceled, timeouts, resets, other;
	long bad_order;
	long next;	  /* the INCR value expected next */
	char *want;	  /* a value expected back */
	size_t want_len;
	long matched;
	int last_err;
	char err_text[128];
	agr_redis_stats stats;
	long closed;
	void (*phase)(struct ctx *c);
};

/* A supplier of one worker, and its end (no worker failure). */
void rig_up(void);
void rig_down(void);
void ctx_init(struct ctx *c, int port, bool cluster);
/* Runs `phase` on the worker and waits for `n` callbacks. */
void run_phase(struct ctx *c, void (*phase)(struct ctx *c), long n);
/* One of the callbacks a phase waits for has come. */
void one_done(struct ctx *c);
/* Counts what a callback got, by kind. */
void tally(struct ctx *c, const redisReply *reply, int err);
/* A command's callback that tallies and counts down. */
void on_any(agr_redis *r, const redisReply *reply, int err, void *arg);
/* A GET's callback: tallies, and counts c->matched if the value is
 * c->want. */
void on_get_value(agr_redis *r, const redisReply *reply, int err, void *arg);
void close_client(struct ctx *c);

/* The cluster's tests (redis_client_cluster.c). */
void redis_client_cluster_tests(TCase *cluster);

#endif
