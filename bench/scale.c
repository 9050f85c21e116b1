/* SPDX-License-Identifier: MIT */
/*
 * bench/scale - many named aggregates: 1, 16 and 256 aggregates (one
 * dispatcher, hence one scheduler, each, all from one supplier) under
 * the same total load, against the pthread peer with one pool per
 * aggregate, alternating engines within each round.
 *
 *   scale [-n MESSAGES] [-i IDS] [-w WORKERS] [-g GROUPS] [-r RUNS] [-q]
 *         [-o DIR]
 *
 * Load: MESSAGES no-op messages (1,000,000) over IDS ids (10,000) from
 * one producer thread; id i belongs to aggregate i % A, so the ids are
 * spread round-robin over the aggregates and every variant carries the
 * same messages. Each scheduler (and each peer pool) gets WORKERS
 * threads; by default max(1, CPUs / A), so that one aggregate uses the
 * whole machine and many aggregates do not oversubscribe it more than
 * one thread each must. Each dispatcher (and pool) gets GROUPS groups;
 * by default 64 per worker, as aggring's default is 64 per CPU.
 *
 * Per engine and variant: throughput in M msg/s from the first send to
 * the last completion; the engine's resident memory in MiB (VmRSS from
 * /proc/self/status once every message completed and every scheduler
 * is still up, minus VmRSS just before the engine was created, so that
 * the messages themselves do not count); and the process's thread count
 * at the same moment (Threads: the engine's threads plus main). Every
 * run checks per-id order and exactly-once completion (bench_order_*).
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

#define WORKLOAD "scale"
#define MAX_RUNS 1000

static const int variants[] = { 1, 16, 256 };
#define VARIANTS (int)(sizeof(variants) / sizeof(variants[0]))

enum engine { AGGRING, PTHREAD, ENGINES };
static const char *const engine_names[ENGINES] = { "aggring", "pthread" };

enum metric { THROUGHPUT, RSS, THREADS, METRICS };
static const char *const metric_names[METRICS] = { "throughput", "rss",
						   "threads" };
static const char *const metric_units[METRICS] = { "Mmsg/s", "MiB",
						   "threads" };

/* One message; an item serves one engine at a time. */
struct item {
	union {
		agr_message msg;
		struct peer_msg peer;
	} u;
	int id, seq;
};

struct config {
	long n;
	int ids, workers, groups, runs;
};

/* What one run of one engine measured. */
struct sample {
	double mps, rss_mib, threads;
	double abs_rss_mib, hwm_mib, setup_ms;
	double doorbells; /* aggring: wake-ups per message */
};

/* ---- /proc/self/status ---- */

struct status {
	long rss_kib, hwm_kib, threads;
};

static struct status read_status(void)
{
	struct status st = { -1, -1, -1 };
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	if (!f) {
		perror("scale: /proc/self/status");
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %ld", &st.rss_kib);
		sscanf(line, "VmHWM: %ld", &st.hwm_kib);
		sscanf(line, "Threads: %ld", &st.threads);
	}
	fclose(f);
	if (st.rss_kib < 0 || st.hwm_kib < 0 || st.threads < 0) {
		fprintf(stderr, "scale: /proc/self/status lacks VmRSS, VmHWM "
			"or Threads\n");
		exit(1);
	}
	return st;
}

/* ---- aggring: one dispatcher per aggregate, one supplier ---- */

static void agr_completed(agr_message *msg, int status, void *arg)
{
	struct item *it = msg->user;

	if (status != 0) {
		fprintf(stderr, "scale: message failed: %s\n",
			agr_strerror(status));
		exit(1);
	}
	bench_order_see(arg, it->id, it->seq);
}

static int agr_noop(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void agr_fail(const char *what, int ret)
{
	fprintf(stderr, "scale: %s: %s\n", what, agr_strerror(ret));
	exit(ret == -ENOSYS || ret == -EPERM ? 77 : 1);
}

static agr_dispatcher **agr_create(int aggregates, const struct config *c,
				   struct bench_order *o, agr_supplier **sup)
{
	agr_dispatcher **d = calloc((size_t)aggregates, sizeof(*d));
	char (*names)[32] = calloc((size_t)aggregates, sizeof(*names));
	int a, ret;

	if (!d || !names)
		exit(1);
	ret = agr_supplier_new("scale", c->workers, sup);
	if (ret)
		agr_fail("agr_supplier_new", ret);
	for (a = 0; a < aggregates; a++) {
		agr_dispatcher_options opt = {
			.name = "scale",
			.parallelism = c->groups,
			.supplier = *sup,
			.on_complete = agr_completed,
			.complete_arg = o,
		};

		/* The supplier copies the names into its cache key. */
		snprintf(names[a], sizeof(names[a]), "Aggregate%d", a);
		opt.named_aggregate.context_name = "scale";
		opt.named_aggregate.aggregate_name = names[a];
		ret = agr_dispatcher_new(&opt, &d[a]);
		if (ret)
			agr_fail("agr_dispatcher_new", ret);
		ret = agr_dispatcher_register(d[a], NULL, agr_noop, NULL);
		if (!ret)
			ret = agr_dispatcher_start(d[a]);
		if (ret)
			agr_fail("agr_dispatcher_start", ret);
	}
	if (agr_supplier_size(*sup) != aggregates) {
		fprintf(stderr, "scale: %d schedulers for %d aggregates\n",
			agr_supplier_size(*sup), aggregates);
		exit(1);
	}
	free(names);
	return d;
}

/* MSG_RING wake-ups of every worker of every scheduler so far. */
static uint64_t agr_doorbells(agr_dispatcher **d, int aggregates)
{
	uint64_t sum = 0;
	int a, i;

	for (a = 0; a < aggregates; a++) {
		agr_scheduler *s = agr_dispatcher_scheduler(d[a]);

		for (i = 0; i < agr_scheduler_parallelism(s); i++) {
			agr_worker_metrics m;

			if (agr_scheduler_worker_metrics(s, i, &m) == 0)
				sum += m.doorbells;
		}
	}
	return sum;
}

static void agr_destroy(agr_dispatcher **d, int aggregates,
			agr_supplier *sup)
{
	int a, ret;

	for (a = 0; a < aggregates; a++) {
		ret = agr_dispatcher_stop_gracefully(d[a], 60ull * 1000000000ull);
		if (ret)
			agr_fail("agr_dispatcher_stop_gracefully", ret);
		agr_dispatcher_free(d[a]);
	}
	ret = agr_supplier_stop_gracefully(sup, 60ull * 1000000000ull);
	if (ret)
		agr_fail("agr_supplier_stop_gracefully", ret);
	agr_supplier_free(sup);
	free(d);
}

/* ---- the pthread peer: one pool per aggregate ---- */

static void peer_handle(struct peer_msg **msgs, int n, void *arg)
{
	int i;

	for (i = 0; i < n; i++) {
		struct item *it = msgs[i]->user;

		bench_order_see(arg, it->id, it->seq);
	}
}

/* ---- one run ---- */

static void reset_items(struct item *items, long n, enum engine e,
			char (*names)[16])
{
	long i;

	for (i = 0; i < n; i++) {
		struct item *it = &items[i];

		memset(&it->u, 0, sizeof(it->u));
		if (e == AGGRING) {
			it->u.msg.aggregate_id = names[it->id];
			it->u.msg.user = it;
		} else {
			it->u.peer.id = names[it->id];
			it->u.peer.user = it;
		}
	}
}

/* One pthread pool per aggregate, as the peer of one scheduler each. */
static struct peer **pools_create(int aggregates, const struct config *c,
				  struct bench_order *o)
{
	struct peer **pools = calloc((size_t)aggregates, sizeof(*pools));
	int a;

	if (!pools)
		exit(1);
	for (a = 0; a < aggregates; a++) {
		pools[a] = peer_pthread.create(c->workers, c->groups,
					       peer_handle, o);
		if (!pools[a]) {
			fprintf(stderr, "scale: pthread pool\n");
			exit(1);
		}
	}
	return pools;
}

/* Sends every item to its aggregate's dispatcher (d) or pool. */
static void send_all(int aggregates, agr_dispatcher **d, struct peer **pools,
		     long n, struct item *items)
{
	long i;

	for (i = 0; i < n; i++) {
		int ret;

		if (!d) {
			peer_pthread.send(pools[items[i].id % aggregates],
					  &items[i].u.peer);
			continue;
		}
		ret = agr_dispatcher_send(d[items[i].id % aggregates],
					  &items[i].u.msg);
		if (ret)
			agr_fail("agr_dispatcher_send", ret);
	}
}

static struct sample run_once(enum engine e, int aggregates,
			      const struct config *c, struct item *items,
			      char (*names)[16])
{
	struct peer **pools = NULL;
	agr_dispatcher **d = NULL;
	agr_supplier *sup = NULL;
	struct status before, up;
	struct bench_order o;
	struct sample s;
	uint64_t t_setup, t0, t1;
	int a;

	reset_items(items, c->n, e, names);
	bench_order_init(&o, c->ids, c->n);
	before = read_status();
	t_setup = bench_now_ns();
	if (e == AGGRING)
		d = agr_create(aggregates, c, &o, &sup);
	else
		pools = pools_create(aggregates, c, &o);
	t0 = bench_now_ns();
	send_all(aggregates, d, pools, c->n, items);
	bench_order_wait(&o);
	t1 = bench_now_ns();
	up = read_status(); /* every scheduler (pool) is still up */
	s.doorbells = 0;
	if (e == AGGRING) {
		s.doorbells = (double)agr_doorbells(d, aggregates) /
			      (double)c->n;
		agr_destroy(d, aggregates, sup);
	} else {
		for (a = 0; a < aggregates; a++)
			peer_pthread.destroy(pools[a]);
		free(pools);
	}
	bench_order_verify(&o, engine_names[e]);
	bench_order_destroy(&o);
	s.mps = (double)c->n / ((double)(t1 - t0) / 1e9) / 1e6;
	s.rss_mib = (double)(up.rss_kib - before.rss_kib) / 1024.0;
	s.threads = (double)up.threads;
	s.abs_rss_mib = (double)up.rss_kib / 1024.0;
	s.hwm_mib = (double)up.hwm_kib / 1024.0;
	s.setup_ms = (double)(t0 - t_setup) / 1e6;
	return s;
}

/* ---- setup and report ---- */

static struct item *make_items(long n, int ids, char (**names)[16])
{
	struct item *items = calloc((size_t)n, sizeof(*items));
	int *seq = calloc((size_t)ids, sizeof(int));
	long i;
	int id;

	*names = calloc((size_t)ids, sizeof(**names));
	if (!items || !seq || !*names)
		exit(1);
	for (id = 0; id < ids; id++)
		snprintf((*names)[id], sizeof((*names)[id]), "id-%d", id);
	for (i = 0; i < n; i++) {
		items[i].id = (int)(i % ids);
		items[i].seq = seq[items[i].id]++;
	}
	free(seq);
	return items;
}

static int workers_for(int aggregates, int fixed)
{
	int w = bench_cpus() / aggregates;

	if (fixed)
		return fixed;
	return w > 0 ? w : 1;
}

/* What the command line sets; 0: the default. */
struct args {
	struct config base;
	int fixed_workers, fixed_groups;
	bool quick;
	const char *dir;
};

static void parse(int argc, char **argv, struct args *a)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_LONG('n', "MESSAGES", a->base.n, 1, 1L << 30,
			       "messages per run (default 1000000)"),
		BENCH_OPT_INT('i', "IDS", a->base.ids, 1, 1 << 24,
			      "distinct ids (default 10000)"),
		BENCH_OPT_INT('w', "WORKERS", a->fixed_workers, 1, 64,
			      "workers per scheduler / pool (default max(1, "
			      "CPUs / aggregates))"),
		BENCH_OPT_INT('g', "GROUPS", a->fixed_groups, 1, 1 << 20,
			      "groups per dispatcher / pool (default 64 x "
			      "workers)"),
		BENCH_OPT_INT('r', "RUNS", a->base.runs, 1, MAX_RUNS,
			      "runs per engine and variant (default 5)"),
		BENCH_OPT_SET('q', a->quick,
			      "quick smoke run: -n 100000 -r 3 (unless given)"),
		BENCH_OPT_TEXT('o', "DIR", a->dir, "write DIR/scale.csv"),
		BENCH_OPT_END,
	};

	bench_options(argc, argv, WORKLOAD, opts);
	if (!a->base.n)
		a->base.n = a->quick ? 100000 : 1000000;
	if (!a->base.runs)
		a->base.runs = a->quick ? 3 : 5;
}

/* What the runs measured, by variant, engine, metric (and run). */
struct results {
	double val[VARIANTS][ENGINES][METRICS][MAX_RUNS];
	struct sample last[VARIANTS][ENGINES];
	struct bench_summary s[VARIANTS][ENGINES][METRICS];
};

static void print_plan(const struct args *a)
{
	int v;

	printf("%s: %ld no-op messages over %d ids (id i -> aggregate i %% A), "
	       "one producer, single sends, %d runs, engines alternating\n",
	       WORKLOAD, a->base.n, a->base.ids, a->base.runs);
	for (v = 0; v < VARIANTS; v++) {
		int w = workers_for(variants[v], a->fixed_workers);
		int g = a->fixed_groups ? a->fixed_groups : 64 * w;

		printf("  %3d aggregates: %d schedulers (pthread: pools) of "
		       "%d workers, %d groups each\n", variants[v],
		       variants[v], w, g);
	}
	fflush(stdout);
}

static void run_rounds(const struct args *a, struct item *items,
		       char (*names)[16], struct results *res)
{
	int r, v, e;

	for (r = 0; r < a->base.runs; r++) {
		for (v = 0; v < VARIANTS; v++) {
			struct config c = a->base;

			c.workers = workers_for(variants[v], a->fixed_workers);
			c.groups = a->fixed_groups ? a->fixed_groups :
						     64 * c.workers;
			for (e = 0; e < ENGINES; e++) {
				/* Who goes first alternates by round. */
				enum engine en = (enum engine)((e + r) %
							       ENGINES);
				struct sample x;

				x = run_once(en, variants[v], &c, items, names);
				res->val[v][en][THROUGHPUT][r] = x.mps;
				res->val[v][en][RSS][r] = x.rss_mib;
				res->val[v][en][THREADS][r] = x.threads;
				res->last[v][en] = x;
			}
		}
	}
}

/* One variant's rows, printed and written to the CSV. */
static void report_variant(int v, int runs, struct results *res, FILE *csv)
{
	char variant[16];
	int e, m;

	snprintf(variant, sizeof(variant), "%d", variants[v]);
	printf("%d aggregate%s:\n", variants[v], variants[v] > 1 ? "s" : "");
	for (e = 0; e < ENGINES; e++) {
		const struct sample *last = &res->last[v][e];

		for (m = 0; m < METRICS; m++) {
			struct bench_summary *sm = &res->s[v][e][m];
			char label[48];

			*sm = bench_summarize(res->val[v][e][m], runs);
			snprintf(label, sizeof(label), "%s %s",
				 engine_names[e], metric_names[m]);
			bench_print_row(label, metric_units[m], *sm);
			bench_csv_row(csv, WORKLOAD, variant, engine_names[e],
				      metric_names[m], metric_units[m], *sm,
				      runs);
		}
		printf("  %-18s (last run: VmRSS %.1f MiB, VmHWM so "
		       "far %.1f MiB, setup %.1f ms", engine_names[e],
		       last->abs_rss_mib, last->hwm_mib, last->setup_ms);
		if (e == AGGRING)
			printf(", %.3f doorbells per message", last->doorbells);
		printf(")\n");
	}
}

static void print_ratios(const struct results *res)
{
	const struct bench_summary(*s)[ENGINES][METRICS] = res->s;
	int v, e;

	printf("ratios (medians):\n");
	for (v = 0; v < VARIANTS; v++)
		printf("  %3d aggregates: aggring / pthread throughput %.2f, "
		       "RSS %.2f (%.1f vs %.1f MiB), threads %.0f vs %.0f\n",
		       variants[v],
		       s[v][AGGRING][THROUGHPUT].median /
			       s[v][PTHREAD][THROUGHPUT].median,
		       s[v][PTHREAD][RSS].median > 0 ?
			       s[v][AGGRING][RSS].median /
				       s[v][PTHREAD][RSS].median : 0,
		       s[v][AGGRING][RSS].median, s[v][PTHREAD][RSS].median,
		       s[v][AGGRING][THREADS].median,
		       s[v][PTHREAD][THREADS].median);
	for (e = 0; e < ENGINES; e++)
		printf("  %s throughput, 16 / 1 aggregates %.2f, 256 / 1 "
		       "aggregates %.2f\n", engine_names[e],
		       s[1][e][THROUGHPUT].median / s[0][e][THROUGHPUT].median,
		       s[2][e][THROUGHPUT].median / s[0][e][THROUGHPUT].median);
}

int main(int argc, char **argv)
{
	struct args a = { .base = { .ids = 10000 } };
	static struct results res;
	char (*names)[16];
	struct item *items;
	FILE *csv;
	int v;

	parse(argc, argv, &a);
	items = make_items(a.base.n, a.base.ids, &names);
	csv = bench_csv_open(a.dir, WORKLOAD);
	bench_print_env(stdout, WORKLOAD);
	print_plan(&a);
	run_rounds(&a, items, names, &res);
	for (v = 0; v < VARIANTS; v++)
		report_variant(v, a.base.runs, &res, csv);
	print_ratios(&res);
	bench_csv_close(csv);
	free(items);
	free(names);
	return 0;
}
