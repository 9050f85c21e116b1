/* SPDX-License-Identifier: MIT */
/*
 * echo_server - the smallest network service on aggring: whatever a
 * client sends comes back.
 *
 *   echo_server [--port P] [--workers N]
 *
 * --port 0 picks a free port; the server prints "listening on
 * 127.0.0.1:PORT" once it accepts connections. SIGTERM or SIGINT stops
 * it gracefully: it stops accepting, closes every connection once what
 * it has read has been echoed, and ends its workers.
 *
 * A scheduler of N workers, each a thread with its own io_uring ring.
 * Worker 0 accepts with a multishot accept and deals the connections
 * round-robin over the workers (agr_scheduler_schedule); from then on
 * a connection's recv and send run on its worker's ring, one after the
 * other: recv, send it all back, recv again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring.h>

#include "acceptor.h"
#include "drain.h"
#include "net.h"
#include "opts.h"
#include "util.h"

#define BUF_SIZE 16384
#define STOP_TIMEOUT_NS (10ull * 1000000000ull)

struct server {
	agr_supplier *sup;
	agr_scheduler *sched;
	unsigned nworkers;
	struct acceptor *acceptor;
	unsigned next; /* round-robin; the acceptor's worker only */
	atomic_bool stopping;
	atomic_uint_fast64_t connections, bytes;
	struct drain drain; /* the acceptor and the open connections */
	struct conn **conns; /* per worker: its live connections */
};

struct conn {
	struct server *srv;
	struct conn *prev, *next;
	unsigned worker;
	int fd;
	size_t len, sent;
	char buf[BUF_SIZE];
};

/* ---- connections ---- */

static void conn_close(struct conn *c)
{
	struct server *srv = c->srv;

	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns[c->worker] = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd);
	free(c);
	drain_done(&srv->drain);
}

static void received(int res, void *arg);
static void sent(int res, void *arg);

static void recv_more(struct conn *c)
{
	if (atomic_load(&c->srv->stopping) ||
	    agr_io_recv(agr_worker_current(), c->fd, c->buf, sizeof(c->buf), 0,
			received, c) < 0)
		conn_close(c);
}

/* The send's callback argument is c->buf, so that a stop's cancel of c
 * (the recv) leaves an echo in progress alone. */
static void send_rest(struct conn *c)
{
	if (agr_io_send(agr_worker_current(), c->fd, c->buf + c->sent,
			c->len - c->sent, MSG_NOSIGNAL, sent, c->buf) < 0)
		conn_close(c);
}

static void received(int res, void *arg)
{
	struct conn *c = arg;

	if (res <= 0) { /* end of stream, an error, or a stop's cancel */
		conn_close(c);
		return;
	}
	c->len = (size_t)res;
	c->sent = 0;
	send_rest(c);
}

static void sent(int res, void *arg)
{
	struct conn *c = container_of(arg, struct conn, buf);

	if (res <= 0) {
		conn_close(c);
		return;
	}
	atomic_fetch_add_explicit(&c->srv->bytes, (uint64_t)res,
				  memory_order_relaxed);
	c->sent += (size_t)res;
	if (c->sent < c->len)
		send_rest(c);
	else
		recv_more(c);
}

/* Runs on the connection's worker. */
static void conn_start(void *arg)
{
	struct conn *c = arg;
	struct conn **head = &c->srv->conns[c->worker];

	c->next = *head;
	if (c->next)
		c->next->prev = c;
	*head = c;
	recv_more(c);
}

/*
 * A stop: cancel the recvs, whose callbacks close their connections. A
 * connection busy echoing has no recv in flight: it finishes the echo,
 * sees `stopping` and closes.
 */
static void close_conns(void *arg)
{
	struct conn **head = arg, *c;
	agr_worker *w = agr_worker_current();

	for (c = *head; c; c = c->next)
		agr_io_cancel(w, c);
}

/* ---- accepting ---- */

/* A new connection, on worker 0: deal it to the next worker. */
static void take(void *arg, int fd)
{
	struct server *srv = arg;
	struct conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return;
	}
	c->srv = srv;
	c->fd = fd;
	c->worker = srv->next++ % srv->nworkers;
	atomic_fetch_add(&srv->connections, 1);
	drain_add(&srv->drain);
	if (agr_scheduler_schedule(srv->sched, c->worker, conn_start, c) < 0) {
		close(fd);
		free(c);
		drain_done(&srv->drain);
	}
}

/* ---- start and stop ---- */

static void start(struct server *srv, int port, int workers)
{
	agr_named_aggregate named = { "echo", "Connection" };
	int ret, fd;

	ret = agr_supplier_new("echo", workers, &srv->sup);
	if (ret == 0)
		ret = agr_supplier_get_or_init(srv->sup, &named, &srv->sched);
	if (ret)
		die_errno("starting the workers (is io_uring available?)", ret);
	srv->nworkers = (unsigned)agr_scheduler_parallelism(srv->sched);
	srv->conns = xcalloc(srv->nworkers, sizeof(*srv->conns));
	fd = net_listen(port, &port);
	ret = acceptor_start(srv->sched, 0, fd, take, srv, &srv->drain,
			     &srv->acceptor);
	if (ret)
		die_errno("agr_scheduler_schedule", ret);
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
}

/*
 * Stop accepting, close the connections, and only then stop the
 * workers: a worker told to stop while an operation of its own is in
 * flight does not wait for it in the kernel (aggring 0.1).
 */
static bool stop(struct server *srv)
{
	uint64_t deadline = now_ns() + STOP_TIMEOUT_NS;
	bool clean;
	unsigned i;

	atomic_store(&srv->stopping, true);
	acceptor_stop(srv->acceptor);
	for (i = 0; i < srv->nworkers; i++)
		agr_scheduler_schedule(srv->sched, i, close_conns,
				       &srv->conns[i]);
	clean = drain_wait(&srv->drain, left_until(deadline));
	if (agr_supplier_stop_gracefully(srv->sup, STOP_TIMEOUT_NS) < 0)
		clean = false;
	agr_supplier_free(srv->sup); /* forces the stop if it timed out */
	acceptor_free(srv->acceptor);
	return clean;
}

static const char usage_text[] = "usage: echo_server [--port P] "
				 "[--workers N]\n";

static void parse_options(int argc, char **argv, long *port, long *workers)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "workers", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "p:w:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'p': *port = opts_number(optarg, 0, 65535); break;
		case 'w': *workers = opts_number(optarg, 0, 1024); break;
		case 'h': opts_help();
		default: opts_bad();
		}
	}
	if (optind != argc)
		opts_bad();
}

int main(int argc, char **argv)
{
	struct server srv = { .sup = NULL };
	long port = 7007, workers = 0;
	sigset_t set;
	bool clean;
	int sig;

	opts_init("echo_server", usage_text);
	parse_options(argc, argv, &port, &workers);
	block_stop_signals(&set); /* main waits for them */
	drain_init(&srv.drain);
	start(&srv, (int)port, (int)workers);
	sigwait(&set, &sig);
	clean = stop(&srv);
	printf("echo_server: stopped %s: %" PRIu64 " connections, %" PRIu64
	       " bytes echoed\n", clean ? "cleanly" : "BY FORCE",
	       (uint64_t)atomic_load(&srv.connections),
	       (uint64_t)atomic_load(&srv.bytes));
	free(srv.conns);
	drain_destroy(&srv.drain);
	return clean ? 0 : 1;
}
