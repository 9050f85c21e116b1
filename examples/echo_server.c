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
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#define BUF_SIZE 16384
#define STOP_TIMEOUT_NS (10ull * 1000000000ull)

struct server {
	agr_supplier *sup;
	agr_scheduler *sched;
	unsigned nworkers;
	int listen_fd;
	unsigned next; /* round-robin; the acceptor's worker only */
	atomic_bool stopping;
	atomic_uint_fast64_t connections, bytes;

	pthread_mutex_t lock; /* cond: the network went quiet */
	pthread_cond_t cond;
	long open_conns;
	bool listening;
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

static void die(const char *what, int err) __attribute__((noreturn));
static void die(const char *what, int err)
{
	fprintf(stderr, "echo_server: %s: %s\n", what, strerror(err));
	exit(1);
}

/* ---- connections ---- */

/* Connections opened (+1) or closed (-1), or the acceptor ended (0). */
static void network_changed(struct server *srv, long delta)
{
	pthread_mutex_lock(&srv->lock);
	srv->open_conns += delta;
	if (delta == 0)
		srv->listening = false;
	pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
}

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
	network_changed(srv, -1);
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
	struct conn *c = (struct conn *)(void *)((char *)arg -
						  offsetof(struct conn, buf));

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

static void accepted(int res, void *arg)
{
	struct server *srv = arg;
	struct conn *c;

	if (res < 0) { /* the multishot accept ended */
		if (res != -ECANCELED)
			fprintf(stderr, "echo_server: accept: %s\n",
				strerror(-res));
		close(srv->listen_fd);
		network_changed(srv, 0);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || atomic_load(&srv->stopping)) {
		close(res);
		free(c);
		return;
	}
	c->srv = srv;
	c->fd = res;
	c->worker = srv->next++ % srv->nworkers;
	atomic_fetch_add(&srv->connections, 1);
	network_changed(srv, 1);
	if (agr_scheduler_schedule(srv->sched, c->worker, conn_start, c) < 0) {
		close(res);
		free(c);
		network_changed(srv, -1);
	}
}

static void start_accepting(void *arg)
{
	struct server *srv = arg;
	int ret = agr_io_accept_multishot(agr_worker_current(), srv->listen_fd,
					  SOCK_CLOEXEC, accepted, srv);

	if (ret < 0)
		accepted(ret, srv);
}

static void stop_accepting(void *arg)
{
	agr_io_cancel(agr_worker_current(), arg);
}

static int listen_on(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket", errno);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind", errno);
	if (listen(fd, 511) < 0)
		die("listen", errno);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	printf("listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
	fflush(stdout);
	return fd;
}

/* ---- start and stop ---- */

static void start(struct server *srv, int port, int workers)
{
	agr_named_aggregate named = { "echo", "Connection" };
	int ret;

	ret = agr_supplier_new("echo", workers, &srv->sup);
	if (ret == 0)
		ret = agr_supplier_get_or_init(srv->sup, &named, &srv->sched);
	if (ret)
		die("starting the workers (is io_uring available?)", -ret);
	srv->nworkers = (unsigned)agr_scheduler_parallelism(srv->sched);
	srv->conns = calloc(srv->nworkers, sizeof(*srv->conns));
	if (!srv->conns)
		die("calloc", ENOMEM);
	srv->listen_fd = listen_on(port);
	srv->listening = true;
	ret = agr_scheduler_schedule(srv->sched, 0, start_accepting, srv);
	if (ret)
		die("agr_scheduler_schedule", -ret);
}

/* Waits, up to the deadline, until no socket operation is in flight. */
static bool wait_network_quiet(struct server *srv, const struct timespec *t)
{
	bool quiet;

	pthread_mutex_lock(&srv->lock);
	while ((srv->open_conns > 0 || srv->listening) &&
	       pthread_cond_timedwait(&srv->cond, &srv->lock, t) == 0)
		;
	quiet = srv->open_conns == 0 && !srv->listening;
	pthread_mutex_unlock(&srv->lock);
	return quiet;
}

/*
 * Stop accepting, close the connections, and only then stop the
 * workers: a worker told to stop while an operation of its own is in
 * flight does not wait for it in the kernel (aggring 0.1).
 */
static bool stop(struct server *srv)
{
	struct timespec deadline;
	bool clean;
	unsigned i;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)(STOP_TIMEOUT_NS / 1000000000ull);
	atomic_store(&srv->stopping, true);
	agr_scheduler_schedule(srv->sched, 0, stop_accepting, srv);
	for (i = 0; i < srv->nworkers; i++)
		agr_scheduler_schedule(srv->sched, i, close_conns,
				       &srv->conns[i]);
	clean = wait_network_quiet(srv, &deadline);
	if (agr_supplier_stop_gracefully(srv->sup, STOP_TIMEOUT_NS) < 0)
		clean = false;
	agr_supplier_free(srv->sup); /* forces the stop if it timed out */
	return clean;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr, "usage: echo_server [--port P] [--workers N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "workers", required_argument, NULL, 'w' },
		{ 0, 0, 0, 0 },
	};
	struct server srv = { .listen_fd = -1 };
	long port = 7007, workers = 0;
	int ch, sig;
	char *end;
	sigset_t set;
	bool clean;

	while ((ch = getopt_long(argc, argv, "p:w:", opts, NULL)) != -1) {
		if (ch != 'p' && ch != 'w')
			usage();
		*(ch == 'p' ? &port : &workers) = strtol(optarg, &end, 10);
		if (*end || end == optarg)
			usage();
	}
	if (optind != argc || port < 0 || port > 65535 || workers < 0 ||
	    workers > 1024)
		usage();
	/* Block the stop signals in every thread; main waits for them. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_cond_init(&srv.cond, NULL);
	start(&srv, (int)port, (int)workers);
	sigwait(&set, &sig);
	clean = stop(&srv);
	printf("echo_server: stopped %s: %" PRIu64 " connections, %" PRIu64
	       " bytes echoed\n", clean ? "cleanly" : "BY FORCE",
	       (uint64_t)atomic_load(&srv.connections),
	       (uint64_t)atomic_load(&srv.bytes));
	free(srv.conns);
	pthread_mutex_destroy(&srv.lock);
	pthread_cond_destroy(&srv.cond);
	return clean ? 0 : 1;
}
