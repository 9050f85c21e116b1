/* SPDX-License-Identifier: MIT */
/*
 * journal - an event store for one named aggregate, on aggring.
 *
 * Producers append events for aggregate ids. The dispatcher routes each
 * event by id to its group; the group's handler appends the event to the
 * group's journal file with agr_io_write() and makes it durable with
 * agr_io_fdatasync before the event is acknowledged. Groups run serially,
 * so each id's events land in its journal in the order they were sent,
 * while many groups keep writes and syncs in flight on each ring.
 *
 *   journal [-d DIR] [-n EVENTS] [-i IDS] [-p PRODUCERS] [-w WORKERS]
 *           [-g GROUPS]      append, acknowledge, write DIR/acked
 *   journal --verify [-d DIR]
 *                            reread the journals: every acknowledged
 *                            event is there exactly once, in per-id order
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "opts.h"
#include "util.h"

#define RECORD_MAX 64

struct config {
	const char *dir;
	long events;
	int ids;
	int producers;
	int workers;
	int groups;
	bool verify;
};

/* One event: the message plus the record it appends. */
struct event {
	agr_message msg;
	int id;
	long seq;
	uint64_t sent_ns;
	uint64_t latency_ns;
	bool durable; /* acknowledged with status 0 */
	char record[RECORD_MAX];
	unsigned len, written;
};

/* A group's journal; touched only by the group's worker. */
struct journal {
	int fd;
	uint64_t offset;
};

struct app {
	struct config cfg;
	agr_dispatcher *disp;
	struct journal *journals;
	struct event *events;
	char (*id_names)[24];
	atomic_long acked;
	atomic_long failed;
	atomic_long fsyncs;
};

/* ---- the handler: write, then fdatasync, then acknowledge ---- */

struct append {
	agr_exchange *ex;
	struct event *ev;
	struct journal *j;
	struct app *app;
};

static void synced(int res, void *arg);

static void written(int res, void *arg)
{
	struct append *a = arg;
	agr_worker *w = agr_exchange_worker(a->ex);
	int ret;

	if (res < 0) {
		agr_exchange_done(a->ex, res);
		free(a);
		return;
	}
	a->ev->written += (unsigned)res;
	if (a->ev->written < a->ev->len) { /* a short write: go on */
		ret = agr_io_write(w, a->j->fd, a->ev->record + a->ev->written,
				   a->ev->len - a->ev->written,
				   a->j->offset + a->ev->written, written, a);
	} else {
		a->j->offset += a->ev->len;
		ret = agr_io_fsync(w, a->j->fd, AGR_IO_DATASYNC, synced, a);
	}
	if (ret < 0) {
		agr_exchange_done(a->ex, ret);
		free(a);
	}
}

static void synced(int res, void *arg)
{
	struct append *a = arg;

	atomic_fetch_add_explicit(&a->app->fsyncs, 1, memory_order_relaxed);
	agr_exchange_done(a->ex, res < 0 ? res : 0);
	free(a);
}

static int append_event(agr_exchange *ex, void *arg)
{
	struct app *app = arg;
	struct append *a = malloc(sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	a->ex = ex;
	a->ev = agr_exchange_message(ex)->user;
	a->j = &app->journals[agr_exchange_group(ex)];
	a->app = app;
	a->ev->written = 0;
	ret = agr_io_write(agr_exchange_worker(ex), a->j->fd, a->ev->record,
			   a->ev->len, a->j->offset, written, a);
	if (ret < 0) {
		free(a);
		return ret;
	}
	return AGR_PENDING;
}

static void acknowledged(agr_message *msg, int status, void *arg)
{
	struct app *app = arg;
	struct event *ev = msg->user;

	ev->latency_ns = now_ns() - ev->sent_ns;
	ev->durable = status == 0;
	if (status != 0)
		atomic_fetch_add(&app->failed, 1);
	atomic_fetch_add(&app->acked, 1);
}

/* ---- producers ---- */

struct producer {
	struct app *app;
	int index;
	pthread_t thread;
};

/*
 * Producer k sends the events of ids k, k+P, k+2P, ..., so every id has
 * one producer and its per-id order is the send order.
 */
static void *produce(void *arg)
{
	struct producer *p = arg;
	struct app *app = p->app;
	long i;
	int ret;

	for (i = 0; i < app->cfg.events; i++) {
		struct event *ev = &app->events[i];

		if (ev->id % app->cfg.producers != p->index)
			continue;
		ev->sent_ns = now_ns();
		while ((ret = agr_dispatcher_send(app->disp, &ev->msg)) ==
		       -EAGAIN)
			sched_yield();
		if (ret)
			die_errno("send", ret);
	}
	return NULL;
}

static void make_events(struct app *app)
{
	long *next_seq = calloc((size_t)app->cfg.ids, sizeof(long));
	unsigned seed = 12345;
	long i;

	app->id_names = calloc((size_t)app->cfg.ids, sizeof(*app->id_names));
	app->events = calloc((size_t)app->cfg.events, sizeof(*app->events));
	if (!next_seq || !app->id_names || !app->events)
		die_errno("allocating events", ENOMEM);
	for (int id = 0; id < app->cfg.ids; id++)
		snprintf(app->id_names[id], sizeof(app->id_names[id]),
			 "account-%d", id);
	for (i = 0; i < app->cfg.events; i++) {
		struct event *ev = &app->events[i];

		seed = seed * 1103515245u + 12345u;
		ev->id = (int)((seed >> 8) % (unsigned)app->cfg.ids);
		ev->seq = next_seq[ev->id]++;
		ev->msg.aggregate_id = app->id_names[ev->id];
		ev->msg.type = "Deposited";
		ev->msg.user = ev;
		ev->len = (unsigned)snprintf(ev->record, sizeof(ev->record),
					     "%d %ld\n", ev->id, ev->seq);
	}
	free(next_seq);
}

/* ---- files ---- */

static char *path_of(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		die_errno("asprintf", ENOMEM);
	return p;
}

static void open_journals(struct app *app)
{
	int g;

	mkdir(app->cfg.dir, 0755);
	app->journals = calloc((size_t)app->cfg.groups,
			       sizeof(*app->journals));
	if (!app->journals)
		die_errno("allocating journals", ENOMEM);
	for (g = 0; g < app->cfg.groups; g++) {
		char name[32], *path;

		snprintf(name, sizeof(name), "group-%d.log", g);
		path = path_of(app->cfg.dir, name);
		app->journals[g].fd = open(path, O_WRONLY | O_CREAT | O_TRUNC |
						 O_CLOEXEC, 0644);
		if (app->journals[g].fd < 0)
			die_errno(path, errno);
		free(path);
	}
}

/* DIR/acked: one line per id, "id count", for --verify. */
static void write_acked(struct app *app)
{
	long *count = calloc((size_t)app->cfg.ids, sizeof(long));
	char *path = path_of(app->cfg.dir, "acked");
	FILE *f = fopen(path, "w");
	long i;

	if (!count || !f)
		die_errno(path, errno ? errno : ENOMEM);
	for (i = 0; i < app->cfg.events; i++)
		if (app->events[i].durable)
			count[app->events[i].id]++;
	for (i = 0; i < app->cfg.ids; i++)
		fprintf(f, "%ld %ld\n", i, count[i]);
	if (fclose(f) != 0)
		die_errno(path, errno);
	free(count);
	free(path);
}

/* ---- verification ---- */

/* The acknowledged count of every id, as write_acked() listed them. */
static long *read_acked(const char *dir, long *ids)
{
	char *path = path_of(dir, "acked");
	FILE *f = fopen(path, "r");
	long id, n, *acked = NULL;

	if (!f)
		die_errno(path, errno);
	*ids = 0;
	/* write_acked() lists every id, in order from 0. */
	while (fscanf(f, "%ld %ld", &id, &n) == 2) {
		long *grown;

		if (id != *ids || n < 0)
			die_errno(path, EINVAL);
		grown = realloc(acked, (size_t)(*ids + 1) * sizeof(long));
		if (!grown)
			die_errno("allocating acked", ENOMEM);
		acked = grown;
		acked[(*ids)++] = n;
	}
	fclose(f);
	free(path);
	return acked;
}

static int verify(const char *dir)
{
	long id, ids, *acked = read_acked(dir, &ids), *seen, events = 0;
	long bad = 0, g;
	char *path;
	FILE *f;

	seen = calloc((size_t)ids + 1, sizeof(long));
	if (!seen)
		die_errno("allocating seen", ENOMEM);
	for (g = 0;; g++) {
		char name[32], line[RECORD_MAX];
		long seq;

		snprintf(name, sizeof(name), "group-%ld.log", g);
		path = path_of(dir, name);
		f = fopen(path, "r");
		free(path);
		if (!f)
			break;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "%ld %ld", &id, &seq) != 2 || id < 0 ||
			    id >= ids || seq != seen[id]) {
				/* Duplicated, lost or out of order. */
				if (bad++ < 10)
					fprintf(stderr, "verify: group %ld: "
						"unexpected record \"%.*s\"\n",
						g, (int)strcspn(line, "\n"),
						line);
				continue;
			}
			seen[id]++;
			events++;
		}
		fclose(f);
	}
	for (id = 0; id < ids; id++)
		if (seen[id] < acked[id]) {
			if (bad++ < 10)
				fprintf(stderr, "verify: id %ld: %ld of %ld "
					"acknowledged events found\n", id,
					seen[id], acked[id]);
		}
	printf("verify: %ld journals, %ld events, %ld ids: %s\n", g, events,
	       ids, bad ? "FAILED" : "every acknowledged event is there "
	       "exactly once, in per-id order");
	free(acked);
	free(seen);
	return bad ? 1 : 0;
}

/* ---- the run ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(struct app *app, double seconds)
{
	uint64_t *lat = malloc((size_t)app->cfg.events * sizeof(*lat));
	long i, n = 0;

	for (i = 0; i < app->cfg.events; i++)
		if (app->events[i].durable)
			lat[n++] = app->events[i].latency_ns;
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("journal: %ld events over %d ids, %d groups, %d workers, "
	       "%d producers\n", app->cfg.events, app->cfg.ids,
	       app->cfg.groups, app->cfg.workers, app->cfg.producers);
	printf("journal: %.0f durable events/s, %ld fdatasyncs, "
	       "ack latency p50 %.2f ms, p99 %.2f ms, failed %ld\n",
	       (double)app->cfg.events / seconds,
	       atomic_load(&app->fsyncs),
	       n ? (double)lat[n / 2] / 1e6 : 0.0,
	       n ? (double)lat[(n * 99) / 100] / 1e6 : 0.0,
	       atomic_load(&app->failed));
	free(lat);
}

static void start_dispatcher(struct app *app)
{
	agr_supplier *sup;
	agr_dispatcher_options o = {
		.size = sizeof(agr_dispatcher_options), /* as its _INIT */
		.name = "journal",
		.named_aggregate = { "ledger", "Account" },
		.parallelism = app->cfg.groups,
		.owns_supplier = true,
		.on_complete = acknowledged,
		.complete_arg = app,
	};
	int ret;

	ret = agr_supplier_new("journal", app->cfg.workers, &sup);
	if (ret)
		die_errno("agr_supplier_new", ret);
	o.supplier = sup;
	ret = agr_dispatcher_new(&o, &app->disp);
	if (ret)
		die_errno("agr_dispatcher_new (is io_uring available?)", ret);
	ret = agr_dispatcher_register(app->disp, "Deposited", append_event, app);
	if (ret)
		die_errno("agr_dispatcher_register", ret);
	ret = agr_dispatcher_start(app->disp);
	if (ret)
		die_errno("agr_dispatcher_start", ret);
}

static int run(struct app *app)
{
	struct producer *p = calloc((size_t)app->cfg.producers, sizeof(*p));
	uint64_t t0;
	int i, ret;

	make_events(app);
	open_journals(app);
	start_dispatcher(app);
	t0 = now_ns();
	for (i = 0; i < app->cfg.producers; i++) {
		p[i].app = app;
		p[i].index = i;
		pthread_create(&p[i].thread, NULL, produce, &p[i]);
	}
	for (i = 0; i < app->cfg.producers; i++)
		pthread_join(p[i].thread, NULL);
	/* Graceful stop under a deadline: every admitted event completes. */
	ret = agr_dispatcher_stop_gracefully(app->disp, 60ull * 1000000000ull);
	if (ret)
		die_errno("agr_dispatcher_stop_gracefully", ret);
	report(app, (double)(now_ns() - t0) / 1e9);
	agr_dispatcher_free(app->disp);
	for (i = 0; i < app->cfg.groups; i++)
		close(app->journals[i].fd);
	write_acked(app);
	free(p);
	free(app->journals);
	free(app->events);
	free(app->id_names);
	return atomic_load(&app->failed) ? 1 : 0;
}

static const char usage_text[] =
	"usage: journal [-d DIR] [-n EVENTS] [-i IDS] [-p PRODUCERS] "
	"[-w WORKERS] [-g GROUPS]\n"
	"       journal --verify [-d DIR]\n";

static long positive(const char *s)
{
	return opts_number(s, 1, INT_MAX);
}

static void parse(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		{ "verify", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;

	*c = (struct config){ .dir = "journal-data", .events = 200000,
			      .ids = 10000, .producers = 2, .workers = 2,
			      .groups = 64 };
	while ((ch = getopt_long(argc, argv, "d:n:i:p:w:g:h", opts, NULL)) !=
	       -1) {
		switch (ch) {
		case 'd': c->dir = optarg; break;
		case 'n': c->events = positive(optarg); break;
		case 'i': c->ids = (int)positive(optarg); break;
		case 'p': c->producers = (int)positive(optarg); break;
		case 'w': c->workers = (int)positive(optarg); break;
		case 'g': c->groups = (int)positive(optarg); break;
		case 'v': c->verify = true; break;
		case 'h': opts_help();
		default: opts_bad();
		}
	}
}

int main(int argc, char **argv)
{
	struct app app = { .acked = 0 };

	opts_init("journal", usage_text);
	parse(argc, argv, &app.cfg);
	if (app.cfg.verify)
		return verify(app.cfg.dir);
	return run(&app);
}
