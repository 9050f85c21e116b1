/* SPDX-License-Identifier: MIT */
/*
 * harness.c - shared by every benchmark; see harness.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <errno.h>
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

void bench_order_init(struct bench_order *o, int ids, long n)
{
	o->n = n;
	o->ids = ids;
	o->next_seq = calloc((size_t)ids, sizeof(int));
	if (!o->next_seq)
		exit(1);
	atomic_init(&o->seen, 0);
	atomic_init(&o->broken, 0);
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->all_seen, NULL);
}

void bench_order_see(struct bench_order *o, int id, int seq)
{
	if (id < 0 || id >= o->ids || o->next_seq[id] != seq)
		atomic_fetch_add_explicit(&o->broken, 1, memory_order_relaxed);
	else
		o->next_seq[id] = seq + 1;
	if (atomic_fetch_add_explicit(&o->seen, 1, memory_order_acq_rel) + 1 ==
	    o->n) {
		pthread_mutex_lock(&o->lock);
		pthread_cond_broadcast(&o->all_seen);
		pthread_mutex_unlock(&o->lock);
	}
}

void bench_order_wait(struct bench_order *o)
{
	pthread_mutex_lock(&o->lock);
	while (atomic_load(&o->seen) < o->n)
		pthread_cond_wait(&o->all_seen, &o->lock);
	pthread_mutex_unlock(&o->lock);
}

void bench_order_verify(struct bench_order *o, const char *engine)
{
	if (atomic_load(&o->broken) == 0 && atomic_load(&o->seen) == o->n)
		return;
	fprintf(stderr, "%s broke per-id order or exactly-once completion "
		"(%ld of %ld seen, %ld out of order); no result reported\n",
		engine, atomic_load(&o->seen), o->n, atomic_load(&o->broken));
	exit(1);
}

void bench_order_destroy(struct bench_order *o)
{
	free(o->next_seq);
	pthread_cond_destroy(&o->all_seen);
	pthread_mutex_destroy(&o->lock);
}

long bench_number(const char *arg, long min, long max, const char *usage)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "bad number '%s' (%ld..%ld)\n%s\n", arg, min,
			max, usage);
		exit(2);
	}
	return v;
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
