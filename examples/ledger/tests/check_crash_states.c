/* SPDX-License-Identifier: MIT */
/*
 * check_crash_states.c - ledger_server's journal survives power loss,
 * not only kill -9: lost, reordered and torn writes, proven the way
 * storage engines prove it (ALICE, CrashMonkey).
 *
 * 1. Record (crash_run.c). A real journal (../ledger_journal.c, on a real file
 *    and a real ring) takes a workload of records, one account each; its trace
 *    hook reports every write (offset, bytes, RWF_DSYNC or not) and fdatasync
 *    it issues and their results, and the records' durable callbacks report the
 *    acknowledgements, all on one clock. The journal is built with 16 KiB of
 *    zeros written ahead at a time (not 4 MiB), so that a run crosses several
 *    zero fills, which race the batches.
 * 2. Build crash states (crash_explore.c). At every point of that clock, a
 *    write is durable if it completed with RWF_DSYNC, or completed before an
 *    fdatasync that completed was issued; only its completed bytes count. Every
 *    other write issued by then may be on the disk or not, whole or torn at
 *    512-byte sectors (each sector old or new), in any combination with the
 *    others (so also reordered). A state is the durable writes whole plus one
 *    choice per write in flight, applied in issue order over the file as it
 *    was; a sector past the end that lands extends the file with zeros before
 *    it. Points with the same durable and in-flight writes are one state group,
 *    checked against the acknowledgements of its last point.
 * 3. Recover and check. Each state is written to a file and replayed by
 *    ledger_server's own replay (crash_replay.c), which cuts a
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
#include "crash_states.h"
#include "testutil.h"

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

uint64_t rng_next(void)
{
	uint64_t x = rng_state; /* xorshift64* */

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

unsigned rng_below(unsigned n)
{
	return (unsigned)(rng_next() % n);
}

/* ---- recovery: the real replay, or a planted one that trusts torn records */

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


/* For the crash handler: what is being replayed. */
char current_state[512];
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
