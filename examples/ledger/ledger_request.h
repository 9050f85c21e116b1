/* SPDX-License-Identifier: MIT */
/*
 * ledger_request.h - a connection's requests and their replies, in
 * arrival order (ledger_conn.h says why that order). A parsed command
 * becomes requests here; each request's message goes to its account's
 * group, and its reply, once final, waits in the connection's queue
 * until every earlier one has been taken.
 */
#ifndef LEDGER_REQUEST_H
#define LEDGER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include <aggring.h>

#include "buf.h"
#include "ledger_commands.h"
#include "resp.h"

struct conn;
struct request;

/*
 * Freed requests kept for reuse: one per worker, shared by that
 * worker's connections, touched only on that worker (requests are made
 * and freed on their connection's worker), so a request costs no
 * malloc or free once the pool has grown to the worker's load.
 */
struct request_pool {
	struct request *free;
	unsigned count; /* in `free`; at most REQUEST_POOL_MAX */
};

/* Frees the pooled requests (the worker has ended). */
void request_pool_clear(struct request_pool *pool);

/* A connection's requests, oldest first. Its own: see below. */
struct request_queue {
	struct request *head, *tail;
	unsigned pending; /* requests in the queue */
	struct request_pool *pool; /* its worker's */
};

/* An empty queue whose requests come from, and go back to, `pool`. */
static inline void requests_init(struct request_queue *q,
				 struct request_pool *pool)
{
	*q = (struct request_queue){ .pool = pool };
}

/* Requests in the queue (its owner reads it through this). */
static inline unsigned requests_pending(const struct request_queue *q)
{
	return q->pending;
}

/* What the calls below need of the connection they act for. */
struct request_ctx {
	struct conn *conn;	    /* told through conn_request_ready() */
	struct request_queue *queue;
	struct buf *out;	    /* replies go here when nothing waits */
	agr_dispatcher *disp;
	unsigned worker;	    /* the connection's worker */
};

/*
 * A reply known at once, queued behind the requests still running, or
 * straight to the output when there are none.
 */
void requests_reply(const struct request_ctx *x, const char *p, size_t n);

/*
 * Turns a command that needs the accounts (COMMAND_ACCOUNT, _KEYS,
 * _TXN, _TRANSFER) into requests and sends their messages; a message
 * the dispatcher refuses is answered at once.
 */
void requests_dispatch(const struct request_ctx *x,
		       const struct resp_command *cmd,
		       const struct command_outcome *o);

/*
 * The dispatcher's completion of a request's message (any worker): makes
 * its reply. Returns the request to hand back to its connection with
 * requests_route(), or NULL when none waits (a saga not over yet, or a
 * transfer resumed at startup, which may complete before the front
 * has started).
 */
struct request *requests_completed(agr_message *msg, int status);

/*
 * Where replies finished on other workers wait for their connection's
 * worker: one per worker (inboxes[i] for worker i of `sched`), pushed
 * from any worker without a lock. The first push onto an empty inbox
 * schedules one task that takes all of them, so a busy worker pays one
 * agr_scheduler_schedule() (a malloc and a wake-up) per batch of
 * replies, not per reply.
 */
struct request_inbox {
	_Alignas(64) _Atomic(struct request *) head; /* a LIFO stack */
	agr_scheduler *sched;
	unsigned worker;
};

/* `n` empty inboxes for the workers of `sched` (free() them). */
struct request_inbox *request_inboxes_new(agr_scheduler *sched, unsigned n);

/*
 * Marks `rq` ready on its connection's worker: at once if that is the
 * calling one, else through that worker's inbox (of `inboxes`).
 */
void requests_route(struct request *rq, struct request_inbox *inboxes);

/*
 * Takes the replies that are next in line off the queue, into `out`
 * (or drops them), and frees their requests.
 */
void requests_collect(struct request_queue *q, struct buf *out, bool drop);

/*
 * Provided by the connection (ledger_conn.c): a request of `c` became
 * ready, on c's worker.
 */
void conn_request_ready(struct conn *c);

#endif /* LEDGER_REQUEST_H */
