/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_conn.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acceptor.h"
#include "buf.h"
#include "ledger_accounts.h"
#include "ledger_commands.h"
#include "ledger_request.h"
#include "net.h"
#include "resp.h"
#include "util.h"

#define PENDING_MAX 1024	   /* requests in flight per connection */
#define IN_BUF_MIN (16 * 1024)
#define LINGER_NS 1000000000ull	   /* a closing peer gets this long */

/*
 * One worker's connections; touched only by its thread until it has
 * ended. Cache-line aligned: neighbours are written by other workers.
 */
struct front_worker {
	_Alignas(64) struct conn *conns; /* its live connections */
	struct conn *replied; /* with replies finished in this turn */
	bool flush_queued;    /* worker_flush_replies() is queued */
	struct front *front;
	unsigned index;
	struct buf scratch; /* the reply of the command being run */
	/* Written by this worker only; INFO reads them anywhere. */
	atomic_ullong commands, protocol_errors, connections;
};

struct front {
	agr_dispatcher *disp;
	agr_scheduler *sched;
	const struct command_server *srv;
	unsigned nworkers;
	struct front_worker *workers; /* [nworkers] */
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
	bool eof;	   /* the peer sends no more (or we gave up on it) */
	bool closing;	   /* we serve no more: QUIT, a stop, a dead peer */
	bool broken;	   /* sending failed: replies are dropped */
	bool lingering;	   /* our FIN is sent; draining until the peer's */
	bool recv_armed;   /* a recv is in flight (callback arg: conn) */
	bool send_armed;   /* a send is in flight (callback arg: &wire) */
	bool linger_armed; /* the linger timer (callback arg: &lingering) */
	bool replied;	   /* on wc->replied, until the end of the turn */
	bool refused;	   /* over --maxclients: one error, then close */
	struct conn *next_replied;
	struct session session;
	struct request_queue queue;
	struct buf in;	  /* received, not yet parsed */
	struct buf out;	  /* replies, in order, waiting for the wire */
	struct buf wire;  /* being sent */
	size_t wire_sent;
};

static void conn_pump(struct conn *c);
static void conn_stop_reading(struct conn *c);

/* ---- requests: their replies, in turn, back to the wire ---- */

/* The end of a worker's turn: send what its connections have finished. */
static void worker_flush_replies(void *arg)
{
	struct front_worker *wc = arg;
	struct conn *c;

	wc->flush_queued = false;
	while ((c = wc->replied) != NULL) {
		wc->replied = c->next_replied;
		c->replied = false;
		conn_pump(c);
	}
}

/* Dropped by a forced stop: the connections go with the workers. */
static void worker_flush_dropped(void *arg, int err)
{
	struct front_worker *wc = arg;

	(void)err;
	wc->flush_queued = false;
	for (; wc->replied; wc->replied = wc->replied->next_replied)
		wc->replied->replied = false;
}

/* A plain increment that INFO may read: this worker is the writer. */
static void count_one(atomic_ullong *c)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static struct request_ctx ctx_of(struct conn *c)
{
	return (struct request_ctx){ .conn = c, .queue = &c->queue,
				     .out = &c->out,
				     .disp = c->wc->front->disp,
				     .worker = c->wc->index };
}

static void conn_reply(struct conn *c, const char *p, size_t n)
{
	struct request_ctx x = ctx_of(c);

	requests_reply(&x, p, n);
}

/*
 * A reply is final. It goes out at the end of the worker's turn, with
 * every other reply of its connection finished in that turn: a
 * pipelining client gets one send per batch of events, not one for the
 * first reply and another for the rest.
 */
void conn_request_ready(struct conn *c)
{
	struct front_worker *wc = c->wc;

	if (c->replied)
		return;
	c->replied = true;
	c->next_replied = wc->replied;
	wc->replied = c;
	if (wc->flush_queued)
		return;
	wc->flush_queued = true;
	if (agr_scheduler_schedule_cancellable(wc->front->sched, wc->index,
					       worker_flush_replies,
					       worker_flush_dropped, wc) < 0)
		worker_flush_replies(wc); /* stopping: now */
}

/*
 * The dispatcher is done with a message (on the group's worker). Its
 * reply goes to the connection's worker, directly if that is this one.
 */
void front_completed(agr_message *msg, int status, void *arg)
{
	struct front *f = arg;
	struct request *rq = requests_completed(msg, status);

	if (rq) /* f->sched is set once a request can exist */
		requests_route(rq, f->sched);
}

static void conn_execute(struct conn *c, const struct resp_command *cmd)
{
	struct front_worker *wc = c->wc;
	struct command_outcome out = { .reply = &wc->scratch };
	struct request_ctx x = ctx_of(c);

	count_one(&wc->commands);
	command_run(wc->front->srv, &c->session, cmd, &out);
	if (out.kind != COMMAND_REPLY && out.kind != COMMAND_QUIT) {
		requests_dispatch(&x, cmd, &out);
		return;
	}
	conn_reply(c, out.reply->p, out.reply->len);
	if (out.kind == COMMAND_QUIT)
		conn_stop_reading(c); /* and close after the replies queued */
}

/* As Redis: "-ERR Protocol error: ...", once, then close. */
static void conn_protocol_error(struct conn *c, const struct resp_error *err)
{
	struct buf *b = &c->wc->scratch;

	count_one(&c->wc->protocol_errors);
	command_protocol_error(b, err->msg);
	conn_reply(c, b->p, b->len);
	conn_stop_reading(c);
}

/*
 * Parses and runs the requests in the input buffer, up to PENDING_MAX
 * in flight. Returns true if it stopped at that limit.
 */
static bool conn_parse(struct conn *c)
{
	const struct command_server *srv = c->wc->front->srv;
	struct resp_command cmd;
	struct resp_error err;
	size_t pos = 0, used;
	enum resp_status s;
	bool blocked = false;

	while (!c->closing && pos < c->in.len) {
		if (requests_pending(&c->queue) >= PENDING_MAX) {
			blocked = true;
			break;
		}
		s = resp_parse_command(c->in.p + pos, c->in.len - pos,
				       srv->max_bulk, &cmd, &used, &err);
		if (s == RESP_MORE) {
			/* Redis closes such a client without a reply. */
			if (c->in.len - pos >= srv->query_buf_max) {
				warnf("closing client %llu: it reached the "
				      "query buffer limit",
				      (unsigned long long)c->session.id);
				conn_stop_reading(c);
				pos = c->in.len;
			}
			break;
		}
		if (s == RESP_PROTOCOL) {
			conn_protocol_error(c, &err);
			pos = c->in.len;
			break;
		}
		pos += used;
		if (cmd.argc > 0)
			conn_execute(c, &cmd);
	}
	buf_consume(&c->in, pos);
	return blocked;
}

/* ---- the socket: recv, send, linger, close ---- */

static void conn_sent(int res, void *arg);

/* QUIT, a stop, a dead peer: serve no more requests, then close. */
static void conn_stop_reading(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->recv_armed)
		agr_io_cancel(agr_worker_current(), c);
}

static void conn_send_more(struct conn *c)
{
	int ret = agr_io_send(agr_worker_current(), c->fd,
			      c->wire.p + c->wire_sent,
			      c->wire.len - c->wire_sent, MSG_NOSIGNAL,
			      conn_sent, &c->wire);

	if (ret < 0) {
		c->broken = true;
		c->wire.len = 0;
		conn_stop_reading(c);
		return;
	}
	c->send_armed = true;
}

static void conn_send(struct conn *c)
{
	struct buf t;

	if (c->broken)
		c->out.len = 0;
	if (c->send_armed || c->out.len == 0)
		return;
	t = c->wire; /* double buffering: fill one, send the other */
	c->wire = c->out;
	c->out = t;
	c->out.len = 0;
	c->wire_sent = 0;
	conn_send_more(c);
}

static void conn_sent(int res, void *arg)
{
	struct conn *c = container_of(arg, struct conn, wire);

	c->send_armed = false;
	if (res <= 0) {
		c->broken = true;
		c->wire.len = 0;
		conn_stop_reading(c);
	} else if ((c->wire_sent += (size_t)res) < c->wire.len) {
		conn_send_more(c); /* the socket buffer was full */
		return;
	} else {
		c->wire.len = 0;
	}
	conn_pump(c);
}

static void conn_received(int res, void *arg);

/*
 * Keeps a recv armed while requests may come and there is room for
 * them; while lingering, to read and drop what the peer still sends.
 */
static void conn_arm_recv(struct conn *c)
{
	size_t room, max = c->wc->front->srv->query_buf_max;
	int ret;

	if (c->recv_armed || c->eof)
		return;
	if (c->closing ? !c->lingering : requests_pending(&c->queue) >= PENDING_MAX)
		return;
	if (c->lingering)
		c->in.len = 0; /* what it sends now is dropped */
	if (c->in.len >= max)
		return; /* conn_parse has closed it */
	room = max - c->in.len;
	buf_reserve(&c->in, room < IN_BUF_MIN / 4 ? room : IN_BUF_MIN / 4,
		    IN_BUF_MIN);
	room = (c->in.cap < max ? c->in.cap : max) - c->in.len;
	ret = agr_io_recv(agr_worker_current(), c->fd, c->in.p + c->in.len,
			  room, 0, conn_received, c);
	if (ret < 0)
		c->eof = true;
	else
		c->recv_armed = true;
}

static void conn_received(int res, void *arg)
{
	struct conn *c = arg;

	c->recv_armed = false;
	if (res > 0 && !c->closing)
		c->in.len += (size_t)res;
	else if (res == 0 || (res < 0 && res != -ECANCELED))
		c->eof = true; /* end of stream, or the peer is gone */
	if (c->eof && c->linger_armed)
		agr_io_cancel(agr_worker_current(), &c->lingering);
	conn_pump(c);
}

static void conn_linger_over(int res, void *arg)
{
	struct conn *c = container_of(arg, struct conn, lingering);

	(void)res; /* -ETIME: time is up; -ECANCELED: the peer closed */
	c->linger_armed = false;
	if (!c->eof) {
		c->eof = true; /* stop waiting for the peer's FIN */
		if (c->recv_armed)
			agr_io_cancel(agr_worker_current(), c);
	}
	conn_pump(c);
}

/*
 * We close first (QUIT, a stop) once every reply has been sent. Closing
 * a socket with unread input makes the kernel send a reset, which can
 * destroy replies the client has not read yet. So half-close instead,
 * and read until the client closes too, for at most LINGER_NS.
 */
static void conn_linger(struct conn *c)
{
	c->lingering = true;
	shutdown(c->fd, SHUT_WR); /* our FIN follows the last reply */
	if (agr_io_timeout(agr_worker_current(), LINGER_NS, conn_linger_over,
			   &c->lingering) < 0)
		c->eof = true;
	else
		c->linger_armed = true;
}

static void conn_free(struct conn *c)
{
	struct drain *drain = c->wc->front->drain;

	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else if (c->wc->conns == c)
		c->wc->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->wire);
	session_free(&c->session);
	if (!c->refused)
		atomic_fetch_sub_explicit(&c->wc->front->connected, 1,
					  memory_order_relaxed);
	free(c);
	drain_done(drain);
}

/* Every request has been answered, or the peer is gone. */
static bool conn_answered(const struct conn *c)
{
	return requests_pending(&c->queue) == 0 && c->out.len == 0 && !c->send_armed;
}

/*
 * Done when the peer sends no more, every request has been answered
 * and no operation of ours is in flight.
 */
static bool conn_done(const struct conn *c)
{
	return (c->eof || c->broken) && conn_answered(c) && !c->recv_armed &&
	       !c->linger_armed && !c->replied;
}

/*
 * Moves a connection along after any event: parse what arrived, pass
 * finished replies to the wire in order, keep a recv armed while there
 * is room, and free the connection once it is done. Never re-entered:
 * nothing it calls completes a request synchronously.
 */
static void conn_pump(struct conn *c)
{
	bool blocked;

	do {
		blocked = conn_parse(c);
		requests_collect(&c->queue, &c->out, c->broken);
	} while (blocked && requests_pending(&c->queue) < PENDING_MAX);
	conn_send(c);
	if (c->closing && !c->eof && !c->broken && !c->lingering &&
	    !c->recv_armed && conn_answered(c))
		conn_linger(c);
	conn_arm_recv(c);
	if (conn_done(c))
		conn_free(c);
}

/* ---- the front: accepting, stopping ---- */

/* Runs on the connection's worker. */
static void conn_start(void *arg)
{
	struct conn *c = arg;
	struct front_worker *wc = c->wc;

	c->next = wc->conns;
	if (c->next)
		c->next->prev = c;
	wc->conns = c;
	count_one(&wc->connections);
	if (c->refused) {
		static const char full[] =
			"-ERR max number of clients reached\r\n";

		conn_reply(c, full, sizeof(full) - 1);
		c->closing = true;
	}
	if (atomic_load(&wc->front->stopping))
		c->closing = true; /* arrived after the stop began */
	conn_pump(c);
}

/* A new connection, on the acceptor's worker: deal it to the next one. */
static void front_take(void *arg, int fd)
{
	struct front *f = arg;
	unsigned target = f->next++ % f->nworkers;
	struct conn *c = xcalloc(1, sizeof(*c));

	net_nodelay(fd);
	c->fd = fd;
	c->wc = &f->workers[target];
	session_init(&c->session, f->srv, ++f->next_id, fd);
	/* As Redis: the error, then the connection closes. */
	if (atomic_fetch_add_explicit(&f->connected, 1, memory_order_relaxed) >=
	    f->srv->maxclients) {
		atomic_fetch_sub_explicit(&f->connected, 1,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&f->rejected, 1,
					  memory_order_relaxed);
		c->refused = true;
	}
	drain_add(f->drain);
	if (target == (unsigned)agr_worker_index(agr_worker_current())) {
		conn_start(c);
		return;
	}
	if (agr_scheduler_schedule(f->sched, target, conn_start, c) < 0) {
		if (!c->refused)
			atomic_fetch_sub_explicit(&f->connected, 1,
						  memory_order_relaxed);
		close(fd);
		free(c);
		drain_done(f->drain);
	}
}

/* A stop: every connection answers what it has read, then closes. */
static void worker_close_conns(void *arg)
{
	struct front_worker *wc = arg;
	struct conn *c, *next;

	for (c = wc->conns; c; c = next) {
		next = c->next;
		conn_stop_reading(c);
		conn_pump(c);
	}
}

struct front *front_new(struct drain *drain, const struct command_server *srv)
{
	struct front *f = xcalloc(1, sizeof(*f));

	f->drain = drain;
	f->srv = srv;
	return f;
}

static void make_workers(struct front *f)
{
	size_t size = f->nworkers * sizeof(*f->workers);
	unsigned i;

	f->workers = aligned_alloc(_Alignof(struct front_worker), size);
	if (!f->workers)
		die("out of memory");
	memset(f->workers, 0, size);
	for (i = 0; i < f->nworkers; i++) {
		f->workers[i].front = f;
		f->workers[i].index = i;
	}
}

void front_start(struct front *f, agr_dispatcher *disp, int port,
		 int *bound)
{
	int fd, ret;

	f->disp = disp;
	f->sched = agr_dispatcher_scheduler(disp);
	f->nworkers = (unsigned)agr_scheduler_parallelism(f->sched);
	make_workers(f);
	fd = net_listen(port, bound);
	ret = acceptor_start(f->sched, 0, fd, front_take, f, f->drain,
			     &f->acceptor);
	if (ret)
		die("agr_scheduler_schedule: %s", agr_strerror(ret));
}

void front_stop(struct front *f)
{
	unsigned i;

	atomic_store(&f->stopping, true);
	acceptor_stop(f->acceptor);
	for (i = 0; i < f->nworkers; i++)
		agr_scheduler_schedule(f->sched, i, worker_close_conns,
				       &f->workers[i]);
}

void front_get_stats(const struct front *f, struct front_stats *st)
{
	unsigned i;

	*st = (struct front_stats){
		.connected = atomic_load_explicit(&f->connected,
						  memory_order_relaxed),
		.rejected = atomic_load_explicit(&f->rejected,
						 memory_order_relaxed),
	};
	for (i = 0; f->workers && i < f->nworkers; i++) {
		const struct front_worker *w = &f->workers[i];

		st->connections += atomic_load_explicit(&w->connections,
							memory_order_relaxed);
		st->commands += atomic_load_explicit(&w->commands,
						     memory_order_relaxed);
		st->protocol_errors += atomic_load_explicit(
			&w->protocol_errors, memory_order_relaxed);
	}
}

void front_free(struct front *f)
{
	unsigned i;

	if (f->acceptor)
		acceptor_free(f->acceptor);
	for (i = 0; f->workers && i < f->nworkers; i++)
		buf_free(&f->workers[i].scratch);
	free(f->workers);
	free(f);
}
