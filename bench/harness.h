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
#include <stdbool.h>
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
 * no lock), bench_order_wait() returns once n were seen.
 *
 * The check must not be what limits the engines it checks: a count
 * that every worker adds to, or ids of different workers on one line,
 * would move cache lines between the workers on every message (on 16
 * cores that capped every engine near 12 M msg/s). So each id's
 * expected seq has a line of its own, each thread counts in a slot of
 * its own, and the waiter adds the slots up, looking every 20 us.
 */
#define BENCH_ORDER_SLOTS 64

struct bench_order_line {
	_Alignas(64) atomic_long value;
};

struct bench_order {
	long n;
	int ids;
	struct bench_order_line *next_seq; /* per id */
	struct bench_order_line *seen;	   /* per thread slot */
	atomic_long broken;
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

/*
 * Command-line options: a program describes its options in a table,
 * one entry each (the BENCH_OPT_* macros; a required option spelt out
 * with .required; BENCH_OPT_END last), and bench_options() reads argv
 * against it in order, as getopt does, so that a later option overrides
 * what an earlier one (a -q, say) set. -h and --help print the usage
 * and every entry's help, made from the table, to stdout and exit 0.
 * An unknown option, a missing or bad argument (numbers are whole, in
 * [min, max]), a required option not given or a word that is no option
 * prints what was wrong and the usage to stderr and exits 2.
 */
enum bench_opt_kind {
	BENCH_KIND_SET,	   /* no argument: *flag = true */
	BENCH_KIND_CALL,   /* no argument: call(ctx) */
	BENCH_KIND_TEXT,   /* *text = the argument */
	BENCH_KIND_INT,	   /* *i = the number */
	BENCH_KIND_LONG,   /* *l = the number */
	BENCH_KIND_DOUBLE, /* *d = the (whole) number */
};

struct bench_opt {
	char letter;	  /* -letter; 0 ends the table */
	const char *arg;  /* the argument's name in the usage; NULL: none */
	const char *help; /* may hold '\n' for more lines */
	enum bench_opt_kind kind;
	union {
		bool *flag;
		const char **text;
		int *i;
		long *l;
		double *d;
		void *ctx;
	} to;
	long min, max;
	void (*call)(void *ctx);
	bool required;
};

#define BENCH_OPT_NUMBER_(kind_, member, c, name, var, lo, hi, help_)     \
	{ .letter = (c), .arg = (name), .help = (help_), .kind = (kind_), \
	  .to.member = &(var), .min = (lo), .max = (hi) }
#define BENCH_OPT_INT(c, name, var, lo, hi, help_)                        \
	BENCH_OPT_NUMBER_(BENCH_KIND_INT, i, c, name, var, lo, hi, help_)
#define BENCH_OPT_LONG(c, name, var, lo, hi, help_)                       \
	BENCH_OPT_NUMBER_(BENCH_KIND_LONG, l, c, name, var, lo, hi, help_)
#define BENCH_OPT_DOUBLE(c, name, var, lo, hi, help_)                     \
	BENCH_OPT_NUMBER_(BENCH_KIND_DOUBLE, d, c, name, var, lo, hi, help_)
#define BENCH_OPT_TEXT(c, name, var, help_)                               \
	{ .letter = (c), .arg = (name), .help = (help_),                  \
	  .kind = BENCH_KIND_TEXT, .to.text = &(var) }
#define BENCH_OPT_SET(c, var, help_)                                      \
	{ .letter = (c), .help = (help_), .kind = BENCH_KIND_SET,         \
	  .to.flag = &(var) }
#define BENCH_OPT_CALL(c, fn, arg_, help_)                                \
	{ .letter = (c), .help = (help_), .kind = BENCH_KIND_CALL,        \
	  .to.ctx = (arg_), .call = (fn) }
#define BENCH_OPT_END { .letter = 0 }

/* `program` names it in the usage and in every message. */
void bench_options(int argc, char **argv, const char *program,
		   const struct bench_opt *opts);

/*
 * What the timed workloads against the peers' pools (journal,
 * direct_read) set alike: BENCH_OPTS_TIMED(t, csv_help) are the table
 * entries -s SECONDS, -r RUNS, -T THREADS, -o CSVDIR and -q of t.
 */
struct bench_timed {
	double seconds;	     /* length of one run */
	int runs;	     /* per engine */
	int peer_threads;    /* pool threads of the peers */
	const char *csv_dir; /* NULL: no CSV */
};

/* 2 s, 5 runs, a peer thread per CPU (as aggring's workers), no CSV. */
void bench_timed_init(struct bench_timed *t);
/* -q: 0.3 s, 3 runs; t is a struct bench_timed. */
void bench_timed_quick(void *t);

#define BENCH_OPTS_TIMED(t, csv_help)                                     \
	BENCH_OPT_DOUBLE('s', "SECONDS", (t).seconds, 1, 600,             \
			 "length of one run (default 2)"),                \
	BENCH_OPT_INT('r', "RUNS", (t).runs, 1, 1000,                     \
		      "runs per engine (default 5)"),                     \
	BENCH_OPT_INT('T', "THREADS", (t).peer_threads, 1, 4096,          \
		      "pool threads of the peers (default: CPUs, as "     \
		      "many\nas aggring's workers)"),                     \
	BENCH_OPT_TEXT('o', "CSVDIR", (t).csv_dir, (csv_help)),           \
	BENCH_OPT_CALL('q', bench_timed_quick, &(t),                      \
		       "quick smoke run: -s 0.3 -r 3")

#endif /* BENCH_HARNESS_H */
