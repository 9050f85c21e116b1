/* SPDX-License-Identifier: MIT */
#include "ledger_checkpointer.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger_journal.h"
#include "ledger_snapshot.h"
#include "util.h"

#define CHECKPOINTER_POLL_NS 50000000ull /* how often it looks: 50 ms */
#define CHECKPOINTER_RETRY_NS 5000000000ull /* after a failed cycle: 5 s */
/* How long a copy may wait for the journals to be durable as far. */
#define CHECKPOINTER_DURABLE_NS 30000000000ull /* 30 s */

struct checkpointer {
	const char *dir;
	struct checkpoint_builder *builder; /* the last cycle's state */
	struct bank *bank;
	unsigned nworkers;
	uint64_t *ends; /* [nends]: the journals' durable ends, as last read */
	unsigned nends;
	struct checkpointer_options o;
	pthread_t thread;
	bool joined;
	struct snapshot snap; /* the workers' copy: this thread's */
	pthread_mutex_t lock; /* the fields below */
	pthread_cond_t wake;
	bool stopping;
	struct checkpointer_stats st;
	uint64_t taken_ns;	 /* when the current one was taken */
	uint64_t events_at;	 /* bank_changes() it covers */
	/*
	 * The journal kept on disk: from the fallback's positions (the
	 * checkpoint before the current one; the journals' start before
	 * there is one), which compaction freed the journal up to. The
	 * thresholds count it, so that what is kept stays within one.
	 */
	uint64_t kept_pos;	 /* the sum of the fallback's positions */
	uint64_t kept_events;	 /* records from there to the current one */
	uint64_t retry_ns;	 /* after a failure, no cycle before this */
	struct checkpoint_trace crash_trace; /* --crash-after checkpoint-* */
	struct checkpoint_options crash_opts;
	unsigned punches;	 /* ...seen so far */
};

/* Reads the journals' durable ends into c->ends; their sum. */
static uint64_t read_ends(struct checkpointer *c)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < c->nends; i++) {
		if (i < c->nworkers)
			c->ends[i] = atomic_load_explicit(
				&bank_journal(c->bank, i)->durable_end,
				memory_order_acquire);
		sum += c->ends[i];
	}
	return sum;
}

/*
 * Whether a cycle is due; under the lock. The disk keeps the journal
 * from the fallback (the checkpoint before the current one), so the
 * thresholds bound that: a cycle comes once the journal after the
 * current checkpoint reaches half a threshold, or the journal kept a
 * whole one. Cycles are then about half a threshold apart and what is
 * kept stays under one, plus what comes in while a cycle is noticed.
 */
static bool due(struct checkpointer *c, uint64_t sum, uint64_t events)
{
	uint64_t since = sum > c->st.position ? sum - c->st.position : 0;
	uint64_t kept = sum > c->kept_pos ? sum - c->kept_pos : 0;
	uint64_t events_since = events - c->events_at;

	return (c->o.bytes && (kept >= c->o.bytes ||
			       2 * since >= c->o.bytes)) ||
	       (c->o.events && (c->kept_events + events_since >= c->o.events ||
				2 * events_since >= c->o.events));
}

/* --crash-after checkpoint-*: dies at that step of a cycle. */
static void crash_step(void *arg, enum checkpoint_op op, const char *path,
		       const char *to, const void *data, uint64_t len)
{
	struct checkpointer *c = arg;
	enum checkpoint_crash at = c->o.crash;

	(void)path;
	(void)to;
	(void)data;
	(void)len;
	if ((at == CHECKPOINT_CRASH_WRITTEN && op == CHECKPOINT_OP_FSYNC) ||
	    (at == CHECKPOINT_CRASH_RENAMED && op == CHECKPOINT_OP_SYNC_DIR) ||
	    (at == CHECKPOINT_CRASH_COMPACTING && op == CHECKPOINT_OP_PUNCH &&
	     c->punches++ == 1)) {
		warnf("--crash-after: killing myself in a checkpoint cycle");
		kill(getpid(), SIGKILL);
	}
}

/* Whether this cycle copies the workers' tables; under the lock. */
static bool from_tables(const struct checkpointer *c, uint64_t events,
			bool final)
{
	uint64_t accounts = bank_accounts(c->bank);

	if (final || c->o.from == CHECKPOINT_FROM_JOURNAL)
		return false;
	return c->o.from == CHECKPOINT_FROM_TABLES ||
	       (2 * accounts <= events - c->events_at &&
		accounts <= (uint64_t)CHECKPOINT_TABLES_MAX * c->nworkers);
}

/* A cycle from the workers' copy; the lock is not held. */
static int take_from_tables(struct checkpointer *c,
			    const struct checkpoint_options *o,
			    struct checkpoint_stats *cs)
{
	struct checkpoint_state state;
	unsigned i;
	int ret = snapshot_take(c->bank, &c->snap);

	if (ret == 0)
		ret = snapshot_wait_durable(c->bank, &c->snap,
					    CHECKPOINTER_DURABLE_NS);
	if (ret < 0)
		return ret;
	for (i = 0; i < c->snap.nworkers && i < c->nends; i++)
		c->ends[i] = c->snap.ends[i]; /* those get_stats does not read */
	state = (struct checkpoint_state){ c->snap.lines, c->snap.len,
					   c->snap.count };
	return checkpoint_builder_take_state(c->builder, c->ends, c->nends,
					     &state, o, cs);
}

/* One cycle; the lock is held, and dropped while it runs. */
static void cycle(struct checkpointer *c, uint64_t events, bool final)
{
	const struct checkpoint_options *o = c->o.crash ? &c->crash_opts :
							    NULL;
	bool tables = from_tables(c, events, final);
	struct checkpoint_stats cs;
	int ret;

	c->st.running = true;
	pthread_mutex_unlock(&c->lock);
	ret = tables ? take_from_tables(c, o, &cs) :
		       checkpoint_builder_take(c->builder, c->ends, c->nends,
					       o, &cs);
	pthread_mutex_lock(&c->lock);
	c->st.running = false;
	if (ret < 0) { /* said why; the last one stays current */
		c->st.failed++;
		c->retry_ns = now_ns() + CHECKPOINTER_RETRY_NS;
		return;
	}
	c->st.taken++;
	c->st.from_tables += tables;
	c->st.seq = cs.seq;
	c->kept_pos = cs.base_pos; /* freed before it: the fallback now */
	c->kept_events = cs.events;
	c->st.position = cs.journal_pos;
	c->st.size = cs.size;
	c->st.duration_ns = cs.duration_ns;
	c->st.freed += cs.freed;
	c->taken_ns = now_ns();
	c->events_at = events;
}

static void wait_a_while(struct checkpointer *c)
{
	struct timespec ts;
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns = (uint64_t)ts.tv_nsec + CHECKPOINTER_POLL_NS;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_cond_timedwait(&c->wake, &c->lock, &ts);
}

static void *checkpointer_main(void *arg)
{
	struct checkpointer *c = arg;

	/* Background work: the workers first when the CPUs are short. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) < 0)
		warnf("checkpointer: setpriority: %s (it runs at the "
		      "workers' priority)", strerror(errno));

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		uint64_t events = bank_changes(c->bank);
		uint64_t sum = read_ends(c);

		if (due(c, sum, events) && now_ns() >= c->retry_ns)
			cycle(c, events, false);
		else
			wait_a_while(c);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/*
 * Where a restart stands: the checkpoint replay started from is the
 * current one, and the journal kept starts at the checkpoint before it
 * on disk (checkpoint_before()), up to which the cycle that made it
 * freed the journal; with none, at the journals' start (none was freed,
 * or, the fallback gone, the kept journal is overcounted: a cycle then
 * comes early, never late). The records replayed after the current one
 * are kept too.
 */
static void start_from(struct checkpointer *c, const struct replay_result *r)
{
	const struct checkpoint *cp = &r->checkpoint;
	struct checkpoint prev;
	bool before = true;
	unsigned i;

	c->st.seq = cp->seq;
	c->st.size = cp->size;
	c->st.position = checkpoint_pos_sum(cp);
	c->kept_events = cp->events + r->events;
	if (!cp->seq || checkpoint_before(c->dir, cp->seq, &prev) < 0)
		return;
	for (i = 0; i < prev.npos; i++) /* a damaged header: not used */
		before = before && prev.pos[i] <= checkpoint_pos(cp, i);
	if (prev.seq && before && prev.events <= cp->events) {
		c->kept_pos = checkpoint_pos_sum(&prev);
		c->kept_events -= prev.events;
	}
	free(prev.pos);
}

struct checkpointer *checkpointer_start(const char *dir, struct bank *bank,
					unsigned nworkers,
					const struct replay_result *r,
					const struct checkpointer_options *o)
{
	struct checkpointer *c = xcalloc(1, sizeof(*c));
	pthread_condattr_t ca;
	unsigned i;
	int ret;

	c->dir = dir;
	c->builder = checkpoint_builder_new(dir);
	c->bank = bank;
	c->nworkers = nworkers;
	c->nends = r->nends > nworkers ? r->nends : nworkers;
	c->ends = xcalloc(c->nends, sizeof(*c->ends));
	for (i = 0; i < r->nends; i++)
		c->ends[i] = r->ends[i];
	c->o = *o;
	c->crash_trace = (struct checkpoint_trace){ crash_step, c };
	c->crash_opts = (struct checkpoint_options){ &c->crash_trace,
						     CHECKPOINT_BUG_NONE };
	start_from(c, r);
	c->taken_ns = now_ns(); /* its age counts from this start */
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	ret = pthread_create(&c->thread, NULL, checkpointer_main, c);
	if (ret)
		die("checkpointer: pthread_create: %s", strerror(ret));
	return c;
}

void checkpointer_get_stats(struct checkpointer *c,
			    struct checkpointer_stats *st)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < c->nworkers; i++)
		sum += atomic_load_explicit(
			&bank_journal(c->bank, i)->durable_end,
			memory_order_acquire);
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	for (i = c->nworkers; i < c->nends; i++)
		sum += c->ends[i];
	st->journal_bytes = sum > c->st.position ? sum - c->st.position : 0;
	st->journal_kept = sum > c->kept_pos ? sum - c->kept_pos : 0;
	st->age_ns = c->st.seq ? now_ns() - c->taken_ns : 0;
	pthread_mutex_unlock(&c->lock);
}

void checkpointer_halt(struct checkpointer *c)
{
	if (!c || c->joined)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	c->joined = true;
}

void checkpointer_stop(struct checkpointer *c, bool final,
		       struct checkpointer_stats *st)
{
	checkpointer_halt(c);
	if (final) {
		uint64_t sum = read_ends(c);

		pthread_mutex_lock(&c->lock);
		if (sum > c->st.position)
			cycle(c, bank_changes(c->bank), true);
		pthread_mutex_unlock(&c->lock);
	}
	checkpointer_get_stats(c, st);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	checkpoint_builder_free(c->builder);
	snapshot_release(&c->snap);
	free(c->ends);
	free(c);
}
