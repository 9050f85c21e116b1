/* SPDX-License-Identifier: MIT */
/*
 * metrics_test.h - what the files of check_metrics share: test
 * messages and handlers, suppliers, schedulers and dispatchers, and the
 * strict reader of the Prometheus text format (prom_reader.c).
 */
#ifndef TESTS_METRICS_TEST_H
#define TESTS_METRICS_TEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

#define US 1000ull

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define LAST_BUCKET (AGR_HISTOGRAM_BUCKETS - 1)

struct tmsg {
	agr_message m;	  /* m.user points back here */
	int status;	  /* 1 until completed */
	atomic_int completions;
	agr_exchange *ex; /* a held message, finished by the test thread */
	int timer_res;	  /* what its timer reported */
};

#define MAX_FAMILIES 32

#define MAX_SAMPLES 1024

#define MAX_LABELS 8

enum kind { K_PLAIN, K_BUCKET, K_SUM, K_COUNT };

struct label {
	char name[32];
	char value[128];
};

struct family {
	char name[64];
	char type[16];
	bool closed; /* its group of lines has ended */
};

struct sample {
	char name[64];
	struct family *family; /* check_grouping closes it */
	enum kind kind;
	struct label labels[MAX_LABELS];
	int nlabels;
	double value;
	int line;
};

struct expo {
	struct family families[MAX_FAMILIES];
	int nfamilies;
	struct family *current;
	struct sample samples[MAX_SAMPLES];
	int nsamples;
	char error[256];
};

extern const agr_named_aggregate order;
extern const agr_named_aggregate cart;
uint64_t pct(const agr_histogram *h, double p);
void wait_completed(struct tu_tally *t, long n);
void tmsg_init(struct tmsg *t, const char *id, const char *type);
int done_now(agr_exchange *ex, void *arg);
int fail_eio(agr_exchange *ex, void *arg);
/* Waits on a timer without blocking its worker. Arg: the nanoseconds. */
int wait_on_timer(agr_exchange *ex, void *arg);
/* Blocks the calling thread: what the blocking detector is there for. */
void block_for(uint64_t ns);
int sleep_300ms(agr_exchange *ex, void *arg);
agr_supplier *new_supplier(const char *name, int workers);
agr_scheduler *lookup(agr_supplier *sup);
/* An Order dispatcher of 16 groups on `sup`, which it does not own. */
agr_dispatcher_options options(const char *name, agr_supplier *sup,
			       struct tu_tally *completions);
agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o);
void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
	    void *arg);
void send_ok(agr_dispatcher *d, struct tmsg *t);
void stop(agr_dispatcher *d);
agr_worker_metrics worker_metrics(agr_scheduler *s, int index);
/* The worker that runs the group of `t`. */
int worker_of(agr_dispatcher *d, struct tmsg *t);
void assert_statuses(struct tmsg *ts, int n, int status);
const char *label_value(const struct sample *x, const char *name);
/* Reads `text` into `e`; false (with e->error) on the first fault. */
bool parse_exposition(struct expo *e, const char *text);
/*
 * context and aggregate on every sample, with dispatcher or (worker
 * figures) scheduler and worker; no other label but outcome or result
 * (counters) and le; no aggregate id as any value.
 */
bool check_label_policy(struct expo *e, const char *const *agg_ids,
			size_t nids);
const struct sample *find_sample(const struct expo *e,
				 const char *name,
				 const char *dispatcher,
				 const char *outcome);
double value_of(const struct expo *e, const char *name,
		const char *dispatcher, const char *outcome);
const char *type_of(struct expo *e, const char *family);
struct expo *new_expo(void);

/* metrics_histogram.c */
void metrics_histogram_tests(TCase *hist);

/* metrics_worker.c */
void metrics_worker_tests(TCase *work, TCase *dog);

/* prom_reader.c */
void prom_reader_tests(TCase *prom);

/* metrics_prometheus.c */
void metrics_prometheus_tests(TCase *prom);

#endif /* TESTS_METRICS_TEST_H */
