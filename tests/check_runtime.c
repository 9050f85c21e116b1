/* SPDX-License-Identifier: MIT */
/*
 * check_runtime.c - the runtime lifecycle: options, registration,
 * admission leases and the quiet boundary, the order of quiesce and
 * reverse stop, failures, the global deadline, force stop, concurrent
 * stops and the drain report. Includes the reference's runtime cases.
 * Options, registration and the order here; the stops, the quiet
 * boundary and startup in runtime_stops.c, runtime_quiet.c and
 * runtime_startup.c.
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

#include "runtime_test.h"
#include "testutil.h"

const agr_named_aggregate order = { "sales", "Order" };

const agr_named_aggregate payment = { "sales", "Payment" };

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

bool warned(const char *text)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(last_warning, text) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

int errors_logged(void)
{
	int n;

	pthread_mutex_lock(&log_lock);
	n = log_errors;
	pthread_mutex_unlock(&log_lock);
	return n;
}

/* ---- a journal of calls ---- */

struct tu_journal journal = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- probes: components of our own ---- */

void probe_init(struct probe *p, const char *name)
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

void probe_destroy(struct probe *p)
{
	tu_latch_destroy(&p->stop_entered);
	tu_latch_destroy(&p->step_entered);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

void probe_release(struct probe *p)
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
	tu_journal_add(&journal, "quiesce", p->name);
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
	tu_journal_add(&journal, "prepare", p->name);
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
	tu_journal_add(&journal, "start", p->name);
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
	tu_journal_add(&journal, "stop", p->name);
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
	tu_journal_add(&journal, "force", p->name);
	pthread_mutex_lock(&p->lock);
	p->forced = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return p->force_ret;
}

const agr_component_ops probe_ops = {
	.quiesce = probe_quiesce,
	.stop_gracefully = probe_stop,
	.force_stop = probe_force,
	.prepare = probe_prepare,
	.start = probe_start,
};

void add_probe(agr_runtime *rt, struct probe *p)
{
	ck_assert_int_eq(agr_runtime_add_component(rt, p->name, &probe_ops, p),
			 0);
}

void add_two_probes(agr_runtime *rt, struct probe *first,
		    struct probe *second)
{
	tu_journal_reset(&journal);
	probe_init(first, "first");
	probe_init(second, "second");
	add_probe(rt, first);
	add_probe(rt, second);
}

agr_runtime *new_runtime(uint64_t timeout_ns, uint64_t quiet_ns)
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

void get_report(agr_runtime *rt, agr_runtime_report *r,
		agr_component_report *c, size_t cap)
{
	ck_assert_int_eq(agr_runtime_report_get(rt, r, c, cap), 0);
}

/* ---- messages, dispatchers ---- */

void tmsg_init(struct tmsg *t, const char *id)
{
	memset(t, 0, sizeof(*t));
	t->m.aggregate_id = id;
	t->m.type = "event";
	t->status = 1; /* no completion yet */
	atomic_init(&t->completions, 0);
}

void on_complete(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = (struct tmsg *)(void *)msg;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	tu_tally_add(arg);
}

agr_supplier *new_supplier(int parallelism)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("rt", parallelism, &sup), 0);
	return sup;
}

agr_dispatcher *new_dispatcher(agr_supplier *sup, const char *name,
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

static void journal_step(const char *step, void *arg)
{
	(void)arg;
	tu_journal_add(&journal, "composite", step);
}

agr_composite *new_orders(agr_supplier *sup, struct tu_tally *done)
{
	agr_composite_options o;
	agr_composite *comp = NULL;

	memset(&o, 0, sizeof(o));
	o.name = "orders";
	o.named_aggregate = order;
	o.supplier = sup;
	o.owns_supplier = true;
	o.event_stream.on_complete = on_complete;
	o.event_stream.complete_arg = done;
	o.state_event = o.event_stream;
	o.on_step = journal_step;
	ck_assert_int_eq(agr_composite_new(&o, &comp), 0);
	return comp;
}

void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

/* Polls; the sleeps here are only the intervals of bounded waits. */
bool wait_state(agr_runtime *rt, agr_runtime_state s)
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

bool wait_no_lease(agr_runtime *rt)
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

void *run_stop(void *arg)
{
	struct stopper *s = arg;

	if (s->start)
		pthread_barrier_wait(s->start);
	s->called_at = tu_now_ns();
	s->result = agr_runtime_stop(s->rt);
	s->returned_at = tu_now_ns();
	return NULL;
}

void stopper_start(struct stopper *s, agr_runtime *rt)
{
	*s = (struct stopper){ .rt = rt, .result = 1 };
	ck_assert_int_eq(pthread_create(&s->thread, NULL, run_stop, s), 0);
}

int stopper_join(struct stopper *s)
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

	add_two_probes(rt, &first, &second);
	before = tu_now_ns();
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	tu_journal_assert(&journal, expected, 4, 4);
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
	runtime_stop_tests(ref, core);
	runtime_quiet_tests(ref, core);
	runtime_startup_tests(ref);
	tcase_add_test(core, options_have_defaults_and_are_checked);
	tcase_add_test(core, registration_rules);
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
