/* SPDX-License-Identifier: MIT */
/*
 * ledger_front_internal.h - the front's state, shared by its two
 * files and by nothing else: ledger_conn.c (one connection: parse,
 * recv, send, linger, close) and ledger_front.c (accepting, dealing
 * connections to the workers, the workers' fixed files and buffer
 * rings, stopping, counters). The API is ledger_conn.h's.
 */
#ifndef LEDGER_FRONT_INTERNAL_H
#define LEDGER_FRONT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "buf.h"
#include "ledger_conn.h"
#include "ledger_request.h"

#define RECV_BUF_SIZE 8192	   /* one buffer of the provided ring */
#define RECV_BUF_GROUP 1
#define FIXED_FILES_MAX 1024	   /* registered sockets per worker */

/*
 * One worker's connections; touched only by its thread until it has
 * ended. Cache-line aligned: neighbours are written by other workers.
 */
struct front_worker {
	_Alignas(64) struct conn *conns; /* its live connections */
	struct request_turn turn; /* its connections told of replies */
	struct front *front;
	unsigned index;
	struct buf scratch; /* the reply of the command being run */
	struct request_pool pool; /* its connections' requests */
	/* --recv multishot, made by front_worker_init() */
	agr_buf_ring *br;   /* NULL: its connections use single recvs */
	int *free_slots;    /* unused indexes of the fixed file table */
	unsigned nfree_slots;
	bool files;	    /* a fixed file table is registered */
	/* Written by this worker only; INFO reads them anywhere. */
	atomic_ullong commands, protocol_errors, connections;
	atomic_ullong output_limit_closed; /* --client-output-buffer-limit */
	atomic_ullong recv_enobufs, recv_rearms, recv_pauses;
};

struct front {
	agr_dispatcher *disp;
	agr_scheduler *sched;
	const struct command_server *srv;
	struct front_options opts;
	unsigned nworkers;
	struct front_worker *workers; /* [nworkers] */
	struct request_return back; /* replies from other workers */
	struct acceptor *acceptor;
	struct drain *drain;
	atomic_bool stopping;
	atomic_uint connected;	 /* open client connections, any worker */
	atomic_ullong rejected;	 /* refused: --maxclients */
	uint64_t next_id;	 /* CLIENT ID; the acceptor's worker only */
	unsigned next; /* round-robin; the acceptor's worker only */
};

struct conn {
	struct front_worker *wc;
	struct conn *prev, *next; /* wc->conns */
	int fd;
	int slot;	   /* its index in the fixed file table, or -1 */
	bool multishot;	   /* receives into wc->br; else single recvs */
	bool recv_paused;  /* its multishot is being ended: no room */
	agr_io_id recv_id; /* the multishot receive */
	bool eof;	   /* the peer sends no more (or we gave up on it) */
	bool closing;	   /* we serve no more: QUIT, a stop, a dead peer */
	bool broken;	   /* sending failed: replies are dropped */
	bool lingering;	   /* our FIN is sent; draining until the peer's */
	bool recv_armed;   /* a recv is in flight (callback arg: conn) */
	bool send_armed;   /* a send is in flight (callback arg: &wire) */
	bool linger_armed; /* the linger timer (callback arg: &lingering) */
	bool refused;	   /* over --maxclients: one error, then close */
	struct session session;
	struct request_queue queue;
	struct buf in;	  /* received, not yet parsed */
	struct resp_partial partial; /* how much of in's first request */
	struct buf out;	  /* replies, in order, waiting for the wire */
	struct buf wire;  /* being sent */
	size_t wire_sent;
	uint64_t over_soft_since; /* replies over the soft limit since; 0 */
};

/*
 * Moves a connection along after any event (ledger_conn.c): parse what
 * arrived, pass finished replies to the wire in order, keep a recv
 * armed while there is room, and free the connection once it is done.
 */
void conn_pump(struct conn *c);

/* QUIT, a stop, a dead peer: serve no more requests, then close. */
void conn_stop_reading(struct conn *c);

/* A reply known at once, in its turn among c's. */
void conn_reply(struct conn *c, const char *p, size_t n);

/* Replies of c are ready (requests_init()'s callback): send them. */
void conn_ready(void *owner);

#endif /* LEDGER_FRONT_INTERNAL_H */
