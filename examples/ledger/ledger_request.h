/* SPDX-License-Identifier: MIT */
/*
 * ledger_request.h - a request's round trip, from a parsed command to
 * its reply in arrival order (ledger_conn.h says why that order). A
 * parsed command becomes requests here; each request's message goes to
 * its account's group, its reply comes back to the connection's worker
 * and waits in the connection's queue until every earlier one has been
 * taken; at the end of the worker's turn the connection is told,
 * through the callback it gave its queue, that replies are ready.
 */
#ifndef LEDGER_REQUEST_H
#define LEDGER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include <aggring.h>

#include "buf.h"
#include "ledger_commands.h"
#include "resp.h"

struct request;
struct request_turn;

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
	struct request_turn *turn; /* its worker's */
	/* Told, at the end of a turn of its worker, that replies are ready. */
	void (*ready)(void *owner);
	void *owner;
	struct request_queue *next_replied; /* turn->replied */
	bool replied; /* on turn->replied until the end of the turn */
};

/*
 * One worker's queues with replies finished in its current turn: each
 * is told once, at the end of the turn, so that a pipelining client
 * gets one send per batch of events, not one for the first reply and
 * another for the rest. Touched only on its worker.
 */
struct request_turn {
	struct request_queue *replied;
	bool flush_queued; /* the end of the turn is scheduled */
	agr_scheduler *sched;
	unsigned worker;
};

/* Worker `worker` of `sched`'s turn, before its queues take requests. */
static inline void request_turn_init(struct request_turn *t,
				     agr_scheduler *sched, unsigned worker)
{
	*t = (struct request_turn){ .sched = sched, .worker = worker };
}

/*
 * An empty queue whose requests come from, and go back to, `pool`, on
 * the worker of `turn`; ready(owner) is called there when replies are.
 */
static inline void requests_init(struct request_queue *q,
				 struct request_pool *pool,
				 struct request_turn *turn,
				 void (*ready)(void *owner), void *owner)
{
	*q = (struct request_queue){ .pool = pool, .turn = turn,
				     .ready = ready, .owner = owner };
}

/* Requests in the queue (its owner reads it through this). */
static inline unsigned requests_pending(const struct request_queue *q)
{
	return q->pending;
}

/* Whether ready() is still to come in this turn: keep the owner. */
static inline bool requests_replied(const struct request_queue *q)
{
	return q->replied;
}

/* What the calls below need of the connection they act for. */
struct request_ctx {
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
 * Runs a parsed command of session `s` (its reply built in `scratch`):
 * answered at once, or turned into requests whose messages go to the
 * accounts (a message the dispatcher refuses is answered at once).
 * Returns true for QUIT: the connection reads no more.
 */
bool requests_run(const struct request_ctx *x,
		  const struct command_server *srv, struct session *s,
		  const struct resp_command *cmd, struct buf *scratch);

/* The way back from the accounts to the connections' workers. */
struct request_return {
	struct request_inbox *inboxes; /* [workers], before any request */
};

/*
 * The dispatcher's completion of a request's message (any worker), with
 * a struct request_return as `arg` (bank_completion's next): makes its
 * reply and passes it to its connection's worker. Nothing when none
 * waits (a saga not over yet, or a transfer resumed at startup, which
 * may complete before the front has started).
 */
void requests_completed(agr_message *msg, int status, void *arg);

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
 * Takes the replies that are next in line off the queue, into `out`
 * (or drops them), and frees their requests.
 */
void requests_collect(struct request_queue *q, struct buf *out, bool drop);

#endif /* LEDGER_REQUEST_H */
