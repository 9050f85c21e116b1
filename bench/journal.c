/* SPDX-License-Identifier: MIT */
/*
 * bench/journal - durable appends: every message appends a 128-byte
 * record to its journal file and completes only once fdatasync made the
 * record durable. aggring (write + fdatasync on the ring) against the
 * peers (pwrite + fdatasync in the handler, one fdatasync per message
 * or one per activation of up to 64 messages), alternating engines in
 * every round.
 *
 *   journal [-d DIR] [-j JOURNALS] [-i IDS] [-S SUBGROUPS] [-s SECONDS]
 *           [-r RUNS] [-T THREADS] [-o CSVDIR] [-q]
 *
 * Journals. There are JOURNALS files (default 64), one per group of the
 * peers: an id's records go to journal agr_group_key(id, JOURNALS) for
 * every engine, in the id's send order.
 *
 * Group commit in aggring. A dispatcher group handles one message at a
 * time and holds it until the record is durable, so a handler never
 * sees a second message of its group: commit batching has to come from
 * several groups sharing one journal, as in examples/ledger/ledger_server.c.
 * The dispatcher has SUBGROUPS (default 64, the peers' drain limit)
 * groups per journal, all on the journal's worker (custom group key:
 * group = sub * J' + journal, J' the journal count rounded up to a
 * multiple of the workers, so group % workers = journal % workers).
 * The handler stages its record in the journal's filling batch and
 * returns AGR_PENDING; one write + one fdatasync per journal is in
 * flight at a time, and the batch gathered meanwhile starts at the end
 * of the worker's turn (a task queued behind the groups woken by the
 * last fdatasync, so that they add their records first). When the
 * fdatasync returns, the batch's messages complete in staging order.
 * An id always maps to the same group, which is serial, so its records
 * are staged, written and acknowledged in send order. "aggring-s1" is
 * the same with one group per journal: one record per fdatasync.
 *
 * The producer sends every message of a run at once, so the peers'
 * queues are deep and their group commit gets full batches. Each run
 * rereads every journal and checks that it holds exactly the expected
 * records, each id's in order, and nothing else; with the per-id order
 * and exactly-once check of the harness, a broken run is not reported.
 * Files live in DIR/aggring-bench-journal-PID/ (a disk filesystem, not
 * tmpfs) and are removed after each run.
 */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring.h>

#include "harness.h"
#include "peer.h"

#define WORKLOAD "journal"
#define RECORD 128

struct config {
	const char *dir;
	char rundir[4096];
	int journals;
	int ids;
	int sub;
	int workers;
	struct bench_timed timed; /* -s, -r, -T, -o, -q */
};

/* Per id: its name, journal and aggring group. */
struct id_info {
	char name[24]; /* "acct-" and 16 hex digits */
	int journal;
	int sub; /* rank among its journal's ids, modulo SUBGROUPS */
};

struct item {
	agr_message msg;
	struct peer_msg peer;
	agr_exchange *ex;
	int id;
	int seq;
	int group; /* aggring dispatcher group */
};

struct batch {
	char *data;
	size_t len;
	struct item **items;
	int count, cap;
};

/* One journal file; touched only by its group's or worker's thread. */
struct journal {
	_Alignas(64) int fd;
	uint64_t offset; /* end of what is durable */
	struct batch batches[2];
	struct batch *filling;	/* gathers the next batch */
	struct batch *flushing; /* written and synced now; NULL if idle */
	size_t written;		/* bytes of `flushing` written so far */
	bool kicked;		/* a journal_kick() task is queued */
	unsigned worker;
	struct run *run;
};

struct run {
	const struct config *cfg;
	const struct id_info *ids;
	struct journal *journals;
	struct bench_order order;
	atomic_long syncs;
	/* aggring */
	agr_dispatcher *disp;
	agr_scheduler *sched;
	int stride; /* J': journals rounded up to a multiple of workers */
	/* peers */
	const struct peer_engine *engine;
	struct peer *peer;
	bool group_commit;
};

static void die(const char *what, int err)
{
	fprintf(stderr, WORKLOAD ": %s: %s\n", what,
		strerror(err < 0 ? -err : err));
	exit(1);
}

/* "id seq" padded to RECORD bytes, ending in a newline. */
static void format_record(char *dst, int id, int seq)
{
	int n = snprintf(dst, RECORD, "%d %d ", id, seq);

	memset(dst + n, '.', (size_t)(RECORD - 1 - n));
	dst[RECORD - 1] = '\n';
}

/* ---- aggring: per-journal commit queue on the journal's worker ---- */

static void journal_written(int res, void *arg);
static void journal_synced(int res, void *arg);

static void journal_write_more(struct journal *j)
{
	struct batch *b = j->flushing;
	int ret;

	ret = agr_io_write(agr_worker_current(), j->fd, b->data + j->written,
			   (unsigned)(b->len - j->written),
			   j->offset + j->written, journal_written, j);
	if (ret < 0)
		die("agr_io_write", ret);
}

static void journal_kick(void *arg)
{
	struct journal *j = arg;

	j->kicked = false;
	if (j->flushing || j->filling->count == 0)
		return;
	j->flushing = j->filling;
	j->filling = j->filling == &j->batches[0] ? &j->batches[1] :
						    &j->batches[0];
	j->written = 0;
	journal_write_more(j);
}

/*
 * Starts the gathered batch at the end of this turn of the worker's
 * loop: the task queues behind the groups that are ready to run, so
 * each of them stages its record first.
 */
static void journal_schedule(struct journal *j)
{
	int ret;

	if (j->kicked || j->flushing || j->filling->count == 0)
		return;
	j->kicked = true;
	ret = agr_scheduler_schedule(j->run->sched, j->worker, journal_kick,
				     j);
	if (ret < 0)
		die("agr_scheduler_schedule", ret);
}

static void journal_written(int res, void *arg)
{
	struct journal *j = arg;
	int ret;

	if (res <= 0)
		die("journal write", res < 0 ? res : -EIO);
	j->written += (size_t)res;
	if (j->written < j->flushing->len) {
		journal_write_more(j); /* a short write: go on */
		return;
	}
	ret = agr_io_fsync(agr_worker_current(), j->fd, AGR_IO_DATASYNC,
			   journal_synced, j);
	if (ret < 0)
		die("agr_io_fsync", ret);
}

/* The batch is durable: complete its messages in order, start the next. */
static void journal_synced(int res, void *arg)
{
	struct journal *j = arg;
	struct batch *b = j->flushing;
	int i;

	if (res < 0)
		die("journal fdatasync", res);
	atomic_fetch_add_explicit(&j->run->syncs, 1, memory_order_relaxed);
	j->offset += b->len;
	/*
	 * b stays `flushing` meanwhile: a group that moves on stages its
	 * next record in the filling batch and cannot start it yet.
	 */
	for (i = 0; i < b->count; i++) {
		struct item *it = b->items[i];

		bench_order_see(&j->run->order, it->id, it->seq);
		agr_exchange_done(it->ex, 0);
	}
	b->count = 0;
	b->len = 0;
	j->flushing = NULL;
	journal_schedule(j);
}

static int agr_append(agr_exchange *ex, void *arg)
{
	struct run *r = arg;
	struct item *it = agr_exchange_message(ex)->user;
	struct journal *j = &r->journals[r->ids[it->id].journal];
	struct batch *b = j->filling;

	/* A group stages one record at a time: cap is the group count. */
	if (b->count == b->cap)
		return -EOVERFLOW;
	it->ex = ex;
	format_record(b->data + b->len, it->id, it->seq);
	b->len += RECORD;
	b->items[b->count++] = it;
	journal_schedule(j);
	return AGR_PENDING;
}

static void agr_completed(agr_message *msg, int status, void *arg)
{
	(void)msg;
	(void)arg;
	if (status != 0)
		die("aggring append", status);
}

static int agr_group(const agr_message *msg, int parallelism, void *arg)
{
	(void)parallelism;
	(void)arg;
	return ((const struct item *)msg->user)->group;
}

static void make_dispatcher(struct run *r, int sub)
{
	agr_dispatcher_options o = {
		.name = "bench",
		.named_aggregate = { "bench", "Journal" },
		.parallelism = sub * r->stride,
		.on_complete = agr_completed,
		.complete_arg = r,
		.group_key = agr_group,
	};

	r->disp = bench_agr_start(WORKLOAD, r->cfg->workers, &o, agr_append,
				  r);
	r->sched = agr_dispatcher_scheduler(r->disp);
}

/* ---- peers: pwrite + fdatasync in the handler ---- */

static void pwrite_all(int fd, const char *buf, size_t len, uint64_t off)
{
	ssize_t n;

	while (len) {
		n = pwrite(fd, buf, len, (off_t)off);
		if (n <= 0)
			die("pwrite", n < 0 ? errno : EIO);
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
}

static void sync_journal(struct run *r, struct journal *j)
{
	if (fdatasync(j->fd) < 0)
		die("fdatasync", errno);
	atomic_fetch_add_explicit(&r->syncs, 1, memory_order_relaxed);
}

/* Naive: one pwrite and one fdatasync per message. */
static void peer_append_naive(struct run *r, struct item **its, int n)
{
	struct journal *j = &r->journals[r->ids[its[0]->id].journal];
	char rec[RECORD];
	int i;

	for (i = 0; i < n; i++) {
		format_record(rec, its[i]->id, its[i]->seq);
		pwrite_all(j->fd, rec, RECORD, j->offset);
		j->offset += RECORD;
		sync_journal(r, j);
		bench_order_see(&r->order, its[i]->id, its[i]->seq);
	}
}

/* Group commit: one pwrite and one fdatasync for the whole activation. */
static void peer_append_group(struct run *r, struct item **its, int n)
{
	struct journal *j = &r->journals[r->ids[its[0]->id].journal];
	char buf[PEER_DRAIN_LIMIT * RECORD];
	int i;

	for (i = 0; i < n; i++)
		format_record(buf + (size_t)i * RECORD, its[i]->id,
			      its[i]->seq);
	pwrite_all(j->fd, buf, (size_t)n * RECORD, j->offset);
	j->offset += (uint64_t)n * RECORD;
	sync_journal(r, j);
	for (i = 0; i < n; i++)
		bench_order_see(&r->order, its[i]->id, its[i]->seq);
}

static void peer_append(struct peer_msg **msgs, int n, void *arg)
{
	struct item *its[PEER_DRAIN_LIMIT];
	struct run *r = arg;
	int i;

	for (i = 0; i < n; i++)
		its[i] = msgs[i]->user;
	if (r->group_commit)
		peer_append_group(r, its, n);
	else
		peer_append_naive(r, its, n);
}

/* ---- files ---- */

static const char *pick_dir(const char *asked)
{
	return bench_disk_dir(WORKLOAD, asked, "where fdatasync costs nothing");
}

static void journal_path(const struct config *c, int j, char *path,
			 size_t size)
{
	snprintf(path, size, "%s/j-%d.log", c->rundir, j);
}

static void sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		die(dir, errno);
	close(fd);
}

/* Empty journal files whose names are durable, as a service would have. */
static struct journal *open_journals(struct run *r, int sub)
{
	const struct config *c = r->cfg;
	struct journal *js;
	char path[4200];
	int j, k;

	js = aligned_alloc(64, (size_t)c->journals * sizeof(*js));
	if (!js)
		die("allocating journals", ENOMEM);
	memset(js, 0, (size_t)c->journals * sizeof(*js));
	for (j = 0; j < c->journals; j++) {
		journal_path(c, j, path, sizeof(path));
		js[j].fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				0644);
		if (js[j].fd < 0)
			die(path, errno);
		js[j].worker = (unsigned)(j % c->workers);
		js[j].run = r;
		for (k = 0; k < 2; k++) {
			struct batch *b = &js[j].batches[k];

			b->cap = sub;
			b->data = malloc((size_t)sub * RECORD);
			b->items = calloc((size_t)sub, sizeof(*b->items));
			if (!b->data || !b->items)
				die("allocating batches", ENOMEM);
		}
		js[j].filling = &js[j].batches[0];
	}
	sync_dir(c->rundir);
	return js;
}

/*
 * Rereads every journal: it must hold exactly `expect[id]` records of
 * each of its ids, each id's in seq order 0, 1, ..., and nothing else.
 */
static void verify_journals(struct run *r, const int *expect,
			    const char *engine)
{
	const struct config *c = r->cfg;
	int *next = calloc((size_t)c->ids, sizeof(int));
	char path[4200], rec[RECORD];
	long bad = 0;
	int j, id, seq, end;
	FILE *f;

	if (!next)
		die("verify", ENOMEM);
	for (j = 0; j < c->journals; j++) {
		journal_path(c, j, path, sizeof(path));
		f = fopen(path, "r");
		if (!f)
			die(path, errno);
		while (fread(rec, 1, RECORD, f) == RECORD) {
			end = 0;
			if (rec[RECORD - 1] != '\n' ||
			    sscanf(rec, "%d %d %n", &id, &seq, &end) != 2 ||
			    !end || id < 0 || id >= c->ids ||
			    r->ids[id].journal != j || seq != next[id]) {
				if (bad++ < 5)
					fprintf(stderr, "%s: %s: unexpected "
						"record \"%.24s...\"\n",
						engine, path, rec);
				continue;
			}
			next[id]++;
		}
		if (ferror(f) || !feof(f) || ftell(f) % RECORD) {
			if (bad++ < 5)
				fprintf(stderr, "%s: %s: torn or unreadable "
					"tail\n", engine, path);
		}
		fclose(f);
	}
	for (id = 0; id < c->ids; id++)
		if (next[id] != expect[id] && bad++ < 5)
			fprintf(stderr, "%s: id %d: %d of %d records in its "
				"journal\n", engine, id, next[id], expect[id]);
	free(next);
	if (bad) {
		fprintf(stderr, WORKLOAD ": %s: the journals do not hold "
			"exactly the acknowledged records in per-id order "
			"(%ld problems); no result reported\n", engine, bad);
		exit(1);
	}
}

static void close_journals(struct run *r)
{
	const struct config *c = r->cfg;
	char path[4200];
	int j, k;

	for (j = 0; j < c->journals; j++) {
		close(r->journals[j].fd);
		journal_path(c, j, path, sizeof(path));
		unlink(path);
		for (k = 0; k < 2; k++) {
			free(r->journals[j].batches[k].data);
			free(r->journals[j].batches[k].items);
		}
	}
	free(r->journals);
}

/* ---- one run ---- */

struct engine {
	const char *name;
	const struct peer_engine *peer; /* NULL: aggring */
	int sub;			/* aggring: groups per journal */
	bool group_commit;		/* peers */
	char label[32];
};

struct result {
	double rate;	/* durable messages/s */
	double per_sync; /* records per fdatasync */
};

/* `n` messages: message i is seq i / ids of id i % ids; expect[id]
 * ends as the number of messages of id. */
static struct item *make_items(const struct run *r, int sub, long n,
			       int *expect)
{
	struct item *items = calloc((size_t)n, sizeof(*items));
	const struct id_info *ids = r->ids;
	long i;

	if (!items)
		die("allocating messages", ENOMEM);
	for (i = 0; i < n; i++) {
		struct item *it = &items[i];

		it->id = (int)(i % r->cfg->ids);
		it->seq = expect[it->id]++;
		it->group = (ids[it->id].sub % sub) * r->stride +
			    ids[it->id].journal;
		it->msg.aggregate_id = ids[it->id].name;
		it->msg.user = it;
		it->peer.id = ids[it->id].name;
		it->peer.user = it;
	}
	return items;
}

/* One run of engine e over n messages (make_items). */
static struct result run_once(const struct config *c,
			      const struct id_info *ids,
			      const struct engine *e, long n)
{
	struct run r = { .cfg = c, .ids = ids, .engine = e->peer,
			 .group_commit = e->group_commit };
	int *expect = calloc((size_t)c->ids, sizeof(int));
	struct item *items;
	struct result res;
	uint64_t t0, t1;
	long i;

	if (!expect)
		die("allocating messages", ENOMEM);
	r.stride = (c->journals + c->workers - 1) / c->workers * c->workers;
	items = make_items(&r, e->sub, n, expect);
	atomic_init(&r.syncs, 0);
	bench_order_init(&r.order, c->ids, n);
	r.journals = open_journals(&r, e->peer ? 1 : e->sub);
	if (e->peer) {
		r.peer = e->peer->create(c->timed.peer_threads, c->journals,
					 peer_append, &r);
		if (!r.peer)
			die(e->label, ENOMEM);
	} else {
		make_dispatcher(&r, e->sub);
	}
	t0 = bench_now_ns();
	for (i = 0; i < n; i++) {
		int ret = 0;

		if (e->peer)
			e->peer->send(r.peer, &items[i].peer);
		else
			ret = agr_dispatcher_send(r.disp, &items[i].msg);
		if (ret)
			die("agr_dispatcher_send", ret);
	}
	bench_order_wait(&r.order);
	t1 = bench_now_ns();
	if (e->peer) {
		e->peer->destroy(r.peer);
	} else {
		agr_dispatcher_stop_gracefully(r.disp, 60ull * 1000000000ull);
		agr_dispatcher_free(r.disp);
	}
	bench_order_verify(&r.order, e->label);
	verify_journals(&r, expect, e->label);
	close_journals(&r);
	bench_order_destroy(&r.order);
	res.rate = (double)n / ((double)(t1 - t0) / 1e9);
	res.per_sync = (double)n / (double)atomic_load(&r.syncs);
	free(items);
	free(expect);
	return res;
}

/* ---- main ---- */

enum { MAX_ENGINES = 10 };

/* splitmix64's finaliser: a bijection that scatters the bits. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static struct id_info *make_ids(const struct config *c)
{
	struct id_info *ids = calloc((size_t)c->ids, sizeof(*ids));
	int *rank = calloc((size_t)c->journals, sizeof(int));
	int id;

	if (!ids || !rank)
		die("allocating ids", ENOMEM);
	for (id = 0; id < c->ids; id++) {
		/*
		 * Scattered names, as account ids or UUIDs are: sequential
		 * "acct-N" would crowd some journals (the Java string hash
		 * modulo a power of two keeps only its low bits).
		 */
		snprintf(ids[id].name, sizeof(ids[id].name), "acct-%016" PRIx64,
			 mix64((uint64_t)id));
		ids[id].journal = agr_group_key(ids[id].name, c->journals);
		ids[id].sub = rank[ids[id].journal]++ % c->sub;
	}
	free(rank);
	return ids;
}

static void parse(int argc, char **argv, struct config *c)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_TEXT('d', "DIR", c->dir,
			       "where the journals live during a run (a disk\n"
			       "filesystem, not tmpfs; default /var/tmp, else "
			       ".)"),
		BENCH_OPT_INT('j', "JOURNALS", c->journals, 1, 4096,
			      "journal files = peer groups (default 64)"),
		BENCH_OPT_INT('i', "IDS", c->ids, 1, 1 << 20,
			      "aggregate ids (default 4096)"),
		BENCH_OPT_INT('S', "SUBGROUPS", c->sub, 1, 4096,
			      "aggring dispatcher groups per journal (default "
			      "64)"),
		BENCH_OPTS_TIMED(c->timed, "write CSVDIR/journal.csv"),
		BENCH_OPT_END,
	};

	*c = (struct config){ .journals = 64, .ids = 4096, .sub = 64,
			      .workers = bench_cpus() };
	bench_timed_init(&c->timed);
	bench_options(argc, argv, WORKLOAD, opts);
}

static int list_engines(const struct config *c, struct engine *e)
{
	int n = 0, i;

	e[n] = (struct engine){ .name = "aggring", .sub = c->sub };
	snprintf(e[n].label, sizeof(e[n].label), "aggring");
	n++;
	if (c->sub > 1) {
		e[n] = (struct engine){ .name = "aggring", .sub = 1 };
		snprintf(e[n].label, sizeof(e[n].label), "aggring-s1");
		n++;
	}
	for (i = 0; peer_engines[i] && n + 2 <= MAX_ENGINES; i++) {
		e[n] = (struct engine){ .name = peer_engines[i]->name,
					.peer = peer_engines[i], .sub = 1 };
		snprintf(e[n].label, sizeof(e[n].label), "%s-naive",
			 peer_engines[i]->name);
		n++;
		e[n] = (struct engine){ .name = peer_engines[i]->name,
					.peer = peer_engines[i], .sub = 1,
					.group_commit = true };
		snprintf(e[n].label, sizeof(e[n].label), "%s-group",
			 peer_engines[i]->name);
		n++;
	}
	return n;
}

/* The summaries, the records per fdatasync and the ratios to peers. */
static void report(const struct config *c, const struct engine *e, int ne,
		   double *const *v, const double *per_sync, FILE *csv)
{
	struct bench_summary s[MAX_ENGINES];
	bool targets = c->timed.peer_threads == c->workers;
	int i;

	printf("\n%s: 128-byte durable appends (write + fdatasync before "
	       "completion), %d runs of ~%.1f s\n", WORKLOAD, c->timed.runs,
	       c->timed.seconds);
	for (i = 0; i < ne; i++) {
		s[i] = bench_summarize(v[i], c->timed.runs);
		bench_print_row(e[i].label, "k/s", s[i]);
		bench_csv_row(csv, WORKLOAD, "append128", e[i].label,
			      "durable_msgs", "k msg/s", s[i], c->timed.runs);
	}
	printf("  records per fdatasync (mean):");
	for (i = 0; i < ne; i++)
		printf(" %s %.1f%s", e[i].label, per_sync[i],
		       i + 1 < ne ? "," : "\n");
	for (i = 1; i < ne; i++) {
		if (!e[i].peer)
			continue;
		printf("  aggring / %-14s = %6.2f%s\n", e[i].label,
		       s[i].median > 0 ? s[0].median / s[i].median : 0,
		       targets && !strcmp(e[i].label, "pthread-naive") ?
		       "  (target >= 2)" :
		       targets && !strcmp(e[i].label, "pthread-group") ?
		       "  (target >= 1.0)" : "");
	}
}

/* A warm-up run per engine sizes its runs to about -s seconds; then the
 * engines take turns, run by run. */
static void run_all(const struct config *c, const struct id_info *ids,
		    const struct engine *e, int ne, double **v,
		    double *per_sync)
{
	long total[MAX_ENGINES];
	int i, k;

	for (i = 0; i < ne; i++) {
		struct result w = run_once(c, ids, &e[i], 2048);

		total[i] = (long)(w.rate * c->timed.seconds);
		if (total[i] < 1024)
			total[i] = 1024;
		v[i] = calloc((size_t)c->timed.runs, sizeof(double));
		if (!v[i])
			die("allocating results", ENOMEM);
		per_sync[i] = 0;
	}
	for (k = 0; k < c->timed.runs; k++)
		for (i = 0; i < ne; i++) {
			struct result res = run_once(c, ids, &e[i], total[i]);

			v[i][k] = res.rate / 1e3;
			per_sync[i] += res.per_sync / c->timed.runs;
		}
}

int main(int argc, char **argv)
{
	struct engine e[MAX_ENGINES];
	double *v[MAX_ENGINES], per_sync[MAX_ENGINES];
	struct id_info *ids;
	struct config c;
	int ne, i;
	FILE *csv;

	parse(argc, argv, &c);
	c.dir = pick_dir(c.dir);
	snprintf(c.rundir, sizeof(c.rundir), "%s/aggring-bench-journal-%d",
		 c.dir, (int)getpid());
	if (mkdir(c.rundir, 0755) < 0)
		die(c.rundir, errno);
	bench_print_env(stdout, WORKLOAD);
	printf("journals: %s/j-*.log (%d files, removed after each run); "
	       "%d ids;\n  aggring: %d workers, %d dispatcher groups per "
	       "journal; peers: %d threads, %d groups,\n  one per journal\n",
	       c.rundir, c.journals, c.ids, c.workers, c.sub,
	       c.timed.peer_threads, c.journals);
	ids = make_ids(&c);
	ne = list_engines(&c, e);
	csv = bench_csv_open(c.timed.csv_dir, WORKLOAD);
	run_all(&c, ids, e, ne, v, per_sync);
	report(&c, e, ne, v, per_sync, csv);
	bench_csv_close(csv);
	for (i = 0; i < ne; i++)
		free(v[i]);
	free(ids);
	if (rmdir(c.rundir) < 0)
		die(c.rundir, errno);
	return 0;
}
