/* SPDX-License-Identifier: MIT */
/*
 * conn.c - one connection to one Redis node, on one worker's ring.
 *
 * Every operation the connection has on the ring (connect, recv, send,
 * the end-of-turn NOP, the reconnect timer) is counted in `ops`, and
 * each completion handler lowers the count as its last step, then
 * calls conn_step(): so the connection is never freed while one of its
 * handlers, or a reply callback called from one, still runs.
 */
#include "conn.h"

#include "buffer.h"
#include "redis_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <liburing.h>

#include <aggring/io.h>

enum conn_state {
	CONN_IDLE,	 /* no socket; connects when given a command */
	CONN_CONNECTING, /* a connect is in flight */
	CONN_READY,	 /* connected: receiving, sending what is queued */
	CONN_BROKEN,	 /* failed: waiting for its I/O to end */
	CONN_WAITING,	 /* the reconnect timer runs */
	CONN_CLOSING,	 /* closed: waiting for its I/O to end */
	CONN_DEAD,	 /* the worker is stopping: nothing more is done */
};

struct agr__redis_conn {
	agr_worker *w;
	char *host;
	int port;
	char *name;
	char *username;
	char *password;
	uint64_t connect_timeout_ns;
	uint64_t reconnect_delay_ns;
	agr_redis_stats *stats;
	const struct agr__redis_conn_hooks *hooks;
	void *hook_arg;

	enum conn_state state;
	int fd;
	unsigned ops;	    /* operations on the ring not yet completed */
	bool receiving;	    /* a recv is in flight */
	bool sending;	    /* a send is in flight */
	bool flush_queued;  /* the end-of-turn NOP is in flight */
	uint64_t deadline;  /* of the attempts to connect; 0: none running */
	struct sockaddr_storage addr; /* the kernel's until the connect ends */
	socklen_t addrlen;

	struct agr__redis_buf out;  /* appended, not yet handed to send */
	struct agr__redis_buf wire; /* being sent */
	size_t wire_off;	    /* of it, bytes sent */
	struct agr__redis_pipe pipe;
	redisReader *reader;
	char rbuf[16384];
};

static void conn_step(struct agr__redis_conn *c);
static void conn_attempt(struct agr__redis_conn *c);
static void conn_flush(struct agr__redis_conn *c);
static void conn_recv(struct agr__redis_conn *c);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Completes entries with `err`: every one, or only those on the wire.
 * Only those there now: a callback may append commands, which stay.
 */
static void conn_fail(struct agr__redis_conn *c, int err, bool sent_only)
{
	size_t n = sent_only ? agr__redis_pipe_sent(&c->pipe)
			     : agr__redis_pipe_len(&c->pipe);
	struct agr__redis_pending e;

	if (!sent_only) {
		agr__redis_buf_clear(&c->out);
		agr__redis_buf_clear(&c->wire);
		c->wire_off = 0;
	}
	while (n-- && agr__redis_pipe_pop(&c->pipe, &e))
		e.cb(e.arg, NULL, err);
}

/* The worker is stopping: no more I/O can be submitted. */
static void conn_die(struct agr__redis_conn *c, int err)
{
	agr_log(AGR_LOG_WARN, "redis %s:%d: %s; the connection stops",
		c->host, c->port, agr_strerror(err));
	c->state = CONN_DEAD;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	conn_fail(c, -ECANCELED, false);
}

/* A connected socket failed: what was sent is lost, the rest waits. */
static void conn_break(struct agr__redis_conn *c, int err)
{
	if (c->state != CONN_READY)
		return;
	agr_log(AGR_LOG_WARN, "redis %s:%d: connection lost: %s", c->host,
		c->port, strerror(-err));
	c->state = CONN_BROKEN;
	if (c->receiving || c->sending)
		agr_io_cancel(c->w, c);
	agr__redis_buf_clear(&c->wire);
	c->wire_off = 0;
	/* a force stop cancels the receive: that is not the server's doing */
	conn_fail(c, agr_worker_interrupted() ? -ECANCELED : -ECONNRESET, true);
	if (c->state == CONN_BROKEN && c->hooks->down)
		c->hooks->down(c, err, c->hook_arg);
}

static void on_timer(int res, void *arg)
{
	struct agr__redis_conn *c = arg;

	(void)res; /* -ETIME, or -ECANCELED by a close */
	c->ops--;
	if (c->state == CONN_WAITING) {
		c->state = CONN_IDLE;
		conn_attempt(c);
	}
	conn_step(c);
}

static void conn_wait_retry(struct agr__redis_conn *c, uint64_t delay)
{
	int ret = agr_io_timeout(c->w, delay, on_timer, c);

	if (ret < 0) {
		conn_die(c, ret);
		return;
	}
	c->ops++;
	c->state = CONN_WAITING;
}

/* An attempt failed: try again after the delay, or give up at the deadline. */
static void conn_attempt_failed(struct agr__redis_conn *c, int err)
{
	uint64_t now = now_ns(), delay = c->reconnect_delay_ns;

	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (now >= c->deadline) {
		agr_log(AGR_LOG_WARN,
			"redis %s:%d: no connection within %llu ms (last: %s)",
			c->host, c->port,
			(unsigned long long)(c->connect_timeout_ns / 1000000u),
			strerror(-err));
		c->state = CONN_IDLE;
		c->deadline = 0;
		conn_fail(c, -ETIMEDOUT, false);
		return;
	}
	if (delay > c->deadline - now)
		delay = c->deadline - now;
	conn_wait_retry(c, delay ? delay : 1);
	/* the node may be gone for good, its slots served elsewhere now */
	if (c->state == CONN_WAITING && c->hooks->down)
		c->hooks->down(c, err, c->hook_arg);
}

static int conn_resolve(struct agr__redis_conn *c, struct sockaddr_storage *ss,
			socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai;
	char port[16];
	int ret;

	snprintf(port, sizeof(port), "%d", c->port);
	ret = getaddrinfo(c->host, port, &hints, &ai);
	if (ret != 0) {
		agr_log(AGR_LOG_WARN, "redis %s:%d: cannot resolve: %s",
			c->host, c->port, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int conn_hello(struct agr__redis_conn *c);

static void on_connect(int res, void *arg)
{
	struct agr__redis_conn *c = arg;
	int one = 1;

	c->ops--;
	if (c->state != CONN_CONNECTING) {
		conn_step(c);
		return;
	}
	if (res < 0) {
		/* the linked timeout cancels a connect that takes too long */
		conn_attempt_failed(c, res == -ECANCELED ? -ETIMEDOUT : res);
		conn_step(c);
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = CONN_READY;
	c->deadline = 0;
	c->stats->connects++;
	if (c->reader)
		redisReaderFree(c->reader);
	c->reader = redisReaderCreate();
	if (!c->reader || conn_hello(c) < 0) {
		conn_break(c, -ENOMEM);
		conn_step(c);
		return;
	}
	conn_recv(c);
	if (c->state == CONN_READY && c->hooks->up)
		c->hooks->up(c, c->hook_arg);
	conn_flush(c);
	conn_step(c);
}

static void conn_attempt(struct agr__redis_conn *c)
{
	agr_io_params p = AGR_IO_PARAMS_INIT;
	uint64_t now = now_ns();
	int ret;

	if (c->state != CONN_IDLE)
		return;
	if (c->deadline == 0)
		c->deadline = now + c->connect_timeout_ns;
	c->state = CONN_CONNECTING;
	ret = conn_resolve(c, &c->addr, &c->addrlen);
	if (ret < 0) {
		conn_attempt_failed(c, ret);
		return;
	}
	c->fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		conn_attempt_failed(c, -errno);
		return;
	}
	p.timeout_ns = c->deadline > now ? c->deadline - now : 1;
	ret = agr_io_next(c->w, &p);
	if (ret == 0)
		ret = agr_io_connect(c->w, c->fd, (struct sockaddr *)&c->addr,
				     c->addrlen, on_connect, c);
	if (ret < 0) {
		conn_die(c, ret);
		return;
	}
	c->ops++;
}

static void on_recv(int res, void *arg);

static void conn_recv(struct agr__redis_conn *c)
{
	int ret = agr_io_recv(c->w, c->fd, c->rbuf, sizeof(c->rbuf), 0,
			      on_recv, c);

	if (ret < 0) {
		conn_break(c, ret);
		return;
	}
	c->ops++;
	c->receiving = true;
}

/* Hands each complete reply to the oldest command sent. */
static void conn_deliver(struct agr__redis_conn *c)
{
	struct agr__redis_pending e;
	void *reply;

	while (c->state == CONN_READY) {
		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
			agr_log(AGR_LOG_ERROR, "redis %s:%d: bad reply: %s",
				c->host, c->port, c->reader->errstr);
			conn_break(c, -EPROTO);
			return;
		}
		if (!reply)
			return;
		if (!agr__redis_pipe_pop_sent(&c->pipe, &e)) {
			agr_log(AGR_LOG_ERROR,
				"redis %s:%d: a reply without a command",
				c->host, c->port);
			freeReplyObject(reply);
			conn_break(c, -EPROTO);
			return;
		}
		e.cb(e.arg, reply, 0);
		freeReplyObject(reply);
	}
}

static void on_recv(int res, void *arg)
{
	struct agr__redis_conn *c = arg;

	c->receiving = false;
	if (c->state == CONN_READY) {
		if (res <= 0) {
			conn_break(c, res == 0 ? -ECONNRESET : res);
		} else if (redisReaderFeed(c->reader, c->rbuf, (size_t)res) !=
			   REDIS_OK) {
			conn_break(c, -ENOMEM);
		} else {
			conn_deliver(c);
			if (c->state == CONN_READY)
				conn_recv(c);
		}
	}
	c->ops--;
	conn_step(c);
}

static void on_send(int res, void *arg)
{
	struct agr__redis_conn *c = arg;

	c->sending = false;
	if (c->state == CONN_READY) {
		if (res < 0) {
			conn_break(c, res);
		} else {
			c->wire_off += (size_t)res;
			if (c->wire_off >= agr__redis_buf_len(&c->wire)) {
				agr__redis_buf_clear(&c->wire);
				c->wire_off = 0;
			}
			conn_flush(c);
		}
	}
	c->ops--;
	conn_step(c);
}

/* Sends the rest of the wire buffer, or the output gathered since. */
static void conn_flush(struct agr__redis_conn *c)
{
	int ret;

	if (c->state != CONN_READY || c->sending)
		return;
	if (agr__redis_buf_len(&c->wire) == 0) {
		if (agr__redis_buf_len(&c->out) == 0)
			return;
		agr__redis_buf_swap(&c->out, &c->wire);
		c->wire_off = 0;
		agr__redis_pipe_mark_sent(&c->pipe);
	}
	ret = agr_io_send(c->w, c->fd,
			  agr__redis_buf_data(&c->wire) + c->wire_off,
			  agr__redis_buf_len(&c->wire) - c->wire_off,
			  MSG_NOSIGNAL, on_send, c);
	if (ret < 0) {
		conn_break(c, ret);
		return;
	}
	c->ops++;
	c->sending = true;
	c->stats->sends++;
	if (!c->receiving)
		conn_recv(c);
}

static void on_turn_end(int res, void *arg)
{
	struct agr__redis_conn *c = arg;

	(void)res;
	c->flush_queued = false;
	conn_flush(c);
	c->ops--;
	conn_step(c);
}

/*
 * A NOP completes once the ring has seen this turn's submissions: its
 * callback runs in the next turn, after everything appended in this
 * one, so they share one send.
 */
static void conn_flush_at_turn_end(struct agr__redis_conn *c)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (c->flush_queued || c->sending)
		return;
	ret = agr_io_sqe(c->w, on_turn_end, c, &sqe);
	if (ret < 0) {
		conn_flush(c); /* no NOP to wait for: send now */
		return;
	}
	io_uring_prep_nop(sqe);
	c->ops++;
	c->flush_queued = true;
}

static void ignore_setname_reply(void *arg, struct redisReply *reply, int err)
{
	(void)arg;
	(void)reply;
	(void)err;
}

/* A command of the connection's own, ahead of everything queued. */
static int conn_prepend(struct agr__redis_conn *c, agr__redis_reply_cb cb,
			int argc, const char **argv)
{
	char *cmd;
	int len, ret;

	len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
	if (len < 0)
		return -ENOMEM;
	ret = agr__redis_pipe_push_front(&c->pipe, cb, c);
	if (ret == 0) {
		ret = agr__redis_buf_prepend(&c->out, cmd, (size_t)len);
		if (ret < 0)
			agr__redis_pipe_drop_front(&c->pipe);
	}
	redisFreeCommand(cmd);
	return ret;
}

/*
 * A refused AUTH is logged; the commands behind it run as the
 * connection's user before AUTH (NOAUTH errors where the default user
 * needs a password).
 */
static void on_auth(void *arg, struct redisReply *reply, int err)
{
	struct agr__redis_conn *c = arg;

	if (err == 0 && reply->type == REDIS_REPLY_ERROR)
		agr_log(AGR_LOG_ERROR, "redis %s:%d: AUTH refused: %s",
			c->host, c->port, reply->str);
}

/* AUTH, then CLIENT SETNAME, ahead of the commands that waited. */
static int conn_hello(struct agr__redis_conn *c)
{
	const char *setname[] = { "CLIENT", "SETNAME", c->name };
	const char *auth[] = { "AUTH", c->username ? c->username : c->password,
			       c->password };
	int ret = 0;

	if (c->name)
		ret = conn_prepend(c, ignore_setname_reply, 3, setname);
	if (ret == 0 && c->password)
		ret = c->username ? conn_prepend(c, on_auth, 3, auth)
				  : conn_prepend(c, on_auth, 2, auth);
	return ret;
}

int agr__redis_conn_append(struct agr__redis_conn *c, const char *cmd,
			   size_t len, agr__redis_reply_cb cb, void *arg)
{
	int ret;

	if (c->state == CONN_CLOSING || c->state == CONN_DEAD)
		return -ESHUTDOWN;
	ret = agr__redis_pipe_push(&c->pipe, cb, arg);
	if (ret < 0)
		return ret;
	ret = agr__redis_buf_append(&c->out, cmd, len);
	if (ret < 0) {
		agr__redis_pipe_drop_back(&c->pipe);
		return ret;
	}
	if (c->state == CONN_READY)
		conn_flush_at_turn_end(c);
	else if (c->state == CONN_IDLE)
		conn_attempt(c);
	/* a send that could not be submitted broke the connection */
	if (c->state == CONN_BROKEN)
		conn_step(c);
	return 0;
}

void agr__redis_conn_start(struct agr__redis_conn *c)
{
	conn_attempt(c);
}

/* Moves on once the I/O a state waits for has ended. */
static void conn_step(struct agr__redis_conn *c)
{
	if (c->state == CONN_BROKEN && !c->receiving && !c->sending) {
		close(c->fd);
		c->fd = -1;
		c->deadline = now_ns() + c->connect_timeout_ns;
		conn_wait_retry(c, c->reconnect_delay_ns);
	} else if (c->state == CONN_CLOSING && c->ops == 0) {
		if (c->hooks->closed)
			c->hooks->closed(c, c->hook_arg);
		agr__redis_conn_free(c);
	}
}

static void on_closing(int res, void *arg)
{
	struct agr__redis_conn *c = arg;

	(void)res;
	c->ops--;
	conn_step(c);
}

/*
 * The connection is freed at the end of one of its handlers, never
 * inside the call that closes it: the callers up the stack, and the
 * reply callbacks that may have closed it, can still touch it.
 */
void agr__redis_conn_close(struct agr__redis_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->state == CONN_CLOSING)
		return;
	c->state = CONN_CLOSING;
	if (c->ops)
		agr_io_cancel(c->w, c);
	conn_fail(c, -ECANCELED, false);
	if (c->state != CONN_CLOSING || c->ops)
		return;
	if (agr_io_sqe(c->w, on_closing, c, &sqe) == 0) {
		io_uring_prep_nop(sqe);
		c->ops++;
		return;
	}
	/* the worker is tearing down: no handler of c can be running */
	conn_step(c);
}

void agr__redis_conn_free(struct agr__redis_conn *c)
{
	if (!c)
		return;
	c->state = CONN_CLOSING;
	conn_fail(c, -ECANCELED, false);
	if (c->fd >= 0)
		close(c->fd);
	if (c->reader)
		redisReaderFree(c->reader);
	agr__redis_buf_free(&c->out);
	agr__redis_buf_free(&c->wire);
	agr__redis_pipe_free(&c->pipe);
	free(c->host);
	free(c->name);
	free(c->username);
	if (c->password) /* do not leave it in freed memory */
		explicit_bzero(c->password, strlen(c->password));
	free(c->password);
	free(c);
}

int agr__redis_conn_new(const struct agr__redis_conn_config *cfg,
			const struct agr__redis_conn_hooks *hooks, void *arg,
			struct agr__redis_conn **out)
{
	struct agr__redis_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->w = cfg->w;
	c->host = strdup(cfg->host);
	c->name = cfg->name ? strdup(cfg->name) : NULL;
	c->username = cfg->username ? strdup(cfg->username) : NULL;
	c->password = cfg->password ? strdup(cfg->password) : NULL;
	if (!c->host || (cfg->name && !c->name) ||
	    (cfg->username && !c->username) ||
	    (cfg->password && !c->password)) {
		agr__redis_conn_free(c);
		return -ENOMEM;
	}
	c->port = cfg->port;
	c->connect_timeout_ns = cfg->connect_timeout_ns;
	c->reconnect_delay_ns = cfg->reconnect_delay_ns;
	c->stats = cfg->stats;
	c->hooks = hooks;
	c->hook_arg = arg;
	c->fd = -1;
	c->state = CONN_IDLE;
	*out = c;
	return 0;
}

bool agr__redis_conn_ready(const struct agr__redis_conn *c)
{
	return c->state == CONN_READY;
}

const char *agr__redis_conn_host(const struct agr__redis_conn *c)
{
	return c->host;
}

int agr__redis_conn_port(const struct agr__redis_conn *c)
{
	return c->port;
}
