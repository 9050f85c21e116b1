/* SPDX-License-Identifier: MIT */
/*
 * bench/dispatch - no-op dispatch throughput from one producer thread:
 * aggring with single sends, aggring with batched sends, and the
 * hand-rolled pthread pool peer (bench/peer_pthread.c), alternating in
 * one run so that drift hits every engine alike.
 *
 *   dispatch [-n MESSAGES] [-i IDS] [-r RUNS] [-b BATCH]
 *
 * Every run checks per-id order and exactly-once completion and refuses
 * to report a run that broke either. Prints, per engine, the median,
 * min and max of RUNS runs in M msg/s and the spread ((max - min) /
 * median), then the ratios. Absolute numbers drift on shared machines;
 * the ratios are the result.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "peer_pthread.h"

/* One message, as each engine sees it. */
struct item {
	agr_message msg;
	struct peer_msg peer;
	int id;
	int seq; /* per id, from 0 */
};

struct run {
	long n;
	atomic_long completed;
	atomic_long broken; /* out of order or completed twice */
	int *next_seq;	    /* per id; touched only by the id's group */
	pthread_mutex_t lock;
	pthread_cond_t done;
};

enum engine { AGR_SINGLE, AGR_BATCH, PTHREAD_POOL, ENGINES };

static const char *const engine_names[ENGINES] = { "aggring", "aggring-64",
						   "pthread" };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The handler of every engine: checks order, counts the completion. */
static void handle(struct run *r, struct item *it)
{
	if (r->next_seq[it->id] != it->seq)
		atomic_fetch_add_explicit(&r->broken, 1, memory_order_relaxed);
	r->next_seq[it->id] = it->seq + 1;
	if (atomic_fetch_add_explicit(&r->completed, 1,
				      memory_order_relaxed) + 1 == r->n) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->done);
		pthread_mutex_unlock(&r->lock);
	}
}

static int agr_noop(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void agr_completed(agr_message *msg, int status, void *arg)
{
	if (status != 0) {
		fprintf(stderr, "dispatch: message failed: %d\n", status);
		exit(1);
	}
	handle(arg, msg->user);
}

static void peer_handle(struct peer_msg *msg, void *arg)
{
	handle(arg, msg->user);
}

static agr_dispatcher *make_dispatcher(struct run *r)
{
	agr_dispatcher_options o = {
		.name = "bench",
		.named_aggregate = { "bench", "Order" },
		.owns_supplier = true,
		.on_complete = agr_completed,
		.complete_arg = r,
	};
	agr_dispatcher *d;
	agr_supplier *sup;
	int ret;

	ret = agr_supplier_new("bench", 0, &sup);
	if (!ret) {
		o.supplier = sup;
		ret = agr_dispatcher_new(&o, &d);
	}
	if (!ret)
		ret = agr_dispatcher_register(d, NULL, agr_noop, NULL);
	if (!ret)
		ret = agr_dispatcher_start(d);
	if (ret) {
		fprintf(stderr, "dispatch: setup failed: %s\n",
			agr_strerror(ret));
		exit(ret == -ENOSYS || ret == -EPERM ? 77 : 1);
	}
	return d;
}

static void send_agr(agr_dispatcher *d, struct item *items, long n,
		     int batch)
{
	agr_message *ptrs[256];
	long i;
	int k;

	for (i = 0; i < n; i += batch) {
		if (batch == 1) {
			if (agr_dispatcher_send(d, &items[i].msg) != 0)
				exit(1);
			continue;
		}
		for (k = 0; k < batch && i + k < n; k++)
			ptrs[k] = &items[i + k].msg;
		if (agr_dispatcher_send_batch(d, ptrs, (size_t)k, NULL) != 0)
			exit(1);
	}
}

static void wait_all(struct run *r)
{
	pthread_mutex_lock(&r->lock);
	while (atomic_load(&r->completed) < r->n)
		pthread_cond_wait(&r->done, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

/* One run: M msg/s from the first send to the last completion. */
static double run_once(enum engine e, struct item *items, long n, int ids,
		       int batch)
{
	int workers = (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct run r = { .n = n };
	struct peer_pool *pool = NULL;
	agr_dispatcher *d = NULL;
	uint64_t t0, t1;
	long i;

	r.next_seq = calloc((size_t)ids, sizeof(int));
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.done, NULL);
	for (i = 0; i < n; i++)
		memset(&items[i].msg.internal_, 0,
		       sizeof(items[i].msg.internal_));
	if (e == PTHREAD_POOL)
		pool = peer_pool_new(workers, 64 * workers, peer_handle, &r);
	else
		d = make_dispatcher(&r);
	t0 = now_ns();
	if (e == PTHREAD_POOL)
		for (i = 0; i < n; i++)
			peer_pool_send(pool, &items[i].peer);
	else
		send_agr(d, items, n, e == AGR_BATCH ? batch : 1);
	wait_all(&r);
	t1 = now_ns();
	if (pool)
		peer_pool_free(pool);
	if (d) {
		agr_dispatcher_stop_gracefully(d, 60ull * 1000000000ull);
		agr_dispatcher_free(d);
	}
	if (atomic_load(&r.broken) || atomic_load(&r.completed) != n) {
		fprintf(stderr, "dispatch: %s broke per-id order or "
			"exactly-once completion; no result reported\n",
			engine_names[e]);
		exit(1);
	}
	free(r.next_seq);
	pthread_cond_destroy(&r.done);
	pthread_mutex_destroy(&r.lock);
	return (double)n / ((double)(t1 - t0) / 1e9) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct summary {
	double median, min, max, spread;
};

static struct summary summarize(double *v, int runs)
{
	struct summary s;

	qsort(v, (size_t)runs, sizeof(*v), cmp_double);
	s.median = runs % 2 ? v[runs / 2] : (v[runs / 2 - 1] + v[runs / 2]) / 2;
	s.min = v[0];
	s.max = v[runs - 1];
	s.spread = (s.max - s.min) / s.median;
	return s;
}

static struct item *make_items(long n, int ids, char (**names)[16])
{
	struct item *items = calloc((size_t)n, sizeof(*items));
	int *seq = calloc((size_t)ids, sizeof(int));
	long i;

	*names = calloc((size_t)ids, sizeof(**names));
	if (!items || !seq || !*names)
		exit(1);
	for (int id = 0; id < ids; id++)
		snprintf((*names)[id], sizeof((*names)[id]), "id-%d", id);
	for (i = 0; i < n; i++) {
		items[i].id = (int)(i % ids);
		items[i].seq = seq[items[i].id]++;
		items[i].msg.aggregate_id = (*names)[items[i].id];
		items[i].msg.user = &items[i];
		items[i].peer.id = (*names)[items[i].id];
		items[i].peer.user = &items[i];
	}
	free(seq);
	return items;
}

int main(int argc, char **argv)
{
	long n = 2000000;
	int ids = 10000, runs = 5, batch = 64, ch, r, e;
	double *v[ENGINES];
	struct summary s[ENGINES];
	char (*names)[16];
	struct item *items;

	while ((ch = getopt(argc, argv, "n:i:r:b:")) != -1) {
		switch (ch) {
		case 'n': n = atol(optarg); break;
		case 'i': ids = atoi(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: dispatch [-n MESSAGES] [-i IDS] "
				"[-r RUNS] [-b BATCH]\n");
			return 2;
		}
	}
	if (n <= 0 || ids <= 0 || runs <= 0 || batch < 2 || batch > 256)
		return 2;
	items = make_items(n, ids, &names);
	for (e = 0; e < ENGINES; e++) {
		v[e] = calloc((size_t)runs, sizeof(double));
		run_once((enum engine)e, items, n < 100000 ? n : 100000, ids,
			 batch); /* warm up */
	}
	for (r = 0; r < runs; r++)
		for (e = 0; e < ENGINES; e++)
			v[e][r] = run_once((enum engine)e, items, n, ids, batch);
	printf("dispatch: %ld no-op messages over %d ids, %d runs each, one "
	       "producer, %ld CPUs, aggring %s\n", n, ids, runs,
	       sysconf(_SC_NPROCESSORS_ONLN), agr_version());
	for (e = 0; e < ENGINES; e++) {
		s[e] = summarize(v[e], runs);
		printf("  %-11s median %6.2f M/s  min %6.2f  max %6.2f  "
		       "spread %4.0f%%\n", engine_names[e], s[e].median,
		       s[e].min, s[e].max, s[e].spread * 100);
	}
	printf("  aggring single / batch-%d = %.2f\n", batch,
	       s[AGR_SINGLE].median / s[AGR_BATCH].median);
	printf("  aggring single / pthread  = %.2f\n",
	       s[AGR_SINGLE].median / s[PTHREAD_POOL].median);
	printf("  aggring batch  / pthread  = %.2f\n",
	       s[AGR_BATCH].median / s[PTHREAD_POOL].median);
	for (e = 0; e < ENGINES; e++)
		free(v[e]);
	free(items);
	free(names);
	return 0;
}
