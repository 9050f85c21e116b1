/* SPDX-License-Identifier: MIT */
/*
 * append_store - a storage service the way io_uring services are built,
 * on aggring: whatever a client sends is appended to its worker's log
 * file, made durable, and acknowledged.
 *
 *   append_store [--port P] [--dir DIR] [--workers N]
 *
 * --port 0 picks a free port; the server prints "listening on
 * 127.0.0.1:PORT" once it accepts connections. A client reads
 * "ACK <bytes>\n" lines: the bytes of that connection durable so far.
 * SIGTERM or SIGINT stops it gracefully. Worker i's log is DIR/log-<i>.
 *
 * What it shows, each in one place:
 * - agr_supplier_new_opts(): ring sizes, and a worker init hook that,
 *   on each worker's thread before any work, opens the worker's log and
 *   registers it as fixed file 0, creates a provided buffer ring, and
 *   registers the ring's memory as fixed buffer 0 (the exit hook undoes
 *   it all);
 * - a multishot receive into that buffer ring: the kernel picks the
 *   buffer;
 * - the buffer written to the log straight from where it was received
 *   (AGR_IO_FIXED_FILE | AGR_IO_FIXED_BUF), linked to an fdatasync
 *   (agr_io_chain): no copy, one submit;
 * - the buffer recycled once durable, and the acknowledgement sent
 *   with a zero-copy send, its text freed at the kernel's notification.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "acceptor.h"
#include "drain.h"
#include "net.h"
#include "opts.h"
#include "util.h"

#define BUFS 64		  /* receive buffers per worker */
#define BUF_SIZE 16384
#define BUF_GROUP 1
#define LOG_FILE 0	  /* fixed file index of the worker's log */
#define RING_MEMORY 0	  /* fixed buffer index of the buffer ring */
#define STOP_TIMEOUT_NS (10ull * 1000000000ull)

/* What one worker owns: made by its init hook, undone by its exit. */
struct worker_state {
	int log_fd;
	agr_buf_ring *br;
	uint64_t log_end; /* where the next chunk goes */
	struct conn *conns; /* its open connections */
};

struct server {
	const char *dir;
	agr_supplier *sup;
	agr_scheduler *sched;
	unsigned nworkers;
	struct worker_state *ws;
	struct acceptor *acceptor;
	unsigned next; /* round-robin; the acceptor's worker only */
	atomic_bool stopping;
	atomic_uint_fast64_t connections, bytes;
	struct drain drain; /* the acceptor and the open connections */
};

struct conn {
	struct server *srv;
	struct worker_state *ws;
	struct conn *prev, *next;
	unsigned worker;
	int fd;
	agr_io_id recv_id;
	bool receiving; /* the multishot receive is armed */
	bool starved;	/* it ended with -ENOBUFS: arm again on a recycle */
	bool closing;
	unsigned chunks; /* appends in flight */
	uint64_t durable;
};

/* One received buffer on its way to the disk. */
struct chunk {
	struct conn *c;
	unsigned bid;
	unsigned len;
	int written, synced;
	int pending; /* callbacks still to come: the write's, the sync's */
};

/* An acknowledgement: the kernel reads `text` until its notification. */
struct ack {
	char text[32];
};

/* ---- the worker's own setup ---- */

static int worker_init(agr_worker *w, void *arg)
{
	struct server *srv = arg;
	struct worker_state *ws = &srv->ws[agr_worker_index(w)];
	struct io_uring *ring = agr_worker_ring(w);
	char path[PATH_MAX];
	struct iovec memory;
	int ret;

	snprintf(path, sizeof(path), "%s/log-%d", srv->dir,
		 agr_worker_index(w));
	ws->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (ws->log_fd < 0)
		return -errno;
	ret = io_uring_register_files(ring, &ws->log_fd, 1);
	if (ret)
		return ret;
	ret = agr_buf_ring_new(w, BUF_GROUP, BUFS, BUF_SIZE, &ws->br);
	if (ret)
		return ret;
	memory.iov_base = agr_buf_ring_buf(ws->br, 0);
	memory.iov_len = (size_t)BUFS * BUF_SIZE;
	return io_uring_register_buffers(ring, &memory, 1);
}

static void worker_exit(agr_worker *w, void *arg)
{
	struct server *srv = arg;
	struct worker_state *ws = &srv->ws[agr_worker_index(w)];
	struct io_uring *ring = agr_worker_ring(w);

	io_uring_unregister_buffers(ring);
	agr_buf_ring_free(ws->br);
	io_uring_unregister_files(ring);
	close(ws->log_fd);
}

/* ---- connections ---- */

static void arm_recv(struct conn *c);

static void conn_close_if_done(struct conn *c)
{
	if (!c->closing || c->receiving || c->chunks)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->ws->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	close(c->fd);
	drain_done(&c->srv->drain);
	free(c);
}

static void send_ack(struct conn *c);
static void ack_sent(int res, unsigned flags, void *arg)
{
	(void)res;
	/* Free at the notification, or at once if none will come. */
	if ((flags & IORING_CQE_F_NOTIF) || !(flags & IORING_CQE_F_MORE))
		free(arg);
}

static void send_ack(struct conn *c)
{
	struct ack *a = malloc(sizeof(*a));
	int n;

	if (!a)
		return;
	n = snprintf(a->text, sizeof(a->text), "ACK %" PRIu64 "\n", c->durable);
	if (agr_io_send_zc(agr_worker_current(), c->fd, a->text, (size_t)n,
			   MSG_NOSIGNAL, ack_sent, a) < 0)
		free(a);
}

/* The write and its fdatasync are done: recycle, acknowledge. */
static void chunk_done(struct chunk *k)
{
	struct conn *c = k->c;

	agr_buf_ring_recycle(c->ws->br, k->bid);
	c->chunks--;
	if (k->synced == 0 && k->written == (int)k->len) {
		c->durable += k->len;
		atomic_fetch_add(&c->srv->bytes, k->len);
		if (!c->closing)
			send_ack(c);
	} else {
		warnf("append failed: write %d, fdatasync %d", k->written,
		      k->synced);
		c->closing = true;
	}
	free(k);
	if (c->starved && !c->closing) {
		c->starved = false;
		arm_recv(c);
	}
	conn_close_if_done(c);
}

static void chunk_written(int res, void *arg)
{
	struct chunk *k = arg;

	k->written = res;
	if (--k->pending == 0)
		chunk_done(k);
}

static void chunk_synced(int res, void *arg)
{
	struct chunk *k = arg;

	k->synced = res;
	if (--k->pending == 0)
		chunk_done(k);
}

/*
 * Appends buffer `bid` (len bytes) to the log straight from the buffer
 * ring's registered memory, linked to an fdatasync: 0, or the error of
 * the write's submission (nothing was submitted then).
 */
static int append(struct conn *c, unsigned bid, unsigned len)
{
	agr_worker *w = agr_worker_current();
	agr_io_params p = AGR_IO_PARAMS_INIT;
	struct chunk *k = calloc(1, sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	k->c = c;
	k->bid = bid;
	k->len = len;
	k->pending = 2;
	p.flags = AGR_IO_FIXED_FILE | AGR_IO_FIXED_BUF;
	p.buf_index = RING_MEMORY;
	ret = agr_io_chain(w, 2);
	if (!ret)
		ret = agr_io_next(w, &p);
	if (!ret)
		ret = agr_io_write(w, LOG_FILE, agr_buf_ring_buf(c->ws->br, bid),
				   len, c->ws->log_end, chunk_written, k);
	if (ret) {
		free(k);
		return ret;
	}
	c->ws->log_end += len;
	c->chunks++;
	p.flags = AGR_IO_FIXED_FILE;
	ret = agr_io_next(w, &p);
	if (!ret)
		ret = agr_io_fsync(w, LOG_FILE, AGR_IO_DATASYNC, chunk_synced,
				   k);
	if (ret) {
		k->synced = ret; /* the write's callback finishes it */
		k->pending--;
	}
	return 0;
}

static void received(int res, unsigned flags, void *arg)
{
	struct conn *c = arg;
	int bid = agr_buf_ring_bid(flags);

	if (res > 0 && bid >= 0 && append(c, (unsigned)bid, (unsigned)res)) {
		agr_buf_ring_recycle(c->ws->br, (unsigned)bid);
		c->closing = true;
	}
	if (flags & IORING_CQE_F_MORE)
		return;
	c->receiving = false;
	if (res == -ENOBUFS && !c->closing)
		c->starved = true; /* the next recycle arms it again */
	else if (res > 0 && !c->closing)
		arm_recv(c); /* the kernel may end a multishot any time */
	else
		c->closing = true; /* end of stream, an error, or a stop */
	conn_close_if_done(c);
}

static void arm_recv(struct conn *c)
{
	agr_worker *w = agr_worker_current();
	agr_io_params p = AGR_IO_PARAMS_INIT;

	p.id = &c->recv_id;
	if (atomic_load(&c->srv->stopping) || agr_io_next(w, &p) ||
	    agr_io_recv_multishot(w, c->fd, c->ws->br, 0, received, c) < 0) {
		c->closing = true;
		conn_close_if_done(c);
		return;
	}
	c->receiving = true;
}

/* Runs on the connection's worker. */
static void conn_start(void *arg)
{
	struct conn *c = arg;

	c->ws = &c->srv->ws[c->worker];
	c->next = c->ws->conns;
	if (c->next)
		c->next->prev = c;
	c->ws->conns = c;
	arm_recv(c);
}

/* ---- accepting, starting, stopping ---- */

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
	net_nodelay(fd);
	atomic_fetch_add(&srv->connections, 1);
	drain_add(&srv->drain);
	if (agr_scheduler_schedule(srv->sched, c->worker, conn_start, c) < 0) {
		close(fd);
		free(c);
		drain_done(&srv->drain);
	}
}

static void start(struct server *srv, int port, int workers)
{
	agr_named_aggregate named = { "store", "Log" };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	int ret, fd;

	if (mkdir(srv->dir, 0755) && errno != EEXIST)
		die_errno(srv->dir, -errno);
	srv->nworkers = workers > 0 ? (unsigned)workers :
				      (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	srv->ws = xcalloc(srv->nworkers, sizeof(*srv->ws));
	o.parallelism = (int)srv->nworkers;
	o.sq_entries = 512;
	o.worker_init = worker_init;
	o.worker_exit = worker_exit;
	o.hook_arg = srv;
	ret = agr_supplier_new_opts("store", &o, &srv->sup);
	if (ret == 0)
		ret = agr_supplier_get_or_init(srv->sup, &named, &srv->sched);
	if (ret)
		die_errno("starting the workers (io_uring, or the worker init "
			  "hook: see the log)", ret);
	fd = net_listen(port, &port);
	ret = acceptor_start(srv->sched, 0, fd, take, srv, &srv->drain,
			     &srv->acceptor);
	if (ret)
		die_errno("agr_scheduler_schedule", ret);
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
}

/* Ends the receives; each connection closes once its appends are done. */
static void close_conns(void *arg)
{
	struct worker_state *ws = arg;
	agr_worker *w = agr_worker_current();
	struct conn *c;

	for (c = ws->conns; c; c = c->next)
		if (c->receiving)
			agr_io_cancel_op(w, c->recv_id);
}

static bool stop(struct server *srv)
{
	uint64_t deadline = now_ns() + STOP_TIMEOUT_NS;
	bool clean;
	unsigned i;

	atomic_store(&srv->stopping, true);
	acceptor_stop(srv->acceptor);
	for (i = 0; i < srv->nworkers; i++)
		agr_scheduler_schedule(srv->sched, i, close_conns, &srv->ws[i]);
	clean = drain_wait(&srv->drain, left_until(deadline));
	if (agr_supplier_stop_gracefully(srv->sup, STOP_TIMEOUT_NS) < 0)
		clean = false;
	agr_supplier_free(srv->sup); /* forces the stop if it timed out */
	acceptor_free(srv->acceptor);
	return clean;
}

static const char usage_text[] = "usage: append_store [--port P] "
				 "[--dir DIR] [--workers N]\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },
		{ "workers", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct server srv = { .dir = "store-data" };
	long port = 7010, workers = 0;
	sigset_t set;
	bool clean;
	int ch, sig;

	opts_init("append_store", usage_text);
	while ((ch = getopt_long(argc, argv, "p:d:w:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'p': port = opts_number(optarg, 0, 65535); break;
		case 'd': srv.dir = optarg; break;
		case 'w': workers = opts_number(optarg, 0, 1024); break;
		case 'h': opts_help();
		default: opts_bad();
		}
	}
	if (optind != argc)
		opts_bad();
	block_stop_signals(&set); /* main waits for them */
	drain_init(&srv.drain);
	start(&srv, (int)port, (int)workers);
	sigwait(&set, &sig);
	clean = stop(&srv);
	printf("append_store: stopped %s: %" PRIu64 " connections, %" PRIu64
	       " bytes durable\n", clean ? "cleanly" : "BY FORCE",
	       (uint64_t)atomic_load(&srv.connections),
	       (uint64_t)atomic_load(&srv.bytes));
	free(srv.ws);
	drain_destroy(&srv.drain);
	return clean ? 0 : 1;
}
