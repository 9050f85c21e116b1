/* SPDX-License-Identifier: MIT */
/*
 * aggring/redis_client.h - a pipelined Redis client that lives on one
 * aggring worker (libaggring-redis).
 *
 * A client belongs to the worker it was made on: every call on it, and
 * every reply callback, runs on that worker's thread, and its sockets
 * are read and written with agr_io_* on that worker's ring. A service
 * makes one client per worker (in a worker_init hook, or from a task or
 * handler on that worker) and uses it from the handlers that run there.
 *
 * Commands are pipelined: each call appends the command to the
 * connection's output, and what was appended during one turn of the
 * worker's loop goes out in one send. Replies are parsed with hiredis's
 * reader, one callback per command, in the order the commands were
 * issued on each connection: in cluster mode, commands to different
 * masters complete in no fixed order, and a redirected command
 * completes after those sent behind it.
 *
 * Cluster mode reads the slot map with CLUSTER SHARDS (CLUSTER SLOTS
 * before Redis 7), sends each command to the master of its key's slot
 * (CRC16 of the key or of its {hash tag}, mod 16384), follows MOVED
 * (and refreshes the map) and ASK (ASKING first), and after a node's
 * connection fails reconnects and refreshes the map (after each failed
 * attempt too). Commands not yet sent on the failed connection wait for
 * it, up to connect_timeout_ns, even if a replica took over meanwhile;
 * later ones follow the new map.
 *
 * Blocking commands (XREADGROUP ... BLOCK, BLPOP) hold up every command
 * pipelined behind them on the same connection: give them a client of
 * their own.
 */
#ifndef AGGRING_REDIS_CLIENT_H
#define AGGRING_REDIS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

struct redisReply; /* <hiredis/read.h>, <hiredis/hiredis.h> */

typedef struct agr_redis agr_redis;

typedef struct agr_redis_options {
	size_t size;	      /* sizeof(agr_redis_options) */
	const char *host;     /* a node's address (numeric or a name);
			       * NULL: "127.0.0.1" */
	int port;	      /* 0: 6379 */
	bool cluster;	      /* discover and follow the slot map; false:
			       * every command goes to host:port */
	unsigned max_redirects;	    /* MOVED/ASK hops per command; 0: 5 */
	uint64_t connect_timeout_ns; /* 0: 5 s */
	uint64_t reconnect_delay_ns; /* between attempts; 0: 100 ms */
	const char *name;     /* CLIENT SETNAME, without blanks; NULL:
			       * "aggring" */
	const char *username; /* ACL user (Redis 6+): AUTH username
			       * password; NULL: AUTH password alone */
	const char *password; /* AUTH on each connection before anything
			       * else; NULL: none */
	uint64_t reserved[8];
} agr_redis_options;

#define AGR_REDIS_OPTIONS_INIT { .size = sizeof(agr_redis_options) }

AGR_API void agr_redis_options_init(agr_redis_options *o);

/*
 * Makes a client on worker `w`; must be called on w's thread. The
 * connection is made asynchronously: commands issued before it is up
 * wait for it. A host that is not numeric is resolved with getaddrinfo
 * on the worker at each attempt to connect: prefer an address. The
 * option strings are copied. Returns 0, -EINVAL (and a log line naming
 * the field), -ENOMEM, or -EPERM when not called on `w`.
 */
AGR_API int agr_redis_new(agr_worker *w, const agr_redis_options *o,
			  agr_redis **out);

/*
 * Called once per admitted command, on the client's worker. When `err`
 * is 0, `reply` is the reply (its type may be REDIS_REPLY_ERROR, the
 * server's error, MOVED and ASK already followed); it is valid only
 * during the call. Otherwise `reply` is NULL and `err` is:
 *  -ECONNRESET  the connection failed after the command was sent: it
 *               may or may not have run;
 *  -ETIMEDOUT   no connection could be made within connect_timeout_ns;
 *  -ELOOP       more than max_redirects redirections;
 *  -ENXIO       (cluster) no master serves the key's slot;
 *  -EPROTO      the slot map could not be read (a reply of an unknown
 *               shape; logged);
 *  -ENOMEM      memory ran out while the command was redirected;
 *  -ECANCELED   the client was closed, or its worker is being stopped.
 * TRYAGAIN and CLUSTERDOWN are replies (REDIS_REPLY_ERROR), not retried.
 * The callback may issue commands and may close the client.
 */
typedef void (*agr_redis_reply_fn)(agr_redis *r, const struct redisReply *reply,
				   int err, void *arg);

/*
 * Sends one command, given as argv (binary-safe: argvlen[i] bytes of
 * argv[i]). In cluster mode it goes to the master of `key`'s slot
 * (`key` points at keylen bytes, usually one of argv); a NULL key means
 * any node. Returns 0 (cb will be called exactly once), -EINVAL,
 * -ENOMEM, -EPERM (not on the client's worker) or -ESHUTDOWN (closing).
 */
AGR_API int agr_redis_command_argv(agr_redis *r, const char *key,
				   size_t keylen, int argc, const char **argv,
				   const size_t *argvlen, agr_redis_reply_fn cb,
				   void *arg);

/*
 * The same with a hiredis format (redisFormatCommand: %s, %b with a
 * pointer and a size_t, %d, %lld ...; each space-separated word is one
 * argument); the key, a C string, is given apart (NULL: any node). No
 * printf format attribute: the compiler would reject %b. Also -EINVAL
 * for a format hiredis refuses.
 */
AGR_API int agr_redis_command(agr_redis *r, const char *key,
			      agr_redis_reply_fn cb, void *arg,
			      const char *fmt, ...);

/* The cluster slot of a key, 0..16383, with {hash tag} rules. */
AGR_API unsigned agr_redis_key_slot(const char *key, size_t len);

/*
 * Closes the client: commands not yet answered complete with
 * -ECANCELED, the sockets close, and done(arg) runs on the worker once
 * nothing refers to the client any more (then it is freed). Safe to
 * call once; done may be NULL. A client keeps a receive in flight on
 * its worker's ring, so a graceful stop of its supplier waits for the
 * close: close clients first.
 */
AGR_API void agr_redis_close(agr_redis *r, void (*done)(void *arg),
			     void *arg);

/*
 * Frees the client at once. Only from the worker's exit hook (the loop
 * has ended, no I/O is in flight): unanswered commands complete with
 * -ECANCELED first.
 */
AGR_API void agr_redis_free(agr_redis *r);

typedef struct agr_redis_stats {
	uint64_t commands;	 /* admitted */
	uint64_t replies;	 /* callbacks with err == 0 */
	uint64_t server_errors;	 /* of those, REDIS_REPLY_ERROR */
	uint64_t failures;	 /* callbacks with err < 0 */
	uint64_t moved;		 /* MOVED redirections followed */
	uint64_t ask;		 /* ASK redirections followed */
	uint64_t connects;	 /* connections made */
	uint64_t slot_refreshes; /* slot map reads */
	uint64_t sends;		 /* send operations submitted */
	uint64_t reserved[7];
} agr_redis_stats;

/* Copies the client's counters; on its worker only. */
AGR_API int agr_redis_stats_get(const agr_redis *r, agr_redis_stats *out);

/* The worker the client lives on. */
AGR_API agr_worker *agr_redis_worker(const agr_redis *r);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_REDIS_CLIENT_H */
