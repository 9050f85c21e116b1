/* SPDX-License-Identifier: MIT */
/*
 * bench/producers_report.c - bench/producers' report of one (P, kind):
 * each engine's rate (median, min, max), the ratios its targets are
 * about, the counters that explain them and aggring's slowest and
 * fastest run; the same as CSV rows.
 */
#include "config.h"

#include <stdio.h>

#include "harness.h"
#include "producers_report.h"

#define WORKLOAD "producers"

static const char *const counter_metrics[COUNTERS] = {
	"cpu_ns_per_msg", "switches_per_kmsg", "doorbells_per_msg",
	"msgs_per_activation"
};
static const char *const counter_units[COUNTERS] = { "ns", "count", "count",
						     "count" };

static void print_ratio(const char *what, double ratio, double target)
{
	if (target > 0)
		printf("  %-34s %6.3f  (target >= %.1f: %s)\n", what, ratio,
		       target, ratio >= target ? "met" : "MISSED");
	else
		printf("  %-34s %6.3f  (no target)\n", what, ratio);
}

static double median_of(double *v, int runs)
{
	return bench_summarize(v, runs).median;
}

/* The counters' medians per engine; aggring's engine counters too. */
static void print_counters(const struct report *rp)
{
	struct sample (*v)[MAX_RUNS] = rp->v;
	int runs = rp->runs;
	double x[MAX_RUNS];
	int e, k, r;

	printf("  counters, median of runs: %-8s %12s %14s %14s %12s\n", "",
	       "cpu ns/msg", "switches/kmsg", "doorbells/msg", "msgs/activ");
	for (e = 0; e < rp->nengines; e++) {
		printf("    %-32s", rp->engine_name(e));
		for (k = 0; k < COUNTERS; k++) {
			if (e >= FIRST_PEER && k >= DOORBELLS) {
				printf(" %14s", "-");
				continue;
			}
			for (r = 0; r < runs; r++)
				x[r] = v[e][r].counter[k];
			printf(k == CPU_NS ? " %12.1f" : " %14.4f",
			       median_of(x, runs));
		}
		printf("\n");
	}
}

/*
 * aggring's slowest and fastest runs with the messages each ran per
 * activation and its doorbells per message: a bimodal engine shows as
 * one mode in each.
 */
static void print_modes(const struct report *rp)
{
	struct sample (*v)[MAX_RUNS] = rp->v;
	int runs = rp->runs;
	const struct sample *slow, *fast;
	int e, r;

	for (e = 0; e < FIRST_PEER; e++) {
		slow = fast = &v[e][0];
		for (r = 1; r < runs; r++) {
			if (v[e][r].rate < slow->rate)
				slow = &v[e][r];
			if (v[e][r].rate > fast->rate)
				fast = &v[e][r];
		}
		printf("  %-18s slowest %6.2f M/s at %5.1f msgs/activation, "
		       "%.4f doorbells/msg; fastest %6.2f at %5.1f, %.4f\n",
		       rp->engine_name(e), slow->rate,
		       slow->counter[PER_ACTIVATION], slow->counter[DOORBELLS],
		       fast->rate, fast->counter[PER_ACTIVATION],
		       fast->counter[DOORBELLS]);
	}
}

static void csv_counters(const struct report *rp, FILE *csv,
			 const char *variant)
{
	struct sample (*v)[MAX_RUNS] = rp->v;
	int runs = rp->runs;
	double x[MAX_RUNS];
	int e, k, r;

	for (e = 0; e < rp->nengines; e++)
		for (k = 0; k < COUNTERS; k++) {
			if (e >= FIRST_PEER && k >= DOORBELLS)
				continue;
			for (r = 0; r < runs; r++)
				x[r] = v[e][r].counter[k];
			bench_csv_row(csv, WORKLOAD, variant,
				      rp->engine_name(e), counter_metrics[k],
				      counter_units[k],
				      bench_summarize(x, runs), runs);
		}
}

/* Rates: rows and CSV into s[]; returns the best peer (-1: none). */
static int print_rates(const struct report *rp, FILE *csv,
		       const char *variant, struct bench_summary *s)
{
	struct sample (*v)[MAX_RUNS] = rp->v;
	int runs = rp->runs;
	double x[MAX_RUNS];
	int e, r, best = -1;

	for (e = 0; e < rp->nengines; e++) {
		for (r = 0; r < runs; r++)
			x[r] = v[e][r].rate;
		s[e] = bench_summarize(x, runs);
		bench_print_row(rp->engine_name(e), "M/s", s[e]);
		bench_csv_row(csv, WORKLOAD, variant, rp->engine_name(e),
			      "throughput", "Mmsg/s", s[e], runs);
		if (e >= FIRST_PEER &&
		    (best < 0 || s[e].median > s[best].median))
			best = e;
	}
	return best;
}

void report_print(const struct report *rp, FILE *csv)
{
	double target = rp->nprod >= 4 ? 1.0 : 0;
	struct bench_summary s[rp->nengines];
	char variant[32], what[64];
	int e, best;

	snprintf(variant, sizeof(variant), "P%d-%s", rp->nprod, rp->kind);
	printf("\n%s: %s: %d %s producer%s, %ld no-op messages over %d ids "
	       "(%d per producer), %d groups, %d workers, %d runs "
	       "(M msg/s)\n", WORKLOAD, variant, rp->nprod, rp->kind,
	       rp->nprod == 1 ? "" : "s", rp->n,
	       rp->nprod * (rp->ids / rp->nprod), rp->ids / rp->nprod,
	       rp->groups, rp->workers, rp->runs);
	best = print_rates(rp, csv, variant, s);
	if (best >= 0) {
		printf("  best peer: %s\n", rp->engine_name(best));
		print_ratio("aggring single / best peer",
			    s[AGR_SINGLE].median / s[best].median, target);
		snprintf(what, sizeof(what), "%s / best peer",
			 rp->engine_name(AGR_BATCH));
		print_ratio(what, s[AGR_BATCH].median / s[best].median,
			    target);
	}
	printf("  slowest run / median (target >= 0.6):");
	for (e = 0; e < rp->nengines; e++)
		printf(" %s %.2f%s", rp->engine_name(e), s[e].min / s[e].median,
		       s[e].min >= 0.6 * s[e].median ? "" : " MISSED");
	printf("\n");
	print_counters(rp);
	print_modes(rp);
	csv_counters(rp, csv, variant);
}
