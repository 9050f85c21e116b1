/* SPDX-License-Identifier: MIT */
/*
 * harness.c - shared by every benchmark; see harness.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bench_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct bench_summary bench_summarize(double *v, int runs)
{
	struct bench_summary s;
	int q;

	qsort(v, (size_t)runs, sizeof(*v), cmp_double);
	s.median = runs % 2 ? v[runs / 2] : (v[runs / 2 - 1] + v[runs / 2]) / 2;
	s.min = v[0];
	s.max = v[runs - 1];
	s.spread = s.median != 0 ? (s.max - s.min) / s.median : 0;
	/* Nearest-rank quartiles: with under 5 runs, min and max. */
	q = (runs - 1) / 4;
	s.middle_spread = s.median != 0 ?
				  (v[runs - 1 - q] - v[q]) / s.median : 0;
	return s;
}

void bench_print_env(FILE *out, const char *workload)
{
	struct utsname u;

	uname(&u);
	fprintf(out, "%s: %s %s %s, %d CPUs, aggring %s\n", workload,
		u.sysname, u.release, u.machine, bench_cpus(), agr_version());
}

FILE *bench_csv_open(const char *dir, const char *workload)
{
	char path[4096];
	FILE *f;

	if (!dir)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s.csv", dir, workload);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", workload, path,
			strerror(errno));
		exit(1);
	}
	fprintf(f, "workload,variant,engine,metric,unit,median,min,max,runs\n");
	return f;
}

void bench_csv_row(FILE *csv, const char *workload, const char *variant,
		   const char *engine, const char *metric, const char *unit,
		   struct bench_summary s, int runs)
{
	if (!csv)
		return;
	fprintf(csv, "%s,%s,%s,%s,%s,%.6g,%.6g,%.6g,%d\n", workload, variant,
		engine, metric, unit, s.median, s.min, s.max, runs);
	fflush(csv);
}

void bench_csv_close(FILE *csv)
{
	if (csv)
		fclose(csv);
}

void bench_print_row(const char *engine, const char *unit,
		     struct bench_summary s)
{
	printf("  %-18s median %10.3f %-6s min %10.3f  max %10.3f  "
	       "spread %4.0f%%\n", engine, s.median, unit, s.min, s.max,
	       s.spread * 100);
}

static struct bench_order_line *order_lines(size_t n)
{
	struct bench_order_line *l;

	if (posix_memalign((void **)&l, 64, n * sizeof(*l)))
		exit(1);
	memset(l, 0, n * sizeof(*l));
	return l;
}

void bench_order_init(struct bench_order *o, int ids, long n)
{
	o->n = n;
	o->ids = ids;
	o->next_seq = order_lines(ids > 0 ? (size_t)ids : 1);
	o->seen = order_lines(BENCH_ORDER_SLOTS);
	atomic_init(&o->broken, 0);
}

/* The calling thread's counting slot, taken in turn at its first look. */
static unsigned order_slot(void)
{
	static atomic_uint next;
	static _Thread_local unsigned mine;

	if (!mine)
		mine = 1 + atomic_fetch_add(&next, 1) % BENCH_ORDER_SLOTS;
	return mine - 1;
}

void bench_order_see(struct bench_order *o, int id, int seq)
{
	atomic_long *next;

	if (id < 0 || id >= o->ids) {
		atomic_fetch_add_explicit(&o->broken, 1, memory_order_relaxed);
	} else {
		next = &o->next_seq[id].value;
		if (atomic_load_explicit(next, memory_order_relaxed) != seq)
			atomic_fetch_add_explicit(&o->broken, 1,
						  memory_order_relaxed);
		else
			atomic_store_explicit(next, seq + 1,
					      memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&o->seen[order_slot()].value, 1,
				  memory_order_release);
}

static long order_seen(struct bench_order *o)
{
	long sum = 0;
	int i;

	for (i = 0; i < BENCH_ORDER_SLOTS; i++)
		sum += atomic_load_explicit(&o->seen[i].value,
					    memory_order_acquire);
	return sum;
}

void bench_order_wait(struct bench_order *o)
{
	const struct timespec tick = { 0, 20000 };

	while (order_seen(o) < o->n)
		nanosleep(&tick, NULL);
}

void bench_order_verify(struct bench_order *o, const char *engine)
{
	long seen = order_seen(o);

	if (atomic_load(&o->broken) == 0 && seen == o->n)
		return;
	fprintf(stderr, "%s broke per-id order or exactly-once completion "
		"(%ld of %ld seen, %ld out of order); no result reported\n",
		engine, seen, o->n, atomic_load(&o->broken));
	exit(1);
}

void bench_order_destroy(struct bench_order *o)
{
	free(o->next_seq);
	free(o->seen);
}

/* ---- command-line options ---- */

#define USAGE_WIDTH 79
#define MAX_OPTS 32 /* entries of one table */

/* "-x ARG", as the usage and the help show the option. */
static void opt_name(const struct bench_opt *o, char *buf, size_t len)
{
	snprintf(buf, len, "-%c%s%s", o->letter, o->arg ? " " : "",
		 o->arg ? o->arg : "");
}

/* "usage: prog [-a] -b ARG ...", wrapped under the program's name. */
static void print_usage(FILE *out, const char *program,
			const struct bench_opt *opts)
{
	int indent = (int)strlen("usage: ") + (int)strlen(program);
	int col = fprintf(out, "usage: %s", program);
	char name[64], item[72];
	const struct bench_opt *o;
	int len;

	for (o = opts; o->letter; o++) {
		opt_name(o, name, sizeof(name));
		len = snprintf(item, sizeof(item), o->required ? "%s" : "[%s]",
			       name);
		if (col + 1 + len > USAGE_WIDTH)
			col = fprintf(out, "\n%*s", indent, "") - 1;
		col += fprintf(out, " %s", item);
	}
	fputc('\n', out);
}

/* "  -x ARG  text", the text's further lines indented as its first. */
static void print_opt_help(const char *name, int width, const char *help)
{
	const char *p;

	printf("  %-*s  ", width, name);
	for (p = help; *p; p++) {
		putchar(*p);
		if (*p == '\n')
			printf("  %-*s  ", width, "");
	}
	putchar('\n');
}

static void print_help(const char *program, const struct bench_opt *opts)
{
	const char *help_name = "-h, --help";
	int width = (int)strlen(help_name);
	const struct bench_opt *o;
	char name[64];

	print_usage(stdout, program, opts);
	for (o = opts; o->letter; o++) {
		opt_name(o, name, sizeof(name));
		if ((int)strlen(name) > width)
			width = (int)strlen(name);
	}
	for (o = opts; o->letter; o++) {
		opt_name(o, name, sizeof(name));
		print_opt_help(name, width, o->help);
	}
	print_opt_help(help_name, width, "print this help and exit");
}

/* Says what was wrong with the command line, then the usage; exits 2. */
static void bad_usage(const char *program, const struct bench_opt *opts,
		      const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

static void bad_usage(const char *program, const struct bench_opt *opts,
		      const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	print_usage(stderr, program, opts);
	fprintf(stderr, "(%s --help: what each option means)\n", program);
	exit(2);
}

/* The whole number arg is, if it is one in [o->min, o->max]. */
static long opt_number(const char *program, const struct bench_opt *opts,
		       const struct bench_opt *o, const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < o->min || v > o->max)
		bad_usage(program, opts,
			  "-%c %s: '%s' is not a whole number from %ld to %ld",
			  o->letter, o->arg, arg, o->min, o->max);
	return v;
}

static void opt_apply(const char *program, const struct bench_opt *opts,
		      const struct bench_opt *o, const char *arg)
{
	long v;

	switch (o->kind) {
	case BENCH_KIND_SET:
		*o->to.flag = true;
		break;
	case BENCH_KIND_CALL:
		o->call(o->to.ctx);
		break;
	case BENCH_KIND_TEXT:
		*o->to.text = arg;
		break;
	case BENCH_KIND_INT:
		*o->to.i = (int)opt_number(program, opts, o, arg);
		break;
	case BENCH_KIND_LONG:
		*o->to.l = opt_number(program, opts, o, arg);
		break;
	case BENCH_KIND_DOUBLE:
		v = opt_number(program, opts, o, arg);
		*o->to.d = (double)v;
		break;
	}
}

/* getopt's option string for the table, "h" included. */
static void opt_string(const char *program, const struct bench_opt *opts,
		       char *buf)
{
	const struct bench_opt *o;
	size_t n = 0;

	buf[n++] = ':'; /* a missing argument is ':', not '?' */
	for (o = opts; o->letter; o++) {
		if (o->letter == 'h' || o->letter == ':' ||
		    o - opts >= MAX_OPTS) {
			fprintf(stderr, "%s: bad option table at -%c\n",
				program, o->letter);
			exit(1);
		}
		buf[n++] = o->letter;
		if (o->arg)
			buf[n++] = ':';
	}
	buf[n++] = 'h';
	buf[n] = '\0';
}

static const struct bench_opt *opt_find(const struct bench_opt *opts, int c)
{
	const struct bench_opt *o;

	for (o = opts; o->letter; o++)
		if (o->letter == c)
			return o;
	return NULL;
}

/* The entry of what getopt_long() returned; exits on -h and on faults. */
static const struct bench_opt *opt_seen(const char *program,
					const struct bench_opt *opts, int c,
					const char *word)
{
	if (c == 'h') {
		print_help(program, opts);
		exit(0);
	}
	if (c == ':')
		bad_usage(program, opts, "-%c needs an argument (%s)", optopt,
			  opt_find(opts, optopt)->arg);
	if (c == '?' && optopt && optopt != 'h')
		bad_usage(program, opts, "unknown option -%c", optopt);
	if (c == '?')
		bad_usage(program, opts, "unknown option %s", word);
	return opt_find(opts, c);
}

static void check_required(const char *program, const struct bench_opt *opts,
			   const bool *given)
{
	const struct bench_opt *o;
	char name[64];

	for (o = opts; o->letter; o++)
		if (o->required && !given[o - opts]) {
			opt_name(o, name, sizeof(name));
			bad_usage(program, opts, "%s is required", name);
		}
}

void bench_options(int argc, char **argv, const char *program,
		   const struct bench_opt *opts)
{
	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char optstring[2 * MAX_OPTS + 3];
	bool given[MAX_OPTS] = { false };
	const struct bench_opt *o;
	int c;

	opt_string(program, opts, optstring);
	opterr = 0; /* our messages, not getopt's */
	while ((c = getopt_long(argc, argv, optstring, longs, NULL)) != -1) {
		o = opt_seen(program, opts, c, argv[optind - 1]);
		given[o - opts] = true;
		opt_apply(program, opts, o, optarg);
	}
	if (optind < argc)
		bad_usage(program, opts, "unexpected argument '%s'",
			  argv[optind]);
	check_required(program, opts, given);
}

void bench_timed_init(struct bench_timed *t)
{
	*t = (struct bench_timed){ .seconds = 2, .runs = 5,
				   .peer_threads = bench_cpus() };
}

void bench_timed_quick(void *t)
{
	struct bench_timed *timed = t;

	timed->seconds = 0.3;
	timed->runs = 3;
}

agr_dispatcher *bench_agr_start(const char *workload, int workers,
				agr_dispatcher_options *o, agr_handler_fn fn,
				void *fn_arg)
{
	agr_dispatcher *d = NULL;
	agr_supplier *sup;
	int ret;

	ret = agr_supplier_new("bench", workers, &sup);
	if (!ret) {
		o->supplier = sup;
		o->owns_supplier = true;
		ret = agr_dispatcher_new(o, &d);
		if (ret)
			agr_supplier_free(sup);
	}
	if (!ret)
		ret = agr_dispatcher_register(d, NULL, fn, fn_arg);
	if (!ret)
		ret = agr_dispatcher_start(d);
	if (ret) {
		fprintf(stderr, "%s: aggring setup failed: %s\n", workload,
			agr_strerror(ret));
		exit(ret == -ENOSYS || ret == -EPERM ? 77 : 1);
	}
	return d;
}

void bench_agr_stop(const char *workload, agr_dispatcher *d)
{
	int ret = agr_dispatcher_stop_gracefully(d, 60ull * 1000000000ull);

	if (ret) {
		fprintf(stderr, "%s: stop: %s\n", workload, agr_strerror(ret));
		exit(1);
	}
	agr_dispatcher_free(d);
}

static bool on_memory_fs(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf) < 0)
		return false;
	return sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC;
}

const char *bench_disk_dir(const char *workload, const char *asked,
			   const char *why)
{
	if (asked) {
		if (on_memory_fs(asked)) {
			fprintf(stderr, "%s: %s is tmpfs/ramfs, %s; use a disk "
				"(-d)\n", workload, asked, why);
			exit(2);
		}
		return asked;
	}
	if (access("/var/tmp", W_OK) == 0 && !on_memory_fs("/var/tmp"))
		return "/var/tmp";
	if (on_memory_fs(".")) {
		fprintf(stderr, "%s: neither /var/tmp nor . is on a disk "
			"filesystem; pass -d DIR\n", workload);
		exit(2);
	}
	return ".";
}
