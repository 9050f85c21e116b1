/* SPDX-License-Identifier: MIT */
/*
 * ledger_request.c - a connection's requests, from a parsed command to
 * the reply in its turn: account messages sent to their groups (one, a
 * key each for MGET/EXISTS/DEL, a transaction, a transfer's saga) and
 * the replies put back in arrival order.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_request.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_accounts.h"
#include "resp.h"
#include "util.h"

/* Pooled per worker beyond this are freed: a burst does not stay. */
#define REQUEST_POOL_MAX 4096

/*
 * A request of a connection. Lives from parsing until its reply has
 * been queued for sending; in between its message may visit the
 * account's group on another worker, which touches only the message
 * and the reply, never the connection.
 */
struct request {
	struct conn *conn;
	struct request *next; /* the connection's queue, arrival order */
	struct request *next_ready; /* an inbox (request_inbox) */
	bool ready;	      /* reply[] (or big) is final */
	bool counts;	      /* a child of `parent` that counts 1 */
	bool refused;	      /* a parent: the dispatcher refused a child */
	bool ok;	      /* a parent: WATCH's, answering OK */
	unsigned conn_worker;
	unsigned reply_len;
	struct request *parent; /* EXISTS, DEL: the request of the count */
	unsigned children;	/* a parent: children not yet ready */
	long long count;	/* a parent: of its children that counted */
	char *big;		/* a reply longer than REPLY_MAX */
	struct account_step *steps; /* EXEC: the transaction's commands */
	struct transfer *xfer;	    /* TRANSFER */
	struct account_msg am; /* msg.user = this */
	char reply[REPLY_MAX]; /* not cleared on reuse: reply_len says */
};

/*
 * A cleared request, from the pool if it has one. Only the fields
 * before reply[] are cleared: the reply is written before it is read.
 */
static struct request *request_alloc(struct request_pool *pool)
{
	struct request *rq = pool->free;

	if (!rq)
		return xcalloc(1, sizeof(*rq));
	pool->free = rq->next;
	pool->count--;
	memset(rq, 0, offsetof(struct request, reply));
	return rq;
}

static void request_release(struct request_pool *pool, struct request *rq)
{
	free(rq->big);
	command_msg_release(&rq->am);
	free(rq->steps);
	free(rq->xfer);
	if (pool->count >= REQUEST_POOL_MAX) {
		free(rq);
		return;
	}
	rq->next = pool->free;
	pool->free = rq;
	pool->count++;
}

void request_pool_clear(struct request_pool *pool)
{
	struct request *rq;

	while ((rq = pool->free) != NULL) {
		pool->free = rq->next;
		free(rq);
	}
	pool->count = 0;
}

static void request_enqueue(const struct request_ctx *x, struct request *rq)
{
	struct request_queue *q = x->queue;

	rq->conn = x->conn;
	rq->next = NULL;
	if (q->tail)
		q->tail->next = rq;
	else
		q->head = rq;
	q->tail = rq;
	q->pending++;
}

void requests_reply(const struct request_ctx *x, const char *p, size_t n)
{
	struct request *rq;

	if (!x->queue->head) {
		buf_append(x->out, p, n);
		return;
	}
	rq = request_alloc(x->queue->pool);
	if (n > REPLY_MAX) {
		rq->big = xrealloc(NULL, n);
		memcpy(rq->big, p, n);
	} else {
		memcpy(rq->reply, p, n);
	}
	rq->reply_len = (unsigned)n;
	rq->ready = true;
	request_enqueue(x, rq);
}

/* The reply of EXISTS or DEL, once every key has been answered. */
static void parent_finish(struct request *p)
{
	p->reply_len = p->refused ?
			       (unsigned)command_refused_reply(-ESHUTDOWN,
							       p->reply) :
		       p->ok ? (unsigned)resp_encode_simple(p->reply,
							    REPLY_MAX, "OK") :
			       (unsigned)resp_encode_integer(p->reply,
							     REPLY_MAX,
							     p->count);
	p->ready = true;
}

/* A request's reply is final: its connection is told, on its worker. */
static void request_ready(void *arg)
{
	struct request *rq = arg;
	struct request *p = rq->parent;

	rq->ready = true;
	if (p) { /* EXISTS, DEL: the count is final with the last key */
		p->count += rq->counts;
		if (--p->children > 0)
			return;
		parent_finish(p);
	}
	conn_request_ready(rq->conn);
}

struct request *requests_completed(agr_message *msg, int status)
{
	struct request *rq = msg->user;
	struct transfer *x = account_msg_of(msg)->xfer;

	if (x) { /* a saga: replies when its last message completes */
		if (!transfer_message_done(x))
			return NULL;
		if (x->recovery) {
			free(x); /* resumed at startup: nobody waits */
			return NULL;
		}
		rq = x->debit.msg.user;
		rq->reply_len = (unsigned)command_transfer_reply(x, rq->reply);
	} else if (rq->parent) {
		rq->counts = command_account_counts(&rq->am, status);
	} else if (rq->am.scan) {
		struct buf b = { 0 };

		command_scan_reply(&rq->am, status, &b);
		rq->am.scan = NULL; /* freed by the reply */
		rq->big = b.p;
		rq->reply_len = (unsigned)b.len;
	} else if (rq->steps) {
		struct buf b = { 0 };

		command_txn_reply(&rq->am, status, &b);
		rq->big = b.p;
		rq->reply_len = (unsigned)b.len;
	} else
		rq->reply_len = (unsigned)command_account_reply(&rq->am, status,
								rq->reply);
	return rq;
}

struct request_inbox *request_inboxes_new(agr_scheduler *sched, unsigned n)
{
	struct request_inbox *in =
		aligned_alloc(_Alignof(struct request_inbox), n * sizeof(*in));
	unsigned i;

	if (!in)
		die("out of memory");
	for (i = 0; i < n; i++) {
		atomic_init(&in[i].head, NULL);
		in[i].sched = sched;
		in[i].worker = i;
	}
	return in;
}

/* On the inbox's worker: every reply pushed so far, in any order. */
static void inbox_drain(void *arg)
{
	struct request_inbox *in = arg;
	struct request *rq = atomic_exchange_explicit(&in->head, NULL,
						      memory_order_acquire);
	struct request *next;

	for (; rq; rq = next) {
		next = rq->next_ready;
		request_ready(rq);
	}
}

/*
 * Pushes rq; the push that finds the inbox empty schedules the drain,
 * which will see every later push until it empties the inbox again.
 */
static void inbox_push(struct request_inbox *in, struct request *rq)
{
	struct request *head = atomic_load_explicit(&in->head,
						    memory_order_relaxed);
	int ret;

	do
		rq->next_ready = head;
	while (!atomic_compare_exchange_weak_explicit(&in->head, &head, rq,
						      memory_order_release,
						      memory_order_relaxed));
	if (head)
		return;
	ret = agr_scheduler_schedule(in->sched, in->worker, inbox_drain, in);
	if (ret < 0) /* only after a forced stop: the connection is gone */
		warnf("replies lost: %s", strerror(-ret));
}

void requests_route(struct request *rq, struct request_inbox *inboxes)
{
	struct request_inbox *in = &inboxes[rq->conn_worker];
	agr_worker *w = agr_worker_current();

	if (w && agr_worker_scheduler(w) == in->sched &&
	    (unsigned)agr_worker_index(w) == rq->conn_worker) {
		request_ready(rq);
		return;
	}
	inbox_push(in, rq);
}

/* Sends rq's message to the accounts, or answers at once if refused. */
static void request_send(const struct request_ctx *x, struct request *rq)
{
	int ret = agr_dispatcher_send(x->disp, &rq->am.msg);

	if (ret >= 0)
		return;
	/* Not admitted: no callback will come, so answer now. */
	if (!rq->parent) {
		rq->reply_len = (unsigned)command_refused_reply(ret, rq->reply);
	} else { /* the parent's guard keeps it above 0 here */
		rq->parent->refused = true;
		rq->parent->children--;
	}
	rq->ready = true;
}

static struct request *request_new(const struct request_ctx *x)
{
	struct request *rq = request_alloc(x->queue->pool);

	rq->conn_worker = x->worker;
	return rq;
}

static void dispatch(const struct request_ctx *x,
		     const struct command_outcome *o)
{
	struct request *rq = request_new(x);

	account_msg_init(&rq->am, o->op, o->key.p, o->key.len, o->amount,
			 rq);
	if (o->reqid.len)
		account_msg_set_reqid(&rq->am, o->reqid.p, o->reqid.len);
	if (o->value.p) /* SET of a string */
		account_step_set_str(&rq->am.one, o->value.p, o->value.len);
	request_enqueue(x, rq);
	request_send(x, rq);
}

/* SCAN: one message to the group it lists (bank_group_key). */
static void dispatch_scan(const struct request_ctx *x,
			  const struct command_outcome *o)
{
	struct request *rq = request_new(x);
	struct buf b = { 0 };
	int ret;

	account_msg_init(&rq->am, OP_SCAN, "", 0, 0, rq);
	rq->am.scan = o->scan;
	request_enqueue(x, rq);
	ret = agr_dispatcher_send(x->disp, &rq->am.msg);
	if (ret >= 0)
		return;
	command_scan_reply(&rq->am, ret, &b); /* frees the scan */
	buf_free(&b);
	rq->am.scan = NULL;
	rq->reply_len = (unsigned)command_refused_reply(ret, rq->reply);
	rq->ready = true;
}

/* TRANSFER: a saga that starts with the debit (ledger_accounts.h). */
static void dispatch_transfer(const struct request_ctx *x,
			      const struct command_outcome *o)
{
	struct request *rq = request_new(x);
	struct transfer *t = xcalloc(1, sizeof(*t));
	int ret;

	transfer_init(t, o->key.p, o->key.len, o->key2.p, o->key2.len,
		      o->amount, rq);
	if (o->reqid.len)
		transfer_set_reqid(t, o->reqid.p, o->reqid.len);
	rq->xfer = t;
	request_enqueue(x, rq);
	ret = agr_dispatcher_send(x->disp, &t->debit.msg);
	if (ret < 0) {
		rq->reply_len = (unsigned)command_refused_reply(ret, rq->reply);
		rq->ready = true;
	}
}

/* EXEC: the transaction is one message to its account. */
static void dispatch_txn(const struct request_ctx *x,
			 const struct command_outcome *o)
{
	struct request *rq = request_new(x);

	rq->steps = o->steps;
	account_msg_init_steps(&rq->am, o->key.p, o->key.len, o->steps,
			       o->nsteps, rq);
	if (o->reqid.len)
		account_msg_set_reqid(&rq->am, o->reqid.p, o->reqid.len);
	rq->am.watches = o->watches; /* the request's now */
	rq->am.nwatches = o->nwatches;
	request_enqueue(x, rq);
	request_send(x, rq);
}

/*
 * MGET: an array header, then one GET per key, whose replies follow in
 * order. EXISTS, DEL: one message per key, counted by a parent request
 * queued after them, ready when the last of them is.
 */
static void dispatch_keys(const struct request_ctx *x,
			  const struct resp_command *cmd,
			  const struct command_outcome *o)
{
	struct request *parent = NULL, *rq;
	char head[32];
	int i;

	if (o->count) {
		parent = request_new(x);
		parent->children = 1; /* a guard, until every key is sent */
		parent->ok = o->op == OP_WATCH;
	} else {
		requests_reply(x, head, resp_encode_array(head, sizeof(head),
						      (size_t)cmd->argc - 1));
	}
	for (i = 1; i < cmd->argc; i++) {
		const struct resp_arg *k = &cmd->argv[i];

		rq = request_new(x);
		request_enqueue(x, rq);
		if (!key_valid(k->p, k->len)) { /* no such account */
			rq->reply_len = parent ? 0 :
				(unsigned)resp_encode_nil(rq->reply, REPLY_MAX);
			rq->ready = true;
			continue;
		}
		account_msg_init(&rq->am, o->op, k->p, k->len, 0, rq);
		if (o->watches) /* WATCH: the message fills it in */
			rq->am.watch = o->watches[i - 1];
		if (parent) {
			rq->parent = parent;
			parent->children++;
		}
		request_send(x, rq);
	}
	free(o->watches); /* the references are the messages' now */
	if (parent) {
		request_enqueue(x, parent);
		if (--parent->children == 0)
			parent_finish(parent);
	}
}

void requests_dispatch(const struct request_ctx *x,
		       const struct resp_command *cmd,
		       const struct command_outcome *o)
{
	switch (o->kind) {
	case COMMAND_ACCOUNT:
		dispatch(x, o);
		break;
	case COMMAND_KEYS:
		dispatch_keys(x, cmd, o);
		break;
	case COMMAND_TXN:
		dispatch_txn(x, o);
		break;
	case COMMAND_TRANSFER:
		dispatch_transfer(x, o);
		break;
	case COMMAND_SCAN:
		dispatch_scan(x, o);
		break;
	case COMMAND_REPLY:
	case COMMAND_QUIT:
		break;
	}
}

void requests_collect(struct request_queue *q, struct buf *out, bool drop)
{
	struct request *rq;

	while ((rq = q->head) && rq->ready) {
		q->head = rq->next;
		if (!q->head)
			q->tail = NULL;
		q->pending--;
		if (!drop)
			buf_append(out, rq->big ? rq->big : rq->reply,
				   rq->reply_len);
		request_release(q->pool, rq);
	}
}
