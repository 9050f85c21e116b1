/* SPDX-License-Identifier: MIT */
/*
 * bench/dispatch - no-op dispatch throughput: single sends against
 * batched sends from one producer thread, alternating in one run.
 *
 *   dispatch [-n MESSAGES] [-i IDS] [-r RUNS] [-b BATCH]
 *
 * Prints, per mode, the median, min and max of RUNS runs in M msg/s,
 * the spread of each ((max - min) / median), and the ratio of single to
 * batched sends. Absolute numbers drift on shared machines; the ratios
 * are the result.
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

#include <aggring.h>

struct run {
	long n;
	atomic_long completed;
	pthread_mutex_t lock;
	pthread_cond_t done;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int noop(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void completed(agr_message *msg, int status, void *arg)
{
	struct run *r = arg;

	(void)msg;
	if (status != 0) {
		fprintf(stderr, "dispatch: message failed: %d\n", status);
		exit(1);
	}
	if (atomic_fetch_add_explicit(&r->completed, 1,
				      memory_order_relaxed) + 1 == r->n) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->done);
		pthread_mutex_unlock(&r->lock);
	}
}

static agr_dispatcher *make_dispatcher(struct run *r)
{
	agr_dispatcher_options o = {
		.name = "bench",
		.named_aggregate = { "bench", "Order" },
		.owns_supplier = true,
		.on_complete = completed,
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
		ret = agr_dispatcher_register(d, NULL, noop, NULL);
	if (!ret)
		ret = agr_dispatcher_start(d);
	if (ret) {
		fprintf(stderr, "dispatch: setup failed: %s\n",
			agr_strerror(ret));
		exit(ret == -ENOSYS || ret == -EPERM ? 77 : 1);
	}
	return d;
}

static void send_all(agr_dispatcher *d, agr_message *msgs, long n, int batch)
{
	agr_message *ptrs[256];
	long i;
	int k;

	for (i = 0; i < n; i += batch) {
		if (batch == 1) {
			if (agr_dispatcher_send(d, &msgs[i]) != 0)
				exit(1);
			continue;
		}
		for (k = 0; k < batch && i + k < n; k++)
			ptrs[k] = &msgs[i + k];
		if (agr_dispatcher_send_batch(d, ptrs, (size_t)k, NULL) != 0)
			exit(1);
	}
}

/* One run: M msg/s from the first send to the last completion. */
static double run_once(agr_message *msgs, long n, int batch)
{
	struct run r = { .n = n };
	agr_dispatcher *d;
	uint64_t t0, t1;
	long i;

	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.done, NULL);
	for (i = 0; i < n; i++)
		memset(&msgs[i].internal_, 0, sizeof(msgs[i].internal_));
	d = make_dispatcher(&r);
	t0 = now_ns();
	send_all(d, msgs, n, batch);
	pthread_mutex_lock(&r.lock);
	while (atomic_load(&r.completed) < n)
		pthread_cond_wait(&r.done, &r.lock);
	pthread_mutex_unlock(&r.lock);
	t1 = now_ns();
	agr_dispatcher_stop_gracefully(d, 60ull * 1000000000ull);
	agr_dispatcher_free(d);
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

int main(int argc, char **argv)
{
	long n = 2000000, i;
	int ids = 10000, runs = 5, batch = 64, ch, r;
	char (*names)[16];
	agr_message *msgs;
	double *single, *batched;
	struct summary s, b;

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
	names = calloc((size_t)ids, sizeof(*names));
	msgs = calloc((size_t)n, sizeof(*msgs));
	single = calloc((size_t)runs, sizeof(double));
	batched = calloc((size_t)runs, sizeof(double));
	if (!names || !msgs || !single || !batched)
		return 1;
	for (int id = 0; id < ids; id++)
		snprintf(names[id], sizeof(names[id]), "id-%d", id);
	for (i = 0; i < n; i++)
		msgs[i].aggregate_id = names[i % ids];

	run_once(msgs, n < 100000 ? n : 100000, 1); /* warm up */
	for (r = 0; r < runs; r++) { /* alternate, so drift hits both */
		single[r] = run_once(msgs, n, 1);
		batched[r] = run_once(msgs, n, batch);
	}
	s = summarize(single, runs);
	b = summarize(batched, runs);
	printf("dispatch: %ld no-op messages over %d ids, %d runs each, "
	       "one producer, aggring %s\n", n, ids, runs, agr_version());
	printf("  %-10s median %6.2f M/s  min %6.2f  max %6.2f  spread %4.0f%%\n",
	       "single", s.median, s.min, s.max, s.spread * 100);
	printf("  %-10s median %6.2f M/s  min %6.2f  max %6.2f  spread %4.0f%%\n",
	       "batch", b.median, b.min, b.max, b.spread * 100);
	printf("  single / batch = %.2f\n", s.median / b.median);
	free(names);
	free(msgs);
	free(single);
	free(batched);
	return 0;
}
