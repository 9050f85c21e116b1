/* SPDX-License-Identifier: MIT */
/*
 * conn.h - one connection to one Redis node, on one worker's ring.
 *
 * Commands are appended as RESP bytes with a callback each; what is
 * appended during one turn of the worker's loop goes out in one send
 * (a NOP on the ring marks the end of the turn). A connection connects
 * when it is started or given its first command, and after it fails it
 * reconnects on its own, every reconnect_delay_ns: commands that were
 * on the wire then complete with -ECONNRESET, the others wait for the
 * new connection, up to connect_timeout_ns (then -ETIMEDOUT).
 */
#ifndef AGGRING_REDIS_CONN_H
#define AGGRING_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/redis_client.h>

#include "pipeline.h"

struct agr__redis_conn;

struct agr__redis_conn_hooks {
	/* Connected (again); commands waiting go out next. */
	void (*up)(struct agr__redis_conn *c, void *arg);
	/*
	 * The connection failed (err), or an attempt to make it again did;
	 * another attempt follows after the delay.
	 */
	void (*down)(struct agr__redis_conn *c, int err, void *arg);
	/* After agr__redis_conn_close(): c is freed when this returns. */
	void (*closed)(struct agr__redis_conn *c, void *arg);
};

struct agr__redis_conn_config {
	agr_worker *w;
	const char *host;
	int port;
	const char *name;	/* CLIENT SETNAME on each connect; NULL: none */
	const char *username;	/* AUTH username password; NULL: AUTH password */
	const char *password;	/* NULL: no AUTH */
	uint64_t connect_timeout_ns;
	uint64_t reconnect_delay_ns;
	agr_redis_stats *stats; /* connects and sends are counted there */
};

/* 0, -ENOMEM. The connection is idle until started or given a command. */
int agr__redis_conn_new(const struct agr__redis_conn_config *cfg,
			const struct agr__redis_conn_hooks *hooks, void *arg,
			struct agr__redis_conn **out);
/* Starts connecting if idle. */
void agr__redis_conn_start(struct agr__redis_conn *c);
/*
 * Appends one command (RESP bytes, copied); cb runs exactly once when
 * 0 is returned. -ENOMEM, -ESHUTDOWN (closing, or the worker is
 * stopping).
 */
int agr__redis_conn_append(struct agr__redis_conn *c, const char *cmd,
			   size_t len, agr__redis_reply_cb cb, void *arg);
/*
 * Completes every command with -ECANCELED, cancels the I/O, and calls
 * hooks->closed once nothing is in flight (perhaps before returning).
 */
void agr__redis_conn_close(struct agr__redis_conn *c);
/* The same at once, without the hook: only when no I/O can be in flight. */
void agr__redis_conn_free(struct agr__redis_conn *c);

bool agr__redis_conn_ready(const struct agr__redis_conn *c);
const char *agr__redis_conn_host(const struct agr__redis_conn *c);
int agr__redis_conn_port(const struct agr__redis_conn *c);

#endif /* AGGRING_REDIS_CONN_H */
