/* SPDX-License-Identifier: MIT */
/*
 * check_scheduler.c - tasks on the workers of one named aggregate:
 * routing by hint, exactly-once delivery under many producers, FIFO per
 * producer and worker, and what graceful and immediate dispose do to
 * queued and running tasks.
 *
 * Results are recorded on the workers and asserted on the test thread:
 * a failed ck_assert on a worker thread would end the child abruptly.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

static const agr_named_aggregate order = { "sales", "Order" };

static agr_supplier *new_supplier(int parallelism)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("sched", parallelism, &sup), 0);
	ck_assert_ptr_nonnull(sup);
	return sup;
}

static agr_scheduler *lookup(agr_supplier *sup)
{
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static void count(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

static void count_cancel(void *arg, int reason)
{
	(void)reason;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* ---- blocking the only worker ---- */

struct blocker {
	struct tu_latch started;
	struct tu_latch release;
	bool released;
	atomic_bool saw_interrupt;
};

static void block_until_released(void *arg)
{
	struct blocker *b = arg;

	tu_latch_count_down(&b->started);
	b->released = tu_latch_wait(&b->release, TU_LONG_NS);
}

/* Polls, as a long task should; bounded so a bug cannot hang forever. */
static void block_until_interrupted(void *arg)
{
	struct blocker *b = arg;
	struct timespec pause = { 0, 1000000 };
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;

	tu_latch_count_down(&b->started);
	while (!agr_worker_interrupted() && tu_now_ns() < deadline)
		nanosleep(&pause, NULL);
	atomic_store(&b->saw_interrupt, agr_worker_interrupted());
}

static void blocker_init(struct blocker *b)
{
	tu_latch_init(&b->started, 1);
	tu_latch_init(&b->release, 1);
	b->released = false;
	atomic_init(&b->saw_interrupt, false);
}

static void blocker_destroy(struct blocker *b)
{
	tu_latch_destroy(&b->started);
	tu_latch_destroy(&b->release);
}

/* Occupies worker 0 with `fn` and returns once it runs. */
static void block_worker(agr_scheduler *s, struct blocker *b, agr_task_fn fn)
{
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, fn, b), 0);
	ck_assert(tu_latch_wait(&b->started, TU_LONG_NS));
}

/* ---- names and arguments ---- */

START_TEST(name_parallelism_and_null_handling)
{
	agr_supplier *sup = new_supplier(3);
	agr_scheduler *s = lookup(sup), *again = NULL;
	atomic_int runs = 0;

	ck_assert_str_eq(agr_scheduler_name(s), "sched-Order");
	ck_assert_int_eq(agr_scheduler_parallelism(s), 3);
	ck_assert_int_eq(agr_scheduler_parallelism(s),
			 agr_supplier_parallelism(sup));
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &again), 0);
	ck_assert_ptr_eq(again, s);

	ck_assert_ptr_null(agr_scheduler_name(NULL));
	ck_assert_int_eq(agr_scheduler_parallelism(NULL), -EINVAL);
	ck_assert_int_eq(agr_scheduler_schedule(NULL, 0, count, &runs),
			 -EINVAL);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, NULL, &runs), -EINVAL);
	ck_assert_int_eq(agr_scheduler_schedule_cancellable(NULL, 0, count,
							    count_cancel,
							    &runs), -EINVAL);
	ck_assert_int_eq(agr_scheduler_schedule_cancellable(s, 0, NULL,
							    count_cancel,
							    &runs), -EINVAL);
	ck_assert(!agr_scheduler_is_disposed(NULL));
	ck_assert(!agr_scheduler_is_terminated(NULL));
	ck_assert(!agr_scheduler_is_disposed(s));
	ck_assert(!agr_scheduler_is_terminated(s));

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(atomic_load(&runs), 0);
	agr_supplier_free(sup);
}
END_TEST

/* ---- many producers ---- */

#define PRODUCERS 8
#define PER_PRODUCER 5000
#define TOTAL (PRODUCERS * PER_PRODUCER)
#define FAN_WORKERS 3

struct fan;

struct job {
	struct fan *fan;
	unsigned id, hint, producer, seq;
};

struct fan {
	agr_scheduler *s;
	struct job jobs[TOTAL];
	atomic_int runs[TOTAL];
	atomic_int wrong_worker, out_of_order, refused;
	/* Next expected seq + 1, per worker and producer; one writer each. */
	unsigned last[FAN_WORKERS][PRODUCERS];
	struct tu_latch go, done;
};

struct producer {
	struct fan *fan;
	unsigned index;
	pthread_t thread;
};

static void job_run(void *arg)
{
	struct job *j = arg;
	struct fan *f = j->fan;
	int idx = agr_worker_index(agr_worker_current());

	if (idx != (int)(j->hint % FAN_WORKERS)) {
		atomic_fetch_add(&f->wrong_worker, 1);
	} else {
		if (f->last[idx][j->producer] > j->seq)
			atomic_fetch_add(&f->out_of_order, 1);
		f->last[idx][j->producer] = j->seq + 1;
	}
	atomic_fetch_add(&f->runs[j->id], 1);
	tu_latch_count_down(&f->done);
}

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct fan *f = p->fan;
	unsigned seq;

	/* Start together, so the producers really contend. */
	tu_latch_wait(&f->go, TU_LONG_NS);
	for (seq = 0; seq < PER_PRODUCER; seq++) {
		struct job *j = &f->jobs[p->index * PER_PRODUCER + seq];

		if (agr_scheduler_schedule(f->s, j->hint, job_run, j) != 0)
			atomic_fetch_add(&f->refused, 1);
	}
	return NULL;
}

static void fan_init(struct fan *f, agr_scheduler *s)
{
	unsigned id;

	memset(f, 0, sizeof(*f));
	f->s = s;
	for (id = 0; id < TOTAL; id++) {
		f->jobs[id].fan = f;
		f->jobs[id].id = id;
		/* An odd multiplier is a bijection: distinct, spread hints. */
		f->jobs[id].hint = id * 2654435761u;
		f->jobs[id].producer = id / PER_PRODUCER;
		f->jobs[id].seq = id % PER_PRODUCER;
		atomic_init(&f->runs[id], 0);
	}
	tu_latch_init(&f->go, 1);
	tu_latch_init(&f->done, TOTAL);
}

static void run_many_producers(void)
{
	agr_supplier *sup = new_supplier(FAN_WORKERS);
	struct producer prod[PRODUCERS];
	struct fan *f = malloc(sizeof(*f));
	unsigned i;

	ck_assert_ptr_nonnull(f);
	fan_init(f, lookup(sup));
	for (i = 0; i < PRODUCERS; i++) {
		prod[i] = (struct producer){ f, i, 0 };
		ck_assert_int_eq(pthread_create(&prod[i].thread, NULL, produce,
						&prod[i]), 0);
	}
	tu_latch_count_down(&f->go);
	for (i = 0; i < PRODUCERS; i++)
		pthread_join(prod[i].thread, NULL);
	ck_assert_int_eq(atomic_load(&f->refused), 0);
	ck_assert(tu_latch_wait(&f->done, TU_LONG_NS));

	/* After the stop nothing can still run: counts are final. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	for (i = 0; i < TOTAL; i++)
		ck_assert_int_eq(atomic_load(&f->runs[i]), 1);
	ck_assert_int_eq(atomic_load(&f->wrong_worker), 0);
	ck_assert_int_eq(atomic_load(&f->out_of_order), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&f->go);
	tu_latch_destroy(&f->done);
	free(f);
}

START_TEST(many_producers_each_task_once_in_order)
{
	run_many_producers();
}
END_TEST

START_TEST(many_producers_through_thread_local_sender_rings)
{
	/* Read once per process; Check runs this test in its own child. */
	ck_assert_int_eq(setenv("AGR_NO_SYNC_MSG", "1", 1), 0);
	run_many_producers();
}
END_TEST

/* ---- graceful dispose ---- */

START_TEST(schedule_after_graceful_stop_is_refused)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup);
	atomic_int before = 0, after = 0;
	struct tu_latch ran;

	/* Up and running first, so the stop has real workers to end. */
	tu_latch_init(&ran, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 1, tu_count_down, &ran), 0);
	ck_assert(tu_latch_wait(&ran, TU_LONG_NS));
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, count, &before), 0);

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_disposed(s));
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert_int_eq(atomic_load(&before), 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, count, &after),
			 -ESHUTDOWN);
	ck_assert_int_eq(agr_scheduler_schedule_cancellable(s, 1, count,
							    count_cancel,
							    &after),
			 -ESHUTDOWN);
	agr_supplier_free(sup);
	/* Joined and freed: a refused task can no longer sneak in. */
	ck_assert_int_eq(atomic_load(&after), 0);
	tu_latch_destroy(&ran);
}
END_TEST

#define QUEUED 100

struct ordered {
	int n;
	int order[QUEUED];
};

struct slot {
	struct ordered *o;
	int i;
};

/* Only one worker appends, so the array needs no lock. */
static void append(void *arg)
{
	struct slot *sl = arg;

	if (sl->o->n < QUEUED)
		sl->o->order[sl->o->n] = sl->i;
	sl->o->n++;
}

START_TEST(graceful_stop_runs_queued_tasks)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup);
	struct ordered o = { 0 };
	struct slot slots[QUEUED];
	struct blocker b;
	atomic_int late = 0;
	int i;

	blocker_init(&b);
	block_worker(s, &b, block_until_released);
	for (i = 0; i < QUEUED; i++) {
		slots[i] = (struct slot){ &o, i };
		ck_assert_int_eq(agr_scheduler_schedule(s, 7, append,
							&slots[i]), 0);
	}
	/* The blocked task holds the stop; the stop still goes on. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, 50 * MS),
			 -ETIMEDOUT);
	ck_assert(agr_scheduler_is_disposed(s));
	ck_assert(!agr_scheduler_is_terminated(s));
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, count, &late),
			 -ESHUTDOWN);

	tu_latch_count_down(&b.release);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert(b.released);
	ck_assert_int_eq(o.n, QUEUED);
	for (i = 0; i < QUEUED; i++)
		ck_assert_int_eq(o.order[i], i);
	ck_assert_int_eq(atomic_load(&late), 0);
	agr_supplier_free(sup);
	blocker_destroy(&b);
}
END_TEST

/* ---- immediate dispose ---- */

#define DROPPED 200

struct outcome {
	atomic_int ran, cancelled, reason;
};

static void outcome_run(void *arg)
{
	struct outcome *out = arg;

	atomic_fetch_add(&out->ran, 1);
}

static void outcome_cancel(void *arg, int reason)
{
	struct outcome *out = arg;

	atomic_store(&out->reason, reason);
	atomic_fetch_add(&out->cancelled, 1);
}

START_TEST(force_stop_drops_queued_tasks_and_reports_each)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup);
	struct outcome *out = calloc(DROPPED, sizeof(*out));
	struct blocker b;
	int i, ran = 0, cancelled = 0;

	ck_assert_ptr_nonnull(out);
	blocker_init(&b);
	block_worker(s, &b, block_until_interrupted);
	for (i = 0; i < DROPPED; i++)
		ck_assert_int_eq(agr_scheduler_schedule_cancellable(s, 0,
				 outcome_run, outcome_cancel, &out[i]), 0);

	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, outcome_run, &out[0]),
			 -ESHUTDOWN);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert(atomic_load(&b.saw_interrupt));

	/* Exactly one of fn and on_cancel, for every admitted task. */
	for (i = 0; i < DROPPED; i++) {
		int r = atomic_load(&out[i].ran);
		int c = atomic_load(&out[i].cancelled);

		ck_assert_int_eq(r + c, 1);
		if (c)
			ck_assert_int_eq(atomic_load(&out[i].reason),
					 -ECANCELED);
		ran += r;
		cancelled += c;
	}
	ck_assert_int_eq(ran + cancelled, DROPPED);
	agr_supplier_free(sup);
	/* Freeing must not report anything a second time. */
	for (i = 0; i < DROPPED; i++)
		ck_assert_int_eq(atomic_load(&out[i].ran) +
				 atomic_load(&out[i].cancelled), 1);
	blocker_destroy(&b);
	free(out);
}
END_TEST

START_TEST(force_stop_drops_plain_tasks_without_leaking)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup);
	atomic_int runs = 0;
	struct blocker b;
	int i;

	blocker_init(&b);
	block_worker(s, &b, block_until_interrupted);
	for (i = 0; i < DROPPED; i++)
		ck_assert_int_eq(agr_scheduler_schedule(s, 0, count, &runs),
				 0);
	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(atomic_load(&b.saw_interrupt));
	ck_assert_int_le(atomic_load(&runs), DROPPED);
	agr_supplier_free(sup); /* ASan's leak check sees any lost task */
	blocker_destroy(&b);
}
END_TEST

/* ---- agr_scheduler_call_on ---- */

static int worker_index_plus_100(void *arg)
{
	(void)arg;
	return agr_worker_index(agr_worker_current()) + 100;
}

START_TEST(call_on_returns_the_value_from_that_worker)
{
	agr_supplier *sup = new_supplier(3);
	agr_scheduler *s = lookup(sup);
	int i, result;

	for (i = 0; i < 3; i++) {
		result = -1;
		ck_assert_int_eq(agr_scheduler_call_on(s, i,
				 worker_index_plus_100, NULL, &result), 0);
		ck_assert_int_eq(result, 100 + i);
	}
	/* A NULL result: the call still waits for fn. */
	ck_assert_int_eq(agr_scheduler_call_on(s, 0, worker_index_plus_100,
					       NULL, NULL), 0);
	result = -1;
	ck_assert_int_eq(agr_scheduler_call_on(NULL, 0, worker_index_plus_100,
					       NULL, &result), -EINVAL);
	ck_assert_int_eq(agr_scheduler_call_on(s, 0, NULL, NULL, &result),
			 -EINVAL);
	ck_assert_int_eq(agr_scheduler_call_on(s, 3, worker_index_plus_100,
					       NULL, &result), -EINVAL);
	ck_assert_int_eq(agr_scheduler_call_on(s, -1, worker_index_plus_100,
					       NULL, &result), -EINVAL);
	ck_assert_int_eq(result, -1);
	agr_supplier_free(sup);
}
END_TEST

struct nested {
	agr_scheduler *s;
	struct tu_latch done;
	int self_ret, peer_ret, peer_result;
};

/* On worker 0: a call to itself is refused, one to worker 1 runs. */
static void call_from_worker(void *arg)
{
	struct nested *n = arg;
	int r = -1;

	n->self_ret = agr_scheduler_call_on(n->s, 0, worker_index_plus_100,
					    NULL, &r);
	n->peer_ret = agr_scheduler_call_on(n->s, 1, worker_index_plus_100,
					    NULL, &n->peer_result);
	tu_latch_count_down(&n->done);
}

START_TEST(call_on_from_that_worker_is_edeadlk)
{
	agr_supplier *sup;
	struct nested n = { .peer_result = -1 };

	/*
	 * Workers that sleep as soon as they are idle: worker 1 then needs
	 * the doorbell worker 0 rings before it blocks in the call.
	 */
	setenv("AGR_IDLE_SPIN_US", "0", 1);
	sup = new_supplier(2);
	n.s = lookup(sup);
	tu_latch_init(&n.done, 1);
	ck_assert_int_eq(agr_scheduler_schedule(n.s, 0, call_from_worker, &n),
			 0);
	ck_assert(tu_latch_wait(&n.done, TU_LONG_NS));
	ck_assert_int_eq(n.self_ret, -EDEADLK);
	ck_assert_int_eq(n.peer_ret, 0);
	ck_assert_int_eq(n.peer_result, 101);
	agr_supplier_free(sup);
	tu_latch_destroy(&n.done);
}
END_TEST

START_TEST(call_on_after_dispose_is_eshutdown)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup);
	int result = -1;

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_scheduler_call_on(s, 0, worker_index_plus_100,
					       NULL, &result), -ESHUTDOWN);
	ck_assert_int_eq(result, -1);
	agr_supplier_free(sup);
}
END_TEST

/* "still waiting" warnings that name worker 0 of sched-sales-Order. */
static struct tu_tally call_waits;

static void call_log_hook(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == AGR_LOG_WARN && strstr(msg, "still waiting") &&
	    strstr(msg, "Order-0"))
		tu_tally_add(&call_waits);
}

struct caller {
	agr_scheduler *s;
	int ret, result;
	struct tu_latch done;
};

static void *call_blocked_worker(void *arg)
{
	struct caller *c = arg;

	c->ret = agr_scheduler_call_on(c->s, 0, worker_index_plus_100, NULL,
				       &c->result);
	tu_latch_count_down(&c->done);
	return NULL;
}

/*
 * A call behind a task that does not return says what it waits for,
 * every 5 s; a force stop then drops it: -ECANCELED, fn never ran.
 */
START_TEST(call_on_waits_aloud_and_a_force_stop_cancels_it)
{
	agr_supplier *sup = new_supplier(1);
	struct caller c = { .s = lookup(sup), .result = -1 };
	struct blocker b;
	pthread_t th;

	tu_tally_init(&call_waits);
	agr_set_log_hook(call_log_hook, NULL);
	blocker_init(&b);
	tu_latch_init(&c.done, 1);
	block_worker(c.s, &b, block_until_interrupted);
	ck_assert_int_eq(pthread_create(&th, NULL, call_blocked_worker, &c),
			 0);
	/* The warning comes 5 s into the wait: the call is queued then. */
	ck_assert(tu_tally_wait(&call_waits, 1, TU_LONG_NS));
	ck_assert_int_eq(tu_latch_count(&c.done), 1); /* still waiting */
	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	ck_assert(tu_latch_wait(&c.done, TU_LONG_NS));
	pthread_join(th, NULL);
	ck_assert_int_eq(c.ret, -ECANCELED);
	ck_assert_int_eq(c.result, -1);
	ck_assert(atomic_load(&b.saw_interrupt));
	agr_supplier_free(sup);
	agr_set_log_hook(NULL, NULL);
	tu_tally_destroy(&call_waits);
	tu_latch_destroy(&c.done);
	blocker_destroy(&b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("scheduler");
	TCase *tc = tcase_create("core");

	/* Generous even when run by hand, outside `make check`. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, name_parallelism_and_null_handling);
	tcase_add_test(tc, many_producers_each_task_once_in_order);
	tcase_add_test(tc, many_producers_through_thread_local_sender_rings);
	tcase_add_test(tc, schedule_after_graceful_stop_is_refused);
	tcase_add_test(tc, graceful_stop_runs_queued_tasks);
	tcase_add_test(tc, force_stop_drops_queued_tasks_and_reports_each);
	tcase_add_test(tc, force_stop_drops_plain_tasks_without_leaking);
	tcase_add_test(tc, call_on_returns_the_value_from_that_worker);
	tcase_add_test(tc, call_on_from_that_worker_is_edeadlk);
	tcase_add_test(tc, call_on_after_dispose_is_eshutdown);
	tcase_add_test(tc, call_on_waits_aloud_and_a_force_stop_cancels_it);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
