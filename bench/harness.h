/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what every benchmark in bench/ shares: a clock, the
 * median/min/max of repeated runs, the per-id order and exactly-once
 * checker every engine's handler calls, and the CSV rows that
 * bench/plot.sh and bench/RESULTS.md are made from.
 *
 * CSV (one file per workload, bench/results/<workload>.csv):
 *   workload,variant,engine,metric,unit,median,min,max,runs
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <aggring.h>

uint64_t bench_now_ns(void);
int bench_cpus(void);

struct bench_summary {
	double median, min, max;
	double spread; /* (max - min) / median */
	/* (third quartile - first) / median: how far the middle half of
	 * the runs spread, whatever the slowest and fastest did. */
	double middle_spread;
};

/* Sorts v in place. */
struct bench_summary bench_summarize(double *v, int runs);

/* Machine, kernel, CPU count and aggring version on one line. */
void bench_print_env(FILE *out, const char *workload);

/*
 * Opens <dir>/<workload>.csv for writing (truncates) and writes the
 * header; NULL dir means no CSV (returns NULL, rows are then ignored).
 */
FILE *bench_csv_open(const char *dir, const char *workload);
void bench_csv_row(FILE *csv, const char *workload, const char *variant,
		   const char *engine, const char *metric, const char *unit,
		   struct bench_summary s, int runs);
void bench_csv_close(FILE *csv);

/* Prints "  engine  median X unit  min  max  spread" to stdout. */
void bench_print_row(const char *engine, const char *unit,
		     struct bench_summary s);

/*
 * Per-id order and exactly-once completion. Messages of id i carry
 * seq 0, 1, 2, ... in send order; bench_order_see() is called by the
 * handler of every engine (from the id's group only, so next_seq needs
 * no lock), bench_order_wait() blocks until n were seen.
 */
struct bench_order {
	long n;
	int ids;
	int *next_seq;
	atomic_long seen;
	atomic_long broken;
	pthread_mutex_t lock;
	pthread_cond_t all_seen;
};

void bench_order_init(struct bench_order *o, int ids, long n);
void bench_order_see(struct bench_order *o, int id, int seq);
void bench_order_wait(struct bench_order *o);
/* Exits(1) naming engine if order or exactly-once broke. */
void bench_order_verify(struct bench_order *o, const char *engine);
void bench_order_destroy(struct bench_order *o);

/*
 * A started dispatcher on a supplier of its own (`workers` workers, 0:
 * CPUs): *o's supplier is set here and owned by the dispatcher, `fn`
 * handles every message type. Exits 77 when io_uring is unavailable and
 * 1 on any other error, naming workload.
 */
agr_dispatcher *bench_agr_start(const char *workload, int workers,
				agr_dispatcher_options *o, agr_handler_fn fn,
				void *fn_arg);
/* Stops d gracefully (exits 1 if that fails) and frees it. */
void bench_agr_stop(const char *workload, agr_dispatcher *d);

/*
 * Where a workload's files go: `asked` (exits 2 if it is tmpfs or
 * ramfs, saying `why` a disk is needed), else /var/tmp, else ".".
 */
const char *bench_disk_dir(const char *workload, const char *asked,
			   const char *why);

/* strtol with a range check; exits(2) with usage text on bad input. */
long bench_number(const char *arg, long min, long max, const char *usage);

#endif /* BENCH_HARNESS_H */
