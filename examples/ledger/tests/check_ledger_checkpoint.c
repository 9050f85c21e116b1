/* SPDX-License-Identifier: MIT */
/*
 * check_ledger_checkpoint.c - ledger_server's checkpoints
 * (examples/ledger/ledger_checkpoint.c): what a restart rebuilds from one is
 * what a replay of the whole journal rebuilds, a torn or corrupt one is
 * passed over for the one before, and no crash during a checkpoint
 * cycle loses or doubles anything.
 *
 * 1. Round trip. Two journals take a workload of every kind of record
 *    (deposits, withdrawals, strings, closes, request ids with their
 *    replies, transactions' results, transfers settled, refunded, left
 *    open, and a credit whose debit lies after the other journal's
 *    checkpoint position). After each checkpoint the state a restart
 *    builds (balances, strings, remembered request ids with their
 *    replies, open transfers) must equal a full replay's.
 * 2. A newest checkpoint cut short or with one byte changed is passed
 *    over: the restart uses the one before and replays longer, to the
 *    same state; the next cycle goes on from that one and keeps it as
 *    the fallback. 1 and 2 run twice: each cycle from the disk alone
 *    (checkpoint_take), and one builder for every cycle, as the
 *    server's checkpointer (checkpoint_builder_take).
 * 3. Crash states of a checkpoint cycle (checkpoint_crash_states.c).
 *    Two cycles of one builder are recorded through the checkpoint's
 *    trace hook (every write, fsync, rename, directory fsync, unlink and
 *    punch). At every point between two of
 *    those steps, a crash may leave on the disk: the namespace changes
 *    up to the last directory fsync, plus any prefix of those after it
 *    (a journaling file system commits them in order); a checkpoint's
 *    bytes only once fsync'd, else none, all, any prefix of 512-byte
 *    sectors, or (seeded) random sectors lost at full length, in any
 *    combination with the namespace (so a rename may land before the
 *    data it names); each journal punched up to any of the lengths
 *    issued so far, or not at all. Every such state is recovered by the
 *    server's own replay (repairing, in a child, so that a refusal to
 *    start counts as a failure) and must equal the full replay.
 *    Then each planted bug (a checkpoint made current without its fsync;
 *    the journal freed before the new checkpoint is current) must be
 *    caught in some state. CKPT_CRASH_SEED (default 1) seeds the random
 *    tears; the counts are printed.
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

#define CHECK_EQ(a, b)                                                   \
	do {                                                             \
		unsigned long long a_ = (a), b_ = (b);                   \
		if (a_ != b_)                                            \
			FAIL("%s is %llu, not %llu", #a, a_, b_);       \
	} while (0)

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

int rm_rf(const char *dir)
{
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the workload ---- */

static void rec_init(struct record *r, const char *key)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->key, sizeof(r->key), "%s", key);
}

/* Record i of journal j (accounts "aK" in journal 0, "bK" in 1). */
static void workload(unsigned j, unsigned i, struct record *r, bool *skip)
{
	char key[16];

	*skip = false;
	snprintf(key, sizeof(key), "%c%u", j ? 'b' : 'a', i % 23);
	rec_init(r, key);
	r->kind = RECORD_DELTA;
	r->delta = (long long)(i % 7) + 1;
	switch (i % 11) {
	case 0: /* a deposit with its request id */
		r->reply = 'c';
		snprintf(r->reqid, sizeof(r->reqid), "r%u-%u", j, i);
		break;
	case 1: /* a string */
		r->kind = RECORD_STRING;
		r->value_len = 3;
		memcpy(r->value, i % 2 ? "x y" : "\0\1\2", 3);
		r->reply = i % 3 ? 's' : '\0';
		snprintf(r->reqid, sizeof(r->reqid), "%s",
			 r->reply ? "set-id" : "");
		break;
	case 2: /* a withdrawal */
		r->delta = -1;
		break;
	case 3: /* a transaction with its results */
		r->reply = 'x';
		snprintf(r->reqid, sizeof(r->reqid), "t%u-%u", j, i);
		snprintf(r->results, sizeof(r->results), "i%u,OK", i);
		break;
	case 4: /* a close, now and then */
		if (i % 3 == 0)
			r->kind = RECORD_CLOSE;
		break;
	case 5: /* journal 0: a transfer's debit to b(i); its end below */
		if (j == 0) {
			r->reply = 'd';
			r->delta = -5;
			snprintf(r->reqid, sizeof(r->reqid), "@x%u", i);
			snprintf(r->peer, sizeof(r->peer), "b%u", i % 23);
		}
		break;
	case 8: /* its end, three records later: credit, refund or none */
		if (i % 3 == 0 && j == 1) { /* credit of debit i - 3 */
			snprintf(r->key, sizeof(r->key), "b%u", (i - 3) % 23);
			r->reply = 't';
			r->delta = 5;
			snprintf(r->reqid, sizeof(r->reqid), "@x%u", i - 3);
			snprintf(r->peer, sizeof(r->peer), "a%u", (i - 3) % 23);
		} else if (i % 3 == 1 && j == 0) { /* refund of i - 3 */
			snprintf(r->key, sizeof(r->key), "a%u", (i - 3) % 23);
			r->reply = 'r';
			r->delta = 5;
			snprintf(r->reqid, sizeof(r->reqid), "@x%u", i - 3);
		} else {
			*skip = i % 3 == 2; /* left open */
		}
		break;
	}
}

void path_of(char *p, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(p, cap, "%s/%s", dir, name);

	CHECK(n > 0 && (size_t)n < cap);
}

/* Appends records [from, to) of journal j; its size after. */
static uint64_t append_records(const char *dir, unsigned j, unsigned from,
			       unsigned to)
{
	char path[PATH_MAX], line[RECORD_MAX], name[32];
	struct record r;
	FILE *f;
	bool skip;
	long end;
	size_t n;

	snprintf(name, sizeof(name), "journal-%u.log", j);
	path_of(path, sizeof(path), dir, name);
	f = fopen(path, "a");
	CHECK(f != NULL);
	for (; from < to; from++) {
		workload(j, from, &r, &skip);
		if (skip)
			continue;
		n = record_encode(line, &r);
		CHECK(fwrite(line, 1, n, f) == n);
	}
	CHECK(fflush(f) == 0 && fsync(fileno(f)) == 0);
	end = ftell(f);
	fclose(f);
	return (uint64_t)end;
}

/* ---- the state a restart builds, as text ---- */

struct text {
	char **lines;
	size_t n;
};

static void add_line(struct text *t, const char *s)
{
	t->lines = xrealloc(t->lines, (t->n + 1) * sizeof(*t->lines));
	t->lines[t->n++] = strdup(s);
}

static void dump_line(void *arg, const struct record *rec)
{
	struct text *t = arg;
	char line[RECORD_MAX + 32];
	size_t n, k;

	/* "key\tNNNNN\trecord": an account's records keep their order. */
	k = (size_t)snprintf(line, sizeof(line), "%s\t%05zu\t", rec->key,
			     t->n);
	n = record_encode(line + k, rec);
	line[k + n - 1] = '\0'; /* its '\n' */
	add_line(t, line);
}

static int line_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t kx = strcspn(x, "\t"), ky = strcspn(y, "\t");
	int c = strncmp(x, y, kx < ky ? kx : ky);

	if (c || kx != ky)
		return c ? c : (kx < ky ? -1 : 1);
	return strcmp(x, y);
}

/*
 * Replays dir as a restart does (repairing), into one string: every
 * account's records in order (its balance or string, and the request
 * ids with their replies), then the open transfers. The caller's.
 */
char *restart_state(const char *dir, uint64_t *seq, unsigned *skipped)
{
	struct accounts *a = accounts_new(3);
	struct replay_result r;
	struct text t = { 0 };
	char line[4 * KEY_MAX], *out;
	size_t i, len = 1;
	unsigned k;

	replay_journals(dir, a, true, &r);
	accounts_dump(a, dump_line, &t);
	/* The accounts' own order (a table's) is not part of the state. */
	qsort(t.lines, t.n, sizeof(*t.lines), line_cmp);
	for (i = 0; i < t.n; i++) { /* the dump's counter goes too */
		char *tab = strchr(t.lines[i], '\t');

		memmove(tab + 1, tab + 7, strlen(tab + 7) + 1);
	}
	for (k = 0; k < r.nopen; k++) {
		snprintf(line, sizeof(line), "open %s %s %s %lld",
			 r.open[k].id, r.open[k].from, r.open[k].to,
			 r.open[k].amount);
		add_line(&t, line);
	}
	qsort(t.lines + (t.n - r.nopen), r.nopen, sizeof(*t.lines),
	      line_cmp);
	for (i = 0; i < t.n; i++)
		len += strlen(t.lines[i]) + 1;
	out = xcalloc(1, len);
	for (i = 0; i < t.n; i++) {
		strcat(out, t.lines[i]);
		strcat(out, "\n");
		free(t.lines[i]);
	}
	free(t.lines);
	if (seq)
		*seq = r.checkpoint.seq;
	if (skipped)
		*skipped = r.checkpoint.skipped;
	free(r.ends);
	free(r.open);
	free(r.checkpoint.pos);
	accounts_free(a);
	return out;
}

/* ---- files ---- */

void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	CHECK(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	CHECK(n == 0);
	close(in);
	close(out);
}

/* A copy of dir's journals only: what a replay without checkpoints sees. */
char *full_replay_state(const char *dir)
{
	char tmp[] = "/tmp/ckpt-full-XXXXXX", from[PATH_MAX], to[PATH_MAX];
	char name[32], *s;
	unsigned j;

	CHECK(mkdtemp(tmp) != NULL);
	for (j = 0; j < NJ; j++) {
		snprintf(name, sizeof(name), "journal-%u.log", j);
		path_of(from, sizeof(from), dir, name);
		path_of(to, sizeof(to), tmp, name);
		copy_file(from, to);
	}
	s = restart_state(tmp, NULL, NULL);
	CHECK(rm_rf(tmp) == 0);
	return s;
}

/* A cycle: with builder b (kept from cycle to cycle, as the server's), else
 * from the disk alone. */
uint64_t take(struct checkpoint_builder *b, const char *dir,
	      const uint64_t *ends, const struct checkpoint_options *o)
{
	struct checkpoint_stats st;

	if (b)
		CHECK(checkpoint_builder_take(b, ends, NJ, o, &st) == 0);
	else
		CHECK(checkpoint_take(dir, ends, NJ, o, &st) == 0);
	return st.seq;
}

/* ---- 1, 2: round trip, torn checkpoints ---- */

static void corrupt(const char *dir, uint64_t seq, bool cut)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/checkpoint-%020" PRIu64 ".ckpt", dir,
		 seq);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0 && fstat(fd, &st) == 0);
	if (cut) {
		CHECK(ftruncate(fd, st.st_size / 2) == 0);
	} else {
		char c;

		CHECK(pread(fd, &c, 1, st.st_size / 3) == 1);
		c ^= 0x20;
		CHECK(pwrite(fd, &c, 1, st.st_size / 3) == 1);
	}
	close(fd);
}

static void expect_restart(const char *dir, const char *ref,
			   uint64_t want_seq, unsigned want_skipped)
{
	char *full = full_replay_state(ref), *got;
	uint64_t seq;
	unsigned skipped;

	got = restart_state(dir, &seq, &skipped);
	if (strcmp(full, got) != 0) {
		fprintf(stderr, "--- full replay:\n%s--- from checkpoint %"
			PRIu64 ":\n%s", full, seq, got);
		FAIL("a restart from a checkpoint differs from a full replay");
	}
	CHECK_EQ(seq, want_seq);
	CHECK_EQ(skipped, want_skipped);
	free(full);
	free(got);
}

/* Records [from, to) of journal j into dir and ref (never checkpointed). */
uint64_t append_both(const char *dir, const char *ref, unsigned j,
		     unsigned from, unsigned to)
{
	append_records(ref, j, from, to);
	return append_records(dir, j, from, to);
}

/*
 * With `kept`, one builder takes every cycle, as the server's
 * checkpointer does: it must notice a newest checkpoint damaged behind
 * its back and go on from the valid one before, as a cycle from the
 * disk alone does.
 */
static void test_round_trip(bool kept)
{
	char dir[] = "/tmp/ckpt-rt-XXXXXX", ref[] = "/tmp/ckpt-ref-XXXXXX";
	struct checkpoint_builder *b;
	uint64_t ends[NJ], s1, s2;

	CHECK(mkdtemp(dir) != NULL && mkdtemp(ref) != NULL);
	b = kept ? checkpoint_builder_new(dir) : NULL;
	/* Journal 0 cut before debits whose credits journal 1 has. */
	ends[0] = append_both(dir, ref, 0, 0, 100);
	ends[1] = append_both(dir, ref, 1, 0, 160);
	append_both(dir, ref, 0, 100, 160);
	s1 = take(b, dir, ends, NULL);
	CHECK_EQ(s1, 1);
	expect_restart(dir, ref, 1, 0);
	ends[0] = append_both(dir, ref, 0, 160, 400);
	ends[1] = append_both(dir, ref, 1, 160, 400);
	s2 = take(b, dir, ends, NULL);
	CHECK_EQ(s2, 2);
	expect_restart(dir, ref, 2, 0);
	/* A third: the first goes, the second stays as the fallback. */
	ends[0] = append_both(dir, ref, 0, 400, 420);
	CHECK_EQ(take(b, dir, ends, NULL), 3);
	expect_restart(dir, ref, 3, 0);
	corrupt(dir, 3, false);
	expect_restart(dir, ref, 2, 1);
	corrupt(dir, 3, true);
	expect_restart(dir, ref, 2, 1);
	/* The next cycles go on from 2, which stays the fallback. */
	ends[1] = append_both(dir, ref, 1, 400, 440);
	CHECK_EQ(take(b, dir, ends, NULL), 4);
	expect_restart(dir, ref, 4, 0);
	ends[0] = append_both(dir, ref, 0, 420, 450);
	CHECK_EQ(take(b, dir, ends, NULL), 5);
	corrupt(dir, 5, false); /* one byte: its size stays */
	ends[1] = append_both(dir, ref, 1, 440, 470);
	CHECK_EQ(take(b, dir, ends, NULL), 6);
	expect_restart(dir, ref, 6, 0);
	corrupt(dir, 6, false);
	expect_restart(dir, ref, 4, 1);
	checkpoint_builder_free(b);
	CHECK(rm_rf(dir) == 0 && rm_rf(ref) == 0);
}

int main(void)
{
	record_init();
	test_round_trip(false);
	printf("round trip and torn checkpoints: OK\n");
	test_round_trip(true);
	printf("round trip and torn checkpoints, one builder for every "
	       "cycle: OK\n");
	test_crash_states();
	return 0;
}
