/* SPDX-License-Identifier: MIT */
#include "ledger_snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger_checkpoint.h"
#include "ledger_journal.h"
#include "util.h"

/* One worker's part: what its task needs. */
struct snapshot_call {
	struct bank *bank;
	struct snapshot *s;
	unsigned worker;
};

static void add_line(void *arg, const struct record *rec)
{
	struct snapshot *s = arg;

	if (s->cap - s->len < CHECKPOINT_LINE_MAX) {
		s->cap = s->cap * 2 + 64 * CHECKPOINT_LINE_MAX;
		s->lines = xrealloc(s->lines, s->cap);
	}
	s->len += checkpoint_line(s->lines + s->len, 's', rec);
	s->count++;
}

/* On worker call->worker: its groups and its journal's end, at once. */
static int copy_on_worker(void *arg)
{
	struct snapshot_call *call = arg;
	struct journal *j = bank_journal(call->bank, call->worker);

	if (j->error)
		return j->error;
	call->s->ends[call->worker] = journal_appended_end(j);
	accounts_dump_groups(bank_tables(call->bank), (int)call->worker,
			     (int)call->s->nworkers, add_line, call->s);
	return 0;
}

int snapshot_take(struct bank *b, struct snapshot *s)
{
	agr_scheduler *sched = bank_scheduler(b);
	unsigned n = (unsigned)agr_scheduler_parallelism(sched), w;
	int ret = 0, result = 0;

	if (s->nworkers != n) {
		free(s->ends);
		s->ends = xcalloc(n, sizeof(*s->ends));
		s->nworkers = n;
	}
	s->len = s->count = 0;
	for (w = 0; w < n && ret == 0 && result == 0; w++) {
		struct snapshot_call call = { b, s, w };

		ret = agr_scheduler_call_on(sched, (int)w, copy_on_worker,
					    &call, &result);
	}
	if (ret == 0 && result == 0)
		return 0;
	warnf("checkpoint: copying worker %u's accounts: %s", w - 1,
	      ret ? agr_strerror(ret) : strerror(-result));
	return ret ? ret : result;
}

int snapshot_wait_durable(struct bank *b, const struct snapshot *s,
			  uint64_t timeout_ns)
{
	const struct timespec tick = { 0, 1000000 }; /* 1 ms */
	uint64_t deadline = now_ns() + timeout_ns;
	unsigned w;

	for (w = 0; w < s->nworkers; w++) {
		struct journal *j = bank_journal(b, w);

		while (atomic_load_explicit(&j->durable_end,
					    memory_order_acquire) < s->ends[w]) {
			if (atomic_load_explicit(&j->failed,
						 memory_order_acquire)) {
				warnf("checkpoint: journal %u failed before "
				      "the accounts copied were durable", w);
				return -EIO;
			}
			if (now_ns() >= deadline) {
				warnf("checkpoint: journal %u not durable to "
				      "%" PRIu64 " after %.1f s; this cycle "
				      "is given up", w, s->ends[w],
				      (double)timeout_ns / 1e9);
				return -ETIMEDOUT;
			}
			nanosleep(&tick, NULL);
		}
	}
	return 0;
}

void snapshot_release(struct snapshot *s)
{
	free(s->lines);
	free(s->ends);
	memset(s, 0, sizeof(*s));
}
