/* SPDX-License-Identifier: MIT */
/*
 * bench/direct_read - random 4 KiB reads of a 1 GiB file, one read per
 * message: aggring (agr_io_read on the group's ring, AGR_PENDING until
 * the CQE) against the peers (pread inside the handler) and against fio
 * (io_uring engine) at the same total queue depth, in one session,
 * alternating engines in every round.
 *
 *   direct_read [-d DIR] [-D DEPTH] [-s SECONDS] [-r RUNS] [-T THREADS]
 *               [-o CSVDIR] [-q]
 *
 * Variants: "direct" opens the file with O_DIRECT (every read goes to the
 * device); "cached" opens it without, after reading the whole file once
 * so that every read is a page cache hit.
 *
 * Total queue depth. The producer keeps a window of DEPTH messages
 * outstanding: DEPTH slots, slot s sends its next message when its
 * previous one completed (closed loop, resent from the completion). Slot
 * s owns one aggregate id chosen so that it maps to group s of DEPTH
 * groups, so no two outstanding messages wait on the same group: for
 * aggring, DEPTH groups have one read in flight each on the rings of
 * the CPU-count workers, i.e. DEPTH reads queued at the device. fio
 * runs at the same total: numjobs = workers, iodepth = DEPTH / workers.
 * The peers get the same window, but a pread blocks its pool thread, so
 * their real depth is their thread count (default: CPUs, as many as
 * aggring's workers; -T changes it): that is the difference this
 * workload shows.
 *
 * One more row, "io_uring", is no engine: the same slots read by one
 * bare liburing loop per worker (SINGLE_ISSUER | DEFER_TASKRUN, as
 * aggring's rings; submit and wait for one completion; like aggring,
 * it hands reads to the kernel AGR_SUBMIT_BATCH at a time, default 4,
 * while it resends from a batch of completions), with no dispatcher,
 * groups or callbacks around the reads. aggring / io_uring
 * is what the engine costs; io_uring / fio is what fio's own loop gains
 * over a plain one.
 *
 * Every run checks per-id order and exactly-once completion and that
 * each read returned 4096 bytes; a broken run is not reported. Each
 * figure is the median of RUNS runs (min, max, spread); the ratios are
 * the result, as absolute numbers drift on a shared machine.
 */
#include "config.h"

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "harness.h"
#include "peer.h"

#define WORKLOAD "direct_read"
#define FILE_SIZE (1ull << 30)
#define BLOCK 4096u
#define BLOCKS (FILE_SIZE / BLOCK)
#define FILE_NAME "aggring-bench-direct_read-1g.dat"

struct config {
	const char *dir;
	int depth;
	int workers;
	struct bench_timed timed; /* -s, -r, -T, -o, -q */
};

/* One slot of the window: one id, one message at a time. */
struct slot {
	agr_message msg;
	struct peer_msg peer;
	agr_exchange *ex;
	struct run *run;
	void *buf; /* BLOCK bytes, BLOCK-aligned (O_DIRECT) */
	uint64_t offset;
	uint64_t rng;
	int id;
	int seq;   /* of the message in flight */
	int quota; /* messages this slot sends in the run */
};

struct run {
	int fd;
	struct bench_order order;
	struct slot *slots;
	int nslots;
	atomic_long failed;
	/* aggring */
	agr_dispatcher *disp;
	/* peers */
	const struct peer_engine *engine;
	struct peer *peer;
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* The next message of the slot: a new random block, the next seq. */
static void slot_next(struct slot *s)
{
	s->offset = (xorshift(&s->rng) % BLOCKS) * BLOCK;
	s->seq++;
}

static void read_finished(struct slot *s, ssize_t res)
{
	if (res != BLOCK)
		atomic_fetch_add(&s->run->failed, 1);
	bench_order_see(&s->run->order, s->id, s->seq);
}

/* ---- aggring: agr_io_read on the ring, the group waits ---- */

static void agr_read_done(int res, void *arg)
{
	struct slot *s = arg;

	read_finished(s, res);
	agr_exchange_done(s->ex, res == BLOCK ? 0 : res < 0 ? res : -EIO);
}

static int agr_read(agr_exchange *ex, void *arg)
{
	struct slot *s = agr_exchange_message(ex)->user;
	int ret;

	(void)arg;
	s->ex = ex;
	ret = agr_io_read(agr_exchange_worker(ex), s->run->fd, s->buf, BLOCK,
			  s->offset, agr_read_done, s);
	return ret < 0 ? ret : AGR_PENDING;
}

static void agr_send(struct slot *s)
{
	int ret;

	memset(&s->msg.internal_, 0, sizeof(s->msg.internal_));
	ret = agr_dispatcher_send(s->run->disp, &s->msg);
	if (ret) {
		fprintf(stderr, WORKLOAD ": send: %s\n", agr_strerror(ret));
		exit(1);
	}
}

/* The window: a completed slot sends its next message. */
static void agr_completed(agr_message *msg, int status, void *arg)
{
	struct slot *s = msg->user;

	(void)arg;
	if (status != 0) {
		fprintf(stderr, WORKLOAD ": aggring read failed: %s\n",
			agr_strerror(status));
		exit(1);
	}
	if (s->seq + 1 < s->quota) {
		slot_next(s);
		agr_send(s);
	}
}

static agr_dispatcher *make_dispatcher(struct run *r, int workers)
{
	agr_dispatcher_options o = {
		.name = "bench",
		.named_aggregate = { "bench", "Block" },
		.parallelism = r->nslots,
		.on_complete = agr_completed,
		.complete_arg = r,
	};

	return bench_agr_start(WORKLOAD, workers, &o, agr_read, NULL);
}

/* ---- peers: pread in the handler ---- */

static void peer_read(struct peer_msg **msgs, int n, void *arg)
{
	struct run *r = arg;
	int i;

	for (i = 0; i < n; i++) {
		struct slot *s = msgs[i]->user;

		read_finished(s, pread(r->fd, s->buf, BLOCK,
				       (off_t)s->offset));
		if (s->seq + 1 < s->quota) {
			slot_next(s);
			r->engine->send(r->peer, &s->peer);
		}
	}
}

/* ---- io_uring: a bare ring per worker, no engine ---- */

/* Named like a peer, run by run_bare(): only its name is used. */
static const struct peer_engine bare_uring = { .name = "io_uring" };

struct bare_thread {
	struct run *run;
	int first, step; /* its slots: first, first + step, ... */
	unsigned submit_batch; /* as aggring's AGR_SUBMIT_BATCH */
	pthread_barrier_t *ready;
	uint64_t started_ns; /* when it began to read */
	pthread_t tid;
};

/* A read of slot s; the waiting ones go first once a batch waits. */
static void bare_prep(struct io_uring *ring, struct slot *s,
		      unsigned submit_batch)
{
	struct io_uring_sqe *sqe;

	if (submit_batch && io_uring_sq_ready(ring) >= submit_batch)
		io_uring_submit(ring);
	/* Never NULL: the ring has an entry for each of its slots. */
	sqe = io_uring_get_sqe(ring);

	io_uring_prep_read(sqe, s->run->fd, s->buf, BLOCK, s->offset);
	io_uring_sqe_set_data(sqe, s);
}

static void bare_ring_init(struct io_uring *ring, unsigned entries)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_SINGLE_ISSUER |
			 IORING_SETUP_DEFER_TASKRUN,
	};
	int ret = io_uring_queue_init_params(entries, ring, &p);

	if (ret == -EINVAL) { /* before 6.1 */
		p.flags = 0;
		ret = io_uring_queue_init_params(entries, ring, &p);
	}
	if (ret < 0) {
		fprintf(stderr, WORKLOAD ": io_uring: %s\n", strerror(-ret));
		exit(1);
	}
}

/* Reads its slots until each has sent its quota. */
static void *bare_loop(void *arg)
{
	struct bare_thread *t = arg;
	struct run *r = t->run;
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	int live = 0, i, ret;

	bare_ring_init(&ring, (unsigned)((r->nslots + t->step - 1) / t->step));
	for (i = t->first; i < r->nslots; i += t->step, live++)
		bare_prep(&ring, &r->slots[i], t->submit_batch);
	pthread_barrier_wait(t->ready);
	t->started_ns = bench_now_ns();
	while (live > 0) {
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR) {
			fprintf(stderr, WORKLOAD ": io_uring_submit_and_wait:"
				" %s\n", strerror(-ret));
			exit(1);
		}
		seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			struct slot *s = io_uring_cqe_get_data(cqe);

			read_finished(s, cqe->res);
			seen++;
			if (s->seq + 1 < s->quota) {
				slot_next(s);
				bare_prep(&ring, s, t->submit_batch);
			} else {
				live--;
			}
		}
		io_uring_cq_advance(&ring, seen);
	}
	io_uring_queue_exit(&ring);
	return NULL;
}

/* AGR_SUBMIT_BATCH as aggring reads it: 0..256, else the default 4. */
static unsigned submit_batch_setting(void)
{
	const char *s = getenv("AGR_SUBMIT_BATCH");
	char *end;
	long v;

	if (!s || !*s)
		return 4;
	v = strtol(s, &end, 10);
	return *end || v < 0 || v > 256 ? 4 : (unsigned)v;
}

/*
 * Runs the slots of r on `threads` bare rings; returns when all are
 * done, with *t0 the time the first of them began to read (not when
 * this thread got past the barrier: it may get the CPU only after a
 * short run has ended).
 */
static void run_bare(struct run *r, int threads, uint64_t *t0)
{
	struct bare_thread *t = calloc((size_t)threads, sizeof(*t));
	unsigned submit_batch = submit_batch_setting();
	pthread_barrier_t ready;
	int i;

	if (!t || pthread_barrier_init(&ready, NULL, (unsigned)threads + 1))
		exit(1);
	for (i = 0; i < threads; i++) {
		t[i] = (struct bare_thread){ .run = r, .first = i,
					     .step = threads,
					     .submit_batch = submit_batch,
					     .ready = &ready };
		if (pthread_create(&t[i].tid, NULL, bare_loop, &t[i]))
			exit(1);
	}
	pthread_barrier_wait(&ready);
	for (i = 0; i < threads; i++)
		pthread_join(t[i].tid, NULL);
	*t0 = t[0].started_ns;
	for (i = 1; i < threads; i++)
		if (t[i].started_ns < *t0)
			*t0 = t[i].started_ns;
	pthread_barrier_destroy(&ready);
	free(t);
}

/* ---- one run ---- */

/* Names "blk-<k>" such that name s goes to group s of `groups`. */
static char (*slot_ids(int groups))[24]
{
	char (*names)[24] = calloc((size_t)groups, sizeof(*names));
	char name[24];
	int found = 0, k, g;

	if (!names)
		exit(1);
	for (k = 0; found < groups; k++) {
		snprintf(name, sizeof(name), "blk-%d", k);
		g = agr_group_key(name, groups);
		if (names[g][0])
			continue;
		memcpy(names[g], name, sizeof(name));
		found++;
	}
	return names;
}

/* Starts aggring or a peer on r and sends every slot; returns when. */
static uint64_t run_engine(const struct config *c, struct run *r)
{
	uint64_t t0;
	int i;

	if (r->engine) {
		r->peer = r->engine->create(c->timed.peer_threads, r->nslots,
					    peer_read, r);
		if (!r->peer) {
			fprintf(stderr, WORKLOAD ": %s: create failed\n",
				r->engine->name);
			exit(1);
		}
	} else {
		r->disp = make_dispatcher(r, c->workers);
	}
	t0 = bench_now_ns();
	for (i = 0; i < r->nslots; i++)
		if (r->engine)
			r->engine->send(r->peer, &r->slots[i].peer);
		else
			agr_send(&r->slots[i]);
	bench_order_wait(&r->order);
	return t0;
}

static void stop_engine(struct run *r)
{
	if (r->engine) {
		r->engine->destroy(r->peer);
	} else {
		agr_dispatcher_stop_gracefully(r->disp, 60ull * 1000000000ull);
		agr_dispatcher_free(r->disp);
	}
}

/*
 * Runs `engine` (NULL: aggring) with `total` messages; returns kIOPS from
 * the first send to the last read.
 */
static double run_once(const struct config *c, const struct peer_engine *engine,
		       int fd, char (*ids)[24], void **bufs, long total)
{
	struct run r = { .fd = fd, .nslots = c->depth, .engine = engine };
	int quota = (int)(total / c->depth), i;
	uint64_t t0, t1;

	if (quota < 1)
		quota = 1;
	r.slots = calloc((size_t)r.nslots, sizeof(*r.slots));
	if (!r.slots)
		exit(1);
	atomic_init(&r.failed, 0);
	bench_order_init(&r.order, r.nslots, (long)quota * r.nslots);
	for (i = 0; i < r.nslots; i++) {
		struct slot *s = &r.slots[i];

		s->run = &r;
		s->buf = bufs[i];
		s->id = i;
		s->quota = quota;
		s->seq = -1;
		s->rng = bench_now_ns() * 2654435761u + (uint64_t)i * 97 + 1;
		s->msg.aggregate_id = ids[i];
		s->msg.user = s;
		s->peer.id = ids[i];
		s->peer.user = s;
		slot_next(s);
	}
	if (engine == &bare_uring) {
		run_bare(&r, c->workers, &t0);
		t1 = bench_now_ns();
	} else {
		t0 = run_engine(c, &r);
		t1 = bench_now_ns();
		stop_engine(&r);
	}
	bench_order_verify(&r.order, engine ? engine->name : "aggring");
	if (atomic_load(&r.failed)) {
		fprintf(stderr, WORKLOAD ": %s: %ld reads failed or were "
			"short; no result reported\n",
			engine ? engine->name : "aggring",
			atomic_load(&r.failed));
		exit(1);
	}
	bench_order_destroy(&r.order);
	free(r.slots);
	return (double)quota * r.nslots / ((double)(t1 - t0) / 1e9) / 1e3;
}

/* ---- fio at the same depth ---- */

/* The first "iops" of the read section of fio's JSON report, or -1. */
static double fio_parse_iops(const char *json)
{
	const char *p = strstr(json, "\"jobs\"");

	if (p)
		p = strstr(p, "\"read\"");
	if (p)
		p = strstr(p, "\"iops\"");
	if (!p)
		return -1;
	p += strlen("\"iops\"");
	while (*p == ' ' || *p == ':')
		p++;
	return strtod(p, NULL);
}

/* Runs fio for the same seconds at the same total depth; kIOPS. */
static double run_fio(const struct config *c, const char *path, bool direct)
{
	char cmd[8192], *json = NULL;
	size_t len = 0, cap = 0, got;
	double iops;
	FILE *f;
	int status;

	/* --invalidate=0: fio would drop the warm page cache. */
	snprintf(cmd, sizeof(cmd),
		 "fio --name=randread --ioengine=io_uring --direct=%d "
		 "--rw=randread --bs=4k --iodepth=%d --numjobs=%d "
		 "--group_reporting --invalidate=0 --size=1G "
		 "--filename='%s' --time_based --runtime=%dms "
		 "--output-format=json",
		 direct ? 1 : 0, c->depth / c->workers, c->workers, path,
		 (int)(c->timed.seconds * 1000));
	f = popen(cmd, "r");
	if (!f) {
		fprintf(stderr, WORKLOAD ": popen fio: %s\n", strerror(errno));
		exit(1);
	}
	do {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 65536;
			json = realloc(json, cap + 1);
			if (!json)
				exit(1);
		}
		got = fread(json + len, 1, cap - len, f);
		len += got;
	} while (got);
	json[len] = '\0';
	status = pclose(f);
	iops = status == 0 ? fio_parse_iops(json) : -1;
	if (iops <= 0) {
		fprintf(stderr, WORKLOAD ": fio failed (exit status %d); "
			"command: %s\n", status, cmd);
		exit(1);
	}
	free(json);
	return iops / 1e3;
}

static bool have_fio(void)
{
	return system("fio --version >/dev/null 2>&1") == 0;
}

/* ---- the test file ---- */

static const char *pick_dir(const char *asked)
{
	return bench_disk_dir(WORKLOAD, asked,
			      "and O_DIRECT reads need a disk filesystem");
}

/* Creates DIR/FILE_NAME (1 GiB of random data) unless it is there. */
static void make_file(const char *path)
{
	struct stat st;
	uint64_t rng = 0x9e3779b97f4a7c15ull, *chunk;
	size_t chunk_len = 1u << 20, k;
	uint64_t done;
	int fd;

	if (stat(path, &st) == 0 && (uint64_t)st.st_size == FILE_SIZE)
		return;
	printf("creating %s (1 GiB of random data)...\n", path);
	fflush(stdout);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	chunk = malloc(chunk_len);
	if (fd < 0 || !chunk) {
		fprintf(stderr, WORKLOAD ": %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (posix_fallocate(fd, 0, (off_t)FILE_SIZE) != 0)
		fprintf(stderr, WORKLOAD ": fallocate failed; writing "
			"anyway\n");
	for (done = 0; done < FILE_SIZE; done += chunk_len) {
		for (k = 0; k < chunk_len / sizeof(*chunk); k++)
			chunk[k] = xorshift(&rng);
		if (pwrite(fd, chunk, chunk_len, (off_t)done) !=
		    (ssize_t)chunk_len) {
			fprintf(stderr, WORKLOAD ": writing %s: %s\n", path,
				strerror(errno));
			unlink(path);
			exit(1);
		}
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		fprintf(stderr, WORKLOAD ": %s: %s\n", path, strerror(errno));
		exit(1);
	}
	free(chunk);
}

/* Reads the whole file once so that buffered reads hit the cache. */
static void warm_cache(int fd)
{
	size_t len = 1u << 20;
	char *buf = malloc(len);
	uint64_t off;

	if (!buf)
		exit(1);
	for (off = 0; off < FILE_SIZE; off += len)
		if (pread(fd, buf, len, (off_t)off) != (ssize_t)len) {
			fprintf(stderr, WORKLOAD ": warming the cache: %s\n",
				strerror(errno));
			exit(1);
		}
	free(buf);
}

/* ---- the variants ---- */

enum { MAX_ENGINES = 8 };

struct engines {
	const struct peer_engine *peer[MAX_ENGINES]; /* [0] NULL: aggring */
	const char *name[MAX_ENGINES];
	int n;	    /* aggring and the peers */
	bool fio;   /* fio is engine n */
};

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* The file to read, cached (and read once through) or O_DIRECT. */
static int open_target(const char *path, bool direct)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));

	if (fd < 0) {
		fprintf(stderr, WORKLOAD ": open %s%s: %s\n", path,
			direct ? " with O_DIRECT" : "", strerror(errno));
		exit(1);
	}
	if (!direct)
		warm_cache(fd);
	return fd;
}

static void print_ratios(const struct config *c, const struct engines *e,
			 const struct bench_summary *s, bool direct)
{
	int i;

	for (i = 1; i < e->n; i++)
		printf("  aggring / %-8s = %6.2f%s\n", e->name[i],
		       ratio(s[0].median, s[i].median),
		       direct && !strcmp(e->name[i], "pthread") &&
		       c->timed.peer_threads == c->workers ?
		       "  (target >= 3)" : "");
	if (e->fio)
		printf("  aggring / fio      = %6.2f%s\n",
		       ratio(s[0].median, s[e->n].median),
		       direct ? "  (target >= 0.9)" : "");
}

static void run_variant(const struct config *c, const struct engines *e,
			const char *path, bool direct, char (*ids)[24],
			void **bufs, FILE *csv)
{
	int ne = e->n + (e->fio ? 1 : 0), i, k, fd;
	long total[MAX_ENGINES];
	double *v[MAX_ENGINES], warm;
	struct bench_summary s[MAX_ENGINES];
	const char *variant = direct ? "direct" : "cached";

	fd = open_target(path, direct);
	/*
	 * Warm-up run per engine, which also sizes its runs: about
	 * -s seconds each at the rate it just showed.
	 */
	for (i = 0; i < e->n; i++) {
		long probe = (long)c->depth * 64;

		warm = run_once(c, e->peer[i], fd, ids, bufs, probe);
		total[i] = (long)(warm * 1e3 * c->timed.seconds);
		if (total[i] < (long)c->depth * 4)
			total[i] = (long)c->depth * 4;
	}
	for (i = 0; i < ne; i++) {
		v[i] = calloc((size_t)c->timed.runs, sizeof(double));
		if (!v[i])
			exit(1);
	}
	for (k = 0; k < c->timed.runs; k++)
		for (i = 0; i < ne; i++)
			v[i][k] = i < e->n ?
				run_once(c, e->peer[i], fd, ids, bufs,
					 total[i]) :
				run_fio(c, path, direct);
	close(fd);
	printf("\n%s, %s: 4 KiB random reads, total queue depth %d "
	       "(%d workers x %d; peers: %d threads), %d runs of ~%.1f s\n",
	       WORKLOAD, variant, c->depth, c->workers,
	       c->depth / c->workers, c->timed.peer_threads, c->timed.runs,
	       c->timed.seconds);
	for (i = 0; i < ne; i++) {
		s[i] = bench_summarize(v[i], c->timed.runs);
		bench_print_row(e->name[i], "kIOPS", s[i]);
		bench_csv_row(csv, WORKLOAD, variant, e->name[i], "iops",
			      "kIOPS", s[i], c->timed.runs);
		free(v[i]);
	}
	print_ratios(c, e, s, direct);
}

static void parse(int argc, char **argv, struct config *c)
{
	const struct bench_opt opts[] = {
		BENCH_OPT_TEXT('d', "DIR", c->dir,
			       "where the 1 GiB test file lives (a disk "
			       "filesystem,\nnot tmpfs; default /var/tmp, else "
			       ".); kept for reuse"),
		BENCH_OPT_INT('D', "DEPTH", c->depth, 1, 4096,
			      "total queue depth: messages outstanding "
			      "(default 64;\na multiple of the CPU count)"),
		BENCH_OPTS_TIMED(c->timed, "write CSVDIR/direct_read.csv"),
		BENCH_OPT_END,
	};

	*c = (struct config){ .depth = 64, .workers = bench_cpus() };
	bench_timed_init(&c->timed);
	bench_options(argc, argv, WORKLOAD, opts);
	/* Equal split over the rings, as fio's numjobs x iodepth. */
	if (c->depth < c->workers)
		c->depth = c->workers;
	c->depth -= c->depth % c->workers;
}

int main(int argc, char **argv)
{
	struct config c;
	struct engines e = { .n = 0 };
	char (*ids)[24], path[4096];
	void **bufs;
	FILE *csv;
	int i;

	parse(argc, argv, &c);
	c.dir = pick_dir(c.dir);
	snprintf(path, sizeof(path), "%s/%s", c.dir, FILE_NAME);
	bench_print_env(stdout, WORKLOAD);
	make_file(path);
	printf("file: %s (1 GiB; kept for the next run, delete it when "
	       "done)\n", path);
	printf("total queue depth = messages outstanding = %d: a window of "
	       "%d slots, each\n  on its own group, resent on completion; "
	       "aggring has one read in flight\n  per group on %d rings; "
	       "fio: numjobs %d x iodepth %d; the peers block one\n  pool "
	       "thread per pread, so their depth is their %d threads\n",
	       c.depth, c.depth, c.workers, c.workers, c.depth / c.workers,
	       c.timed.peer_threads);
	e.name[e.n] = "aggring";
	e.peer[e.n++] = NULL;
	for (i = 0; peer_engines[i] && e.n < MAX_ENGINES - 1; i++) {
		e.name[e.n] = peer_engines[i]->name;
		e.peer[e.n++] = peer_engines[i];
	}
	e.name[e.n] = bare_uring.name;
	e.peer[e.n++] = &bare_uring;
	e.fio = have_fio();
	if (e.fio)
		e.name[e.n] = "fio";
	else
		printf("fio not found: no fio comparison\n");
	ids = slot_ids(c.depth);
	bufs = calloc((size_t)c.depth, sizeof(*bufs));
	if (!bufs)
		exit(1);
	for (i = 0; i < c.depth; i++)
		if (posix_memalign(&bufs[i], BLOCK, BLOCK))
			exit(1);
	csv = bench_csv_open(c.timed.csv_dir, WORKLOAD);
	run_variant(&c, &e, path, true, ids, bufs, csv);
	run_variant(&c, &e, path, false, ids, bufs, csv);
	bench_csv_close(csv);
	for (i = 0; i < c.depth; i++)
		free(bufs[i]);
	free(bufs);
	free(ids);
	return 0;
}
