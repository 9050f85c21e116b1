/* SPDX-License-Identifier: MIT */
#include "ledger_replay.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger_journal.h"
#include "util.h"

/*
 * A transfer's half whose other half has not been read yet: a debit
 * waiting for its credit or refund, or an end read before its debit
 * (they can be in different journals, read in any order). Sized to its
 * strings: "id\0" and, for a debit, "from\0to\0".
 */
struct xfer_node {
	struct xfer_node *next;
	long long amount;
	bool debit;
	char text[];
};

/*
 * The transfers' unmatched halves, by id: a half is dropped as soon as
 * its other half is read, so what stays is the open transfers (and the
 * ends of transfers whose debit is in a journal not read yet), not
 * every transfer ever made.
 */
struct transfer_log {
	struct xfer_node **slots; /* [nslots], a power of two */
	size_t nslots, count, ndebits;
};

static size_t id_hash(const char *id)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*id)
		h = (h ^ (unsigned char)*id++) * 1099511628211ull;
	return (size_t)h;
}

/* The link to a half of kind `debit` with this id, or NULL. */
static struct xfer_node **xfer_find(struct transfer_log *t, const char *id,
				    bool debit)
{
	struct xfer_node **l;

	if (!t->nslots)
		return NULL;
	l = &t->slots[id_hash(id) & (t->nslots - 1)];
	for (; *l; l = &(*l)->next)
		if ((*l)->debit == debit && strcmp((*l)->text, id) == 0)
			return l;
	return NULL;
}

/* Doubles the table once it holds as many halves as slots. */
static void xfer_grow(struct transfer_log *t)
{
	size_t n = t->nslots ? t->nslots * 2 : 1024, i;
	struct xfer_node **slots = xcalloc(n, sizeof(*slots)), *x;

	for (i = 0; i < t->nslots; i++) {
		while ((x = t->slots[i]) != NULL) {
			t->slots[i] = x->next;
			x->next = slots[id_hash(x->text) & (n - 1)];
			slots[id_hash(x->text) & (n - 1)] = x;
		}
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = n;
}

static void xfer_add(struct transfer_log *t, const struct record *rec,
		     bool debit)
{
	size_t id = strlen(rec->reqid) + 1, from = 0, to = 0;
	struct xfer_node *x, **slot;

	if (debit) {
		from = strlen(rec->key) + 1;
		to = strlen(rec->peer) + 1;
	}
	x = xrealloc(NULL, sizeof(*x) + id + from + to);
	x->debit = debit;
	x->amount = -rec->delta;
	memcpy(x->text, rec->reqid, id);
	if (debit) {
		memcpy(x->text + id, rec->key, from);
		memcpy(x->text + id + from, rec->peer, to);
		t->ndebits++;
	}
	if (t->count >= t->nslots)
		xfer_grow(t);
	slot = &t->slots[id_hash(x->text) & (t->nslots - 1)];
	x->next = *slot;
	*slot = x;
	t->count++;
}

static void note_transfer(struct transfer_log *t, const struct record *rec)
{
	bool debit = rec->reply == 'd';
	struct xfer_node **l, *x;

	if (!debit && rec->reply != 't' && rec->reply != 'r')
		return;
	l = xfer_find(t, rec->reqid, !debit); /* its other half */
	if (!l) {
		xfer_add(t, rec, debit);
		return;
	}
	x = *l;
	*l = x->next;
	t->count--;
	t->ndebits -= x->debit;
	free(x);
}

static void open_of(struct open_transfer *o, const struct xfer_node *x)
{
	const char *from = x->text + strlen(x->text) + 1;

	snprintf(o->id, sizeof(o->id), "%s", x->text);
	snprintf(o->from, sizeof(o->from), "%s", from);
	snprintf(o->to, sizeof(o->to), "%s", from + strlen(from) + 1);
	o->amount = x->amount;
}

/* The debits left without an end are the open transfers. */
static void match_transfers(struct transfer_log *t, struct replay_result *r)
{
	struct xfer_node *x;
	size_t i;

	r->open = t->ndebits ? xcalloc(t->ndebits, sizeof(*r->open)) : NULL;
	for (i = 0; i < t->nslots; i++) {
		while ((x = t->slots[i]) != NULL) {
			t->slots[i] = x->next;
			if (x->debit) {
				open_of(&r->open[r->nopen++], x);
				r->in_flight += x->amount;
			}
			free(x);
		}
	}
	free(t->slots);
#ifdef __GLIBC__
	/* The halves were small blocks in the heap's middle: give back. */
	malloc_trim(0);
#endif
}

/*
 * SIGTERM or SIGINT arrived (the server blocks them for sigwait): a
 * long replay stops rather than making the stop wait for its end.
 */
static bool stop_pending(void)
{
	sigset_t set;

	return sigpending(&set) == 0 &&
	       (sigismember(&set, SIGTERM) == 1 ||
		sigismember(&set, SIGINT) == 1);
}

/* Applies one journal; returns the length of its valid prefix. */
static uint64_t replay_file(struct accounts *accounts,
			    struct replay_result *r, FILE *f,
			    const char *name, struct transfer_log *t)
{
	char *line = NULL;
	struct record rec;
	size_t cap = 0;
	ssize_t n;
	uint64_t valid = 0;

	while ((n = getline(&line, &cap, f)) > 0) {
		if (!record_parse(line, (size_t)n, &rec))
			break;
		if (!accounts_apply(accounts, &rec))
			die("%s: the balance of %s overflows", name, rec.key);
		note_transfer(t, &rec);
		valid += (uint64_t)n;
		if (++r->events % 65536 == 0 && stop_pending()) {
			r->interrupted = true;
			break;
		}
	}
	free(line);
	if (ferror(f))
		die("reading %s: %s", name, strerror(errno));
	return valid;
}

/* Whether `name` is journal-I.log; sets *idx to I. */
static bool is_journal_name(const char *name, unsigned *idx)
{
	int end = 0;

	return sscanf(name, "journal-%u.log%n", idx, &end) == 1 &&
	       end > 0 && name[end] == '\0' && *idx < 1u << 20;
}

/* Remembers where journal-idx.log's records end, for journal_open(). */
static void keep_end(struct replay_result *r, unsigned idx, uint64_t end)
{
	if (idx >= r->nends) {
		r->ends = xrealloc(r->ends, (idx + 1) * sizeof(*r->ends));
		memset(r->ends + r->nends, 0,
		       (idx + 1 - r->nends) * sizeof(*r->ends));
		r->nends = idx + 1;
	}
	r->ends[idx] = end;
}

/*
 * What follows the whole records of a journal: nothing, the zeros a
 * direct journal writes ahead (kept), or a torn batch, never
 * acknowledged since its write never completed: reported, and cut off
 * when repairing, zeros after it included, so that no record of it can
 * ever count.
 */
static void replay_tail(struct replay_result *r, bool repair, FILE *f,
			const char *path, uint64_t valid, uint64_t size)
{
	int zeros = journal_zeros_after(fileno(f), valid, size);

	if (zeros < 0)
		die("%s: %s", path, strerror(-zeros));
	if (zeros)
		return;
	warnf("%s: %" PRIu64 " bytes after the last whole record %s", path,
	      size - valid, repair ? "cut off" : "(a torn write)");
	r->torn_bytes += size - valid;
	if (repair && (ftruncate(fileno(f), (off_t)valid) < 0 ||
		       fdatasync(fileno(f)) < 0))
		die("%s: %s", path, strerror(errno));
}

/*
 * Where journal-idx.log's replay starts: at the checkpoint's position,
 * which must still be there (not freed by a compaction).
 */
static uint64_t replay_start(FILE *f, const char *path, uint64_t size,
			     const struct checkpoint *cp, unsigned idx)
{
	uint64_t start = checkpoint_pos(cp, idx);

	if (start > size)
		die("%s: %" PRIu64 " bytes, but checkpoint %" PRIu64
		    " starts it at %" PRIu64, path, size, cp->seq, start);
	if (!checkpoint_journal_intact(fileno(f), start))
		die("%s: compacted past %" PRIu64 ", where %s: the "
		    "checkpoint that covered it is missing or invalid", path,
		    start, cp->seq ? "the newest valid checkpoint starts" :
				     "replay without a checkpoint starts");
	if (start && fseeko(f, (off_t)start, SEEK_SET) < 0)
		die("%s: %s", path, strerror(errno));
	return start;
}

/* One journal-idx.log at `path`. */
static void replay_journal(struct accounts *accounts, bool repair,
			   struct replay_result *r, const char *path,
			   unsigned idx, struct transfer_log *t)
{
	FILE *f = fopen(path, repair ? "r+" : "r");
	uint64_t valid;
	struct stat st;

	if (!f || fstat(fileno(f), &st) < 0)
		die("%s: %s", path, strerror(errno));
	valid = replay_start(f, path, (uint64_t)st.st_size, &r->checkpoint,
			     idx);
	valid += replay_file(accounts, r, f, path, t);
	r->journals++;
	if (r->interrupted) { /* the rest was not read: cut nothing */
		fclose(f);
		return;
	}
	if ((uint64_t)st.st_size > valid)
		replay_tail(r, repair, f, path, valid, (uint64_t)st.st_size);
	keep_end(r, idx, valid);
	fclose(f);
}

static void checkpoint_xfer(void *arg, const struct record *rec)
{
	note_transfer(arg, rec);
}

/*
 * The newest valid checkpoint into accounts and t; every journal it
 * names ends at least at its position (one missing starts there anew).
 */
static void replay_checkpoint(const char *dir, struct accounts *accounts,
			      struct replay_result *r, struct transfer_log *t)
{
	struct checkpoint *cp = &r->checkpoint;
	int ret = checkpoint_load(dir, accounts, checkpoint_xfer, t, cp);
	unsigned i;

	if (ret < 0)
		die("%s: %s", dir, strerror(-ret));
	for (i = 0; i < cp->npos; i++)
		keep_end(r, i, cp->pos[i]);
}

static void count_account(void *arg, const char *key, long long balance)
{
	struct replay_result *r = arg;

	(void)key;
	r->accounts++;
	r->total_overflow |= __builtin_add_overflow(r->total, balance,
						    &r->total);
	r->negative += balance < 0;
}

void replay_journals(const char *dir, struct accounts *accounts,
		     bool repair, struct replay_result *r)
{
	DIR *d = opendir(dir);
	struct transfer_log t = { 0 };
	struct dirent *e;

	*r = (struct replay_result){ 0 };
	if (!d)
		die("%s: %s", dir, strerror(errno));
	replay_checkpoint(dir, accounts, r, &t);
	while (!r->interrupted && (e = readdir(d)) != NULL) {
		char path[PATH_MAX];
		unsigned idx;

		if (!is_journal_name(e->d_name, &idx))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		replay_journal(accounts, repair, r, path, idx, &t);
	}
	closedir(d);
	match_transfers(&t, r);
	accounts_each(accounts, count_account, r);
}

static void print_balance(void *arg, const char *key, long long balance)
{
	fprintf(arg, "%s %lld\n", key, balance);
}

int replay_verify(const char *dir, const char *dump)
{
	struct accounts *accounts = accounts_new(64);
	struct replay_result r;
	char total[32];
	FILE *f;

	replay_journals(dir, accounts, false, &r);
	if (dump) {
		f = fopen(dump, "w");
		if (!f)
			die("%s: %s", dump, strerror(errno));
		accounts_each(accounts, print_balance, f);
		/* die() does not return: f is not NULL here. */
		// cppcheck-suppress nullPointerRedundantCheck
		if (fclose(f) != 0)
			die("%s: %s", dump, strerror(errno));
	}
	if (r.total_overflow)
		snprintf(total, sizeof(total), "over 2^63");
	else
		snprintf(total, sizeof(total), "%lld", r.total);
	if (r.checkpoint.seq)
		printf("verify: checkpoint %" PRIu64 " (%" PRIu64 " bytes, %"
		       PRIu64 " records, %" PRIu64 " events) valid and used%s; "
		       "%" PRIu64 " events after it\n",
		       r.checkpoint.seq, r.checkpoint.size,
		       r.checkpoint.records, r.checkpoint.events,
		       r.checkpoint.skipped ? "; newer ones INVALID" : "",
		       r.events);
	else
		printf("verify: no valid checkpoint%s: replaying every "
		       "journal from its start\n",
		       r.checkpoint.skipped ? " (INVALID ones passed over)" :
					      "");
	printf("verify: %u journals, %" PRIu64 " events, %" PRIu64
	       " accounts, total balance %s, %u open transfers (%lld in "
	       "flight), %" PRIu64 " torn bytes: %s\n",
	       r.journals, r.checkpoint.events + r.events, r.accounts, total,
	       r.nopen,
	       r.in_flight, r.torn_bytes,
	       r.negative ? "FAILED (negative balances)" : "OK");
	accounts_free(accounts);
	free(r.ends);
	free(r.open);
	free(r.checkpoint.pos);
	return r.negative ? 1 : 0;
}
