/* SPDX-License-Identifier: MIT */
/*
 * bench/latency - latency under an open-loop load: aggring (single
 * sends) and every peer of bench/peer.h at 10%, 50% and 90% of
 * aggring's peak no-op rate, alternating engines within each round.
 *
 *   latency [-R RATE] [-d MS] [-r RUNS] [-i IDS] [-w WORKERS]
 *           [-p PEERS] [-q] [-o DIR]
 *
 * The producer is paced by the clock, not by completions: message k is
 * due at t0 + k / rate and its latencies are measured from that due
 * time, so a producer that falls behind (because an engine stalled it)
 * shows up as latency instead of hiding it (no coordinated omission).
 * Per message: due -> handler start, and due -> completion (aggring:
 * its completion callback; peers: the end of the message's handling).
 * Reports p50, p99 and p99.9 in microseconds (median, min and max of
 * RUNS runs) and the ratio the target is about: aggring's p99
 * at 50% load no worse than the best peer's.
 *
 * Messages live in a ring of slots that the producer reuses once their
 * message completed; it reads the latencies out of a slot before it
 * reuses it, into log-linear histograms (under 1.6% error), so memory
 * stays bounded however long a run is.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "harness.h"
#include "peer.h"

#define WORKLOAD "latency"
#define RING_SLOTS (1u << 19)
#define MAX_RUNS 1000
#define SLEEP_NS 100000 /* sleep when the next send is this far off */

/* One message slot, reused once its message completed. */
struct slot {
	agr_message msg;
	struct peer_msg peer;
	int id, seq;
	uint64_t due;
	uint64_t start;
	_Atomic uint64_t done; /* 0 while in flight */
};

/* ---- log-linear histogram of nanoseconds ---- */

#define SUB_BITS 6
#define SUB (1 << SUB_BITS)
#define HIST_BUCKETS (2 * SUB + (64 - SUB_BITS - 1) * SUB)

struct hist {
	uint64_t count;
	uint64_t b[HIST_BUCKETS];
};

static int bucket_of(uint64_t v)
{
	int e;

	if (v < 2 * SUB)
		return (int)v;
	e = 63 - __builtin_clzll(v); /* >= SUB_BITS + 1 */
	return 2 * SUB + (e - SUB_BITS - 1) * SUB +
	       (int)((v >> (e - SUB_BITS)) - SUB);
}

/* The middle of bucket i. */
static double bucket_value(int i)
{
	int e;
	uint64_t lo;

	if (i < 2 * SUB)
		return i;
	e = (i - 2 * SUB) / SUB + SUB_BITS + 1;
	lo = (uint64_t)(SUB + (i - 2 * SUB) % SUB) << (e - SUB_BITS);
	return (double)lo + (double)(1ull << (e - SUB_BITS)) / 2;
}

static void hist_add(struct hist *h, uint64_t v)
{
	h->b[bucket_of(v)]++;
	h->count++;
}

/* The q-quantile in microseconds. */
static double hist_quantile_us(const struct hist *h, double q)
{
	uint64_t rank = (uint64_t)(q * (double)h->count), seen = 0;
	int i;

	if (rank >= h->count)
		rank = h->count - 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen > rank)
			return bucket_value(i) / 1e3;
	}
	return 0;
}

/* ---- engines ---- */

struct run {
	struct bench_order order;
	struct hist start, done;
};

/* Engine 0 is aggring, engine e > 0 is peers[e - 1]. */
static int nengines;

/* The peers to run: all of peer_engines[], or those -p names. */
#define MAX_PEERS 16
static const struct peer_engine *peers[MAX_PEERS];
static int npeers;

static void select_peers(const char *list)
{
	npeers = peer_select(WORKLOAD, list, peers, MAX_PEERS);
}

static const char *engine_name(int e)
{
	return e ? peers[e - 1]->name : "aggring";
}

static void finish(struct run *r, struct slot *s, uint64_t start)
{
	int id = s->id, seq = s->seq;

	s->start = start;
	bench_order_see(&r->order, id, seq);
	/* Last: the producer may reuse the slot from here on. */
	atomic_store_explicit(&s->done, bench_now_ns(),
			      memory_order_release);
}

static int agr_handler(agr_exchange *ex, void *arg)
{
	struct slot *s = agr_exchange_message(ex)->user;

	(void)arg;
	s->start = bench_now_ns();
	return 0;
}

static void agr_completed(agr_message *msg, int status, void *arg)
{
	struct slot *s = msg->user;

	if (status != 0) {
		fprintf(stderr, WORKLOAD ": message failed: %s\n",
			agr_strerror(status));
		exit(1);
	}
	finish(arg, s, s->start);
}

static void peer_handle(struct peer_msg **msgs, int n, void *arg)
{
	int i;

	for (i = 0; i < n; i++)
		finish(arg, msgs[i]->user, bench_now_ns());
}

static agr_dispatcher *make_dispatcher(int workers, int groups, struct run *r)
{
	agr_dispatcher_options opt = {
		.name = "bench",
		.named_aggregate = { "bench", "Order" },
		.parallelism = groups,
		.on_complete = agr_completed,
		.complete_arg = r,
	};

	return bench_agr_start(WORKLOAD, workers, &opt, agr_handler, NULL);
}

static void free_dispatcher(agr_dispatcher *d)
{
	bench_agr_stop(WORKLOAD, d);
}

/* ---- the open-loop producer ---- */

struct config {
	int ids, workers, groups;
	uint64_t give_up_ns;
	char (*names)[16];
	struct slot *ring;
};

/* Waits until the slot's message completed and records its latencies. */
static void harvest(struct run *r, struct slot *s)
{
	uint64_t done;

	while (!(done = atomic_load_explicit(&s->done,
					     memory_order_acquire)))
		sched_yield();
	hist_add(&r->start, s->start > s->due ? s->start - s->due : 0);
	hist_add(&r->done, done > s->due ? done - s->due : 0);
}

/*
 * Sleeps when the next message is far off, else yields: a producer that
 * spun would hold a CPU of a 2-CPU machine, and a worker woken on it
 * would wait for the spinner's time slice to end (milliseconds).
 */
static uint64_t wait_until(uint64_t due)
{
	struct timespec ts;
	uint64_t now = bench_now_ns();

	if (due > now + SLEEP_NS) {
		uint64_t wake = due - SLEEP_NS / 2; /* waking takes a while */

		ts.tv_sec = (time_t)(wake / 1000000000u);
		ts.tv_nsec = (long)(wake % 1000000000u);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		now = bench_now_ns();
	}
	while (now < due) {
		sched_yield();
		now = bench_now_ns();
	}
	return now;
}

struct result {
	double rate; /* msg/s from t0 to the last completion */
	double lag_ms; /* how late the last send was */
	bool saturated; /* stopped sending: fell c->give_up_ns behind */
};

static struct peer *make_peer(const struct peer_engine *pe,
			      const struct config *c, struct run *r)
{
	struct peer *p = pe->create(c->workers, c->groups, peer_handle, r);

	if (!p) {
		fprintf(stderr, WORKLOAD ": %s: create failed\n", pe->name);
		exit(1);
	}
	return p;
}

/* Sends slot s's message to the peer p (pe) or to the dispatcher d. */
static void send_slot(const struct peer_engine *pe, struct peer *p,
		      agr_dispatcher *d, const struct config *c,
		      struct slot *s)
{
	if (pe) {
		s->peer.id = c->names[s->id];
		pe->send(p, &s->peer);
		return;
	}
	s->msg.aggregate_id = c->names[s->id];
	memset(&s->msg.internal_, 0, sizeof(s->msg.internal_));
	if (agr_dispatcher_send(d, &s->msg) != 0) {
		fprintf(stderr, WORKLOAD ": send failed\n");
		exit(1);
	}
}

/*
 * Engine e gets n messages, message k due at t0 + k * 1e9 / rate
 * (rate 0: as fast as it goes); latencies go to r's histograms. An
 * engine that cannot keep up would make the run last ever longer: the
 * producer stops once it is c->give_up_ns behind, and the run counts
 * as saturated (its latencies, up to then, stay in).
 */
static struct result run_once(int e, const struct config *c, long n,
			      double rate, struct run *r)
{
	const struct peer_engine *pe = e ? peers[e - 1] : NULL;
	double period = rate > 0 ? 1e9 / rate : 0;
	agr_dispatcher *d = NULL;
	struct peer *p = NULL;
	struct result res;
	uint64_t t0, now, due = 0;
	struct slot *s;
	long k;

	memset(r, 0, sizeof(*r));
	bench_order_init(&r->order, c->ids, n);
	if (pe)
		p = make_peer(pe, c, r);
	else
		d = make_dispatcher(c->workers, c->groups, r);
	t0 = now = bench_now_ns();
	res.saturated = false;
	for (k = 0; k < n; k++) {
		s = &c->ring[k % RING_SLOTS];
		if (k >= RING_SLOTS)
			harvest(r, s);
		due = t0 + (uint64_t)((double)k * period);
		if (now < due) /* else behind: send without looking */
			now = wait_until(due);
		else if (period > 0 && k % 4096 == 0 &&
			 bench_now_ns() - due > c->give_up_ns) {
			res.saturated = true;
			break;
		}
		s->id = (int)(k % c->ids);
		s->seq = (int)(k / c->ids);
		s->due = due;
		atomic_store_explicit(&s->done, 0, memory_order_relaxed);
		send_slot(pe, p, d, c, s);
	}
	res.lag_ms = (double)(bench_now_ns() - due) / 1e6;
	if (!res.saturated)
		bench_order_wait(&r->order);
	res.rate = (double)k / ((double)(bench_now_ns() - t0) / 1e9);
	for (n = k, k = n > RING_SLOTS ? n - RING_SLOTS : 0; k < n; k++)
		harvest(r, &c->ring[k % RING_SLOTS]);
	/* Every handler is done (harvest waited): only n were sent. */
	r->order.n = n;
	if (pe)
		pe->destroy(p);
	else
		free_dispatcher(d);
	bench_order_verify(&r->order, engine_name(e));
	bench_order_destroy(&r->order);
	return res;
}

/* ---- main ---- */

static const double loads[] = { 0.10, 0.50, 0.90 };
#define NLOADS 3
#define TARGET_LOAD 1 /* 50% */

enum { START_P50, START_P99, START_P999, DONE_P50, DONE_P99, DONE_P999,
       METRICS };

static const char *const metric_names[METRICS] = {
	"start_p50", "start_p99", "start_p99.9",
	"done_p50",  "done_p99",  "done_p99.9",
};

static void quantiles(const struct run *r, double *out)
{
	out[START_P50] = hist_quantile_us(&r->start, 0.50);
	out[START_P99] = hist_quantile_us(&r->start, 0.99);
	out[START_P999] = hist_quantile_us(&r->start, 0.999);
	out[DONE_P50] = hist_quantile_us(&r->done, 0.50);
	out[DONE_P99] = hist_quantile_us(&r->done, 0.99);
	out[DONE_P999] = hist_quantile_us(&r->done, 0.999);
}

static int default_groups(int workers)
{
	struct run *r = calloc(1, sizeof(*r));
	agr_dispatcher *d;
	int groups;

	if (!r)
		exit(1);
	bench_order_init(&r->order, 1, 0);
	d = make_dispatcher(workers, 0, r);
	groups = agr_dispatcher_parallelism(d);
	free_dispatcher(d);
	bench_order_destroy(&r->order);
	free(r);
	return groups;
}

/* aggring's peak: the median of three as-fast-as-it-goes runs. */
static double measure_peak(const struct config *c, struct run *r, long n)
{
	double v[3];
	int i;

	run_once(0, c, n / 4, 0, r); /* warm up */
	for (i = 0; i < 3; i++)
		v[i] = run_once(0, c, n, 0, r).rate;
	return bench_summarize(v, 3).median;
}

static void print_target(struct bench_summary (*s)[METRICS], int m)
{
	double ratio, best = s[1][m].median;
	int e;

	for (e = 2; e < nengines; e++)
		if (s[e][m].median < best)
			best = s[e][m].median;
	ratio = s[0][m].median / best;
	printf("  aggring %s / best peer's at 50%% load: %.3f (target <= "
	       "1.0: %s)\n", metric_names[m], ratio,
	       ratio <= 1.0 ? "met" : "MISSED");
}

/* Per engine, over the runs of one load. */
struct lags {
	double max_ms;	/* how late the producer was, at worst */
	int saturated;	/* runs that gave up */
};

static void report_load(int l, double rate, int runs,
			double (*v)[METRICS][MAX_RUNS], struct lags *lag,
			FILE *csv)
{
	struct bench_summary s[MAX_PEERS + 1][METRICS];
	char variant[16];
	int e, m;

	snprintf(variant, sizeof(variant), "%.0f%%", loads[l] * 100);
	printf("\n%s: %s load, %.2f M msg/s offered, %d runs; medians in us "
	       "from the due time\n", WORKLOAD, variant, rate / 1e6, runs);
	printf("  %-10s %9s %9s %9s %9s %9s %9s  %s\n", "engine", "start p50",
	       "p99", "p99.9", "done p50", "p99", "p99.9",
	       "producer's worst lag");
	for (e = 0; e < nengines; e++) {
		for (m = 0; m < METRICS; m++) {
			s[e][m] = bench_summarize(v[e][m], runs);
			bench_csv_row(csv, WORKLOAD, variant, engine_name(e),
				      metric_names[m], "us", s[e][m], runs);
		}
		printf("  %-10s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f  %.1f ms",
		       engine_name(e), s[e][START_P50].median,
		       s[e][START_P99].median, s[e][START_P999].median,
		       s[e][DONE_P50].median, s[e][DONE_P99].median,
		       s[e][DONE_P999].median, lag[e].max_ms);
		if (lag[e].saturated)
			printf(" (saturated in %d of %d runs)",
			       lag[e].saturated, runs);
		printf("\n");
	}
	printf("  done p99 over the runs:\n");
	for (e = 0; e < nengines; e++)
		bench_print_row(engine_name(e), "us", s[e][DONE_P99]);
	if (nengines > 1 && l == TARGET_LOAD) {
		print_target(s, START_P99);
		print_target(s, DONE_P99);
	}
}

/* What the command line sets. */
struct args {
	double peak; /* 0: measure aggring's */
	double dur_ms;
	int runs;
	const char *dir, *only;
};

/* -q: a smoke run, in order with the other options. */
static void quick(void *arg)
{
	struct args *a = arg;

	a->dur_ms = 100;
	a->runs = 3;
}

static void parse(int argc, char **argv, struct args *a, struct config *c)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_DOUBLE('R', "RATE", a->peak, 1000, 1L << 34,
				 "peak rate in msg/s (default: measure "
				 "aggring's)"),
		BENCH_OPT_DOUBLE('d', "MS", a->dur_ms, 1, 3600000,
				 "duration of one run in ms (default 1000)"),
		BENCH_OPT_INT('r', "RUNS", a->runs, 1, MAX_RUNS,
			      "runs per engine and load (default 5)"),
		BENCH_OPT_INT('i', "IDS", c->ids, 1, 1 << 24,
			      "distinct ids (default 10000)"),
		BENCH_OPT_INT('w', "WORKERS", c->workers, 1, 1024,
			      "workers (default: online CPUs)"),
		BENCH_OPT_TEXT('p', "PEERS", a->only,
			       "comma-separated peers to compare (default: "
			       "all)"),
		BENCH_OPT_CALL('q', quick, a, "quick smoke run: -d 100 -r 3"),
		BENCH_OPT_TEXT('o', "DIR", a->dir, "write DIR/latency.csv"),
		BENCH_OPT_END,
	};

	bench_options(argc, argv, WORKLOAD, opts);
}

/* Names, the slot ring and the per-run state; exits if out of memory. */
static struct run *alloc_state(struct config *c,
			       double (**v)[METRICS][MAX_RUNS])
{
	struct run *r;
	int i, k;

	c->names = calloc((size_t)c->ids, sizeof(*c->names));
	c->ring = calloc(RING_SLOTS, sizeof(*c->ring));
	r = calloc(1, sizeof(*r));
	*v = calloc((size_t)nengines, sizeof(**v));
	if (!c->names || !c->ring || !r || !*v) {
		fprintf(stderr, WORKLOAD ": out of memory\n");
		exit(1);
	}
	for (i = 0; i < c->ids; i++)
		snprintf(c->names[i], sizeof(c->names[i]), "id-%d", i);
	for (k = 0; k < (int)RING_SLOTS; k++) {
		c->ring[k].msg.user = &c->ring[k];
		c->ring[k].peer.user = &c->ring[k];
	}
	return r;
}

/* One offered load: a warm-up per engine, then runs alternating. */
static void run_load(int l, double rate, const struct config *c,
		     const struct args *a, struct run *r,
		     double (*v)[METRICS][MAX_RUNS], FILE *csv)
{
	struct lags lag[64];
	long n = (long)(rate * a->dur_ms / 1e3);
	int i, k, e, m;

	if (n < 1)
		n = 1;
	for (e = 0; e < nengines; e++) { /* warm up */
		run_once(e, c, n / 10 + 1, rate, r);
		lag[e] = (struct lags){ 0 };
	}
	for (i = 0; i < a->runs; i++)
		for (k = 0; k < nengines; k++) {
			double q[METRICS];
			struct result res;

			e = (i + k) % nengines;
			res = run_once(e, c, n, rate, r);
			quantiles(r, q);
			for (m = 0; m < METRICS; m++)
				v[e][m][i] = q[m];
			if (res.lag_ms > lag[e].max_ms)
				lag[e].max_ms = res.lag_ms;
			lag[e].saturated += res.saturated;
		}
	report_load(l, rate, a->runs, v, lag, csv);
}

int main(int argc, char **argv)
{
	struct config c = { .ids = 10000, .workers = bench_cpus() };
	struct args a = { .dur_ms = 1000, .runs = 5 };
	double peak, dur_ms, (*v)[METRICS][MAX_RUNS];
	struct run *r;
	FILE *csv;
	int l;

	parse(argc, argv, &a, &c);
	peak = a.peak;
	dur_ms = a.dur_ms;
	select_peers(a.only);
	nengines = 1 + npeers;
	r = alloc_state(&c, &v);
	prctl(PR_SET_TIMERSLACK, 1UL); /* sleep to the microsecond */
	bench_print_env(stdout, WORKLOAD);
	c.groups = default_groups(c.workers);
	if (peak <= 0) {
		peak = measure_peak(&c, r, dur_ms >= 1000 ? 2000000 : 400000);
		printf("%s: aggring's peak %.2f M msg/s (median of 3)\n",
		       WORKLOAD, peak / 1e6);
	}
	printf("%s: %d groups, %d workers, %d ids, %.0f ms per run\n",
	       WORKLOAD, c.groups, c.workers, c.ids, dur_ms);
	/* Give a run up once it is a second (or a duration) late. */
	c.give_up_ns = (uint64_t)(dur_ms > 1000 ? dur_ms : 1000) * 1000000u;
	csv = bench_csv_open(a.dir, WORKLOAD);
	for (l = 0; l < NLOADS; l++)
		run_load(l, peak * loads[l], &c, &a, r, v, csv);
	bench_csv_close(csv);
	free(v);
	free(r);
	free(c.ring);
	free(c.names);
	return 0;
}
