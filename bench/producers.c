/* SPDX-License-Identifier: MIT */
/*
 * bench/producers - no-op dispatch throughput from many producers:
 * the same total of messages sent by P producers (1, 4 and 16 by
 * default), of two kinds, to aggring with single sends, aggring with
 * batched sends (agr_dispatcher_send_batch) and every peer of
 * bench/peer.h, with the same groups and workers, alternating engines
 * within each round as bench/dispatch does.
 *
 *   producers [-n MESSAGES] [-P LIST] [-k KINDS] [-i IDS] [-r RUNS]
 *             [-b BATCH] [-c CHUNK] [-w WORKERS] [-p PEERS] [-q] [-o DIR]
 *
 * Kinds of producer:
 *   foreign  P plain threads of the program, each sending its share
 *            from start to end (clients that are not the engine's);
 *   worker   the producers run on the engine's own threads, as a
 *            service with many connections does: for aggring, a task
 *            per producer scheduled on worker p % WORKERS
 *            (agr_scheduler_schedule) sends CHUNK messages (default 64)
 *            and schedules itself again behind what that worker has
 *            queued; for a peer, a control message per producer whose
 *            handling, on one of the peer's pool threads, sends CHUNK
 *            messages and sends the control message again. The peers
 *            choose the pool thread; aggring pins a producer to a
 *            worker.
 *
 * Producer p owns the ids p, p + P, p + 2P, ... (IDS / P of them), so
 * that the per-id send order is one thread's and the harness checks
 * per-id order and exactly-once completion of every run as in
 * bench/dispatch. A run goes from the release of the producers to the
 * last completion; the engine is created before and freed after.
 *
 * Per (P, kind): each engine's median, min and max in M msg/s; the
 * ratios the targets are about (aggring single and batch over
 * the best peer, >= 1.0 at 4 and 16 producers; each engine's slowest
 * run over its median, >= 0.6); and the counters that explain them,
 * medians over the runs: the process's CPU time per message and
 * context switches per thousand messages (getrusage, every engine),
 * and aggring's doorbells (MSG_RING wake-ups) per message and
 * messages per group activation (agr_scheduler_worker_metrics, read
 * once the dispatcher stopped; the producer tasks are not counted as
 * activations), with aggring's slowest and fastest run in these terms.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <aggring.h>

#include "harness.h"
#include "peer.h"
#include "producers_report.h"

#define WORKLOAD "producers"
#define MAX_BATCH 256
#define MAX_LIST 16	    /* producer counts in -P */
#define MAX_PRODUCERS 1024
#define MAX_PEERS 16

enum kind { FOREIGN, WORKER, KINDS };
static const char *const kind_names[KINDS] = { "foreign", "worker" };

/* One message, as each engine sees it; id < 0: producer -id - 1's
 * control message (peers, worker kind). */
struct item {
	struct peer_msg peer;
	int id;
	int seq; /* per id, from 0 */
	agr_message msg;
};

struct config {
	long n;
	int ids, workers, groups, batch, chunk, runs;
	bool kinds[KINDS];
	int counts[MAX_LIST], ncounts; /* producer counts */
};

struct run;

/* One producer: its share of the messages and how far it got. */
struct producer {
	struct run *run;
	int index;
	struct item *items;
	long n, next;
	struct item control; /* peers, worker kind */
	char control_id[24];
	pthread_t thread;
};

/* One run of one engine. */
struct run {
	const struct config *c;
	int engine, nprod;
	enum kind kind;
	struct producer *prods;
	agr_dispatcher *d;
	agr_scheduler *sched;
	const struct peer_engine *pe;
	struct peer *peer;
	struct bench_order order;
	pthread_barrier_t go;
	atomic_long tasks; /* producer tasks run on aggring's workers */
};

static const struct peer_engine *peers[MAX_PEERS];
static int npeers, nengines;
static char batch_name[32];

static const char *engine_name(int e)
{
	if (e == AGR_SINGLE)
		return "aggring";
	if (e == AGR_BATCH)
		return batch_name;
	return peers[e - FIRST_PEER]->name;
}

static void die(const char *what, int err)
{
	fprintf(stderr, WORKLOAD ": %s: %s\n", what, agr_strerror(err));
	exit(1);
}

/* ---- sending ---- */

static void send_agr_batch(struct producer *p, long end)
{
	agr_message *ptrs[MAX_BATCH];
	int k, ret;

	while (p->next < end) {
		for (k = 0; k < p->run->c->batch && p->next + k < end; k++)
			ptrs[k] = &p->items[p->next + k].msg;
		ret = agr_dispatcher_send_batch(p->run->d, ptrs, (size_t)k,
						NULL);
		if (ret)
			die("agr_dispatcher_send_batch", ret);
		p->next += k;
	}
}

/* Sends up to max more of p's messages; returns how many remain. */
static long send_some(struct producer *p, long max)
{
	struct run *r = p->run;
	long end = p->n - p->next > max ? p->next + max : p->n;
	int ret;

	if (r->pe) {
		for (; p->next < end; p->next++)
			r->pe->send(r->peer, &p->items[p->next].peer);
	} else if (r->engine == AGR_BATCH) {
		send_agr_batch(p, end);
	} else {
		for (; p->next < end; p->next++) {
			ret = agr_dispatcher_send(r->d, &p->items[p->next].msg);
			if (ret)
				die("agr_dispatcher_send", ret);
		}
	}
	return p->n - p->next;
}

static void *foreign_producer(void *arg)
{
	struct producer *p = arg;

	pthread_barrier_wait(&p->run->go);
	send_some(p, p->n);
	return NULL;
}

static void producer_task(void *arg);

static void schedule_producer(struct producer *p)
{
	int ret = agr_scheduler_schedule(p->run->sched, (unsigned)p->index,
					 producer_task, p);

	if (ret)
		die("agr_scheduler_schedule", ret);
}

/* On an aggring worker: a chunk, then back of that worker's line. */
static void producer_task(void *arg)
{
	struct producer *p = arg;

	atomic_fetch_add_explicit(&p->run->tasks, 1, memory_order_relaxed);
	if (send_some(p, p->run->c->chunk) > 0)
		schedule_producer(p);
}

/* ---- handlers ---- */

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

/* On a peer's pool thread: data messages, and producers' chunks. */
static void peer_handle(struct peer_msg **msgs, int n, void *arg)
{
	struct run *r = arg;
	struct producer *p;
	struct item *it;
	int i;

	for (i = 0; i < n; i++) {
		it = msgs[i]->user;
		if (it->id >= 0) {
			bench_order_see(&r->order, it->id, it->seq);
			continue;
		}
		p = &r->prods[-it->id - 1];
		if (send_some(p, r->c->chunk) > 0)
			r->pe->send(r->peer, &p->control.peer);
	}
}

/* ---- engines ---- */

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

static void engine_start(struct run *r)
{
	const struct config *c = r->c;

	if (r->engine >= FIRST_PEER) {
		r->pe = peers[r->engine - FIRST_PEER];
		r->peer = r->pe->create(c->workers, c->groups, peer_handle, r);
		if (!r->peer) {
			fprintf(stderr, WORKLOAD ": %s: create failed\n",
				r->pe->name);
			exit(1);
		}
		return;
	}
	r->d = make_dispatcher(c->workers, c->groups, &r->order);
	r->sched = agr_dispatcher_scheduler(r->d);
}

/* Once the dispatcher stopped, its workers' counters are final. */
static void agr_counters(struct run *r, struct sample *s)
{
	agr_worker_metrics m;
	uint64_t doorbells = 0, items = 0;
	int w;

	for (w = 0; w < r->c->workers; w++)
		if (agr_scheduler_worker_metrics(r->sched, w, &m) == 0) {
			doorbells += m.doorbells;
			items += m.items;
		}
	items -= (uint64_t)atomic_load(&r->tasks);
	s->counter[DOORBELLS] = (double)doorbells / (double)r->c->n;
	s->counter[PER_ACTIVATION] =
		items ? (double)r->c->n / (double)items : 0;
}

static void engine_stop(struct run *r, struct sample *s)
{
	int ret;

	if (r->pe) {
		r->pe->destroy(r->peer);
		return;
	}
	ret = agr_dispatcher_stop_gracefully(r->d, 60ull * 1000000000ull);
	if (ret)
		die("stop", ret);
	agr_counters(r, s);
	agr_dispatcher_free(r->d);
}

/* ---- one run ---- */

static void release_producers(struct run *r)
{
	int p;

	if (r->kind == FOREIGN) {
		pthread_barrier_wait(&r->go);
		return;
	}
	for (p = 0; p < r->nprod; p++)
		if (r->pe)
			r->pe->send(r->peer, &r->prods[p].control.peer);
		else
			schedule_producer(&r->prods[p]);
}

static void start_threads(struct run *r)
{
	int p;

	if (r->kind != FOREIGN)
		return;
	pthread_barrier_init(&r->go, NULL, (unsigned)r->nprod + 1);
	for (p = 0; p < r->nprod; p++)
		if (pthread_create(&r->prods[p].thread, NULL, foreign_producer,
				   &r->prods[p]))
			die("pthread_create", -EAGAIN);
}

static void join_threads(struct run *r)
{
	int p;

	if (r->kind != FOREIGN)
		return;
	for (p = 0; p < r->nprod; p++)
		pthread_join(r->prods[p].thread, NULL);
	pthread_barrier_destroy(&r->go);
}

static uint64_t cpu_ns(const struct rusage *u)
{
	return (uint64_t)(u->ru_utime.tv_sec + u->ru_stime.tv_sec) *
		       1000000000ull +
	       (uint64_t)(u->ru_utime.tv_usec + u->ru_stime.tv_usec) * 1000ull;
}

static void usage_counters(const struct rusage *a, const struct rusage *b,
			   long n, struct sample *s)
{
	long switches = (b->ru_nvcsw - a->ru_nvcsw) +
			(b->ru_nivcsw - a->ru_nivcsw);

	s->counter[CPU_NS] = (double)(cpu_ns(b) - cpu_ns(a)) / (double)n;
	s->counter[SWITCHES] = (double)switches * 1000.0 / (double)n;
}

static void reset_messages(struct run *r)
{
	struct producer *p;
	long i;
	int k;

	for (k = 0; k < r->nprod; k++) {
		p = &r->prods[k];
		p->run = r;
		p->next = 0;
		for (i = 0; i < p->n; i++)
			memset(&p->items[i].msg.internal_, 0,
			       sizeof(p->items[i].msg.internal_));
	}
}

static struct sample run_once(int e, enum kind kind, struct producer *prods,
			      int nprod, const struct config *c)
{
	struct run r = { .c = c, .engine = e, .kind = kind, .prods = prods,
			 .nprod = nprod };
	struct sample s = { 0 };
	struct rusage u0, u1;
	uint64_t t0, t1;

	atomic_init(&r.tasks, 0);
	bench_order_init(&r.order, c->ids, c->n);
	reset_messages(&r);
	engine_start(&r);
	start_threads(&r);
	getrusage(RUSAGE_SELF, &u0);
	t0 = bench_now_ns();
	release_producers(&r);
	bench_order_wait(&r.order);
	t1 = bench_now_ns();
	getrusage(RUSAGE_SELF, &u1);
	join_threads(&r);
	engine_stop(&r, &s);
	bench_order_verify(&r.order, engine_name(e));
	bench_order_destroy(&r.order);
	usage_counters(&u0, &u1, c->n, &s);
	s.rate = (double)c->n / ((double)(t1 - t0) / 1e3);
	return s;
}

/* ---- messages ---- */

/*
 * Splits items[0..n) among nprod producers; producer p sends to the
 * ids p, p + nprod, ... round-robin, each id's seq counting up.
 */
static void assign(struct item *items, const struct config *c,
		   char (*names)[16], struct producer *prods, int nprod)
{
	int *seq = calloc((size_t)c->ids, sizeof(int));
	int p, id, per = c->ids / nprod;
	struct item *it;
	long k, start;

	if (!seq)
		die("assign", -ENOMEM);
	for (p = 0; p < nprod; p++) {
		start = c->n * p / nprod;
		prods[p] = (struct producer){ .index = p, .items = items + start,
					      .n = c->n * (p + 1) / nprod - start };
		for (k = 0; k < prods[p].n; k++) {
			it = &prods[p].items[k];
			id = p + nprod * (int)(k % per);
			*it = (struct item){ .id = id, .seq = seq[id]++ };
			it->msg.aggregate_id = names[id];
			it->msg.user = it;
			it->peer.id = names[id];
			it->peer.user = it;
		}
		snprintf(prods[p].control_id, sizeof(prods[p].control_id),
			 "producer-%d", p);
		prods[p].control.id = -p - 1;
		prods[p].control.peer.id = prods[p].control_id;
		prods[p].control.peer.user = &prods[p].control;
	}
	free(seq);
}

/* ---- report ---- */

static void report(const struct config *c, int nprod, enum kind kind,
		   struct sample (*v)[MAX_RUNS], FILE *csv)
{
	const struct report rp = {
		.kind = kind_names[kind], .nprod = nprod, .n = c->n,
		.ids = c->ids, .groups = c->groups, .workers = c->workers,
		.runs = c->runs, .nengines = nengines,
		.engine_name = engine_name, .v = v,
	};

	report_print(&rp, csv);
}

/* Warm-up, then c->runs rounds alternating engines. */
static void run_config(const struct config *c, struct producer *prods,
		       int nprod, enum kind kind, FILE *csv, bool warm)
{
	struct sample (*v)[MAX_RUNS] = calloc((size_t)nengines, sizeof(*v));
	int r, k, e;

	if (!v)
		die("run_config", -ENOMEM);
	for (e = 0; !warm && e < nengines; e++)
		run_once(e, kind, prods, nprod, c);
	for (r = 0; r < c->runs; r++)
		for (k = 0; k < nengines; k++) {
			/* Rotate who goes first so no engine always follows
			 * the same one. */
			e = (r + k) % nengines;
			v[e][r] = run_once(e, kind, prods, nprod, c);
		}
	report(c, nprod, kind, v, csv);
	free(v);
}

/* ---- options ---- */

/* The group count aggring picks by default (64 x CPUs or AGR_PARALLELISM). */
static int default_groups(int workers)
{
	struct bench_order o;
	agr_dispatcher *d;
	int groups;

	bench_order_init(&o, 1, 0);
	d = make_dispatcher(workers, 0, &o);
	groups = agr_dispatcher_parallelism(d);
	bench_agr_stop(WORKLOAD, d);
	bench_order_destroy(&o);
	return groups;
}

struct args {
	struct config c;
	const char *counts, *kinds, *dir, *only;
};

/* -q: a smoke run, in order with the other options. */
static void quick(void *arg)
{
	struct args *a = arg;

	a->c.n = 200000;
	a->c.runs = 3;
}

/* "1,4,16" into c->counts; exits 2 on a bad list. */
static void parse_counts(struct config *c, const char *list)
{
	const char *at = list;
	char *end;
	long v;

	c->ncounts = 0;
	while (*at) {
		errno = 0;
		v = strtol(at, &end, 10);
		if (end == at || errno || v < 1 || v > MAX_PRODUCERS ||
		    (*end && *end != ',') || c->ncounts == MAX_LIST) {
			fprintf(stderr, WORKLOAD ": -P %s: want up to %d "
				"comma-separated counts in [1, %d]\n", list,
				MAX_LIST, MAX_PRODUCERS);
			exit(2);
		}
		c->counts[c->ncounts++] = (int)v;
		at = *end ? end + 1 : end;
	}
}

/* "foreign,worker" into c->kinds; exits 2 on a bad list. */
static void parse_kinds(struct config *c, const char *list)
{
	int k, any = 0;

	for (k = 0; k < KINDS; k++)
		any += c->kinds[k] = strstr(list, kind_names[k]) != NULL;
	if (!any) {
		fprintf(stderr, WORKLOAD ": -k %s: want foreign, worker or "
			"foreign,worker\n", list);
		exit(2);
	}
}

static void parse(int argc, char **argv, struct args *a)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_LONG('n', "MESSAGES", a->c.n, 1, 1L << 30,
			       "messages per run, all producers together "
			       "(default 2000000)"),
		BENCH_OPT_TEXT('P', "LIST", a->counts,
			       "comma-separated producer counts (default "
			       "1,4,16)"),
		BENCH_OPT_TEXT('k', "KINDS", a->kinds,
			       "foreign, worker or foreign,worker (default)"),
		BENCH_OPT_INT('i', "IDS", a->c.ids, 1, 1 << 24,
			      "distinct ids, split among the producers "
			      "(default 10000)"),
		BENCH_OPT_INT('r', "RUNS", a->c.runs, 1, MAX_RUNS,
			      "runs per engine (default 5)"),
		BENCH_OPT_INT('b', "BATCH", a->c.batch, 2, MAX_BATCH,
			      "batch size of aggring's batched sends (default "
			      "64)"),
		BENCH_OPT_INT('c', "CHUNK", a->c.chunk, 1, 1 << 20,
			      "messages a worker producer sends per turn "
			      "(default 64)"),
		BENCH_OPT_INT('w', "WORKERS", a->c.workers, 1, 1024,
			      "workers (default: online CPUs)"),
		BENCH_OPT_TEXT('p', "PEERS", a->only,
			       "comma-separated peers to compare (default: "
			       "all)"),
		BENCH_OPT_CALL('q', quick, a,
			       "quick smoke run: -n 200000 -r 3"),
		BENCH_OPT_TEXT('o', "DIR", a->dir, "write DIR/producers.csv"),
		BENCH_OPT_END,
	};

	bench_options(argc, argv, WORKLOAD, opts);
	parse_counts(&a->c, a->counts);
	parse_kinds(&a->c, a->kinds);
}

static int largest_count(const struct config *c)
{
	int i, m = 1;

	for (i = 0; i < c->ncounts; i++)
		if (c->counts[i] > m)
			m = c->counts[i];
	return m;
}

static void check_sizes(const struct config *c)
{
	int most = largest_count(c);

	if (c->ids < most || c->n < most) {
		fprintf(stderr, WORKLOAD ": -i %d and -n %ld must be at least "
			"the largest producer count, %d\n", c->ids, c->n,
			most);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct args a = { .c = { .n = 2000000, .ids = 10000, .batch = 64,
				 .chunk = 64, .runs = 5,
				 .workers = bench_cpus() },
			  .counts = "1,4,16", .kinds = "foreign,worker" };
	struct config *c = &a.c;
	struct producer *prods;
	char (*names)[16];
	struct item *items;
	bool warm = false;
	int i, k, id;
	FILE *csv;

	parse(argc, argv, &a);
	check_sizes(c);
	npeers = peer_select(WORKLOAD, a.only, peers, MAX_PEERS);
	nengines = FIRST_PEER + npeers;
	snprintf(batch_name, sizeof(batch_name), "aggring-batch%d", c->batch);
	bench_print_env(stdout, WORKLOAD);
	c->groups = default_groups(c->workers);
	items = calloc((size_t)c->n, sizeof(*items));
	names = calloc((size_t)c->ids, sizeof(*names));
	prods = calloc((size_t)largest_count(c), sizeof(*prods));
	if (!items || !names || !prods)
		die("setup", -ENOMEM);
	for (id = 0; id < c->ids; id++)
		snprintf(names[id], sizeof(names[id]), "id-%d", id);
	printf("%s: %ld messages per run, producers %s, batch %d, chunk %d, "
	       "%d workers, %d groups, %d runs; every peer's worker "
	       "producers run as handlers on its pool threads\n", WORKLOAD,
	       c->n, a.counts, c->batch, c->chunk, c->workers, c->groups,
	       c->runs);
	csv = bench_csv_open(a.dir, WORKLOAD);
	for (i = 0; i < c->ncounts; i++) {
		assign(items, c, names, prods, c->counts[i]);
		for (k = 0; k < KINDS; k++) {
			if (!c->kinds[k])
				continue;
			run_config(c, prods, c->counts[i], (enum kind)k, csv,
				   warm);
			warm = true;
			fflush(stdout);
		}
	}
	bench_csv_close(csv);
	free(prods);
	free(names);
	free(items);
	return 0;
}
