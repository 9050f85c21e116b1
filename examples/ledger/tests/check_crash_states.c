/* SPDX-License-Identifier: MIT */
/*
 * check_crash_states.c - ledger_server's journal survives power loss,
 * not only kill -9: lost, reordered and torn writes, proven the way
 * storage engines prove it (ALICE, CrashMonkey).
 *
 * 1. Record. A real journal (examples/ledger_journal.c, on a real file
 *    and a real ring) takes a workload of records, one account each;
 *    its trace hook reports every write (offset, bytes, RWF_DSYNC or
 *    not) and fdatasync it issues and their results, and the records'
 *    durable callbacks report the acknowledgements, all on one clock.
 *    The journal is built with 16 KiB of zeros written ahead at a time
 *    (not 4 MiB), so that a run crosses several zero fills, which race
 *    the batches.
 * 2. Build crash states. At every point of that clock, a write is
 *    durable if it completed with RWF_DSYNC, or completed before an
 *    fdatasync that completed was issued; only its completed bytes
 *    count. Every other write issued by then may be on the disk or not,
 *    whole or torn at 512-byte sectors (each sector old or new), in any
 *    combination with the others (so also reordered). A state is the
 *    durable writes whole plus one choice per write in flight, applied
 *    in issue order over the file as it was; a sector past the end that
 *    lands extends the file with zeros before it. Points with the same
 *    durable and in-flight writes are one state group, checked against
 *    the acknowledgements of its last point.
 * 3. Recover and check. Each state is written to a file and replayed by
 *    ledger_server's own replay (tests/crash_replay.c), which cuts a
 *    torn tail off; then replayed again (nothing more may be cut, the
 *    same records must come back). Every acknowledged record must be
 *    there exactly once, the records recovered must be a prefix of
 *    those appended (nothing unacknowledged out of order), with their
 *    own amounts (nothing invented), and replay must not crash (a crash
 *    fails the test with the state that caused it).
 * 4. Restart after a crash. For a few states whose recovery cut a torn
 *    tail or kept unacknowledged records, the journal is reopened on
 *    the repaired file as the server does, takes more records, and its
 *    own crash states are checked the same way: the records recovered
 *    the first time count as acknowledged.
 *
 * Bounds. The journal holds at most one batch write (or its fdatasync)
 * and one zero fill in flight, so a state group has at most two writes
 * in flight (asserted; a run with more, such as the planted one, has
 * its oldest beyond four taken as lost), and the workload keeps a
 * write within 64 sectors. Per group the lost/whole combinations are
 * always all explored; the torn ones exhaustively when they fit in the
 * group's share of the budget (every sector subset of a write of up to
 * 10 sectors; for longer writes every prefix, suffix, single missing
 * and single present sector, then random subsets as the share allows),
 * else sampled with a seeded PRNG. The budget is CRASH_STATES (default
 * 4000 over the four I/O and sync modes, of which the restarts get a
 * quarter; .ci/run sets more), the seed CRASH_SEED (default 1); the
 * counts and the seed are printed. (The recorded run itself depends on
 * timing: a seed replays the choices, not the batches.)
 *
 * Not modelled: a sector torn within itself, a file whose size grew
 * with no data written (replay reads that as the zeros it already
 * accepts), and damage to data that was durable.
 *
 * The checker is shown able to fail: a recovery that trusts a torn
 * record (no CRC, no end of line) is run on the same states and must be
 * caught; and check_crash_states_planted, this file built with a
 * journal that acknowledges a batch before it is durable
 * (JOURNAL_PLANT_EARLY_ACK), must be caught losing acknowledged
 * records.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring.h>
#ifdef AGR_FAULT_INJECTION
#include <aggring/fault.h>
#endif

#include "../ledger_journal.h"
#include "crash_replay.h"
#include "testutil.h"

#define SECTOR 512u
#define MAX_SECTORS 64	  /* of one write in the workload */
#define TEAR_ALL 10	  /* up to this many sectors: every subset */
#define MAX_OPS 4096	  /* writes and fdatasyncs of one run */
#define MAX_RECORDS 2048  /* of one run, restarts included */
#define PHASE1_RECORDS 700
#define PHASE2_RECORDS 80
#define BURST_MAX 150	  /* records appended in one task */
#define RESTARTS 3	  /* crash states restarted from, per mode */
#define REPORT_MAX 5	  /* violations printed in full */

/* ---- settings ---- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return dflt;
	v = strtoull(s, &end, 0);
	if (*end != '\0') { /* read before the tests start: no ck_assert */
		fprintf(stderr, "%s=%s is not a number\n", name, s);
		exit(1);
	}
	return v;
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t x = rng_state; /* xorshift64* */

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static unsigned rng_below(unsigned n)
{
	return (unsigned)(rng_next() % n);
}

/* ---- records: one account each, so a balance tells which and how often */

struct record {
	char key[16];
	long long amount;
	long ack_at; /* clock when acknowledged; LONG_MAX never */
};

/* Phase 1's record i is "r<i>", phase 2's "s<i>"; amounts of 7 digits. */
static void record_make(struct record *r, char prefix, unsigned i)
{
	snprintf(r->key, sizeof(r->key), "%c%06u", prefix, i);
	r->amount = 1000003 + (long long)i * 7;
	r->ack_at = LONG_MAX;
}

/* ---- the recorded run ---- */

struct op {
	enum journal_stream stream;
	bool sync, dsync;
	uint64_t at;
	size_t len;
	char *data;
	long issued, completed; /* clock; completed -1 while in flight */
	long durable;		/* from this clock on; LONG_MAX never */
	int res;
};

struct run {
	long clock;
	struct op ops[MAX_OPS];
	unsigned nops;
	long inflight[2]; /* per stream: the op in flight, or -1 */
	char *base;	  /* the file when the run began */
	size_t base_len;
	struct record recs[MAX_RECORDS];
	unsigned nrecs;	   /* in the file's order */
	unsigned first;	   /* recs[first..] are this run's */
	bool overflow;	   /* more ops than MAX_OPS: the run is void */
};

static void traced_issue(void *arg, enum journal_stream s, const void *p,
			 size_t len, uint64_t at, bool dsync)
{
	struct run *r = arg;
	struct op *o;

	if (r->nops == MAX_OPS) {
		r->overflow = true;
		return;
	}
	o = &r->ops[r->nops];
	*o = (struct op){ .stream = s, .sync = p == NULL, .dsync = dsync,
			  .at = at, .len = len, .issued = r->clock++,
			  .completed = -1 };
	if (p) {
		o->data = malloc(len);
		TU_EXPECT(o->data != NULL);
		if (o->data)
			memcpy(o->data, p, len);
	}
	TU_EXPECT(r->inflight[s] < 0);
	r->inflight[s] = (long)r->nops++;
}

static void traced_complete(void *arg, enum journal_stream s, int res)
{
	struct run *r = arg;
	long i = r->inflight[s];

	if (r->overflow)
		return;
	TU_EXPECT(i >= 0);
	if (i < 0)
		return;
	r->ops[i].completed = r->clock++;
	r->ops[i].res = res;
	r->inflight[s] = -1;
}

static const struct journal_trace tracer = { traced_issue, traced_complete,
					     NULL };

static void run_free(struct run *r)
{
	unsigned i;

	for (i = 0; i < r->nops; i++)
		free(r->ops[i].data);
	free(r->base);
	free(r);
}

/* ---- driving a journal on a worker ---- */

struct wait {
	struct commit_wait w; /* first: the callback's argument */
	struct rig *g;
	unsigned k;	  /* the record */
	bool then_append; /* the last of a burst: append the next one */
};

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
	struct journal j;
	struct journal_trace trace;
	struct run *run;
	struct wait waits[MAX_RECORDS];
	unsigned next, end; /* records still to append: next..end-1 */
	unsigned bursts;
	atomic_int failed;
	struct tu_latch done; /* one count per record */
};

static void append_burst(void *arg);

static void rec_durable(struct commit_wait *cw, int status)
{
	struct wait *w = (struct wait *)(void *)cw;
	struct rig *g = w->g;

	if (status == 0)
		g->run->recs[w->k].ack_at = g->run->clock++;
	else
		atomic_store(&g->failed, status);
	if (w->then_append &&
	    agr_scheduler_schedule(g->s, 0, append_burst, g) < 0)
		atomic_store(&g->failed, -ESHUTDOWN);
	tu_latch_count_down(&g->done);
}

/*
 * Appends a burst of records (a few, or now and then up to BURST_MAX).
 * Every other burst schedules the next at once, so that it gathers
 * while this one is written; the others wait for their last record to
 * be durable: at most two bursts are in the journal at a time.
 */
static void append_burst(void *arg)
{
	struct rig *g = arg;
	unsigned n = 1 + rng_below(rng_below(4) == 0 ? BURST_MAX : 12), i;
	char rec[CRASH_RECORD_MAX];
	bool chain = (g->bursts++ & 1) == 0;

	if (n > g->end - g->next)
		n = g->end - g->next;
	for (i = 0; i < n; i++) {
		unsigned k = g->next++;
		const struct record *r = &g->run->recs[k];
		size_t len = crash_record_encode(rec, r->key, r->amount);
		struct wait *w = &g->waits[k];

		*w = (struct wait){ .w.durable = rec_durable, .g = g, .k = k,
				    .then_append = !chain && i == n - 1 &&
						   g->next < g->end };
		if (journal_append(&g->j, rec, len, &w->w) < 0) {
			atomic_store(&g->failed, -EIO);
			tu_latch_count_down(&g->done);
		}
	}
	if (chain && g->next < g->end &&
	    agr_scheduler_schedule(g->s, 0, append_burst, g) < 0)
		atomic_store(&g->failed, -ESHUTDOWN);
}

/* On a disk when it can: tmpfs may refuse O_DIRECT. */
static const char *disk_root(void)
{
	const char *dir = getenv("TMPDIR");

	if (dir && *dir)
		return dir;
	return access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
}

/* Crash states are only read back: in memory when it can. */
static const char *state_root(void)
{
	return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : disk_root();
}

static char *make_dir(const char *root, const char *what)
{
	char *dir = malloc(PATH_MAX);

	ck_assert_ptr_nonnull(dir);
	snprintf(dir, PATH_MAX, "%s/aggring-%s-XXXXXX", root, what);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

static void remove_dir(char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(dir);
}

static char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = calloc(1, (size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

static void write_file(const char *path, const char *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, p, len, 0), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

static long durable_at(const struct run *r, const struct op *o);

/*
 * Runs a journal on `path` (holding `end` bytes of whole records) with
 * records r->recs[r->first..r->nrecs-1] and records what it does.
 * Returns whether the journal went direct.
 */
static bool record_run(struct run *r, const char *path, uint64_t end,
		       enum journal_io io, enum journal_sync sync)
{
	agr_named_aggregate named = { "crash", "Journal" };
	struct rig *g = calloc(1, sizeof(*g));
	bool direct;
	unsigned i;

	ck_assert_ptr_nonnull(g);
	r->inflight[0] = r->inflight[1] = -1;
	r->base = read_file(path, &r->base_len);
	g->run = r;
	g->next = r->first;
	g->end = r->nrecs;
	ck_assert_int_eq(agr_supplier_new("crash", 1, &g->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &named, &g->s), 0);
	ck_assert_int_eq(journal_open(&g->j, path, end, io, sync, g->s, 0), 0);
	g->trace = tracer;
	g->trace.arg = r;
	journal_set_trace(&g->j, &g->trace);
	tu_latch_init(&g->done, (int)(g->end - g->next));
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, append_burst, g), 0);
	ck_assert(tu_latch_wait(&g->done, TU_LONG_NS));
	/* A graceful stop waits for a zero fill still in flight. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
	direct = g->j.direct;
	journal_close(&g->j);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(atomic_load(&g->failed), 0);
	ck_assert(!r->overflow);
	for (i = 0; i < r->nops; i++)
		r->ops[i].durable = durable_at(r, &r->ops[i]);
	tu_latch_destroy(&g->done);
	free(g);
	return direct;
}

/* ---- recovery: the real replay, or a planted one that trusts torn records */

struct recovered {
	const struct run *run;
	unsigned short count[MAX_RECORDS]; /* times each record came back */
	unsigned invented, duplicated;
	char bad_key[CRASH_RECORD_MAX];
	struct crash_replayed out;
};

/* The record a key names in this run, or -1. */
static long record_of(const struct run *r, const char *key)
{
	char *end;
	unsigned long i;

	if (key[0] != 'r' && key[0] != 's')
		return -1;
	i = strtoul(key + 1, &end, 10);
	if (*end || end != key + 7)
		return -1;
	if (key[0] == 's')
		i += r->first; /* phase 2 follows what phase 1 recovered */
	if (i >= r->nrecs || strcmp(r->recs[i].key, key) != 0)
		return -1;
	return (long)i;
}

static void account_seen(void *arg, const char *key, long long balance)
{
	struct recovered *rc = arg;
	long i = record_of(rc->run, key);
	long long amount = i >= 0 ? rc->run->recs[i].amount : 0;

	if (i < 0 || balance <= 0 || balance % amount != 0) {
		rc->invented++;
		snprintf(rc->bad_key, sizeof(rc->bad_key), "%s %lld", key,
			 balance);
		return;
	}
	rc->count[i] = (unsigned short)(balance / amount);
	if (rc->count[i] > 1)
		rc->duplicated++;
}

typedef void recover_fn(const char *dir, bool repair, struct recovered *rc);

/* For the crash handler: what is being replayed. */
static char current_state[512];
static int saved_stderr = -1;
static char replay_log[PATH_MAX];

static void real_recover(const char *dir, bool repair, struct recovered *rc)
{
	int fd = open(replay_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		      0644);

	/* Replay reports each torn tail on stderr: thousands of lines. */
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_stderr, 0);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	close(fd);
	crash_replay(dir, repair, account_seen, rc, &rc->out);
	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	saved_stderr = -1;
}

#ifndef JOURNAL_PLANT_EARLY_ACK
/*
 * The planted bug: a replay that trusts what a record says, without
 * its CRC or its end of line, and stops only at a line that does not
 * begin like a record (a zero byte, say).
 */
static void trusting_recover(const char *dir, bool repair,
			     struct recovered *rc)
{
	char path[PATH_MAX + 16], key[CRASH_RECORD_MAX];
	size_t len, at = 0;
	char *p;

	(void)repair;
	snprintf(path, sizeof(path), "%s/journal-0.log", dir);
	p = read_file(path, &len);
	while (at < len) {
		char *nl = memchr(p + at, '\n', len - at), *sp, *end;
		size_t line = nl ? (size_t)(nl - (p + at)) + 1 : len - at;
		long long delta;

		sp = memchr(p + at, ' ', line);
		if (!sp || sp == p + at || (size_t)(sp - (p + at)) >= 16 ||
		    (sp[1] != '+' && sp[1] != '-'))
			break;
		memcpy(key, p + at, (size_t)(sp - (p + at)));
		key[sp - (p + at)] = '\0';
		delta = strtoll(sp + 1, &end, 10);
		if (end == sp + 1)
			break;
		account_seen(rc, key, delta);
		rc->out.events++;
		at += line;
	}
	rc->out.end = at;
	free(p);
}
#endif

/* Replay never crashes: if it does, say on which state. */
static void on_fatal(int sig)
{
	if (saved_stderr >= 0)
		dup2(saved_stderr, STDERR_FILENO);
	if (current_state[0]) {
		(void)!write(STDERR_FILENO, "crash state being replayed: ", 28);
		(void)!write(STDERR_FILENO, current_state,
			     strlen(current_state));
		(void)!write(STDERR_FILENO, "\n", 1);
	}
	if (sig)
		raise(sig);
}

static void on_exit_in_replay(void)
{
	if (saved_stderr >= 0) {
		char cmd[PATH_MAX + 16];

		on_fatal(0);
		snprintf(cmd, sizeof(cmd), "cat '%s' >&2", replay_log);
		(void)!system(cmd);
	}
}

static void catch_replay_crashes(void)
{
	struct sigaction sa = { .sa_handler = on_fatal,
				.sa_flags = (int)SA_RESETHAND };
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };
	unsigned i;

	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	atexit(on_exit_in_replay);
}

/* ---- crash states ---- */

enum violation {
	V_LOST_ACKED,	/* acknowledged, not recovered */
	V_DUPLICATED,	/* recovered more than once */
	V_INVENTED,	/* an account or amount never appended */
	V_OUT_OF_ORDER, /* recovered after a record that was not */
	V_NOT_IDEMPOTENT, /* a second replay cut more or found otherwise */
	V_KINDS
};

static const char *const violation_name[V_KINDS] = {
	"acknowledged record lost", "record recovered twice",
	"record invented", "record recovered after a hole",
	"second replay disagrees",
};

/* A crash state the restart test goes on from. */
struct restart {
	char *image; /* the journal as replay left it */
	size_t len;
	uint64_t end;
	unsigned recovered; /* records */
};

struct explorer {
	const char *mode;
	const struct run *run;
	recover_fn *recover;
	char *dir;	  /* the crash state's directory */
	char path[PATH_MAX + 16];
	char *img;	  /* the state being built */
	size_t img_len, img_cap;
	uint64_t budget;  /* states for this run */
	uint64_t states, groups, reordered, torn_states, cut, unacked_kept;
	unsigned max_inflight; /* writes in flight at once, at most */
	uint64_t found[V_KINDS];
	unsigned reported;
	struct restart restarts[RESTARTS];
	unsigned restart_seen; /* candidates seen, for reservoir sampling */
	bool want_restarts;
};

/* When write o is durable (its bytes count), or LONG_MAX never. */
static long durable_at(const struct run *r, const struct op *o)
{
	long best = LONG_MAX;
	unsigned i;

	if (o->sync || o->completed < 0 || o->res <= 0)
		return LONG_MAX;
	if (o->dsync)
		return o->completed + 1;
	for (i = 0; i < r->nops; i++) {
		const struct op *s = &r->ops[i];

		if (s->sync && s->completed >= 0 && s->res == 0 &&
		    s->issued > o->completed && s->completed + 1 < best)
			best = s->completed + 1;
	}
	return best;
}

/* The bytes of write o that may be on the disk at t. */
static size_t landable(const struct op *o, long t)
{
	if (o->sync || o->issued >= t)
		return 0;
	if (o->completed >= 0 && o->completed < t && o->res >= 0)
		return (size_t)o->res; /* a short write wrote no more */
	return o->len;
}

static unsigned sectors_of(uint64_t at, size_t len)
{
	if (len == 0)
		return 0;
	return (unsigned)((at + len - 1) / SECTOR - at / SECTOR + 1);
}

/* Room for n bytes in the state being built; what is new reads zeros. */
static void img_reserve(struct explorer *x, size_t n)
{
	size_t cap = n * 2;

	if (n <= x->img_cap)
		return;
	x->img = realloc(x->img, cap);
	ck_assert_ptr_nonnull(x->img);
	memset(x->img + x->img_cap, 0, cap - x->img_cap);
	x->img_cap = cap;
}

static void img_apply(struct explorer *x, const struct op *o, size_t len,
		      uint64_t mask)
{
	uint64_t first = o->at / SECTOR;
	unsigned k = sectors_of(o->at, len), s;

	for (s = 0; s < k; s++) {
		uint64_t from = (first + s) * SECTOR, to = from + SECTOR;

		if (!(mask >> s & 1))
			continue;
		if (from < o->at)
			from = o->at;
		if (to > o->at + len)
			to = o->at + len;
		img_reserve(x, (size_t)to);
		memcpy(x->img + from, o->data + (from - o->at), to - from);
		if (to > x->img_len)
			x->img_len = (size_t)to; /* a gap before reads zeros */
	}
}

static uint64_t full_mask(unsigned k)
{
	return k >= 64 ? ~0ull : (1ull << k) - 1;
}

/*
 * The sector masks explored for a write of k sectors, lost and whole
 * first: every one for a short write; for a longer one the prefixes,
 * suffixes, single holes and single sectors, then random ones up to
 * `want` (of at most `max`).
 */
static unsigned tear_masks(unsigned k, uint64_t *m, unsigned max,
			   uint64_t want)
{
	uint64_t all = full_mask(k);
	unsigned n = 0, i;

	m[n++] = 0;
	if (k == 0)
		return n;
	m[n++] = all;
	if (k <= TEAR_ALL) {
		for (i = 1; i < all; i++)
			m[n++] = i;
		return n;
	}
	for (i = 1; i < k && n + 4 <= max; i++) {
		m[n++] = full_mask(i);	      /* a prefix landed */
		m[n++] = all & ~full_mask(i); /* a suffix landed */
	}
	for (i = 0; i < k && n + 2 <= max; i++) {
		m[n++] = all & ~(1ull << i); /* one sector missing */
		m[n++] = 1ull << i;	     /* one sector only */
	}
	while (n < max && n < want) {
		uint64_t r = rng_next() & all;

		if (r != 0 && r != all)
			m[n++] = r;
	}
	return n;
}

/* Writes in flight explored per state; older ones beyond it are lost. */
#define MAX_INFLIGHT 4
#define MAX_MASKS 4096u /* per write in flight; CI's budget reaches it */
_Static_assert(MAX_MASKS >= 1u << TEAR_ALL, "room for every subset");

struct group {
	long t;			  /* its last point */
	unsigned nv;		  /* writes in flight */
	const struct op *v[MAX_INFLIGHT];
	size_t vlen[MAX_INFLIGHT]; /* their bytes that may land */
	uint64_t masks[MAX_INFLIGHT][MAX_MASKS];
	unsigned nmasks[MAX_INFLIGHT];
	unsigned acked;		  /* records acknowledged by t */
	unsigned inflight;	  /* writes in flight, beyond the bound too */
};

static void describe(struct explorer *x, const struct group *gr,
		     const unsigned *pick)
{
	int n = snprintf(current_state, sizeof(current_state),
			 "%s, crash at %ld of %ld, %u acknowledged;", x->mode,
			 gr->t, x->run->clock, gr->acked);
	unsigned i;

	for (i = 0; i < gr->nv && n > 0 && (size_t)n < sizeof(current_state);
	     i++)
		n += snprintf(current_state + n,
			      sizeof(current_state) - (size_t)n,
			      " write of %zu at %" PRIu64 " sectors %#" PRIx64
			      ";", gr->vlen[i], gr->v[i]->at,
			      gr->masks[i][pick[i]]);
}

/* "VIOLATION", or what the planted tests call what they expect. */
static const char *violation_word = "VIOLATION";

static void report(struct explorer *x, enum violation v, const char *what)
{
	x->found[v]++;
	if (x->reported++ < REPORT_MAX)
		fprintf(stderr, "%s (%s): %s: %s\n", violation_word,
			violation_name[v], what, current_state);
}

/* Checks what replay recovered against what was acknowledged by then. */
static unsigned check_recovered(struct explorer *x, const struct group *gr,
				const struct recovered *rc)
{
	const struct run *r = x->run;
	unsigned i, present = 0;
	char what[64];
	bool hole = false;

	if (rc->invented)
		report(x, V_INVENTED, rc->bad_key);
	if (rc->duplicated)
		report(x, V_DUPLICATED, "a balance twice its amount");
	for (i = 0; i < r->nrecs; i++) {
		if (rc->count[i] && hole) {
			snprintf(what, sizeof(what), "%s", r->recs[i].key);
			report(x, V_OUT_OF_ORDER, what);
			break;
		}
		if (!rc->count[i]) {
			hole = true;
			if (r->recs[i].ack_at < gr->t) {
				snprintf(what, sizeof(what), "%s",
					 r->recs[i].key);
				report(x, V_LOST_ACKED, what);
				break;
			}
		} else {
			present++;
		}
	}
	return present;
}

static void recover_state(struct explorer *x, bool repair,
			  struct recovered *rc)
{
	memset(rc, 0, sizeof(*rc));
	rc->run = x->run;
	x->recover(x->dir, repair, rc);
}

/* Keeps, by reservoir sampling, a few states to restart from. */
static void maybe_keep_restart(struct explorer *x, uint64_t end,
			       unsigned present)
{
	struct restart *k;
	unsigned slot;

	x->restart_seen++;
	slot = x->restart_seen <= RESTARTS ? x->restart_seen - 1 :
					     rng_below(x->restart_seen);
	if (slot >= RESTARTS)
		return;
	k = &x->restarts[slot];
	free(k->image);
	k->image = read_file(x->path, &k->len);
	k->end = end;
	k->recovered = present;
}

/* Builds one state of the group, replays it twice, checks it. */
static void explore_state(struct explorer *x, const struct group *gr,
			  const unsigned *pick)
{
	const struct run *r = x->run;
	struct recovered *rc = malloc(2 * sizeof(*rc));
	unsigned i, v = 0, present;
	bool torn = false;
	size_t old = x->img_len;

	ck_assert_ptr_nonnull(rc);
	img_reserve(x, r->base_len + 1);
	memcpy(x->img, r->base, r->base_len);
	if (old > r->base_len)
		memset(x->img + r->base_len, 0, old - r->base_len);
	x->img_len = r->base_len;
	for (i = 0; i < r->nops; i++) {
		const struct op *o = &r->ops[i];

		if (o->sync || o->issued >= gr->t)
			continue;
		if (o->durable <= gr->t) {
			img_apply(x, o, (size_t)o->res, ~0ull);
			continue;
		}
		if (v == gr->nv || gr->v[v] != o)
			continue; /* in flight beyond the bound: lost */
		img_apply(x, o, gr->vlen[v], gr->masks[v][pick[v]]);
		torn |= pick[v] > 1;
		v++;
	}
	describe(x, gr, pick);
	write_file(x->path, x->img, x->img_len);
	recover_state(x, true, &rc[0]);
	present = check_recovered(x, gr, &rc[0]);
	recover_state(x, true, &rc[1]);
	if (rc[1].out.torn_bytes || rc[1].out.end != rc[0].out.end ||
	    memcmp(rc[0].count, rc[1].count, sizeof(rc[0].count)) != 0)
		report(x, V_NOT_IDEMPOTENT, "after the first replay's repair");
	x->states++;
	x->torn_states += torn;
	x->cut += rc[0].out.torn_bytes > 0;
	x->unacked_kept += present > gr->acked;
	if (x->want_restarts && (rc[0].out.torn_bytes || present > gr->acked))
		maybe_keep_restart(x, rc[0].out.end, present);
	current_state[0] = '\0';
	free(rc);
}

/*
 * The group of crash points ending at t: what is durable, what may
 * land; `want` states for it, to choose how many torn masks to try.
 */
static void group_at(const struct run *r, long t, struct group *gr,
		     uint64_t want)
{
	unsigned i;

	memset(gr, 0, sizeof(*gr));
	gr->t = t;
	for (i = 0; i < r->nops; i++) {
		const struct op *o = &r->ops[i];
		size_t len = landable(o, t);

		if (len == 0 || o->durable <= t)
			continue;
		gr->inflight++;
		if (gr->nv == MAX_INFLIGHT) { /* keep the newest */
			memmove(gr->v, gr->v + 1,
				sizeof(gr->v[0]) * (gr->nv - 1));
			memmove(gr->vlen, gr->vlen + 1,
				sizeof(gr->vlen[0]) * (gr->nv - 1));
			memmove(gr->masks, gr->masks + 1,
				sizeof(gr->masks[0]) * (gr->nv - 1));
			memmove(gr->nmasks, gr->nmasks + 1,
				sizeof(gr->nmasks[0]) * (gr->nv - 1));
			gr->nv--;
		}
		/* Sector masks are 64 bits: the workload stays within. */
		ck_assert_uint_le(sectors_of(o->at, len), MAX_SECTORS);
		gr->v[gr->nv] = o;
		gr->vlen[gr->nv] = len;
		gr->nmasks[gr->nv] = tear_masks(sectors_of(o->at, len),
						gr->masks[gr->nv], MAX_MASKS,
						want);
		gr->nv++;
	}
	for (i = 0; i < r->nrecs; i++)
		gr->acked += r->recs[i].ack_at < t;
}

static bool same_group(const struct group *a, const struct group *b)
{
	unsigned i;

	if (a->nv != b->nv)
		return false;
	for (i = 0; i < a->nv; i++)
		if (a->v[i] != b->v[i] || a->vlen[i] != b->vlen[i])
			return false;
	return true;
}

/* Whether t is its group's last point (the next one differs); gr[0] it. */
static bool last_point(const struct run *r, long t, struct group *gr,
		       uint64_t want)
{
	group_at(r, t, &gr[0], want);
	if (t == r->clock)
		return true;
	group_at(r, t + 1, &gr[1], 0);
	return !same_group(&gr[0], &gr[1]);
}

/*
 * Every lost/whole combination of the group's writes in flight, then
 * every torn one if they fit in `share`, else `share` random ones.
 */
static void explore_group(struct explorer *x, const struct group *gr,
			  uint64_t share)
{
	unsigned pick[MAX_INFLIGHT] = { 0 }, i, c;
	uint64_t combos = 1, whole = 1u << gr->nv, n;

	for (i = 0; i < gr->nv; i++)
		combos *= gr->nmasks[i];
	for (c = 0; c < whole; c++) {
		for (i = 0; i < gr->nv; i++)
			pick[i] = c >> i & 1;
		explore_state(x, gr, pick);
	}
	if (combos <= share) {
		for (n = 0; n < combos; n++) {
			uint64_t rest = n;
			bool any_torn = false;

			for (i = 0; i < gr->nv; i++) {
				pick[i] = (unsigned)(rest % gr->nmasks[i]);
				rest /= gr->nmasks[i];
				any_torn |= pick[i] > 1;
			}
			if (any_torn)
				explore_state(x, gr, pick);
		}
		return;
	}
	for (n = whole; n < share; n++) {
		for (i = 0; i < gr->nv; i++)
			pick[i] = rng_below(gr->nmasks[i]);
		c = rng_below(gr->nv); /* at least one torn */
		if (gr->nmasks[c] > 2)
			pick[c] = 2 + rng_below(gr->nmasks[c] - 2);
		explore_state(x, gr, pick);
	}
}

/* Every crash point of the run, one group at a time, within budget. */
static void explore_run(struct explorer *x)
{
	struct group *gr = malloc(2 * sizeof(*gr));
	long t, ngroups = 0;
	uint64_t start = x->states, used, share;

	ck_assert_ptr_nonnull(gr);
	x->dir = make_dir(state_root(), "crash-state");
	snprintf(x->path, sizeof(x->path), "%s/journal-0.log", x->dir);
	/* First count the groups, to share the budget out. */
	for (t = 0; t <= x->run->clock; t++)
		ngroups += last_point(x->run, t, gr, 0);
	/* What a small group leaves goes to the groups after it. */
	for (t = 0; t <= x->run->clock; t++) {
		used = x->states - start;
		share = (used < x->budget ? x->budget - used : 0) /
			(uint64_t)ngroups;
		if (!last_point(x->run, t, gr, share))
			continue;
		ngroups--;
		explore_group(x, &gr[0], share);
		x->groups++;
		x->reordered += gr[0].nv > 1;
		if (gr[0].inflight > x->max_inflight)
			x->max_inflight = gr[0].inflight;
	}
	remove_dir(x->dir);
	x->dir = NULL;
	free(x->img);
	x->img = NULL;
	x->img_len = x->img_cap = 0;
	free(gr);
}

/* ---- the four ways to the disk, each recorded, crashed, restarted ---- */

struct mode {
	const char *name;
	enum journal_io io;
	enum journal_sync sync;
};

static const struct mode modes[] = {
	{ "direct, RWF_DSYNC", JOURNAL_IO_DIRECT, JOURNAL_SYNC_DSYNC },
	{ "direct, fdatasync", JOURNAL_IO_DIRECT, JOURNAL_SYNC_FDATASYNC },
	{ "buffered, RWF_DSYNC", JOURNAL_IO_BUFFERED, JOURNAL_SYNC_DSYNC },
	{ "buffered, fdatasync", JOURNAL_IO_BUFFERED, JOURNAL_SYNC_FDATASYNC },
};

#define NMODES (sizeof(modes) / sizeof(modes[0]))

static uint64_t budget_per_mode(void)
{
	uint64_t n = env_u64("CRASH_STATES", 4000) / NMODES;

	return n < 64 ? 64 : n;
}

/* A planted bug need not be caught at length: a longer run only costs. */
static uint64_t planted_budget(void)
{
	uint64_t n = budget_per_mode() / 2;

	return n < 1000 ? n : 1000;
}

/* The PRNG, per mode and seed, so that a failure can be replayed. */
static void seed_rng(unsigned salt)
{
	uint64_t seed = env_u64("CRASH_SEED", 1);

	rng_state = (seed + salt) * 0x9e3779b97f4a7c15ull;
	if (rng_state == 0)
		rng_state = 1;
}

struct outcome {
	uint64_t found[V_KINDS];
	uint64_t states, groups, reordered, torn, cut, unacked_kept, ops;
	unsigned max_inflight;
	unsigned restarts;
	bool direct;
};

static void add_up(struct outcome *o, const struct explorer *x,
		   const struct run *r)
{
	unsigned v;

	for (v = 0; v < V_KINDS; v++)
		o->found[v] += x->found[v];
	o->states += x->states;
	o->groups += x->groups;
	o->reordered += x->reordered;
	if (x->max_inflight > o->max_inflight)
		o->max_inflight = x->max_inflight;
	o->torn += x->torn_states;
	o->cut += x->cut;
	o->unacked_kept += x->unacked_kept;
	o->ops += r->nops;
}

/*
 * Restarts from a crash state as the server does (the repaired file,
 * reopened after its records), appends more, and explores that run.
 */
static void restart_from(const struct mode *m, const struct restart *k,
			 const struct run *before, uint64_t budget,
			 struct outcome *o)
{
	struct run *r = calloc(1, sizeof(*r));
	char *dir = make_dir(disk_root(), "crash-restart");
	char path[PATH_MAX + 16], name[64];
	struct explorer x = { .recover = real_recover, .budget = budget };
	unsigned i;

	ck_assert_ptr_nonnull(r);
	snprintf(path, sizeof(path), "%s/journal-0.log", dir);
	write_file(path, k->image, k->len);
	for (i = 0; i < k->recovered; i++) {
		r->recs[i] = before->recs[i];
		r->recs[i].ack_at = -1; /* served after the restart */
	}
	r->first = k->recovered;
	r->nrecs = k->recovered + PHASE2_RECORDS;
	for (i = 0; i < PHASE2_RECORDS; i++)
		record_make(&r->recs[r->first + i], 's', i);
	record_run(r, path, k->end, m->io, m->sync);
	snprintf(name, sizeof(name), "%s, after a restart", m->name);
	x.mode = name;
	x.run = r;
	explore_run(&x);
	add_up(o, &x, r);
	o->restarts++;
	run_free(r);
	remove_dir(dir);
}

/* Fault injection: a few of the first run's writes come back short. */
static bool short_writes;

/*
 * Direct: a write of more than a block and a half is cut to that (the
 * journal writes its last block again), a zero fill fails (the batches
 * extend the file themselves). Buffered: writes are cut to 700 bytes.
 */
static void arm_short_writes(const struct mode *m)
{
#ifdef AGR_FAULT_INJECTION
	int at = m->io == JOURNAL_IO_DIRECT ? (int)(JOURNAL_BLOCK * 3 / 2) :
					      700;

	if (short_writes)
		ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_SHORT, at, 2, 6),
				 0);
#else
	(void)m;
#endif
}

static void disarm_short_writes(void)
{
#ifdef AGR_FAULT_INJECTION
	if (short_writes) {
		ck_assert_uint_gt(agr_fault_fired(AGR_FAULT_IO_SHORT), 0);
		agr_fault_reset();
	}
#endif
}

static void run_mode(const struct mode *m, unsigned salt, recover_fn *recover,
		     bool restarts, uint64_t budget, struct outcome *o)
{
	struct run *r = calloc(1, sizeof(*r));
	char *dir = make_dir(disk_root(), "crash-run");
	char path[PATH_MAX + 16];
	struct explorer x = { .mode = m->name, .recover = recover,
			      .want_restarts = restarts,
			      .budget = restarts ? budget * 3 / 4 : budget };
	unsigned i, v;

	ck_assert_ptr_nonnull(r);
	memset(o, 0, sizeof(*o));
	seed_rng(salt);
	snprintf(replay_log, sizeof(replay_log), "%s/replay.log", dir);
	snprintf(path, sizeof(path), "%s/journal-0.log", dir);
	write_file(path, "", 0);
	r->nrecs = PHASE1_RECORDS;
	for (i = 0; i < r->nrecs; i++)
		record_make(&r->recs[i], 'r', i);
	arm_short_writes(m);
	o->direct = record_run(r, path, 0, m->io, m->sync);
	disarm_short_writes();
	x.run = r;
	explore_run(&x);
	add_up(o, &x, r);
	for (i = 0; i < RESTARTS; i++) {
		if (!x.restarts[i].image)
			continue;
		restart_from(m, &x.restarts[i], r, budget / 4 / RESTARTS, o);
		free(x.restarts[i].image);
	}
	printf("crash states, %s%s%s (seed %" PRIu64 "): %" PRIu64
	       " writes and syncs, %" PRIu64 " groups (%" PRIu64
	       " with more than one write in flight), %" PRIu64
	       " states (%" PRIu64 " torn, %" PRIu64 " with a tail cut off, %"
	       PRIu64 " keeping unacknowledged records), %u restarts;",
	       m->name, short_writes ? ", short writes" : "",
	       m->io == JOURNAL_IO_DIRECT && !o->direct ?
	       " (O_DIRECT refused: buffered)" : "", env_u64("CRASH_SEED", 1),
	       o->ops, o->groups, o->reordered, o->states, o->torn, o->cut,
	       o->unacked_kept, o->restarts);
	for (v = 0; v < V_KINDS; v++)
		printf(" %s: %" PRIu64 "%s", violation_name[v], o->found[v],
		       v + 1 < V_KINDS ? "," : "\n");
	fflush(stdout);
	run_free(r);
	remove_dir(dir);
}

#ifndef JOURNAL_PLANT_EARLY_ACK

/* Every crash state of every mode recovers what it must. */
START_TEST(crash_states_recover)
{
	struct outcome o;
	unsigned v;

	run_mode(&modes[_i], (unsigned)_i, real_recover, true,
		 budget_per_mode(), &o);
	/* The bound the comment at the top states. */
	ck_assert_uint_le(o.max_inflight, 2);
	ck_assert_uint_gt(o.torn, 0);
	ck_assert_uint_gt(o.restarts, 0);
	for (v = 0; v < V_KINDS; v++)
		ck_assert_msg(o.found[v] == 0, "%s: %" PRIu64 " states: %s",
			      modes[_i].name, o.found[v], violation_name[v]);
}
END_TEST

#ifdef AGR_FAULT_INJECTION

/* Short writes finished by the journal, failed zero fills: the same. */
START_TEST(crash_states_recover_after_short_writes)
{
	struct outcome o;
	unsigned v;

	short_writes = true;
	run_mode(&modes[_i], 50 + (unsigned)_i, real_recover, true,
		 budget_per_mode() / 2, &o);
	short_writes = false;
	for (v = 0; v < V_KINDS; v++)
		ck_assert_msg(o.found[v] == 0, "%s: %" PRIu64 " states: %s",
			      modes[_i].name, o.found[v], violation_name[v]);
}
END_TEST

#endif

/* The checker can fail: a replay that trusts torn records is caught. */
START_TEST(a_replay_that_trusts_torn_records_is_caught)
{
	struct outcome o;

	violation_word = "caught, as planted";
	run_mode(&modes[_i], 100 + (unsigned)_i, trusting_recover, false,
		 planted_budget(), &o);
	violation_word = "VIOLATION";
	ck_assert_msg(o.found[V_INVENTED] + o.found[V_OUT_OF_ORDER] > 0,
		      "%s: the trusting replay went unnoticed",
		      modes[_i].name);
}
END_TEST

#else

/* The checker can fail: a journal that acknowledges early is caught. */
START_TEST(a_journal_that_acknowledges_early_is_caught)
{
	struct outcome o;

	violation_word = "caught, as planted";
	run_mode(&modes[_i], 200 + (unsigned)_i, real_recover, false,
		 planted_budget(), &o);
	ck_assert_msg(o.found[V_LOST_ACKED] > 0,
		      "%s: acknowledging before durable went unnoticed",
		      modes[_i].name);
}
END_TEST

#endif

static Suite *crash_suite(void)
{
	Suite *s = suite_create("crash_states");
	TCase *tc = tcase_create("crash_states");

	/* About a thousand states a second; far slower under sanitizers. */
	tcase_set_timeout(tc, (double)(120 + budget_per_mode() / 20));
#ifndef JOURNAL_PLANT_EARLY_ACK
	tcase_add_loop_test(tc, crash_states_recover, 0, NMODES);
#ifdef AGR_FAULT_INJECTION
	tcase_add_loop_test(tc, crash_states_recover_after_short_writes, 0,
			    NMODES);
#endif
	tcase_add_loop_test(tc, a_replay_that_trusts_torn_records_is_caught,
			    0, NMODES);
#else
	tcase_add_loop_test(tc, a_journal_that_acknowledges_early_is_caught,
			    0, NMODES);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	catch_replay_crashes();
	return tu_run(crash_suite());
}
