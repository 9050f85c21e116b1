/* SPDX-License-Identifier: MIT */
/*
 * bench/echo_load - request/response load for an echo server
 * (examples/basic/echo_server, bench/uv_echo): each connection sends one
 * message, waits for its echo, checks every byte and sends the next.
 *
 *   echo_load -p PORT [-c CONNECTIONS] [-s BYTES] [-d SECONDS]
 *             [-w WARMUP_MS] [-t THREADS] [-r RUNS]
 *
 * Defaults: 64 connections, 64-byte messages, 5 s measured after 500 ms
 * of warm-up, one epoll thread per CPU (each owns an equal share of the
 * connections), 1 run. Per run it prints
 *
 *   echo_load: R requests/s, p50 X ms, p99 Y ms (...)
 *
 * counting the echoes that complete inside the measured window; the
 * latency is from just before write() to the echo's last byte, to the
 * microsecond. With -r > 1 it also prints the median, min and max.
 * A wrong byte, a short write or a closed connection ends it with
 * status 1: a broken server reports no figure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define HIST_US 200000 /* 1 us buckets up to 200 ms, then one more */
#define STALL_NS (10ull * 1000000000ull) /* no echo after the window */
#define MSG_MAX 65536

struct config {
	int port, conns, size, threads, runs;
	double seconds;
	long warmup_ms;
};

struct conn {
	int fd;
	uint32_t seq;	 /* of the message in flight */
	size_t got;	 /* bytes of its echo so far */
	uint64_t sent_at;
	char *expect, *in;
};

struct loader {
	const struct config *cfg;
	pthread_t thread;
	pthread_barrier_t *ready;
	int first, count; /* its connections: [first, first + count) */
	struct conn *conns;
	uint64_t t_start, t_end; /* the measured window, set by main */
	uint64_t done;		 /* echoes completed in the window */
	uint32_t *hist;		 /* [HIST_US + 1] */
};

static void die(const char *what)
{
	fprintf(stderr, "echo_load: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *what, int conn)
{
	fprintf(stderr, "echo_load: connection %d: %s\n", conn, what);
	exit(1);
}

/* Message `seq` of connection `id`: differs per connection and seq. */
static void fill(char *p, int size, int id, uint32_t seq)
{
	uint32_t x = (uint32_t)id * 2654435761u ^ seq * 40503u;
	int i;

	for (i = 0; i < size; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (char)(x >> 24);
	}
}

static int connect_to(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	/* Small messages, one in flight: never wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void send_next(struct loader *l, struct conn *c, int id)
{
	int size = l->cfg->size;
	ssize_t n;

	c->seq++;
	c->got = 0;
	fill(c->expect, size, id, c->seq);
	c->sent_at = bench_now_ns();
	n = send(c->fd, c->expect, (size_t)size, MSG_NOSIGNAL);
	/* One message in flight: the send buffer is empty, never short. */
	if (n != size)
		n < 0 ? die("send") : fail("short send", id);
}

static void record(struct loader *l, uint64_t now, uint64_t sent_at)
{
	uint64_t us = (now - sent_at) / 1000;

	if (now < l->t_start || now >= l->t_end)
		return;
	l->done++;
	l->hist[us < HIST_US ? us : HIST_US]++;
}

/* Reads what c has; true once its whole echo is in and checked. */
static bool receive(struct loader *l, struct conn *c, int id)
{
	size_t size = (size_t)l->cfg->size;
	ssize_t n = recv(c->fd, c->in + c->got, MSG_MAX - c->got, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n < 0)
		die("recv");
	if (n == 0)
		fail("the server closed the connection", id);
	c->got += (size_t)n;
	if (c->got > size)
		fail("more bytes came back than were sent", id);
	if (c->got < size)
		return false;
	if (memcmp(c->in, c->expect, size) != 0)
		fail("the echo differs from the message", id);
	return true;
}

static void *load(void *arg)
{
	struct loader *l = arg;
	struct epoll_event ev[64];
	int ep = epoll_create1(EPOLL_CLOEXEC), i, n;
	uint64_t now;

	if (ep < 0)
		die("epoll_create1");
	for (i = 0; i < l->count; i++) {
		struct conn *c = &l->conns[i];
		struct epoll_event e = { .events = EPOLLIN, .data.u32 = i };

		c->fd = connect_to(l->cfg->port);
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0)
			die("epoll_ctl");
	}
	pthread_barrier_wait(l->ready); /* main sets the window */
	pthread_barrier_wait(l->ready);
	for (i = 0; i < l->count; i++)
		send_next(l, &l->conns[i], l->first + i);
	/* Connections stop sending once the window is over. */
	for (int busy = l->count; busy > 0;) {
		n = epoll_wait(ep, ev, 64, 1000);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		if (n <= 0 && bench_now_ns() > l->t_end + STALL_NS) {
			fprintf(stderr, "echo_load: %d echoes still missing "
				"10 s after the end\n", busy);
			exit(1);
		}
		for (i = 0; i < n; i++) {
			int k = (int)ev[i].data.u32;
			struct conn *c = &l->conns[k];

			if (!receive(l, c, l->first + k))
				continue;
			now = bench_now_ns();
			record(l, now, c->sent_at);
			if (now < l->t_end)
				send_next(l, c, l->first + k);
			else
				busy--;
		}
	}
	for (i = 0; i < l->count; i++)
		close(l->conns[i].fd);
	close(ep);
	return NULL;
}

/* The q-quantile of the merged histogram, in ms. */
static double quantile_ms(const uint32_t *hist, uint64_t total, double q)
{
	uint64_t want = (uint64_t)(q * (double)total), seen = 0;
	int us;

	if (want >= total)
		want = total - 1;
	for (us = 0; us <= HIST_US; us++) {
		seen += hist[us];
		if (seen > want)
			break;
	}
	return (us + 0.5) / 1000.0; /* the middle of the bucket */
}

/* A loader's connections, their buffers and its histogram. */
static void loader_alloc(struct loader *l)
{
	int i;

	l->conns = calloc((size_t)l->count, sizeof(*l->conns));
	l->hist = calloc(HIST_US + 1, sizeof(*l->hist));
	if (!l->conns || !l->hist)
		die("calloc");
	for (i = 0; i < l->count; i++) {
		l->conns[i].expect = malloc(MSG_MAX);
		l->conns[i].in = malloc(MSG_MAX);
		if (!l->conns[i].expect || !l->conns[i].in)
			die("malloc");
	}
}

static void loader_free(struct loader *l)
{
	int i;

	for (i = 0; i < l->count; i++) {
		free(l->conns[i].expect);
		free(l->conns[i].in);
	}
	free(l->conns);
	free(l->hist);
}

struct result {
	double rps, p50, p99;
};

static struct result run_once(const struct config *cfg)
{
	struct loader *l = calloc((size_t)cfg->threads, sizeof(*l));
	uint32_t *hist = calloc(HIST_US + 1, sizeof(*hist));
	pthread_barrier_t ready;
	uint64_t total = 0, start, end;
	struct result r;
	int t, i, first = 0;

	if (!l || !hist)
		die("calloc");
	pthread_barrier_init(&ready, NULL, (unsigned)cfg->threads + 1);
	for (t = 0; t < cfg->threads; t++) {
		l[t].cfg = cfg;
		l[t].ready = &ready;
		l[t].first = first;
		l[t].count = cfg->conns / cfg->threads +
			     (t < cfg->conns % cfg->threads);
		first += l[t].count;
		loader_alloc(&l[t]);
		errno = pthread_create(&l[t].thread, NULL, load, &l[t]);
		if (errno)
			die("pthread_create");
	}
	pthread_barrier_wait(&ready); /* everyone is connected */
	start = bench_now_ns() + (uint64_t)cfg->warmup_ms * 1000000u;
	end = start + (uint64_t)(cfg->seconds * 1e9);
	for (t = 0; t < cfg->threads; t++) {
		l[t].t_start = start;
		l[t].t_end = end;
	}
	pthread_barrier_wait(&ready);
	for (t = 0; t < cfg->threads; t++) {
		pthread_join(l[t].thread, NULL);
		total += l[t].done;
		for (i = 0; i <= HIST_US; i++)
			hist[i] += l[t].hist[i];
		loader_free(&l[t]);
	}
	pthread_barrier_destroy(&ready);
	if (total == 0) {
		fprintf(stderr, "echo_load: no echo completed in the window\n");
		exit(1);
	}
	r.rps = (double)total / cfg->seconds;
	r.p50 = quantile_ms(hist, total, 0.50);
	r.p99 = quantile_ms(hist, total, 0.99);
	free(hist);
	free(l);
	return r;
}

static void parse(int argc, char **argv, struct config *cfg)
{
	const struct bench_opt opts[] = {
		{ .letter = 'p', .arg = "PORT", .kind = BENCH_KIND_INT,
		  .help = "the echo server's port on 127.0.0.1",
		  .to.i = &cfg->port, .min = 1, .max = 65535,
		  .required = true },
		BENCH_OPT_INT('c', "CONNECTIONS", cfg->conns, 1, 10000,
			      "connections (default 64)"),
		BENCH_OPT_INT('s', "BYTES", cfg->size, 1, MSG_MAX,
			      "bytes per message (default 64)"),
		BENCH_OPT_DOUBLE('d', "SECONDS", cfg->seconds, 1, 3600,
				 "measured length of a run (default 5)"),
		BENCH_OPT_LONG('w', "WARMUP_MS", cfg->warmup_ms, 0, 60000,
			       "warm-up before the measured window (default "
			       "500)"),
		BENCH_OPT_INT('t', "THREADS", cfg->threads, 1, 256,
			      "epoll threads (default: CPUs, at most one per "
			      "connection)"),
		BENCH_OPT_INT('r', "RUNS", cfg->runs, 1, 1000,
			      "runs (default 1)"),
		BENCH_OPT_END,
	};

	bench_options(argc, argv, "echo_load", opts);
}

int main(int argc, char **argv)
{
	struct config cfg = { .port = -1, .conns = 64, .size = 64,
			      .seconds = 5, .warmup_ms = 500, .runs = 1 };
	double *rps, *p50, *p99;
	int i;

	parse(argc, argv, &cfg);
	if (!cfg.threads)
		cfg.threads = bench_cpus();
	if (cfg.threads > cfg.conns)
		cfg.threads = cfg.conns;
	signal(SIGPIPE, SIG_IGN);
	rps = calloc((size_t)cfg.runs, sizeof(*rps));
	p50 = calloc((size_t)cfg.runs, sizeof(*p50));
	p99 = calloc((size_t)cfg.runs, sizeof(*p99));
	if (!rps || !p50 || !p99)
		die("calloc");
	for (i = 0; i < cfg.runs; i++) {
		struct result r = run_once(&cfg);

		rps[i] = r.rps;
		p50[i] = r.p50;
		p99[i] = r.p99;
		printf("echo_load: %.0f requests/s, p50 %.3f ms, p99 %.3f ms "
		       "(%d connections, %d-byte messages, %d threads, "
		       "%.0f s)\n", r.rps, r.p50, r.p99, cfg.conns, cfg.size,
		       cfg.threads, cfg.seconds);
		fflush(stdout);
	}
	if (cfg.runs > 1) {
		bench_print_row("requests/s", "req/s",
				bench_summarize(rps, cfg.runs));
		bench_print_row("p50", "ms", bench_summarize(p50, cfg.runs));
		bench_print_row("p99", "ms", bench_summarize(p99, cfg.runs));
	}
	free(rps);
	free(p50);
	free(p99);
	return 0;
}
