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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

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
#define RECV_BUF_SIZE 8192	   /* one buffer of the provided ring */
#define RECV_BUF_GROUP 1
#define FIXED_FILES_MAX 1024	   /* registered sockets per worker */

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
	struct request_inbox *inboxes; /* [nworkers]: replies from others */
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
	bool replied;	   /* on wc->replied, until the end of the turn */
	bool refused;	   /* over --maxclients: one error, then close */
	struct conn *next_replied;
	struct session session;
	struct request_queue queue;
	struct buf in;	  /* received, not yet parsed */
	struct resp_partial partial; /* how much of in's first request */
	struct buf out;	  /* replies, in order, waiting for the wire */
	struct buf wire;  /* being sent */
	size_t wire_sent;
	uint64_t over_soft_since; /* replies over the soft limit since; 0 */
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

	if (rq) /* f->inboxes is set once a request can exist */
		requests_route(rq, f->inboxes);
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
 * Redis's guard against cross-protocol scripting: a web page can make a
 * browser POST to 127.0.0.1:6379, and the body's lines would run as
 * inline commands. "POST" and "Host:" are never commands: log, close.
 */
static bool conn_cross_protocol(struct conn *c, const struct resp_command *cmd)
{
	if (!resp_arg_is(&cmd->argv[0], "post") &&
	    !resp_arg_is(&cmd->argv[0], "host:"))
		return false;
	count_one(&c->wc->protocol_errors);
	warnf("possible security attack: client %llu sent a '%.*s' line, as "
	      "a browser posting to this port would (cross-protocol "
	      "scripting); connection closed, nothing it sent applied",
	      (unsigned long long)c->session.id, (int)cmd->argv[0].len,
	      cmd->argv[0].p);
	conn_stop_reading(c);
	return true;
}

/* The request at p[0, len): resumes where the last call stopped. */
static enum resp_status conn_parse_one(struct conn *c, const char *p,
				       size_t len, struct resp_command *cmd,
				       size_t *used, struct resp_error *err)
{
	struct resp_limits lim = {
		.max_bulk = c->wc->front->srv->max_bulk,
		.unauthenticated = !c->session.authed,
	};

	return resp_parse_request(p, len, &lim, &c->partial, cmd, used, err);
}

/*
 * Parses and runs the requests in p[0, len), up to PENDING_MAX in
 * flight (*blocked then). Returns the bytes used: the rest is an
 * incomplete request (c->partial says how far it was checked), or waits
 * for room. After a protocol error or the query buffer limit,
 * everything counts as used: the connection reads no more.
 */
static size_t conn_parse_from(struct conn *c, const char *p, size_t len,
			      bool *blocked)
{
	const struct command_server *srv = c->wc->front->srv;
	struct resp_command cmd;
	struct resp_error err;
	size_t pos = 0, used;
	enum resp_status s;

	*blocked = false;
	while (!c->closing && pos < len) {
		if (requests_pending(&c->queue) >= PENDING_MAX) {
			*blocked = true;
			break;
		}
		s = conn_parse_one(c, p + pos, len - pos, &cmd, &used, &err);
		if (s == RESP_MORE) {
			/* Redis closes such a client without a reply. */
			if (len - pos >= srv->query_buf_max) {
				warnf("closing client %llu: it reached the "
				      "query buffer limit",
				      (unsigned long long)c->session.id);
				conn_stop_reading(c);
				pos = len;
			}
			break;
		}
		if (s == RESP_PROTOCOL) {
			conn_protocol_error(c, &err);
			pos = len;
			break;
		}
		pos += used;
		if (cmd.argc > 0 && !conn_cross_protocol(c, &cmd))
			conn_execute(c, &cmd);
	}
	return pos;
}

/* conn_parse_from() on the input buffer. True if it stopped blocked. */
static bool conn_parse(struct conn *c)
{
	bool blocked;

	buf_consume(&c->in, conn_parse_from(c, c->in.p, c->in.len, &blocked));
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

/*
 * The descriptor for the next operation on c's socket: its fixed file
 * when it has one (the flag set for that next call), else the fd.
 * `id`, if not NULL, gets the operation's id.
 */
static int conn_sock(struct conn *c, agr_worker *w, agr_io_id *id)
{
	agr_io_params p = AGR_IO_PARAMS_INIT;

	if (c->slot < 0 && !id)
		return c->fd;
	p.id = id;
	if (c->slot >= 0)
		p.flags = AGR_IO_FIXED_FILE;
	if (agr_io_next(w, &p) < 0)
		return -1; /* logged; the call then fails on it (-EBADF) */
	return c->slot >= 0 ? c->slot : c->fd;
}

static void conn_send_more(struct conn *c)
{
	agr_worker *w = agr_worker_current();
	int ret = agr_io_send(w, conn_sock(c, w, NULL),
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
static void conn_received_multishot(int res, unsigned flags, void *arg);

/* --recv single: one recv into the input buffer, re-armed each time. */
static int conn_arm_single(struct conn *c, agr_worker *w)
{
	size_t room, max = c->wc->front->srv->query_buf_max;

	room = max - c->in.len;
	buf_reserve(&c->in, room < IN_BUF_MIN / 4 ? room : IN_BUF_MIN / 4,
		    IN_BUF_MIN);
	room = (c->in.cap < max ? c->in.cap : max) - c->in.len;
	return agr_io_recv(w, c->fd, c->in.p + c->in.len, room, 0,
			   conn_received, c);
}

/*
 * --recv multishot: one receive that stays armed, into the worker's
 * provided buffers, until the kernel ends it (conn_received_multishot).
 */
static int conn_arm_multishot(struct conn *c, agr_worker *w)
{
	int fd = conn_sock(c, w, &c->recv_id);

	return agr_io_recv_multishot(w, fd, c->wc->br, 0,
				     conn_received_multishot, c);
}

/*
 * Whether the connection takes input now: while requests may come and
 * there is room for them; while lingering, to read and drop what the
 * peer still sends.
 */
static bool conn_wants_input(const struct conn *c)
{
	if (c->eof)
		return false;
	if (c->closing)
		return c->lingering;
	return requests_pending(&c->queue) < PENDING_MAX &&
	       c->in.len < c->wc->front->srv->query_buf_max;
}

/*
 * Keeps a receive armed while the connection wants input. A multishot
 * receive goes on without asking, so when the connection has no room
 * (PENDING_MAX requests in flight) it is ended, and armed again once
 * there is room: the client then waits in TCP's flow control, as with
 * single recvs, and the input buffer does not grow without bound.
 */
static void conn_arm_recv(struct conn *c)
{
	agr_worker *w = agr_worker_current();
	bool want = conn_wants_input(c);
	int ret;

	if (c->recv_armed) {
		if (!want && c->multishot && !c->closing && !c->recv_paused &&
		    agr_io_cancel_op(w, c->recv_id) == 0) {
			c->recv_paused = true;
			count_one(&c->wc->recv_pauses);
		}
		return;
	}
	if (!want)
		return;
	if (c->lingering)
		c->in.len = 0; /* what it sends now is dropped */
	ret = c->multishot ? conn_arm_multishot(c, w) : conn_arm_single(c, w);
	if (ret < 0)
		c->eof = true;
	else
		c->recv_armed = true;
}

/*
 * Input from a provided buffer, which goes back to the kernel as soon
 * as this returns. With nothing buffered, the requests are parsed where
 * they arrived; what is left (a request cut at the buffer's end, or
 * requests waiting for room) is copied to the input buffer, in front
 * of which the next buffer's bytes then go.
 */
static void conn_take_input(struct conn *c, const char *p, size_t n)
{
	size_t used = 0;
	bool blocked;

	if (c->closing)
		return; /* QUIT, a stop, lingering: dropped */
	if (c->in.len == 0)
		used = conn_parse_from(c, p, n, &blocked);
	if (!c->closing)
		buf_append(&c->in, p + used, n - used);
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

/*
 * The multishot receive has ended (a CQE without IORING_CQE_F_MORE).
 * -ENOBUFS: the worker's buffers were all taken, which lasts only until
 * this turn's CQEs have been read (each recycles its buffer), so it is
 * armed again at once, as after the kernel's own ends (res > 0) and a
 * pause. -EINVAL: a kernel without multishot recv (before 6.0): the
 * connection goes on with single recvs.
 */
static void conn_multishot_ended(struct conn *c, int res)
{
	struct front_worker *wc = c->wc;

	c->recv_armed = false;
	c->recv_paused = false;
	if (res == -ENOBUFS) {
		count_one(&wc->recv_enobufs);
	} else if (res > 0) {
		count_one(&wc->recv_rearms);
	} else if (res == -EINVAL && !c->closing) {
		warnf("multishot recv refused (Linux < 6.0?): client %llu "
		      "uses single recvs", (unsigned long long)c->session.id);
		c->multishot = false;
	} else if (res != -ECANCELED) {
		c->eof = true; /* end of stream, or the peer is gone */
	}
	if (c->eof && c->linger_armed)
		agr_io_cancel(agr_worker_current(), &c->lingering);
}

static void conn_received_multishot(int res, unsigned flags, void *arg)
{
	struct conn *c = arg;
	int bid = agr_buf_ring_bid(flags);

	if (bid >= 0) {
		if (res > 0)
			conn_take_input(c, agr_buf_ring_buf(c->wc->br,
							    (unsigned)bid),
					(size_t)res);
		agr_buf_ring_recycle(c->wc->br, (unsigned)bid);
	}
	if (!(flags & IORING_CQE_F_MORE))
		conn_multishot_ended(c, res);
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

/*
 * A socket in the fixed file table is still open while the table holds
 * it: the slot is emptied before the close, or the peer would never see
 * our FIN.
 */
static void conn_release_slot(struct conn *c)
{
	struct front_worker *wc = c->wc;
	int none = -1;

	if (c->slot < 0)
		return;
	if (io_uring_register_files_update(agr_worker_ring(agr_worker_current()),
					   (unsigned)c->slot, &none, 1) == 1)
		wc->free_slots[wc->nfree_slots++] = c->slot;
	else /* the slot is lost; the socket closes with the ring */
		warnf("client %llu: could not empty fixed file %d",
		      (unsigned long long)c->session.id, c->slot);
	c->slot = -1;
}

static void conn_free(struct conn *c)
{
	struct drain *drain = c->wc->front->drain;

	conn_release_slot(c);
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
/* Replies held for a client that does not read them: cut it off. */
static void conn_output_overflow(struct conn *c, size_t held, bool hard)
{
	const struct command_server *srv = c->wc->front->srv;

	count_one(&c->wc->output_limit_closed);
	warnf("closing client %llu: %zu bytes of replies it has not read "
	      "reached the %s output limit (%zu%s; "
	      "--client-output-buffer-limit)",
	      (unsigned long long)c->session.id, held, hard ? "hard" : "soft",
	      hard ? srv->out_hard : srv->out_soft,
	      hard ? " bytes" : " bytes for longer than its time");
	c->broken = true; /* its replies are dropped */
	c->out.len = 0;
	conn_stop_reading(c);
	/* The send in flight may never end otherwise: the peer reads not. */
	shutdown(c->fd, SHUT_RDWR);
}

/*
 * Redis's client-output-buffer-limit: replies waiting for the wire over
 * the hard limit close the client at once; over the soft limit, once
 * they have stayed over it for its time (checked as replies are added).
 */
static void conn_check_output(struct conn *c)
{
	const struct command_server *srv = c->wc->front->srv;
	size_t held = c->out.len;
	uint64_t now;

	if (c->wire.len > c->wire_sent) /* wire.len is 0 once sent */
		held += c->wire.len - c->wire_sent;

	if (c->broken)
		return;
	if (srv->out_hard && held > srv->out_hard) {
		conn_output_overflow(c, held, true);
		return;
	}
	if (!srv->out_soft || held <= srv->out_soft) {
		c->over_soft_since = 0;
		return;
	}
	now = now_ns();
	if (!c->over_soft_since)
		c->over_soft_since = now;
	else if (now - c->over_soft_since >= srv->out_soft_ns)
		conn_output_overflow(c, held, false);
}

static void conn_pump(struct conn *c)
{
	bool blocked;

	do {
		blocked = conn_parse(c);
		requests_collect(&c->queue, &c->out, c->broken);
	} while (blocked && requests_pending(&c->queue) < PENDING_MAX);
	conn_send(c);
	conn_check_output(c);
	if (c->closing && !c->eof && !c->broken && !c->lingering &&
	    !c->recv_armed && conn_answered(c))
		conn_linger(c);
	conn_arm_recv(c);
	if (conn_done(c))
		conn_free(c);
}

/* ---- the front: accepting, stopping ---- */

/*
 * --recv multishot: the socket goes into a free slot of the worker's
 * fixed file table, so that its receive and sends skip the kernel's
 * file lookup. With no slot free (or no table), the plain fd is used.
 */
static void conn_take_slot(struct conn *c)
{
	struct front_worker *wc = c->wc;
	int slot;

	if (!wc->files || wc->nfree_slots == 0)
		return;
	slot = wc->free_slots[--wc->nfree_slots];
	if (io_uring_register_files_update(agr_worker_ring(agr_worker_current()),
					   (unsigned)slot, &c->fd, 1) == 1) {
		c->slot = slot;
		return;
	}
	wc->free_slots[wc->nfree_slots++] = slot;
}

/* Runs on the connection's worker. */
static void conn_start(void *arg)
{
	struct conn *c = arg;
	struct front_worker *wc = c->wc;

	if (wc->br) {
		c->multishot = true;
		conn_take_slot(c);
	}

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
	c->slot = -1;
	c->wc = &f->workers[target];
	requests_init(&c->queue, &c->wc->pool);
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

struct front *front_new(struct drain *drain, const struct command_server *srv,
			const struct front_options *opts)
{
	struct front *f = xcalloc(1, sizeof(*f));

	f->drain = drain;
	f->srv = srv;
	f->opts = *opts;
	return f;
}

void front_prepare(struct front *f, unsigned nworkers)
{
	size_t size = nworkers * sizeof(*f->workers);
	unsigned i;

	f->nworkers = nworkers;
	f->workers = aligned_alloc(_Alignof(struct front_worker), size);
	if (!f->workers)
		die("out of memory");
	memset(f->workers, 0, size);
	for (i = 0; i < f->nworkers; i++) {
		f->workers[i].front = f;
		f->workers[i].index = i;
	}
}

/*
 * A sparse fixed file table of at most FIXED_FILES_MAX sockets (the
 * kernel allows no more than RLIMIT_NOFILE). Without one, the worker's
 * connections use plain fds: logged, not fatal.
 */
static void worker_register_files(struct front_worker *wc, agr_worker *w)
{
	struct rlimit rl;
	unsigned n = FIXED_FILES_MAX, i;
	int ret;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
		n = (unsigned)rl.rlim_cur;
	ret = io_uring_register_files_sparse(agr_worker_ring(w), n);
	if (ret < 0) {
		warnf("worker %u: no fixed file table (%s): plain fds",
		      wc->index, strerror(-ret));
		return;
	}
	wc->free_slots = xcalloc(n, sizeof(*wc->free_slots));
	for (i = 0; i < n; i++)
		wc->free_slots[i] = (int)(n - 1 - i); /* slot 0 first */
	wc->nfree_slots = n;
	wc->files = true;
}

int front_worker_init(struct front *f, agr_worker *w)
{
	struct front_worker *wc = &f->workers[agr_worker_index(w)];
	int ret;

	if (f->opts.recv != FRONT_RECV_MULTISHOT)
		return 0;
	ret = agr_buf_ring_new(w, RECV_BUF_GROUP, f->opts.recv_buffers,
			       RECV_BUF_SIZE, &wc->br);
	if (ret < 0) { /* Linux < 5.19: the old way */
		warnf("worker %u: no provided buffer ring (%s): single recvs",
		      wc->index, strerror(-ret));
		wc->br = NULL;
		return 0;
	}
	worker_register_files(wc, w);
	return 0;
}

void front_worker_exit(struct front *f, agr_worker *w)
{
	struct front_worker *wc = &f->workers[agr_worker_index(w)];

	if (wc->files)
		io_uring_unregister_files(agr_worker_ring(w));
	wc->files = false;
	agr_buf_ring_free(wc->br);
	wc->br = NULL;
}

void front_start(struct front *f, agr_dispatcher *disp, int port,
		 int *bound)
{
	int fd, ret;

	f->disp = disp;
	f->sched = agr_dispatcher_scheduler(disp);
	if (!f->workers)
		front_prepare(f, (unsigned)agr_scheduler_parallelism(f->sched));
	f->inboxes = request_inboxes_new(f->sched, f->nworkers);
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
		st->output_limit_closed += atomic_load_explicit(
			&w->output_limit_closed, memory_order_relaxed);
		st->recv_enobufs += atomic_load_explicit(
			&w->recv_enobufs, memory_order_relaxed);
		st->recv_rearms += atomic_load_explicit(
			&w->recv_rearms, memory_order_relaxed);
		st->recv_pauses += atomic_load_explicit(
			&w->recv_pauses, memory_order_relaxed);
	}
}

void front_free(struct front *f)
{
	unsigned i;

	if (f->acceptor)
		acceptor_free(f->acceptor);
	for (i = 0; f->workers && i < f->nworkers; i++) {
		buf_free(&f->workers[i].scratch);
		request_pool_clear(&f->workers[i].pool);
		free(f->workers[i].free_slots);
	}
	free(f->workers);
	free(f->inboxes);
	free(f);
}
