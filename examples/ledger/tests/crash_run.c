/* SPDX-License-Identifier: MIT */
/*
 * crash_run.c - check_crash_states' recorded run: a real journal on a
 * real file and ring takes the workload's records, and its trace hook
 * writes down every write and fdatasync it issues, their results and
 * the acknowledgements, on one clock (step 1 of check_crash_states.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring.h>

#include "crash_states.h"
#include "testutil.h"

/* Phase 1's record i is "r<i>", phase 2's "s<i>"; amounts of 7 digits. */
void record_make(struct record *r, char prefix, unsigned i)
{
	snprintf(r->key, sizeof(r->key), "%c%06u", prefix, i);
	r->amount = 1000003 + (long long)i * 7;
	r->ack_at = LONG_MAX;
}

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

void run_free(struct run *r)
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

/* When write o is durable (its bytes count), or LONG_MAX never. */
long durable_at(const struct run *r, const struct op *o)
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


/*
 * Runs a journal on `path` (holding `end` bytes of whole records) with
 * records r->recs[r->first..r->nrecs-1] and records what it does.
 * Returns whether the journal went direct.
 */
bool record_run(struct run *r, const char *path, uint64_t end,
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
