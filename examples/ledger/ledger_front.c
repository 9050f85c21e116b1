/* SPDX-License-Identifier: MIT */
/*
 * ledger_front.c - the front's side of the connections: the acceptor
 * on worker 0 dealing them round-robin to the workers, each worker's
 * fixed file table and provided buffer ring (--recv multishot),
 * stopping, and the counters INFO reads. One connection's socket is
 * ledger_conn.c's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_front_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <liburing.h>

#include "acceptor.h"
#include "net.h"
#include "util.h"

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
	requests_init(&c->queue, &c->wc->pool, &c->wc->turn, conn_ready, c);
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
	unsigned i;
	int fd, ret;

	f->disp = disp;
	f->sched = agr_dispatcher_scheduler(disp);
	if (!f->workers)
		front_prepare(f, (unsigned)agr_scheduler_parallelism(f->sched));
	f->back.inboxes = request_inboxes_new(f->sched, f->nworkers);
	for (i = 0; i < f->nworkers; i++)
		request_turn_init(&f->workers[i].turn, f->sched, i);
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
	free(f->back.inboxes);
	free(f);
}

struct request_return *front_return(struct front *f)
{
	return &f->back;
}
