/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_crash_states.c - check_ledger_checkpoint's third part: the
 * crash states of a checkpoint cycle, recorded through the checkpoint's
 * trace hook, each recovered by the server's own replay and compared
 * with a replay of the journals alone; and the planted bugs (a
 * checkpoint made current before it is durable, a journal freed too
 * early) caught. check_ledger_checkpoint.c says which states.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ftw.h>

#include "../ledger_checkpoint.h"
#include "../ledger_replay.h"
#include "util.h"

#include "checkpoint_test.h"

/* ---- 3: crash states of checkpoint cycles ---- */

struct op {
	enum checkpoint_op op;
	char path[NAME_MAX + 1], to[NAME_MAX + 1]; /* in the directory */
	char *data; /* WRITE's */
	uint64_t len;
};

struct oplog {
	struct op *ops;
	size_t n;
};

static void record_op(void *arg, enum checkpoint_op op, const char *path,
		      const char *to, const void *data, uint64_t len)
{
	struct oplog *l = arg;
	struct op *o;

	l->ops = xrealloc(l->ops, (l->n + 1) * sizeof(*l->ops));
	o = &l->ops[l->n++];
	memset(o, 0, sizeof(*o));
	o->op = op;
	snprintf(o->path, sizeof(o->path), "%s", strrchr(path, '/') + 1);
	if (to)
		snprintf(o->to, sizeof(o->to), "%s", strrchr(to, '/') + 1);
	o->len = len;
	if (data)
		o->data = memcpy(xrealloc(NULL, len), data, len);
}

/* A file of the modelled directory: a name and what it holds. */
struct mfile {
	char name[NAME_MAX + 1];
	int op;	       /* the WRITE that made it; -1: there before */
	char *data;    /* op -1: its bytes */
	uint64_t len;
};

struct model {
	struct mfile f[16];
	unsigned n;
};

static struct mfile *mfind(struct model *m, const char *name)
{
	unsigned i;

	for (i = 0; i < m->n; i++)
		if (strcmp(m->f[i].name, name) == 0)
			return &m->f[i];
	return NULL;
}

static void mremove(struct model *m, const char *name)
{
	struct mfile *f = mfind(m, name);

	if (f)
		*f = m->f[--m->n];
}

/* Applies namespace operation o (number k) to m. */
static void mapply(struct model *m, const struct op *o, int k)
{
	struct mfile *f;

	if (o->op == CHECKPOINT_OP_WRITE) {
		mremove(m, o->path);
		CHECK(m->n < 16);
		f = &m->f[m->n++];
		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), "%s", o->path);
		f->op = k;
	} else if (o->op == CHECKPOINT_OP_RENAME) {
		f = mfind(m, o->path);
		CHECK(f != NULL);
		mremove(m, o->to);
		f = mfind(m, o->path); /* mremove may have moved it */
		snprintf(f->name, sizeof(f->name), "%s", o->to);
	} else if (o->op == CHECKPOINT_OP_UNLINK) {
		mremove(m, o->path);
	}
}

static bool is_ns_op(enum checkpoint_op op)
{
	return op == CHECKPOINT_OP_WRITE || op == CHECKPOINT_OP_RENAME ||
	       op == CHECKPOINT_OP_UNLINK;
}

/* What a crash left of one WRITE not yet fsync'd. */
enum tear { TEAR_NONE, TEAR_WHOLE, TEAR_PREFIX, TEAR_RANDOM };

struct choice {
	enum tear tear;
	unsigned arg; /* PREFIX: sectors kept; RANDOM: its seed */
};

/* The explorer's run: the recorded steps and what a state must equal. */
struct explore {
	const struct oplog *log;
	const char *base;   /* the directory before the first traced step */
	const char *ref;    /* the journals, whole */
	const char *expect; /* the full replay's state */
	unsigned long seed;
	uint64_t states, failed;
	bool stop_at_first;
	char first[512]; /* the first failing state, in words */
};

static unsigned long rng_next(unsigned long *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Writes what choice c leaves of data[0, len) at path. */
static void write_torn(const char *path, const char *data, uint64_t len,
		       const struct choice *c, unsigned long seed)
{
	uint64_t keep = len, s;
	char *buf = xrealloc(NULL, len + 1);
	unsigned long x = seed * 2654435761u + c->arg + 1;
	int fd;

	memcpy(buf, data, len);
	if (c->tear == TEAR_NONE)
		keep = 0;
	else if (c->tear == TEAR_PREFIX)
		keep = (uint64_t)c->arg * SECTOR;
	else if (c->tear == TEAR_RANDOM)
		for (s = 0; s * SECTOR < len; s++)
			if (rng_next(&x) & 1)
				memset(buf + s * SECTOR, 0,
				       len - s * SECTOR < SECTOR ?
					       len - s * SECTOR :
					       SECTOR);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, buf, keep) == (ssize_t)keep);
	close(fd);
	free(buf);
}

/* One crash state, described. */
struct state {
	size_t point;	   /* steps 0 to point - 1 were made */
	size_t ns;	   /* namespace steps that landed */
	uint64_t punch[NJ]; /* each journal freed up to this */
	struct model m;	   /* the directory's names */
	struct choice ch[16]; /* per file of m not fsync'd: what landed */
};

static void describe(const struct explore *e, const struct state *st,
		     char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "crash after %zu of %zu steps "
				    "(%zu namespace steps landed; journals "
				    "freed to %" PRIu64 ", %" PRIu64 ";",
				    st->point, e->log->n, st->ns,
				    st->punch[0], st->punch[1]);
	unsigned i;

	for (i = 0; i < st->m.n && n < cap; i++) {
		static const char *const tears[] = { "lost", "whole",
						     "sectors kept: ",
						     "random sectors, seed " };
		const struct choice *c = &st->ch[i];

		if (st->m.f[i].op < 0)
			n += (size_t)snprintf(out + n, cap - n, " %s durable",
					      st->m.f[i].name);
		else
			n += (size_t)snprintf(out + n, cap - n, " %s %s", st->m.f[i].name,
					      tears[c->tear]);
		if (n < cap && st->m.f[i].op >= 0 && c->tear >= TEAR_PREFIX)
			n += (size_t)snprintf(out + n, cap - n, "%u", c->arg);
	}
	if (n < cap)
		snprintf(out + n, cap - n, ")");
}

/* Builds state st in a new directory; its path in dir. */
static void materialize(const struct explore *e, const struct state *st,
			char *dir)
{
	char from[PATH_MAX], to[PATH_MAX], name[32];
	unsigned i;

	/* tmpfs where there is one: many small files, never synced. */
	strcpy(dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/ckpt-state-XXXXXX" :
						  "/tmp/ckpt-state-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	for (i = 0; i < NJ; i++) {
		int fd;

		snprintf(name, sizeof(name), "journal-%u.log", i);
		path_of(from, sizeof(from), e->ref, name);
		path_of(to, sizeof(to), dir, name);
		copy_file(from, to);
		if (!st->punch[i])
			continue;
		fd = open(to, O_WRONLY);
		CHECK(fd >= 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE |
						       FALLOC_FL_KEEP_SIZE,
					   0, (off_t)st->punch[i]) == 0);
		close(fd);
	}
	for (i = 0; i < st->m.n; i++) {
		const struct mfile *f = &st->m.f[i];
		const struct op *o = f->op >= 0 ? &e->log->ops[f->op] : NULL;
		struct choice whole = { TEAR_WHOLE, 0 };

		path_of(to, sizeof(to), dir, f->name);
		if (o)
			write_torn(to, o->data, o->len, &st->ch[i], e->seed);
		else
			write_torn(to, f->data, f->len, &whole, 0);
	}
}

/* Recovers dir in a child; its state, or NULL if it could not start. */
static char *recover_in_child(const char *dir)
{
	int fds[2], status;
	char *out = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	pid_t pid;

	CHECK(pipe(fds) == 0);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char *s;

		close(fds[0]);
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		s = restart_state(dir, NULL, NULL);
		_exit(write(fds[1], s, strlen(s)) == (ssize_t)strlen(s) ? 0 : 2);
	}
	close(fds[1]);
	do {
		if (len + 4096 > cap)
			out = xrealloc(out, cap = (len + 4096) * 2);
		n = read(fds[0], out + len, cap - len - 1);
		len += n > 0 ? (size_t)n : 0;
	} while (n > 0);
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	out[len] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return out;
	free(out);
	return NULL;
}

static void check_state(struct explore *e, const struct state *st)
{
	char dir[PATH_MAX], *got;

	if (e->stop_at_first && e->failed)
		return;
	materialize(e, st, dir);
	got = recover_in_child(dir);
	e->states++;
	if (!got || strcmp(got, e->expect) != 0) {
		if (!e->failed++)
			describe(e, st, e->first, sizeof(e->first));
	}
	free(got);
	CHECK(rm_rf(dir) == 0);
}

/* The choices for file i of st's model and on, then the state. */
static void each_tear(struct explore *e, struct state *st, unsigned i)
{
	const struct mfile *f;
	unsigned k, sectors;

	if (i == st->m.n) {
		check_state(e, st);
		return;
	}
	f = &st->m.f[i];
	if (f->op < 0 || strstr(f->name, ".tmp")) { /* .tmp: never read */
		st->ch[i] = (struct choice){ TEAR_WHOLE, 0 };
		each_tear(e, st, i + 1);
		return;
	}
	sectors = (unsigned)((e->log->ops[f->op].len + SECTOR - 1) / SECTOR);
	for (k = 0; k <= 3; k++) { /* lost, whole, and two prefixes */
		st->ch[i] = (struct choice){ (enum tear)(k < 2 ? k : 2),
					     k == 2 ? 1 : sectors / 2 };
		each_tear(e, st, i + 1);
	}
	for (k = 0; k < NRANDOM; k++) {
		st->ch[i] = (struct choice){ TEAR_RANDOM, k };
		each_tear(e, st, i + 1);
	}
}

/* Whether a WRITE (step w) was fsync'd in steps [0, point). */
static bool fsynced(const struct oplog *l, int w, size_t point)
{
	size_t k;

	for (k = (size_t)w + 1; k < point; k++)
		if (l->ops[k].op == CHECKPOINT_OP_FSYNC &&
		    strcmp(l->ops[k].path, l->ops[w].path) == 0)
			return true;
	return false;
}

/* The punch options of journal j and on, then the tears. */
static void each_punch(struct explore *e, struct state *st, unsigned j)
{
	char name[32];
	size_t k;

	if (j == NJ) {
		each_tear(e, st, 0);
		return;
	}
	snprintf(name, sizeof(name), "journal-%u.log", j);
	st->punch[j] = 0;
	each_punch(e, st, j + 1);
	for (k = 0; k < st->point; k++) {
		const struct op *o = &e->log->ops[k];

		if (o->op != CHECKPOINT_OP_PUNCH || strcmp(o->path, name))
			continue;
		st->punch[j] = o->len;
		each_punch(e, st, j + 1);
	}
}

/* The directory as it was before the first traced step. */
static void base_model(const char *base, struct model *m)
{
	char path[PATH_MAX], *buf;
	struct dirent *d;
	DIR *dir = opendir(base);
	struct stat sb;
	int fd;

	memset(m, 0, sizeof(*m));
	CHECK(dir != NULL);
	while ((d = readdir(dir)) != NULL) {
		struct mfile *f;

		if (strncmp(d->d_name, "checkpoint-", 11) != 0)
			continue;
		path_of(path, sizeof(path), base, d->d_name);
		fd = open(path, O_RDONLY);
		CHECK(fd >= 0 && fstat(fd, &sb) == 0);
		buf = xrealloc(NULL, (size_t)sb.st_size + 1);
		CHECK(read(fd, buf, (size_t)sb.st_size) == sb.st_size);
		close(fd);
		f = &m->f[m->n++];
		snprintf(f->name, sizeof(f->name), "%s", d->d_name);
		f->op = -1;
		f->data = buf;
		f->len = (uint64_t)sb.st_size;
	}
	closedir(dir);
}

static void free_model(struct model *m)
{
	unsigned i;

	for (i = 0; i < m->n; i++)
		if (m->f[i].op < 0)
			free(m->f[i].data);
}

/*
 * Every crash point, every namespace prefix that may have landed, then
 * the punches and tears. Data fsync'd before a point is whole; the
 * namespace steps before the last directory fsync have landed.
 */
static void explore(struct explore *e)
{
	struct model base;
	struct state st;
	size_t point, k, nns, durable_ns, p;

	base_model(e->base, &base);
	for (point = e->log->n + 1; point-- > 0;) { /* latest first */
		nns = durable_ns = 0;
		for (k = 0; k < point; k++) {
			nns += is_ns_op(e->log->ops[k].op);
			if (e->log->ops[k].op == CHECKPOINT_OP_SYNC_DIR)
				durable_ns = nns;
		}
		for (p = durable_ns; p <= nns; p++) {
			size_t seen = 0;
			unsigned i;

			memset(&st, 0, sizeof(st));
			st.point = point;
			st.ns = p;
			st.m = base;
			for (k = 0; k < point && seen < p; k++)
				if (is_ns_op(e->log->ops[k].op)) {
					mapply(&st.m, &e->log->ops[k], (int)k);
					seen++;
				}
			/* A write fsync'd by then is whole in every state. */
			for (i = 0; i < st.m.n; i++)
				if (st.m.f[i].op >= 0 &&
				    fsynced(e->log, st.m.f[i].op, point)) {
					st.m.f[i].data = e->log->ops[st.m.f[i].op].data;
					st.m.f[i].len = e->log->ops[st.m.f[i].op].len;
					st.m.f[i].op = -1;
				}
			each_punch(e, &st, 0);
		}
	}
	free_model(&base);
}

static void copy_dir(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct dirent *d;
	DIR *dir = opendir(from);

	CHECK(dir != NULL);
	while ((d = readdir(dir)) != NULL) {
		if (d->d_name[0] == '.')
			continue;
		path_of(a, sizeof(a), from, d->d_name);
		path_of(b, sizeof(b), to, d->d_name);
		copy_file(a, b);
	}
	closedir(dir);
}

/*
 * Records two traced cycles (with `bug` planted in both) after an
 * untraced first one, and explores their crash states. Returns the
 * failing states.
 */
static uint64_t crash_run(enum checkpoint_bug bug, unsigned long seed,
			  char *first, size_t cap)
{
	char dir[] = "/tmp/ckpt-cs-XXXXXX", ref[] = "/tmp/ckpt-csr-XXXXXX";
	char base[] = "/tmp/ckpt-csb-XXXXXX", *expect;
	struct oplog log = { 0 };
	struct checkpoint_trace tr = { record_op, &log };
	struct checkpoint_options o = { &tr, bug };
	struct explore e = { 0 };
	struct checkpoint_builder *b;
	uint64_t ends[NJ];
	size_t k;

	CHECK(mkdtemp(dir) && mkdtemp(ref) && mkdtemp(base));
	b = checkpoint_builder_new(dir); /* the server's way: one for all */
	/* Some 4 KiB blocks per cycle and journal, so that each frees some. */
	ends[0] = append_both(dir, ref, 0, 0, 400);
	ends[1] = append_both(dir, ref, 1, 0, 500);
	take(b, dir, ends, NULL);
	copy_dir(dir, base); /* journals whole: nothing freed yet */
	ends[0] = append_both(dir, ref, 0, 400, 900);
	ends[1] = append_both(dir, ref, 1, 500, 850);
	take(b, dir, ends, &o);
	ends[0] = append_both(dir, ref, 0, 900, 1300);
	ends[1] = append_both(dir, ref, 1, 850, 1250);
	take(b, dir, ends, &o);
	checkpoint_builder_free(b);
	append_both(dir, ref, 0, 1300, 1350); /* past the last cycle's ends */
	expect = full_replay_state(ref);
	e = (struct explore){ .log = &log, .base = base, .ref = ref,
			      .expect = expect, .seed = seed,
			      .stop_at_first = bug != CHECKPOINT_BUG_NONE };
	explore(&e);
	printf("checkpoint cycles%s: %zu steps, %" PRIu64 " crash states "
	       "(seed %lu), %" PRIu64 " failed%s%s\n",
	       bug == CHECKPOINT_BUG_NO_FSYNC ? " (planted: current before "
						"durable)" :
	       bug == CHECKPOINT_BUG_EARLY_PUNCH ? " (planted: journal freed "
						   "early)" : "",
	       log.n, e.states, seed, e.failed, e.failed ? ": first " : "",
	       e.failed ? e.first : "");
	snprintf(first, cap, "%s", e.first);
	if (getenv("CKPT_CRASH_VERBOSE"))
		for (k = 0; k < log.n; k++)
			printf("  step %zu: %s %s%s%s %" PRIu64 "\n", k,
			       (const char *[]){ "write", "fsync", "rename",
						 "sync-dir", "unlink",
						 "punch" }[log.ops[k].op],
			       log.ops[k].path, log.ops[k].to[0] ? " -> " : "",
			       log.ops[k].to, log.ops[k].len);
	for (k = 0; k < log.n; k++)
		free(log.ops[k].data);
	free(log.ops);
	free(expect);
	CHECK(rm_rf(dir) == 0 && rm_rf(ref) == 0 && rm_rf(base) == 0);
	return e.failed;
}

void test_crash_states(void)
{
	const char *s = getenv("CKPT_CRASH_SEED");
	unsigned long seed = s ? strtoul(s, NULL, 0) : 1;
	char first[512];

	if (crash_run(CHECKPOINT_BUG_NONE, seed, first, sizeof(first)))
		FAIL("a crash during a checkpoint cycle lost or changed the "
		     "state: %s", first);
	if (!crash_run(CHECKPOINT_BUG_NO_FSYNC, seed, first, sizeof(first)))
		FAIL("a checkpoint made current before it was durable went "
		     "unnoticed");
	if (!crash_run(CHECKPOINT_BUG_EARLY_PUNCH, seed, first,
		       sizeof(first)))
		FAIL("a journal freed before its checkpoint was current went "
		     "unnoticed");
}
