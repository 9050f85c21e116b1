/* SPDX-License-Identifier: MIT */
/*
 * bench/dispatch - no-op dispatch throughput from one producer thread:
 * aggring with single sends, aggring with batched sends
 * (agr_dispatcher_send_batch) and every peer of bench/peer.h, with the
 * same groups and workers, alternating engines within each round so
 * that drift on a shared machine hits every engine alike.
 *
 *   dispatch [-n MESSAGES] [-s MESSAGES] [-i IDS] [-r RUNS] [-R RUNS]
 *            [-b BATCH] [-w WORKERS] [-p PEERS] [-q] [-o DIR]
 *
 * Two variants: -n messages (default 2,000,000: the producer outruns
 * the workers, so activations drain many messages) and -s messages
 * (default 200,000: the workers keep up, so the cost of an activation
 * shows). A run of the small variant lasts tens of milliseconds, so one
 * preemption moves it by a third and the median of five is a draw: it
 * runs -R times (default five times -r). Each run goes from the first
 * send to the last completion; the harness checks per-id order and
 * exactly-once completion and refuses to report a run that broke
 * either. Prints the median, min and max of the runs per engine, how
 * far the middle half of them spread, and the ratios the issue's
 * targets are about: aggring single / best peer >= 0.9, aggring batch /
 * best peer >= 1.0, spread < 30%.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring.h>

#include "harness.h"
#include "peer.h"

#define WORKLOAD "dispatch"
#define MAX_BATCH 256

/* One message, as each engine sees it. */
struct item {
	struct peer_msg peer;
	int id;
	int seq; /* per id, from 0 */
	agr_message msg;
};

struct config {
	long n;
	int ids, workers, groups, batch;
};

/* What the command line sets (the large variant's size in c.n). */
struct args {
	struct config c;
	long small;
	int runs, small_runs; /* small_runs 0: 5 x runs */
	const char *dir, *only;
};

enum { AGR_SINGLE, AGR_BATCH, FIRST_PEER };

/* Engine e: the two aggring modes, then peers[e - FIRST_PEER]. */
static int nengines;

/* The peers to run: all of peer_engines[], or those -p names. */
static const struct peer_engine *peers[16];
static int npeers;

static void select_peers(const char *list)
{
	npeers = peer_select(WORKLOAD, list, peers, 16);
}

static char batch_name[32];

static const char *engine_name(int e)
{
	if (e == AGR_SINGLE)
		return "aggring";
	if (e == AGR_BATCH)
		return batch_name;
	return peers[e - FIRST_PEER]->name;
}

static int agr_noop(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void agr_completed(agr_message *msg, int status, void *arg)
{
	struct item *it = msg->user;

	if (status != 0) {
		fprintf(stderr, WORKLOAD ": message failed: %s\n",
			agr_strerror(status));
		exit(1);
	}
	bench_order_see(arg, it->id, it->seq);
}

static void peer_handle(struct peer_msg **msgs, int n, void *arg)
{
	struct item *it;
	int i;

	for (i = 0; i < n; i++) {
		it = msgs[i]->user;
		bench_order_see(arg, it->id, it->seq);
	}
}

/* groups 0: aggring's default parallelism. */
static agr_dispatcher *make_dispatcher(int workers, int groups,
				       struct bench_order *o)
{
	agr_dispatcher_options opt = {
		.name = "bench",
		.named_aggregate = { "bench", "Order" },
		.parallelism = groups,
		.on_complete = agr_completed,
		.complete_arg = o,
	};

	return bench_agr_start(WORKLOAD, workers, &opt, agr_noop, NULL);
}

static void free_dispatcher(agr_dispatcher *d)
{
	bench_agr_stop(WORKLOAD, d);
}

static void send_agr(agr_dispatcher *d, struct item *items, long n,
		     int batch)
{
	agr_message *ptrs[MAX_BATCH];
	long i;
	int k;

	if (batch == 1) {
		for (i = 0; i < n; i++)
			if (agr_dispatcher_send(d, &items[i].msg) != 0)
				exit(1);
		return;
	}
	for (i = 0; i < n; i += k) {
		for (k = 0; k < batch && i + k < n; k++)
			ptrs[k] = &items[i + k].msg;
		if (agr_dispatcher_send_batch(d, ptrs, (size_t)k, NULL) != 0)
			exit(1);
	}
}

/*
 * Items (group activations: nothing else runs here) that the workers of
 * `d` ran. An activation drains up to the drain limit; a worker that
 * keeps pace with the producer runs one message per activation.
 */
static uint64_t activations(agr_dispatcher *d, int workers)
{
	agr_scheduler *s = agr_dispatcher_scheduler(d);
	agr_worker_metrics m;
	uint64_t sum = 0;
	int w;

	for (w = 0; w < workers; w++)
		if (agr_scheduler_worker_metrics(s, w, &m) == 0)
			sum += m.items;
	return sum;
}

/*
 * One run of engine e: M msg/s from the first send to the last
 * completion. For aggring, *per_activation is set to the messages run
 * per group activation.
 */
static double run_once(int e, struct item *items, const struct config *c,
		       double *per_activation)
{
	const struct peer_engine *pe = NULL;
	struct bench_order o;
	agr_dispatcher *d = NULL;
	struct peer *p = NULL;
	uint64_t t0, t1;
	long i;

	bench_order_init(&o, c->ids, c->n);
	for (i = 0; i < c->n; i++)
		memset(&items[i].msg.internal_, 0,
		       sizeof(items[i].msg.internal_));
	if (e >= FIRST_PEER) {
		pe = peers[e - FIRST_PEER];
		p = pe->create(c->workers, c->groups, peer_handle, &o);
		if (!p) {
			fprintf(stderr, WORKLOAD ": %s: create failed\n",
				pe->name);
			exit(1);
		}
	} else {
		d = make_dispatcher(c->workers, c->groups, &o);
	}
	t0 = bench_now_ns();
	if (pe)
		for (i = 0; i < c->n; i++)
			pe->send(p, &items[i].peer);
	else
		send_agr(d, items, c->n, e == AGR_BATCH ? c->batch : 1);
	bench_order_wait(&o);
	t1 = bench_now_ns();
	if (!pe && per_activation)
		*per_activation = (double)c->n /
				  (double)activations(d, c->workers);
	if (pe)
		pe->destroy(p);
	else
		free_dispatcher(d);
	bench_order_verify(&o, engine_name(e));
	bench_order_destroy(&o);
	return (double)c->n / ((double)(t1 - t0) / 1e3);
}

static struct item *make_items(long n, int ids, char (**names)[16])
{
	struct item *items = calloc((size_t)n, sizeof(*items));
	int *seq = calloc((size_t)ids, sizeof(int));
	long i;
	int id;

	*names = calloc((size_t)ids, sizeof(**names));
	if (!items || !seq || !*names) {
		fprintf(stderr, WORKLOAD ": out of memory\n");
		exit(1);
	}
	for (id = 0; id < ids; id++)
		snprintf((*names)[id], sizeof((*names)[id]), "id-%d", id);
	for (i = 0; i < n; i++) {
		id = (int)(i % ids);
		items[i].id = id;
		items[i].seq = seq[id]++;
		items[i].msg.aggregate_id = (*names)[id];
		items[i].msg.user = &items[i];
		items[i].peer.id = (*names)[id];
		items[i].peer.user = &items[i];
	}
	free(seq);
	return items;
}

static void variant_name(char *buf, size_t len, long n)
{
	if (n % 1000000 == 0)
		snprintf(buf, len, "%ldM", n / 1000000);
	else if (n % 1000 == 0)
		snprintf(buf, len, "%ldk", n / 1000);
	else
		snprintf(buf, len, "%ld", n);
}

static void print_ratio(const char *what, double ratio, double target)
{
	printf("  %-28s %6.3f  (target >= %.1f: %s)\n", what, ratio, target,
	       ratio >= target ? "met" : "MISSED");
}

/*
 * The slowest and the fastest of aggring's runs, with the messages each
 * ran per activation: where a run falls is mostly whether a worker kept
 * pace with the producer (about 1 per activation, an activation per
 * message) or fell behind (up to the drain limit).
 */
static void print_modes(const char *engine, const double *v,
			const double *per_act, int runs)
{
	int r, slow = 0, fast = 0;

	for (r = 1; r < runs; r++) {
		if (v[r] < v[slow])
			slow = r;
		if (v[r] > v[fast])
			fast = r;
	}
	printf("  %-18s slowest %6.2f M/s at %5.1f msgs/activation, "
	       "fastest %6.2f M/s at %5.1f\n", engine, v[slow],
	       per_act[slow], v[fast], per_act[fast]);
}

/* How far the middle half of each engine's runs spread. */
static void print_middle_spreads(const struct bench_summary *s)
{
	int e;

	printf("  middle half of the runs within:");
	for (e = 0; e < nengines; e++)
		printf(" %s %.0f%%", engine_name(e), s[e].middle_spread * 100);
	printf("\n");
}

/* Warm-up, then RUNS rounds alternating engines; prints and writes CSV. */
static void run_variant(struct config *c, struct item *items, int runs,
			FILE *csv)
{
	struct bench_summary s[nengines];
	double v[nengines][runs], unsorted[FIRST_PEER][runs];
	double per_act[FIRST_PEER][runs], worst = 0, agr_worst = 0;
	char variant[32];
	int r, k, e, best = -1;

	variant_name(variant, sizeof(variant), c->n);
	for (e = 0; e < nengines; e++)
		run_once(e, items, c, NULL);
	for (r = 0; r < runs; r++)
		for (k = 0; k < nengines; k++) {
			/* Rotate who goes first so no engine always follows
			 * the same one. */
			e = (r + k) % nengines;
			v[e][r] = run_once(e, items, c,
					   e < FIRST_PEER ? &per_act[e][r]
							  : NULL);
		}
	memcpy(unsorted, v, sizeof(unsorted));
	printf("\n%s: %s no-op messages over %d ids, %d groups, %d workers, "
	       "one producer, %d runs (M msg/s)\n", WORKLOAD, variant, c->ids,
	       c->groups, c->workers, runs);
	for (e = 0; e < nengines; e++) {
		s[e] = bench_summarize(v[e], runs);
		bench_print_row(engine_name(e), "M/s", s[e]);
		bench_csv_row(csv, WORKLOAD, variant, engine_name(e),
			      "throughput", "Mmsg/s", s[e], runs);
		if (e >= FIRST_PEER &&
		    (best < 0 || s[e].median > s[best].median))
			best = e;
		if (s[e].spread > worst)
			worst = s[e].spread;
		if (e < FIRST_PEER && s[e].spread > agr_worst)
			agr_worst = s[e].spread;
	}
	if (best >= 0) {
		printf("  best peer: %s\n", engine_name(best));
		print_ratio("aggring single / best peer",
			    s[AGR_SINGLE].median / s[best].median, 0.9);
		print_ratio("aggring batch / best peer",
			    s[AGR_BATCH].median / s[best].median, 1.0);
	}
	printf("  %-28s %4.0f%%  (target < 30%%: %s; any engine: %.0f%%)\n",
	       "aggring's largest spread", agr_worst * 100,
	       agr_worst < 0.3 ? "met" : "MISSED", worst * 100);
	print_middle_spreads(s);
	for (e = 0; e < FIRST_PEER; e++)
		print_modes(engine_name(e), unsorted[e], per_act[e], runs);
}

/* The group count aggring picks by default (64 x CPUs or AGR_PARALLELISM). */
static int default_groups(int workers)
{
	struct bench_order o;
	agr_dispatcher *d;
	int groups;

	bench_order_init(&o, 1, 0);
	d = make_dispatcher(workers, 0, &o);
	groups = agr_dispatcher_parallelism(d);
	free_dispatcher(d);
	bench_order_destroy(&o);
	return groups;
}

/* -q: a smoke run, in order with the other options. */
static void quick(void *arg)
{
	struct args *a = arg;

	a->c.n = 200000;
	a->small = 20000;
	a->runs = 3;
}

static void parse(int argc, char **argv, struct args *a)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_LONG('n', "MESSAGES", a->c.n, 1, 1L << 30,
			       "messages of the large variant (default "
			       "2000000)"),
		BENCH_OPT_LONG('s', "MESSAGES", a->small, 0, 1L << 30,
			       "messages of the small variant (default 200000; "
			       "0: skip)"),
		BENCH_OPT_INT('i', "IDS", a->c.ids, 1, 1 << 24,
			      "distinct ids (default 10000)"),
		BENCH_OPT_INT('r', "RUNS", a->runs, 1, 1000,
			      "runs per engine (default 5)"),
		BENCH_OPT_INT('R', "RUNS", a->small_runs, 1, 5000,
			      "runs per engine of the small variant (default "
			      "5 x -r)"),
		BENCH_OPT_INT('b', "BATCH", a->c.batch, 2, MAX_BATCH,
			      "batch size of aggring's batched sends (default "
			      "64)"),
		BENCH_OPT_INT('w', "WORKERS", a->c.workers, 1, 1024,
			      "workers (default: online CPUs)"),
		BENCH_OPT_TEXT('p', "PEERS", a->only,
			       "comma-separated peers to compare (default: "
			       "all)"),
		BENCH_OPT_CALL('q', quick, a,
			       "quick smoke run: -n 200000 -s 20000 -r 3"),
		BENCH_OPT_TEXT('o', "DIR", a->dir, "write DIR/dispatch.csv"),
		BENCH_OPT_END,
	};

	bench_options(argc, argv, WORKLOAD, opts);
}

int main(int argc, char **argv)
{
	struct args a = { .c = { .n = 2000000, .ids = 10000, .batch = 64,
				 .workers = bench_cpus() },
			  .small = 200000, .runs = 5 };
	struct config *c = &a.c;
	char (*names)[16];
	struct item *items;
	FILE *csv;

	parse(argc, argv, &a);
	select_peers(a.only);
	nengines = FIRST_PEER + npeers;
	snprintf(batch_name, sizeof(batch_name), "aggring-batch%d", c->batch);
	bench_print_env(stdout, WORKLOAD);
	c->groups = default_groups(c->workers);
	items = make_items(c->n > a.small ? c->n : a.small, c->ids, &names);
	csv = bench_csv_open(a.dir, WORKLOAD);
	run_variant(c, items, a.runs, csv);
	if (a.small) {
		c->n = a.small;
		run_variant(c, items, a.small_runs ? a.small_runs : 5 * a.runs,
			    csv);
	}
	bench_csv_close(csv);
	free(items);
	free(names);
	return 0;
}
