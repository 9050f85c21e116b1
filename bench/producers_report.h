/* SPDX-License-Identifier: MIT */
/*
 * bench/producers_report.h - what bench/producers measures in a run,
 * and its report of the runs of one (producer count, kind).
 */
#ifndef BENCH_PRODUCERS_REPORT_H
#define BENCH_PRODUCERS_REPORT_H

#include <stdio.h>

#define MAX_RUNS 1000

/* Engines by number: aggring's single and batched sends, the peers. */
enum engine { AGR_SINGLE, AGR_BATCH, FIRST_PEER };

/* What each run measures besides the rate. */
enum counter { CPU_NS, SWITCHES, DOORBELLS, PER_ACTIVATION, COUNTERS };

/* What one run measured. */
struct sample {
	double rate; /* M msg/s */
	double counter[COUNTERS];
};

/* The runs of one (producer count, kind) and what they ran under. */
struct report {
	const char *kind; /* "foreign" or "worker" */
	int nprod, ids, groups, workers, runs, nengines;
	long n;
	const char *(*engine_name)(int e);
	struct sample (*v)[MAX_RUNS]; /* by engine, then run */
};

/* Prints the report and writes its CSV rows to csv. */
void report_print(const struct report *rp, FILE *csv);

#endif
