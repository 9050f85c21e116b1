/* SPDX-License-Identifier: MIT */
/*
 * check_runtime.c - the runtime lifecycle: options, registration,
 * admission leases and the quiet boundary, the order of quiesce and
 * reverse stop, failures, the global deadline, force stop, concurrent
 * stops and the drain report. Includes the reference's runtime cases.
 *
 * Components of our own ("probes") record every call into a journal;
 * what functions, hooks and probes see off the test thread is recorded
 * and asserted on the test thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull
/* How long past the deadline a stop may take: the reference's bound. */
#define FORCE_BOUND_NS (1000 * MS)

static const agr_named_aggregate order = { "sales", "Order" };
static const agr_named_aggregate payment = { "sales", "Payment" };

/* ---- the log: kept, not printed ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_warning[512];
static int log_errors;

static void keep_log(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&log_lock);
	if (level == AGR_LOG_WARN)
		snprintf(last_warning, sizeof(last_warning), "%s", msg);
	else if (level == AGR_LOG_ERROR)
		log_errors++;
	pthread_mutex_unlock(&log_lock);
}

static bool warned(const char *text)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(last_warning, text) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static int errors_logged(void)
{
	int n;

	pthread_mutex_lock(&log_lock);
	n = log_errors;
	pthread_mutex_unlock(&log_lock);
	return n;
}

/* ---- a journal of calls ---- */

#define MAX_STEPS 64
#define STEP_LEN 48

struct journal {
	pthread_mutex_t lock;
	char steps[MAX_STEPS][STEP_LEN];
	int n;
};

static struct journal journal = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void journal_reset(void)
{
	pthread_mutex_lock(&journal.lock);
	journal.n = 0;
	pthread_mutex_unlock(&journal.lock);
}

static void journal_add(const char *verb, const char *name)
{
	pthread_mutex_lock(&journal.lock);
	if (journal.n < MAX_STEPS) {
		snprintf(journal.steps[journal.n], STEP_LEN, "%s:%s", verb,
			 name);
		journal.n++;
	}
	pthread_mutex_unlock(&journal.lock);
}

static void assert_journal(const char *const *expected, int n)
{
	int i;

	pthread_mutex_lock(&journal.lock);
	for (i = 0; i < n && i < journal.n; i++)
		ck_assert_str_eq(journal.steps[i], expected[i]);
	ck_assert_int_eq(journal.n, n);
	pthread_mutex_unlock(&journal.lock);
}

/* The first `k` entries are `expected`, and there are `n` in all. */
static void assert_journal_prefix(const char *const *expected, int k, int n)
{
	int i;

	pthread_mutex_lock(&journal.lock);
	for (i = 0; i < k && i < journal.n; i++)
		ck_assert_str_eq(journal.steps[i], expected[i]);
	ck_assert_int_eq(journal.n, n);
	pthread_mutex_unlock(&journal.lock);
}

static int journal_count(const char *step)
{
	int i, n = 0;

	pthread_mutex_lock(&journal.lock);
	for (i = 0; i < journal.n; i++)
		n += strcmp(journal.steps[i], step) == 0;
	pthread_mutex_unlock(&journal.lock);
	return n;
}

/* ---- probes: components of our own ---- */

enum stop_mode {
	STOP_RETURNS,		/* returns stop_ret at once */
	STOP_BLOCKS_UNTIL_FORCED, /* a well-behaved slow stop */
	STOP_BLOCKS_UNTIL_RELEASED, /* ignores its deadline and the force */
};

struct probe {
	const char *name;
	int quiesce_ret, stop_ret, force_ret;
	int prepare_ret, start_ret;
	enum stop_mode mode;	     /* of stop_gracefully */
	enum stop_mode quiesce_mode, prepare_mode, start_mode;
	int report_in_prepare, report_in_start; /* 0: none */
	agr_runtime *rt;	     /* given to prepare */
	int lease_at_quiesce;	     /* agr_runtime_lease_acquire() then */
	uint64_t deadline_seen;
	atomic_int quiesces, stops, forces, prepares, starts;
	struct tu_latch stop_entered, step_entered;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool forced, released;
};

static void probe_init(struct probe *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	p->name = name;
	atomic_init(&p->quiesces, 0);
	atomic_init(&p->stops, 0);
	atomic_init(&p->forces, 0);
	atomic_init(&p->prepares, 0);
	atomic_init(&p->starts, 0);
	p->lease_at_quiesce = 1;
	tu_latch_init(&p->stop_entered, 1);
	tu_latch_init(&p->step_entered, 1);
	pthread_mutex_init(&p->lock, NULL);
	tu_cond_init_monotonic(&p->cond);
}

static void probe_destroy(struct probe *p)
{
	tu_latch_destroy(&p->stop_entered);
	tu_latch_destroy(&p->step_entered);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

static void probe_release(struct probe *p)
{
	pthread_mutex_lock(&p->lock);
	p->released = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Bounded, so that a broken runtime fails the test instead of hanging. */
static void probe_block(struct probe *p, const bool *until)
{
	struct timespec ts = tu_deadline_after(TU_LONG_NS);

	pthread_mutex_lock(&p->lock);
	while (!*until &&
	       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&p->lock);
}

/* A step's blocking, as its mode says; tells step_entered first. */
static void probe_step_block(struct probe *p, enum stop_mode mode)
{
	tu_latch_count_down(&p->step_entered);
	if (mode == STOP_BLOCKS_UNTIL_FORCED)
		probe_block(p, &p->forced);
	else if (mode == STOP_BLOCKS_UNTIL_RELEASED)
		probe_block(p, &p->released);
}

static int probe_quiesce(void *self)
{
	struct probe *p = self;

	atomic_fetch_add(&p->quiesces, 1);
	journal_add("quiesce", p->name);
	if (p->rt) {
		p->lease_at_quiesce = agr_runtime_lease_acquire(p->rt);
		if (p->lease_at_quiesce == 0)
			agr_runtime_lease_release(p->rt);
	}
	probe_step_block(p, p->quiesce_mode);
	return p->quiesce_ret;
}

static int probe_prepare(void *self, agr_runtime *rt)
{
	struct probe *p = self;

	atomic_fetch_add(&p->prepares, 1);
	p->rt = rt;
	journal_add("prepare", p->name);
	if (p->report_in_prepare)
		ck_assert_int_eq(agr_runtime_report_failure(
					 rt, p->report_in_prepare),
				 0);
	probe_step_block(p, p->prepare_mode);
	return p->prepare_ret;
}

static int probe_start(void *self)
{
	struct probe *p = self;

	atomic_fetch_add(&p->starts, 1);
	journal_add("start", p->name);
	if (p->report_in_start)
		ck_assert_int_eq(agr_runtime_report_failure(
					 p->rt, p->report_in_start),
				 0);
	probe_step_block(p, p->start_mode);
	return p->start_ret;
}

static int probe_stop(void *self, uint64_t deadline_ns)
{
	struct probe *p = self;

	atomic_fetch_add(&p->stops, 1);
	p->deadline_seen = deadline_ns;
	journal_add("stop", p->name);
	tu_latch_count_down(&p->stop_entered);
	if (p->mode == STOP_BLOCKS_UNTIL_FORCED)
		probe_block(p, &p->forced);
	else if (p->mode == STOP_BLOCKS_UNTIL_RELEASED)
		probe_block(p, &p->released);
	return p->stop_ret;
}

static int probe_force(void *self)
{
	struct probe *p = self;

	atomic_fetch_add(&p->forces, 1);
	journal_add("force", p->name);
	pthread_mutex_lock(&p->lock);
	p->forced = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return p->force_ret;
}

static const agr_component_ops probe_ops = {
	.quiesce = probe_quiesce,
	.stop_gracefully = probe_stop,
	.force_stop = probe_force,
	.prepare = probe_prepare,
	.start = probe_start,
};

static void add_probe(agr_runtime *rt, struct probe *p)
{
	ck_assert_int_eq(agr_runtime_add_component(rt, p->name, &probe_ops, p),
			 0);
}

static agr_runtime *new_runtime(uint64_t timeout_ns, uint64_t quiet_ns)
{
	agr_runtime_options o;
	agr_runtime *rt = NULL;

	agr_runtime_options_init(&o);
	o.shutdown_timeout_ns = timeout_ns;
	o.quiet_period_ns = quiet_ns;
	ck_assert_int_eq(agr_runtime_new(&o, &rt), 0);
	ck_assert_ptr_nonnull(rt);
	return rt;
}

static void get_report(agr_runtime *rt, agr_runtime_report *r,
		       agr_component_report *c, size_t cap)
{
	ck_assert_int_eq(agr_runtime_report_get(rt, r, c, cap), 0);
}

/* ---- messages, dispatchers ---- */

struct tmsg {
	agr_message m; /* first: the completion casts back */
	int status;
	atomic_int completions;
};

static void tmsg_init(struct tmsg *t, const char *id)
{
	memset(t, 0, sizeof(*t));
	t->m.aggregate_id = id;
	t->m.type = "event";
	t->status = 1; /* no completion yet */
	atomic_init(&t->completions, 0);
}

static void on_complete(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = (struct tmsg *)(void *)msg;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	tu_tally_add(arg);
}

static agr_supplier *new_supplier(int parallelism)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("rt", parallelism, &sup), 0);
	return sup;
}

static agr_dispatcher *new_dispatcher(agr_supplier *sup, const char *name,
				      const agr_named_aggregate *named,
				      struct tu_tally *done)
{
	agr_dispatcher_options o;
	agr_dispatcher *d = NULL;

	memset(&o, 0, sizeof(o));
	o.name = name;
	o.named_aggregate = *named;
	o.parallelism = 8;
	o.supplier = sup;
	o.on_complete = on_complete;
	o.complete_arg = done;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	return d;
}

static void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

/* Polls; the sleeps here are only the intervals of bounded waits. */
static bool wait_state(agr_runtime *rt, agr_runtime_state s)
{
	const struct timespec tick = { 0, 1000000 };
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;

	while (agr_runtime_state_get(rt) != s) {
		if (tu_now_ns() > deadline)
			return false;
		nanosleep(&tick, NULL);
	}
	return true;
}

static bool wait_no_lease(agr_runtime *rt)
{
	const struct timespec tick = { 0, 1000000 };
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;

	while (agr_runtime_active(rt) > 0) {
		if (tu_now_ns() > deadline)
			return false;
		nanosleep(&tick, NULL);
	}
	return true;
}

/* agr_runtime_stop() on another thread. */
struct stopper {
	pthread_t thread;
	agr_runtime *rt;
	pthread_barrier_t *start;
	int result;
	uint64_t called_at, returned_at;
};

static void *run_stop(void *arg)
{
	struct stopper *s = arg;

	if (s->start)
		pthread_barrier_wait(s->start);
	s->called_at = tu_now_ns();
	s->result = agr_runtime_stop(s->rt);
	s->returned_at = tu_now_ns();
	return NULL;
}

static void stopper_start(struct stopper *s, agr_runtime *rt)
{
	*s = (struct stopper){ .rt = rt, .result = 1 };
	ck_assert_int_eq(pthread_create(&s->thread, NULL, run_stop, s), 0);
}

static int stopper_join(struct stopper *s)
{
	pthread_join(s->thread, NULL);
	return s->result;
}

/* ---- options ---- */

START_TEST(options_have_defaults_and_are_checked)
{
	agr_runtime_options o;
	agr_runtime *rt = NULL;

	agr_runtime_options_init(&o);
	ck_assert_uint_eq(o.shutdown_timeout_ns, 60000 * MS);
	ck_assert_uint_eq(o.quiet_period_ns, 1000 * MS);
	ck_assert_int_eq(agr_runtime_new(NULL, &rt), 0);
	agr_runtime_free(rt);
	ck_assert_int_eq(agr_runtime_new(&o, NULL), -EINVAL);

	o.shutdown_timeout_ns = 0;
	o.quiet_period_ns = 0;
	ck_assert_int_eq(agr_runtime_new(&o, &rt), -EINVAL);
	o.shutdown_timeout_ns = 100 * MS;
	o.quiet_period_ns = 100 * MS; /* must be shorter */
	ck_assert_int_eq(agr_runtime_new(&o, &rt), -EINVAL);
	o.quiet_period_ns = 200 * MS;
	ck_assert_int_eq(agr_runtime_new(&o, &rt), -EINVAL);
	o.quiet_period_ns = 0; /* explicit zero is allowed */
	rt = NULL;
	ck_assert_int_eq(agr_runtime_new(&o, &rt), 0);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_RUNNING);
	ck_assert_uint_eq(agr_runtime_active(rt), 0);
	agr_runtime_free(rt);
	agr_runtime_free(NULL);
}
END_TEST

START_TEST(registration_rules)
{
	struct tu_tally done;
	agr_supplier *sup = new_supplier(1);
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_dispatcher *a, *started;
	agr_runtime_report r;
	struct probe p;

	tu_tally_init(&done);
	probe_init(&p, "p");
	a = new_dispatcher(sup, "a", &order, &done);
	started = new_dispatcher(sup, "started", &payment, &done);
	ck_assert_int_eq(agr_dispatcher_start(started), 0);

	ck_assert_int_eq(agr_runtime_add_dispatcher(NULL, a), -EINVAL);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_add_composite(rt, NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_add_component(rt, NULL, &probe_ops, &p),
			 -EINVAL);
	ck_assert_int_eq(agr_runtime_add_component(rt, "", &probe_ops, &p),
			 -EINVAL);
	ck_assert_int_eq(agr_runtime_add_component(rt, "p", NULL, &p),
			 -EINVAL);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, started), -EBUSY);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, a), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, a), -EEXIST);
	ck_assert_int_eq(agr_runtime_lease_acquire(NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_stop(NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_force_stop(NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_report_get(rt, &r, NULL, 0), -EBUSY);
	ck_assert_int_eq(agr_runtime_report_get(rt, NULL, NULL, 0), -EINVAL);

	ck_assert_int_eq(agr_dispatcher_start(a), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_add_component(rt, "p", &probe_ops, &p),
			 -ESHUTDOWN);
	get_report(rt, &r, NULL, 0);
	ck_assert_uint_eq(r.ncomponents, 1);
	agr_runtime_free(rt);
	agr_dispatcher_free(a);
	agr_dispatcher_free(started);
	agr_supplier_free(sup);
	probe_destroy(&p);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- order ---- */

START_TEST(components_quiesce_in_order_and_stop_in_reverse)
{
	static const char *const expected[] = {
		"quiesce:first", "quiesce:second", "stop:second",
		"stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, second;
	uint64_t before;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	add_probe(rt, &first);
	add_probe(rt, &second);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	assert_journal(expected, 4);
	/* One absolute deadline, stop time + timeout, given to each. */
	ck_assert_uint_eq(first.deadline_seen, second.deadline_seen);
	ck_assert_uint_ge(first.deadline_seen, before + TU_LONG_NS);
	ck_assert_uint_le(first.deadline_seen, tu_now_ns() + TU_LONG_NS);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_STOPPED);
	ck_assert_int_eq(agr_runtime_stop(rt), 0); /* the same result */

	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, 0);
	ck_assert(!r.deadline_passed);
	ck_assert(!r.forced);
	ck_assert_uint_eq(r.ncomponents, 2);
	ck_assert_uint_ge(r.total_ns, r.quiet_ns);
	ck_assert_str_eq(c[0].name, "first");
	ck_assert_str_eq(c[1].name, "second");
	ck_assert_int_eq(c[0].kind, AGR_COMPONENT_USER);
	ck_assert(c[0].quiesce_ran && c[0].stop_ran && !c[0].force_ran);
	ck_assert(c[1].quiesce_ran && c[1].stop_ran && !c[1].force_ran);
	ck_assert_int_eq(c[1].stop_result, 0);
	ck_assert_uint_eq(c[0].in_flight_at_deadline, 0);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&first.forces), 0);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/* ---- the deadline ---- */

/*
 * WowRuntimeTest: "components quiesce first->second, stop
 * second->first; on deadline the stop of the first never runs
 * gracefully". The second, forced inside its stop, is forced once more
 * when that stop returns (the compensation).
 */
START_TEST(deadline_forces_first_never_graceful)
{
	static const char *const expected[] = {
		"quiesce:first", "quiesce:second", "stop:second",
		"force:second" };
	agr_runtime *rt = new_runtime(300 * MS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, second;
	uint64_t before, took;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	second.mode = STOP_BLOCKS_UNTIL_FORCED;
	add_probe(rt, &first);
	add_probe(rt, &second);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_ge(took, 300 * MS);
	ck_assert_uint_lt(took, 300 * MS + FORCE_BOUND_NS);
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);

	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	ck_assert(r.deadline_passed);
	ck_assert(r.forced);
	ck_assert(!c[0].stop_ran);
	ck_assert(c[0].force_ran);
	ck_assert(c[1].stop_ran && c[1].force_ran);
	/* Free joins the stop thread: nothing can call first after. */
	agr_runtime_free(rt);
	assert_journal_prefix(expected, 4, 6);
	ck_assert_int_eq(journal_count("force:second"), 2);
	ck_assert_int_eq(journal_count("force:first"), 1);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&second.forces), 2);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

START_TEST(stop_returns_at_deadline_while_a_stop_blocks)
{
	agr_runtime *rt = new_runtime(200 * MS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, stuck;
	uint64_t before, took;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&stuck, "stuck");
	stuck.mode = STOP_BLOCKS_UNTIL_RELEASED; /* ignores the force */
	add_probe(rt, &first);
	add_probe(rt, &stuck);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_lt(took, 200 * MS + FORCE_BOUND_NS);
	get_report(rt, &r, c, 2);
	ck_assert(c[1].stop_ran);
	ck_assert_int_eq(c[1].stop_result, -EINPROGRESS);
	ck_assert(c[1].force_ran);
	ck_assert(c[0].force_ran);
	probe_release(&stuck);
	agr_runtime_free(rt); /* joins the stop thread, now unblocked */
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	/* Its stop returned after the force: forced once more. */
	ck_assert_int_eq(atomic_load(&stuck.forces), 2);
	probe_destroy(&first);
	probe_destroy(&stuck);
}
END_TEST

/* ---- failures ---- */

/*
 * WowRuntimeTest: "shutdown continues after failures and suppresses
 * later failures".
 */
START_TEST(failure_still_stops_the_rest_and_first_error_wins)
{
	static const char *const expected[] = {
		"quiesce:c1", "quiesce:c2", "quiesce:c3", "stop:c3",
		"stop:c2",    "stop:c1",    "force:c3",	  "force:c2",
		"force:c1" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[3];
	agr_runtime_report r;
	struct probe p[3];
	int logged;

	journal_reset();
	probe_init(&p[0], "c1");
	probe_init(&p[1], "c2");
	probe_init(&p[2], "c3");
	p[1].stop_ret = -EPIPE;
	p[2].stop_ret = -EIO; /* stopped first: the primary failure */
	add_probe(rt, &p[0]);
	add_probe(rt, &p[1]);
	add_probe(rt, &p[2]);
	logged = errors_logged();
	ck_assert_int_eq(agr_runtime_stop(rt), -EIO);
	assert_journal(expected, 9);
	ck_assert_int_eq(errors_logged() - logged, 2); /* each failure */
	get_report(rt, &r, c, 3);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert(r.forced);
	ck_assert(!r.deadline_passed);
	ck_assert_int_eq(c[0].stop_result, 0);
	ck_assert_int_eq(c[1].stop_result, -EPIPE); /* recorded too */
	ck_assert_int_eq(c[2].stop_result, -EIO);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EPIPE);
	agr_runtime_free(rt);
	probe_destroy(&p[0]);
	probe_destroy(&p[1]);
	probe_destroy(&p[2]);
}
END_TEST

START_TEST(quiesce_failure_fails_the_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe a, b;

	journal_reset();
	probe_init(&a, "a");
	probe_init(&b, "b");
	a.quiesce_ret = -EPERM;
	add_probe(rt, &a);
	add_probe(rt, &b);
	ck_assert_int_eq(agr_runtime_stop(rt), -EPERM);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(c[0].quiesce_result, -EPERM);
	/* The rest of the sequence still ran, then everything was forced. */
	ck_assert_int_eq(atomic_load(&a.stops), 1);
	ck_assert_int_eq(atomic_load(&b.stops), 1);
	ck_assert_int_eq(atomic_load(&a.forces), 1);
	ck_assert_int_eq(atomic_load(&b.forces), 1);
	agr_runtime_free(rt);
	probe_destroy(&a);
	probe_destroy(&b);
}
END_TEST

/* ---- force stop ---- */

/*
 * WowRuntimeTest: "explicit force stop cancels graceful cleanup with at
 * most one compensation pass". The graceful observers complete with 0,
 * as the reference's do.
 */
START_TEST(force_stop_abandons_a_graceful_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_component_report c[2];
	agr_runtime_report r;
	struct probe first, slow;
	struct stopper s;
	uint64_t before;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&slow, "slow");
	slow.mode = STOP_BLOCKS_UNTIL_FORCED;
	add_probe(rt, &first);
	add_probe(rt, &slow);
	stopper_start(&s, rt);
	ck_assert(tu_latch_wait(&slow.stop_entered, TU_LONG_NS));
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0); /* no-op now */
	get_report(rt, &r, c, 2);
	ck_assert(r.forced);
	ck_assert(!r.deadline_passed);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&slow.forces), 2);
	probe_destroy(&first);
	probe_destroy(&slow);
}
END_TEST

START_TEST(force_before_stop_and_free_without_stop)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe a, b;

	journal_reset();
	probe_init(&a, "a");
	probe_init(&b, "b");
	add_probe(rt, &a);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&a.quiesces), 0);
	ck_assert_int_eq(atomic_load(&a.forces), 1);
	agr_runtime_free(rt);

	/* Free without a stop forces once, and nothing graceful runs. */
	rt = new_runtime(TU_LONG_NS, 0);
	add_probe(rt, &b);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&b.quiesces), 0);
	ck_assert_int_eq(atomic_load(&b.stops), 0);
	ck_assert_int_eq(atomic_load(&b.forces), 1);
	probe_destroy(&a);
	probe_destroy(&b);
}
END_TEST

/* ---- concurrent stops ---- */

#define STOPPERS 8

/* _i == 0: every stop succeeds; 1: one component fails. */
START_TEST(concurrent_stops_share_one_shutdown)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 10 * MS);
	agr_supplier *sup = new_supplier(2);
	struct stopper s[STOPPERS];
	pthread_barrier_t start;
	struct probe a, b;
	struct tu_tally done;
	struct tmsg t[32];
	agr_dispatcher *d;
	int i, expected = _i == 0 ? 0 : -EIO;

	journal_reset();
	tu_tally_init(&done);
	probe_init(&a, "a");
	probe_init(&b, "b");
	b.stop_ret = expected;
	d = new_dispatcher(sup, "d", &order, &done);
	add_probe(rt, &a);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	add_probe(rt, &b);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	for (i = 0; i < 32; i++) {
		tmsg_init(&t[i], i % 3 ? "order-1" : "order-2");
		send_ok(d, &t[i]);
	}
	pthread_barrier_init(&start, NULL, STOPPERS);
	for (i = 0; i < STOPPERS; i++) {
		s[i] = (struct stopper){ .rt = rt, .start = &start };
		ck_assert_int_eq(pthread_create(&s[i].thread, NULL, run_stop,
						&s[i]),
				 0);
	}
	for (i = 0; i < STOPPERS; i++)
		ck_assert_int_eq(stopper_join(&s[i]), expected);
	pthread_barrier_destroy(&start);
	ck_assert_int_eq(agr_runtime_stop(rt), expected);
	ck_assert_int_eq(atomic_load(&a.quiesces), 1);
	ck_assert_int_eq(atomic_load(&a.stops), 1);
	ck_assert_int_eq(atomic_load(&b.quiesces), 1);
	ck_assert_int_eq(atomic_load(&b.stops), 1);
	ck_assert_int_eq(journal_count("stop:a"), 1);
	ck_assert_int_eq(atomic_load(&a.forces), _i == 0 ? 0 : 1);
	ck_assert_int_eq(atomic_load(&b.forces), _i == 0 ? 0 : 1);
	/* Every message was handled before the dispatcher stopped. */
	ck_assert(tu_tally_wait(&done, 32, TU_LONG_NS));
	for (i = 0; i < 32; i++) {
		ck_assert_int_eq(t[i].status, 0);
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	}
	agr_runtime_free(rt);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	probe_destroy(&a);
	probe_destroy(&b);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- leases and the quiet boundary ---- */

START_TEST(admission_stays_open_while_work_is_active)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 20 * MS);
	agr_supplier *sup = new_supplier(1);
	struct tu_tally done;
	struct tmsg during, after;
	struct stopper s;
	agr_dispatcher *d;
	int logged;

	tu_tally_init(&done);
	d = new_dispatcher(sup, "d", &order, &done);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);

	/* A release without a lease is reported and changes nothing. */
	logged = errors_logged();
	agr_runtime_lease_release(rt);
	ck_assert_int_eq(errors_logged(), logged + 1);
	ck_assert_uint_eq(agr_runtime_active(rt), 0);

	/* Our own lease keeps the runtime active through the boundary. */
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), 0);
	ck_assert_uint_eq(agr_runtime_active(rt), 1);
	stopper_start(&s, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	tmsg_init(&during, "order-1");
	send_ok(d, &during);
	ck_assert(tu_tally_wait(&done, 1, TU_LONG_NS));
	ck_assert_int_eq(during.status, 0);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_QUIET);
	agr_runtime_lease_release(rt);

	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_uint_eq(agr_runtime_active(rt), 0);
	tmsg_init(&after, "order-1");
	ck_assert_int_eq(agr_dispatcher_send(d, &after.m), -ESHUTDOWN);
	ck_assert_int_eq(agr_runtime_lease_acquire(rt), -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&after.completions), 0);
	agr_runtime_free(rt);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/*
 * A's function holds its message (AGR_PENDING) across the start of the
 * stop; then, on A's worker, it sends follow-on work to B and finishes.
 * The follow-on must be admitted and handled: leases are still granted
 * during the quiet boundary.
 */
struct follow_on {
	agr_dispatcher *b;
	agr_exchange *ex;
	int worker;
	struct tu_latch held;
	struct tmsg next;
	atomic_int send_ret;
	atomic_int b_calls;
};

static int hold_message(agr_exchange *ex, void *arg)
{
	struct follow_on *f = arg;

	f->ex = ex;
	f->worker = agr_worker_index(agr_exchange_worker(ex));
	tu_latch_count_down(&f->held);
	return AGR_PENDING;
}

static void send_follow_on_and_finish(void *arg)
{
	struct follow_on *f = arg;

	atomic_store(&f->send_ret, agr_dispatcher_send(f->b, &f->next.m));
	agr_exchange_done(f->ex, 0);
}

static int count_b(agr_exchange *ex, void *arg)
{
	struct follow_on *f = arg;

	(void)ex;
	atomic_fetch_add(&f->b_calls, 1);
	return 0;
}

START_TEST(follow_on_work_in_quiet_boundary_is_handled)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 50 * MS);
	agr_supplier *sup = new_supplier(2);
	struct follow_on f = { .worker = -1 };
	agr_component_report c[2];
	agr_runtime_report r;
	struct tu_tally done;
	struct tmsg first, late;
	struct stopper s;
	agr_dispatcher *a;

	tu_tally_init(&done);
	tu_latch_init(&f.held, 1);
	atomic_init(&f.send_ret, 1);
	atomic_init(&f.b_calls, 0);
	a = new_dispatcher(sup, "a", &order, &done);
	f.b = new_dispatcher(sup, "b", &payment, &done);
	ck_assert_int_eq(agr_dispatcher_register(a, NULL, hold_message, &f),
			 0);
	ck_assert_int_eq(agr_dispatcher_register(f.b, NULL, count_b, &f), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, a), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, f.b), 0);
	ck_assert_int_eq(agr_dispatcher_start(a), 0);
	ck_assert_int_eq(agr_dispatcher_start(f.b), 0);
	tmsg_init(&first, "order-1");
	tmsg_init(&f.next, "payment-1");
	send_ok(a, &first);
	ck_assert(tu_latch_wait(&f.held, TU_LONG_NS));

	stopper_start(&s, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	ck_assert_uint_eq(agr_runtime_active(rt), 1);
	ck_assert_int_eq(agr_scheduler_schedule(agr_dispatcher_scheduler(a),
						(unsigned)f.worker,
						send_follow_on_and_finish, &f),
			 0);
	ck_assert_int_eq(stopper_join(&s), 0);

	ck_assert_int_eq(atomic_load(&f.send_ret), 0);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(first.status, 0);
	ck_assert_int_eq(f.next.status, 0);
	ck_assert_int_eq(atomic_load(&f.b_calls), 1);
	tmsg_init(&late, "payment-2");
	ck_assert_int_eq(agr_dispatcher_send(f.b, &late.m), -ESHUTDOWN);

	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, 0);
	ck_assert_uint_ge(r.quiet_ns, 50 * MS);
	ck_assert_int_eq(c[0].kind, AGR_COMPONENT_DISPATCHER);
	ck_assert_str_eq(c[0].name, "a");
	ck_assert_uint_eq(c[0].handled, 1);
	ck_assert_uint_eq(c[1].handled, 1);
	ck_assert_uint_eq(c[0].discarded + c[1].discarded, 0);
	ck_assert_uint_eq(c[0].in_flight + c[1].in_flight, 0);
	ck_assert(c[0].stop_ran && c[1].stop_ran);
	agr_runtime_free(rt);
	agr_dispatcher_free(a);
	agr_dispatcher_free(f.b);
	agr_supplier_free(sup);
	tu_latch_destroy(&f.held);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- the deadline with a function stuck on I/O ---- */

struct stuck_recv {
	int fds[2];
	char buf[8];
	agr_exchange *ex;
	atomic_int submit_ret;
	atomic_int recv_res;
	atomic_int calls;
	struct tu_latch started;
};

static void recv_finished(int res, void *arg)
{
	struct stuck_recv *r = arg;

	atomic_store(&r->recv_res, res);
	agr_exchange_done(r->ex, res < 0 ? res : 0);
}

/* The first message waits for bytes nobody sends. */
static int recv_forever(agr_exchange *ex, void *arg)
{
	struct stuck_recv *r = arg;
	int ret;

	if (atomic_fetch_add(&r->calls, 1) > 0)
		return 0;
	r->ex = ex;
	ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0], r->buf,
			  sizeof(r->buf), 0, recv_finished, r);
	atomic_store(&r->submit_ret, ret);
	tu_latch_count_down(&r->started);
	return ret < 0 ? ret : AGR_PENDING;
}

START_TEST(deadline_discards_work_stuck_on_recv)
{
	agr_runtime *rt = new_runtime(300 * MS, 20 * MS);
	agr_supplier *sup = new_supplier(1);
	struct stuck_recv rv = { .fds = { -1, -1 } };
	agr_component_report c[1];
	agr_runtime_report r;
	struct tu_tally done;
	struct tmsg stuck, queued;
	agr_dispatcher *d;
	uint64_t before, took;

	tu_tally_init(&done);
	tu_latch_init(&rv.started, 1);
	atomic_init(&rv.submit_ret, 1);
	atomic_init(&rv.recv_res, 1);
	atomic_init(&rv.calls, 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, rv.fds), 0);
	d = new_dispatcher(sup, "d", &order, &done);
	ck_assert_int_eq(agr_dispatcher_register(d, NULL, recv_forever, &rv),
			 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	tmsg_init(&stuck, "order-1");
	tmsg_init(&queued, "order-1"); /* same group: waits behind it */
	send_ok(d, &stuck);
	ck_assert(tu_latch_wait(&rv.started, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&rv.submit_ret), 0);
	send_ok(d, &queued);
	ck_assert_uint_eq(agr_runtime_active(rt), 2);

	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	took = tu_now_ns() - before;
	ck_assert_uint_ge(took, 300 * MS);
	ck_assert_uint_lt(took, 300 * MS + FORCE_BOUND_NS);

	/*
	 * Both complete: the stuck one interrupted (its function ran), the
	 * queued one discarded (the sender may redeliver it).
	 */
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&rv.recv_res), -ECANCELED);
	ck_assert_int_eq(stuck.status, AGR_INTERRUPTED);
	ck_assert_int_eq(queued.status, AGR_DISCARDED);
	ck_assert_int_eq(atomic_load(&stuck.completions), 1);
	ck_assert_int_eq(atomic_load(&queued.completions), 1);
	ck_assert_int_eq(atomic_load(&rv.calls), 1);

	ck_assert(warned("deadline passed with 2 message(s) in flight"));
	/* Each lease is released just after its completion callback. */
	ck_assert(wait_no_lease(rt));
	get_report(rt, &r, c, 1);
	ck_assert(r.deadline_passed);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	ck_assert_uint_eq(c[0].in_flight_at_deadline, 2);
	ck_assert(!c[0].stop_ran);
	ck_assert(c[0].force_ran);
	ck_assert_uint_eq(c[0].discarded, 1);
	ck_assert_uint_eq(c[0].failed, 0);
	ck_assert_uint_eq(c[0].interrupted, 1); /* its function saw -ECANCELED */
	ck_assert_uint_eq(c[0].in_flight, 0);
	agr_runtime_free(rt); /* waits for the last lease */
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	close(rv.fds[0]);
	close(rv.fds[1]);
	tu_latch_destroy(&rv.started);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- a composite among the components ---- */

static void journal_step(const char *step, void *arg)
{
	(void)arg;
	journal_add("composite", step);
}

START_TEST(composite_takes_its_place_in_the_order)
{
	static const char *const expected[] = {
		"quiesce:first",
		"composite:close:domain",
		"composite:close:state",
		"quiesce:last",
		"stop:last",
		"composite:stop:state",
		"composite:stop:domain",
		"composite:stop:scheduler",
		"stop:first",
	};
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(2);
	agr_component_report c[3];
	agr_composite_options o;
	agr_runtime_report r;
	struct probe first, last;
	struct tu_tally done;
	struct tmsg t[4];
	agr_composite *comp = NULL;
	agr_scheduler *sched;
	int i;

	journal_reset();
	tu_tally_init(&done);
	probe_init(&first, "first");
	probe_init(&last, "last");
	memset(&o, 0, sizeof(o));
	o.name = "orders";
	o.named_aggregate = order;
	o.supplier = sup;
	o.owns_supplier = true;
	o.event_stream.on_complete = on_complete;
	o.event_stream.complete_arg = &done;
	o.state_event = o.event_stream;
	o.on_step = journal_step;
	ck_assert_int_eq(agr_composite_new(&o, &comp), 0);
	sched = agr_dispatcher_scheduler(agr_composite_state_event(comp));

	add_probe(rt, &first);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), -EEXIST);
	ck_assert_int_eq(agr_runtime_add_dispatcher(
				 rt, agr_composite_event_stream(comp)),
			 -EEXIST);
	add_probe(rt, &last);
	ck_assert_int_eq(agr_composite_start(comp), 0);
	journal_reset(); /* only the stop's steps */
	for (i = 0; i < 4; i++) {
		tmsg_init(&t[i], "order-1");
		send_ok(i % 2 ? agr_composite_event_stream(comp)
			      : agr_composite_state_event(comp),
			&t[i]);
	}
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	assert_journal(expected, 9);
	ck_assert(agr_scheduler_is_terminated(sched));
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(t[i].status, 0);
	get_report(rt, &r, c, 3);
	ck_assert_uint_eq(r.ncomponents, 3);
	ck_assert_int_eq(c[1].kind, AGR_COMPONENT_COMPOSITE);
	ck_assert_str_eq(c[1].name, "orders");
	ck_assert_uint_eq(c[1].handled, 4); /* both children, skipped */
	ck_assert_uint_eq(c[1].in_flight, 0);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	probe_destroy(&first);
	probe_destroy(&last);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- startup ---- */

/* agr_runtime_start() on another thread. */
struct starter {
	pthread_t thread;
	agr_runtime *rt;
	int result;
};

static void *run_start(void *arg)
{
	struct starter *s = arg;

	s->result = agr_runtime_start(s->rt);
	return NULL;
}

static void starter_start(struct starter *s, agr_runtime *rt)
{
	*s = (struct starter){ .rt = rt, .result = 1 };
	ck_assert_int_eq(pthread_create(&s->thread, NULL, run_start, s), 0);
}

static int starter_join(struct starter *s)
{
	pthread_join(s->thread, NULL);
	return s->result;
}

/* WowRuntimeTest: "start prepares every component before opening
 * processing". */
START_TEST(start_prepares_every_component_before_starting)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "start:first",
		"start:second", "quiesce:first",  "quiesce:second",
		"stop:second",	 "stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second, late;
	agr_component_report c[2];
	agr_runtime_report r;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	probe_init(&late, "late");
	add_probe(rt, &first);
	add_probe(rt, &second);
	ck_assert_int_eq(agr_runtime_start(NULL), -EINVAL);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_RUNNING);
	ck_assert_int_eq(agr_runtime_start(rt), -EALREADY);
	ck_assert_int_eq(agr_runtime_add_component(rt, "late", &probe_ops,
						   &late),
			 -EBUSY);
	ck_assert_ptr_eq(first.rt, rt);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	assert_journal(expected, 8);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.startup_result, 0);
	ck_assert(c[0].prepare_ran && c[0].start_ran);
	ck_assert_int_eq(c[1].start_result, 0);
	ck_assert_uint_eq(c[0].force_calls, 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
	probe_destroy(&late);
}
END_TEST

/*
 * WowRuntimeTest: "start failure rolls prepared components back in
 * reverse order" and "startup failure closes intake before rollback":
 * the quiet period (10 s here) is skipped, admission is closed when the
 * rollback quiesces, and the cleanup failure is attached.
 */
START_TEST(start_failure_rolls_back_in_reverse)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "start:first",
		"start:second",	 "quiesce:first",  "quiesce:second",
		"stop:second",	 "stop:first",	   "force:second",
		"force:first" };
	agr_runtime *rt = new_runtime(60000 * MS, 10000 * MS);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	uint64_t before;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.stop_ret = -EINVAL; /* the cleanup failure */
	second.start_ret = -EIO;
	add_probe(rt, &first);
	add_probe(rt, &second);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_start(rt), -EIO);
	ck_assert_uint_lt(tu_now_ns() - before, 5000 * MS);
	assert_journal(expected, 10);
	ck_assert_int_eq(first.lease_at_quiesce, -ESHUTDOWN);
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_STOPPED);
	ck_assert_int_eq(agr_runtime_stop(rt), -EIO);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert_int_eq(r.startup_result, -EIO);
	ck_assert_int_eq(r.cleanup_result, -EINVAL);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EINVAL);
	ck_assert(r.forced);
	ck_assert_int_eq(c[1].start_result, -EIO);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "prepare failure gracefully rolls back prepared and
 * force stops all components": third is never prepared, but forced.
 */
START_TEST(prepare_failure_rolls_back_prepared_forces_all)
{
	static const char *const expected[] = {
		"prepare:first", "prepare:second", "quiesce:first",
		"quiesce:second", "stop:second",   "stop:first",
		"force:third",	 "force:second",   "force:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe p[3];
	agr_runtime_report r;

	journal_reset();
	probe_init(&p[0], "first");
	probe_init(&p[1], "second");
	probe_init(&p[2], "third");
	p[0].stop_ret = -EINVAL;
	p[1].prepare_ret = -ENOENT;
	add_probe(rt, &p[0]);
	add_probe(rt, &p[1]);
	add_probe(rt, &p[2]);
	ck_assert_int_eq(agr_runtime_start(rt), -ENOENT);
	assert_journal(expected, 9);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOENT);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -EINVAL);
	ck_assert_int_eq(atomic_load(&p[2].prepares), 0);
	ck_assert_int_eq(atomic_load(&p[0].starts), 0);
	agr_runtime_free(rt);
	probe_destroy(&p[0]);
	probe_destroy(&p[1]);
	probe_destroy(&p[2]);
}
END_TEST

/* WowRuntimeTest: "successful startup rollback does not force stop
 * components". */
START_TEST(successful_rollback_forces_nothing)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_runtime_report r;
	struct probe only;

	journal_reset();
	probe_init(&only, "only");
	only.start_ret = -EPROTO;
	add_probe(rt, &only);
	ck_assert_int_eq(agr_runtime_start(rt), -EPROTO);
	ck_assert_int_eq(agr_runtime_stop(rt), -EPROTO);
	get_report(rt, &r, NULL, 0);
	ck_assert(!r.forced);
	ck_assert_int_eq(r.cleanup_result, 0);
	ck_assert_int_eq(atomic_load(&only.stops), 1);
	ck_assert_int_eq(atomic_load(&only.forces), 0);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&only.forces), 0);
	probe_destroy(&only);
}
END_TEST

/*
 * WowRuntimeTest: "failure reported during prepare prevents preparing
 * the next component" (_i == 0) and "failure reported during start
 * prevents starting the next component" (_i == 1).
 */
START_TEST(reported_startup_failure_stops_the_startup)
{
	static const char *const in_prepare[] = { "prepare:first",
						  "quiesce:first",
						  "stop:first" };
	static const char *const in_start[] = {
		"prepare:first",  "prepare:second", "start:first",
		"quiesce:first", "quiesce:second", "stop:second",
		"stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_runtime_report r;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	if (_i == 0)
		first.report_in_prepare = -ENOTCONN;
	else
		first.report_in_start = -ENOTCONN;
	add_probe(rt, &first);
	add_probe(rt, &second);
	ck_assert_int_eq(agr_runtime_report_failure(rt, 0), -EINVAL);
	ck_assert_int_eq(agr_runtime_report_failure(NULL, -EIO), -EINVAL);
	ck_assert_int_eq(agr_runtime_start(rt), -ENOTCONN);
	if (_i == 0)
		assert_journal(in_prepare, 3);
	else
		assert_journal(in_start, 7);
	ck_assert_int_eq(atomic_load(&second.starts), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), -ENOTCONN);
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EIO), -EALREADY);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOTCONN);
	ck_assert_uint_eq(r.nsuppressed, 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "graceful stop requested during prepare is retained
 * and rolls startup back": the prepare in progress finishes, the next
 * component is never prepared, the stop is the ordinary one.
 */
START_TEST(stop_during_startup_aborts_it)
{
	static const char *const expected[] = { "prepare:first",
						"quiesce:first",
						"stop:first" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	struct starter st;
	struct stopper sp;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.prepare_mode = STOP_BLOCKS_UNTIL_RELEASED;
	add_probe(rt, &first);
	add_probe(rt, &second);
	starter_start(&st, rt);
	ck_assert(tu_latch_wait(&first.step_entered, TU_LONG_NS));
	ck_assert_int_eq(agr_runtime_state_get(rt), AGR_RUNTIME_STARTING);
	stopper_start(&sp, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	probe_release(&first);
	ck_assert_int_eq(starter_join(&st), -ECANCELED);
	ck_assert_int_eq(stopper_join(&sp), 0);
	assert_journal(expected, 3);
	get_report(rt, &r, c, 2);
	ck_assert_int_eq(r.result, 0);
	ck_assert_int_eq(r.startup_result, -ECANCELED);
	ck_assert(!c[1].prepare_ran && !c[1].quiesce_ran);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&second.prepares), 0);
	ck_assert_int_eq(atomic_load(&second.forces), 0);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "force stop interrupts a startup blocked inside a
 * component" and "force stop compensates resources acquired after an
 * overlapping prepare call".
 */
START_TEST(force_during_startup_aborts_and_compensates)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	struct probe first, second;
	agr_component_report c[2];
	agr_runtime_report r;
	struct starter st;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.prepare_mode = STOP_BLOCKS_UNTIL_FORCED;
	add_probe(rt, &first);
	add_probe(rt, &second);
	starter_start(&st, rt);
	ck_assert(tu_latch_wait(&first.step_entered, TU_LONG_NS));
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(starter_join(&st), -ECANCELED);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	/* Forced during its prepare, and once more after it returned. */
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	ck_assert_int_eq(atomic_load(&second.prepares), 0);
	ck_assert_int_eq(atomic_load(&first.starts), 0);
	ck_assert_int_eq(atomic_load(&first.quiesces), 0);
	get_report(rt, &r, c, 2);
	ck_assert(r.forced);
	ck_assert_uint_eq(c[0].force_calls, 2);
	ck_assert_uint_eq(c[1].force_calls, 1);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "failure reported during a blocked start is force
 * stopped by the startup deadline": the reported failure stays primary,
 * the timeout is suppressed behind it.
 */
START_TEST(blocked_start_is_forced_by_the_deadline)
{
	agr_runtime *rt = new_runtime(300 * MS, 0);
	struct probe first, second;
	agr_runtime_report r;
	uint64_t before;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.report_in_start = -ENOTCONN;
	first.start_mode = STOP_BLOCKS_UNTIL_FORCED;
	add_probe(rt, &first);
	add_probe(rt, &second);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_start(rt), -ENOTCONN);
	ck_assert_uint_ge(tu_now_ns() - before, 300 * MS);
	ck_assert_uint_lt(tu_now_ns() - before, 300 * MS + FORCE_BOUND_NS);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ENOTCONN);
	ck_assert(r.deadline_passed);
	ck_assert_uint_eq(r.nsuppressed, 1);
	ck_assert_int_eq(r.suppressed[0], -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.starts), 0);
	ck_assert_int_eq(atomic_load(&first.quiesces), 0);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "shutdown deadline covers a blocking component
 * quiesce": the blocked quiesce is forced at the deadline and once more
 * when it returns; the next component is never quiesced gracefully.
 */
START_TEST(blocked_quiesce_is_forced_and_compensated)
{
	agr_runtime *rt = new_runtime(300 * MS, 0);
	struct probe first, second;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.quiesce_mode = STOP_BLOCKS_UNTIL_RELEASED;
	add_probe(rt, &first);
	add_probe(rt, &second);
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	probe_release(&first);
	agr_runtime_free(rt); /* joins the stop thread */
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	ck_assert_int_eq(atomic_load(&second.quiesces), 0);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	ck_assert_int_eq(atomic_load(&first.stops), 0);
	ck_assert_int_eq(atomic_load(&second.stops), 0);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "global shutdown deadline force stops every component
 * and suppresses force failures".
 */
START_TEST(deadline_suppresses_force_failures)
{
	agr_runtime *rt = new_runtime(200 * MS, 0);
	struct probe first, second, slow;
	agr_runtime_report r;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	probe_init(&slow, "slow");
	slow.mode = STOP_BLOCKS_UNTIL_FORCED;
	first.force_ret = -EBADF;
	second.force_ret = -EPIPE;
	add_probe(rt, &first);
	add_probe(rt, &second);
	add_probe(rt, &slow);
	ck_assert_int_eq(agr_runtime_stop(rt), -ETIMEDOUT);
	ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ETIMEDOUT);
	/* Forced in reverse: second, then first. */
	ck_assert_uint_eq(r.nsuppressed, 2);
	ck_assert_int_eq(r.suppressed[0], -EPIPE);
	ck_assert_int_eq(r.suppressed[1], -EBADF);
	agr_runtime_free(rt);
	ck_assert_int_eq(atomic_load(&second.stops), 0);
	probe_destroy(&first);
	probe_destroy(&second);
	probe_destroy(&slow);
}
END_TEST

/*
 * WowRuntimeTest: "graceful failure remains primary when a later
 * component reaches the deadline" (_i == 0) and "explicit force retains
 * a graceful failure observed before a later stop hangs" (_i == 1).
 */
START_TEST(graceful_failure_stays_primary)
{
	agr_runtime *rt = new_runtime(_i == 0 ? 300 * MS : TU_LONG_NS, 0);
	struct probe first, second;
	agr_runtime_report r;
	struct stopper sp;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	first.mode = STOP_BLOCKS_UNTIL_FORCED;
	second.stop_ret = -EIO; /* stopped first */
	add_probe(rt, &first);
	add_probe(rt, &second);
	stopper_start(&sp, rt);
	ck_assert(tu_latch_wait(&first.stop_entered, TU_LONG_NS));
	if (_i == 1)
		ck_assert_int_eq(agr_runtime_force_stop(rt), 0);
	ck_assert_int_eq(stopper_join(&sp), -EIO);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -EIO);
	ck_assert_int_eq(r.deadline_passed, _i == 0);
	ck_assert_uint_eq(r.nsuppressed, _i == 0 ? 1 : 0);
	if (_i == 0)
		ck_assert_int_eq(r.suppressed[0], -ETIMEDOUT);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * WowRuntimeTest: "runtime component failure terminates the complete
 * runtime" and "fatal failure escalates an ordinary quiet shutdown
 * immediately": a failure reported while a stop waits out a long quiet
 * period closes admission at once; everything is then forced.
 */
START_TEST(reported_failure_terminates_the_runtime)
{
	agr_runtime *rt = new_runtime(60000 * MS, 10000 * MS);
	struct probe first, second;
	agr_runtime_report r;
	struct stopper sp;
	uint64_t before;

	journal_reset();
	probe_init(&first, "first");
	probe_init(&second, "second");
	add_probe(rt, &first);
	add_probe(rt, &second);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	stopper_start(&sp, rt);
	ck_assert(wait_state(rt, AGR_RUNTIME_QUIET));
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EHOSTDOWN), 0);
	ck_assert_int_eq(stopper_join(&sp), -EHOSTDOWN);
	ck_assert_uint_lt(tu_now_ns() - before, 5000 * MS);
	ck_assert_int_eq(first.lease_at_quiesce, -ESHUTDOWN);
	ck_assert_int_eq(atomic_load(&first.stops), 1);
	ck_assert_int_eq(atomic_load(&first.forces), 1);
	ck_assert_int_eq(atomic_load(&second.forces), 1);
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -EHOSTDOWN);
	ck_assert(r.forced);
	agr_runtime_free(rt);

	/* Reported on a running runtime, it begins the stop by itself. */
	rt = new_runtime(TU_LONG_NS, 0);
	add_probe(rt, &first);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert_int_eq(agr_runtime_report_failure(rt, -EL2HLT), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), -EL2HLT);
	ck_assert_int_eq(atomic_load(&first.forces), 2);
	agr_runtime_free(rt);
	probe_destroy(&first);
	probe_destroy(&second);
}
END_TEST

/*
 * AggregateDispatcherTest: "top-level runtime waits for aggregate
 * dispatcher message readiness" and "prepare subscribes without
 * processing until start"; CompositeEventDispatcherLifecycleTest:
 * "runtime graceful stop closes every logical intake before scheduler
 * cleanup", with the runtime doing the start.
 */
START_TEST(runtime_starts_dispatchers_and_composites)
{
	static const char *const expected[] = {
		"composite:start:domain", "composite:start:state",
		"composite:close:domain", "composite:close:state",
		"composite:stop:state",	  "composite:stop:domain",
		"composite:stop:scheduler" };
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(2), *own = new_supplier(1);
	agr_composite_options o;
	struct tu_tally done;
	struct tmsg early, ev;
	agr_composite *comp = NULL;
	agr_dispatcher *d;

	journal_reset();
	tu_tally_init(&done);
	d = new_dispatcher(sup, "d", &payment, &done);
	memset(&o, 0, sizeof(o));
	o.name = "orders";
	o.named_aggregate = order;
	o.supplier = own;
	o.owns_supplier = true;
	o.event_stream.on_complete = on_complete;
	o.event_stream.complete_arg = &done;
	o.state_event = o.event_stream;
	o.on_step = journal_step;
	ck_assert_int_eq(agr_composite_new(&o, &comp), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	tmsg_init(&early, "payment-1");
	send_ok(d, &early); /* admitted; waits for the start */
	tmsg_init(&ev, "order-1");
	send_ok(agr_composite_event_stream(comp), &ev);
	ck_assert_int_eq(atomic_load(&early.completions), 0);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(early.status, 0);
	ck_assert_int_eq(ev.status, 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	assert_journal(expected, 7);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/*
 * CompositeEventDispatcherLifecycleTest: "reported event child start
 * failure prevents state child admission", under the runtime: start
 * returns the child's error, the state child never starts, and the
 * rollback cleans it up (its parked message is discarded) and stops the
 * scheduler; the dispatcher registered after it, never reached, is
 * forced so that its parked message is discarded too.
 */
START_TEST(composite_domain_start_failure_fails_startup)
{
	agr_runtime *rt = new_runtime(TU_LONG_NS, 0);
	agr_supplier *sup = new_supplier(1), *own = new_supplier(1);
	agr_composite_options o;
	struct tu_tally done;
	struct tmsg parked, after;
	agr_composite *comp = NULL;
	agr_scheduler *sched;
	agr_runtime_report r;
	agr_dispatcher *d;

	journal_reset();
	tu_tally_init(&done);
	memset(&o, 0, sizeof(o));
	o.name = "orders";
	o.named_aggregate = order;
	o.supplier = own;
	o.owns_supplier = true;
	o.event_stream.on_complete = on_complete;
	o.event_stream.complete_arg = &done;
	o.state_event = o.event_stream;
	o.on_step = journal_step;
	ck_assert_int_eq(agr_composite_new(&o, &comp), 0);
	sched = agr_dispatcher_scheduler(agr_composite_state_event(comp));
	d = new_dispatcher(sup, "d", &payment, &done);
	ck_assert_int_eq(agr_runtime_add_composite(rt, comp), 0);
	ck_assert_int_eq(agr_runtime_add_dispatcher(rt, d), 0);
	tmsg_init(&parked, "order-1");
	send_ok(agr_composite_state_event(comp), &parked);
	tmsg_init(&after, "payment-1");
	send_ok(d, &after);
	ck_assert_int_eq(agr_dispatcher_quiesce(
				 agr_composite_event_stream(comp)),
			 0);
	ck_assert_int_eq(agr_runtime_start(rt), -ESHUTDOWN);
	ck_assert_int_eq(journal_count("composite:start:state"), 0);
	ck_assert_int_eq(journal_count("composite:stop:scheduler"), 1);
	ck_assert(tu_tally_wait(&done, 2, TU_LONG_NS));
	ck_assert_int_eq(parked.status, AGR_DISCARDED);
	ck_assert_int_eq(after.status, AGR_DISCARDED);
	ck_assert(agr_scheduler_is_terminated(sched));
	get_report(rt, &r, NULL, 0);
	ck_assert_int_eq(r.result, -ESHUTDOWN);
	agr_runtime_free(rt);
	agr_composite_free(comp);
	agr_dispatcher_free(d);
	agr_supplier_free(sup);
	tu_tally_destroy(&done);
}
END_TEST

/* ---- misuse ---- */

struct worker_stop {
	agr_runtime *rt;
	int result;
	struct tu_latch done;
};

static void stop_from_worker(void *arg)
{
	struct worker_stop *w = arg;

	w->result = agr_runtime_stop(w->rt);
	tu_latch_count_down(&w->done);
}

START_TEST(stop_on_a_worker_is_refused)
{
	struct worker_stop w = { .result = 1 };
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *sched = NULL;

	w.rt = new_runtime(TU_LONG_NS, 0);
	tu_latch_init(&w.done, 1);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &sched), 0);
	ck_assert_int_eq(agr_scheduler_schedule(sched, 0, stop_from_worker,
						&w),
			 0);
	ck_assert(tu_latch_wait(&w.done, TU_LONG_NS));
	ck_assert_int_eq(w.result, -EDEADLK);
	ck_assert_int_eq(agr_runtime_state_get(w.rt), AGR_RUNTIME_RUNNING);
	ck_assert_int_eq(agr_runtime_stop(w.rt), 0);
	agr_runtime_free(w.rt);
	agr_supplier_free(sup);
	tu_latch_destroy(&w.done);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *ref = tcase_create("reference");
	TCase *core = tcase_create("core");

	tcase_add_test(ref, components_quiesce_in_order_and_stop_in_reverse);
	tcase_add_test(ref, deadline_forces_first_never_graceful);
	tcase_add_test(ref, failure_still_stops_the_rest_and_first_error_wins);
	tcase_add_test(ref, composite_takes_its_place_in_the_order);
	tcase_add_test(ref, start_prepares_every_component_before_starting);
	tcase_add_test(ref, start_failure_rolls_back_in_reverse);
	tcase_add_test(ref, prepare_failure_rolls_back_prepared_forces_all);
	tcase_add_test(ref, successful_rollback_forces_nothing);
	tcase_add_loop_test(ref, reported_startup_failure_stops_the_startup,
			    0, 2);
	tcase_add_test(ref, stop_during_startup_aborts_it);
	tcase_add_test(ref, force_during_startup_aborts_and_compensates);
	tcase_add_test(ref, blocked_start_is_forced_by_the_deadline);
	tcase_add_test(ref, blocked_quiesce_is_forced_and_compensated);
	tcase_add_test(ref, deadline_suppresses_force_failures);
	tcase_add_loop_test(ref, graceful_failure_stays_primary, 0, 2);
	tcase_add_test(ref, reported_failure_terminates_the_runtime);
	tcase_add_test(ref, runtime_starts_dispatchers_and_composites);
	tcase_add_test(ref, composite_domain_start_failure_fails_startup);
	tcase_add_test(ref, force_stop_abandons_a_graceful_stop);
	tcase_add_test(core, options_have_defaults_and_are_checked);
	tcase_add_test(core, registration_rules);
	tcase_add_test(core, stop_returns_at_deadline_while_a_stop_blocks);
	tcase_add_test(core, quiesce_failure_fails_the_stop);
	tcase_add_test(core, force_before_stop_and_free_without_stop);
	tcase_add_loop_test(core, concurrent_stops_share_one_shutdown, 0, 2);
	tcase_add_test(core, admission_stays_open_while_work_is_active);
	tcase_add_test(core, follow_on_work_in_quiet_boundary_is_handled);
	tcase_add_test(core, deadline_discards_work_stuck_on_recv);
	tcase_add_test(core, stop_on_a_worker_is_refused);
	tcase_set_timeout(ref, 120);
	tcase_set_timeout(core, 120);
	suite_add_tcase(s, ref);
	suite_add_tcase(s, core);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	agr_set_log_hook(keep_log, NULL);
	return tu_run(suite());
}
