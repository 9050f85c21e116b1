/* SPDX-License-Identifier: MIT */
/*
 * testutil_redis.h - a redis-server of the test program's own, on a free
 * loopback port, and synchronous commands to it (hiredis), for the
 * suites that drive the Redis module against a real server.
 */
#ifndef AGR_TESTUTIL_REDIS_H
#define AGR_TESTUTIL_REDIS_H

#include <check.h>
#include <hiredis/hiredis.h>

/*
 * Starts redis-server (no persistence, its files in a new /tmp/NAME.*
 * directory) and waits, up to TU_LONG_NS, until it answers PING. Exits
 * 77 (SKIP) if it could not start, 1 if it never answered. `name` (the
 * test program's) names the directory and the error lines.
 */
void tu_redis_start(const char *name);
/*
 * The main() of such a suite: skips (77) without io_uring or
 * redis-server, else runs the suite `make_suite` makes between
 * tu_redis_start(name) and tu_redis_stop(); tu_run()'s exit status.
 */
int tu_redis_run(const char *name, Suite *(*make_suite)(void));
/* Kills the server and removes its directory. */
void tu_redis_stop(void);
/* The server's port. */
int tu_redis_port(void);

/* A new synchronous connection to the server (5 s timeout). */
redisContext *tu_redis_connect(void);
/* Runs one command on a connection of its own; asserts no error reply. */
void tu_redis_ok(const char *fmt, ...);
/*
 * Runs one command on a connection of its own: its integer reply, or
 * the first element of an array of integers (XPENDING's count); -1 for
 * any other reply.
 */
long long tu_redis_integer(const char *fmt, ...);
/* How many entries of stream `topic` group `group` has pending. */
long long tu_redis_pending(const char *topic, const char *group);

#endif /* AGR_TESTUTIL_REDIS_H */
