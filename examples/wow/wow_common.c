/* SPDX-License-Identifier: MIT */
/* wow_common.c - options, names, per-worker clients of the wow_* examples. */
#include "wow_common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool wow_redis_opt(struct wow_redis_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case 'h':
		o->host = arg;
		return true;
	case 'p':
		o->port = atoi(arg);
		return true;
	case 'c':
		o->cluster = true;
		return true;
	default:
		return false;
	}
}

void wow_redis_options(const struct wow_redis_opts *o, const char *name,
		       agr_redis_options *out)
{
	agr_redis_options_init(out);
	out->host = o->host;
	out->port = o->port;
	out->cluster = o->cluster;
	out->name = name;
	out->reconnect_delay_ns = 100000000ull;
	out->connect_timeout_ns = 30000000000ull;
}

const agr_wow_named *wow_named(void)
{
	static const agr_wow_named named = {
		.context_name = WOW_CONTEXT,
		.alias = NULL,
		.aggregate_name = WOW_AGGREGATE,
	};
	return &named;
}

int wow_workers_init(agr_worker *w, void *arg)
{
	struct wow_workers *ws = arg;
	struct wow_worker_state *st = &ws->state[agr_worker_index(w)];
	int ret = agr_redis_new(w, &ws->redis, &st->redis);

	if (ret < 0) {
		fprintf(stderr, "redis client: %s\n", agr_strerror(ret));
		return ret;
	}
	if (ws->user_new) {
		st->user = ws->user_new();
		if (!st->user) {
			agr_redis_free(st->redis);
			st->redis = NULL;
			return -ENOMEM;
		}
	}
	if (ws->state_init) {
		ret = ws->state_init(st);
		if (ret < 0) {
			if (st->user && ws->user_free)
				ws->user_free(st->user);
			agr_redis_free(st->redis);
			memset(st, 0, sizeof(*st));
			return ret;
		}
	}
	return 0;
}

void wow_workers_exit(agr_worker *w, void *arg)
{
	struct wow_workers *ws = arg;
	struct wow_worker_state *st = &ws->state[agr_worker_index(w)];

	if (ws->state_exit && st->store)
		ws->state_exit(st);
	if (st->redis)
		agr_redis_free(st->redis);
	if (st->user && ws->user_free)
		ws->user_free(st->user);
	memset(st, 0, sizeof(*st));
}

struct wow_worker_state *wow_worker_state(struct wow_workers *ws,
					  agr_worker *w)
{
	return &ws->state[agr_worker_index(w)];
}

struct close_task {
	struct wow_workers *ws;
	int index;
};

static void on_client_closed(void *arg)
{
	struct wow_workers *ws = arg;

	atomic_fetch_sub(&ws->closing, 1);
}

static void close_on_worker(void *arg)
{
	struct close_task *t = arg;
	struct wow_workers *ws = t->ws;
	struct wow_worker_state *st = &ws->state[t->index];

	free(t);
	if (ws->state_exit)
		ws->state_exit(st);
	if (st->redis) {
		agr_redis_close(st->redis, on_client_closed, ws);
		st->redis = NULL;
	} else {
		atomic_fetch_sub(&ws->closing, 1);
	}
}

int wow_workers_close(struct wow_workers *ws, agr_scheduler *sched,
		      uint64_t timeout_ns)
{
	struct timespec tick = { 0, 10000000L };
	uint64_t waited = 0;

	atomic_store(&ws->closing, ws->n);
	for (int i = 0; i < ws->n; i++) {
		struct close_task *t = malloc(sizeof(*t));

		if (t) {
			t->ws = ws;
			t->index = i;
		}
		if (!t || agr_scheduler_schedule(sched, (unsigned)i,
						 close_on_worker, t) < 0) {
			free(t);
			atomic_fetch_sub(&ws->closing, 1);
		}
	}
	/* Polls with a deadline: the clients close on their own workers. */
	while (atomic_load(&ws->closing) > 0 && waited < timeout_ns) {
		nanosleep(&tick, NULL);
		waited += 10000000ull;
	}
	return atomic_load(&ws->closing) > 0 ? -ETIMEDOUT : 0;
}

void wow_block_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int wow_wait_signal(atomic_bool *done)
{
	struct timespec tick = { 0, 50000000L };
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	for (;;) {
		sig = sigtimedwait(&set, NULL, &tick);
		if (sig > 0)
			return sig;
		if (done && atomic_load(done))
			return 0;
	}
}

uint64_t wow_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
