/* SPDX-License-Identifier: MIT */
/*
 * crash_explore.c - check_crash_states' explorer: from a recorded run,
 * the crash states at every point of its clock (durable writes whole,
 * those in flight lost, whole or torn, in any combination), each
 * recovered and checked against what was acknowledged by then (steps 2
 * and 3 of check_crash_states.c), and a few kept to restart from.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash_states.h"
#include "testutil.h"

const char *const violation_name[V_KINDS] = {
	"acknowledged record lost", "record recovered twice",
	"record invented", "record recovered after a hole",
	"second replay disagrees",
};


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
const char *violation_word = "VIOLATION";

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
void explore_run(struct explorer *x)
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
