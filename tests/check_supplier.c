/* SPDX-License-Identifier: MIT */
/*
 * check_supplier.c - the supplier: caching, creation under concurrency,
 * graceful and forced stop, the borrowed view. Includes every supplier
 * case of the reference's own tests.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

static const agr_named_aggregate order = { "sales", "Order" };
static const agr_named_aggregate cart = { "sales", "Cart" };

static agr_supplier *new_supplier(const char *name, int parallelism)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new(name, parallelism, &sup), 0);
	ck_assert_ptr_nonnull(sup);
	return sup;
}

static agr_scheduler *lookup(agr_supplier *sup,
			     const agr_named_aggregate *named)
{
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_get_or_init(sup, named, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

/* ---- a task that counts a latch down ---- */

static void assert_runs_task(agr_scheduler *s)
{
	struct tu_latch done;

	tu_latch_init(&done, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, tu_count_down, &done), 0);
	ck_assert(tu_latch_wait(&done, TU_LONG_NS));
	tu_latch_destroy(&done);
}

START_TEST(reports_name_and_parallelism)
{
	agr_supplier *sup = new_supplier("worker", 3);

	ck_assert_str_eq(agr_supplier_name(sup), "worker");
	ck_assert_int_eq(agr_supplier_parallelism(sup), 3);
	ck_assert(!agr_supplier_is_borrowed(sup));
	ck_assert_int_eq(agr_supplier_size(sup), 0);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(default_parallelism_is_cpus)
{
	agr_supplier *sup;

	unsetenv("AGR_SCHEDULER_POOL_SIZE");
	sup = new_supplier("worker", 0);
	ck_assert_int_eq(agr_supplier_parallelism(sup),
			 (int)sysconf(_SC_NPROCESSORS_ONLN));
	agr_supplier_free(sup);
}
END_TEST

START_TEST(pool_size_env_overrides_default)
{
	agr_supplier *sup = NULL;

	setenv("AGR_SCHEDULER_POOL_SIZE", "3", 1);
	sup = new_supplier("worker", 0);
	ck_assert_int_eq(agr_supplier_parallelism(sup), 3);
	agr_supplier_free(sup);
	/* An explicit parallelism wins over the environment. */
	sup = new_supplier("worker", 2);
	ck_assert_int_eq(agr_supplier_parallelism(sup), 2);
	agr_supplier_free(sup);
	setenv("AGR_SCHEDULER_POOL_SIZE", "zero", 1);
	ck_assert_int_eq(agr_supplier_new("worker", 0, &sup), -EINVAL);
	setenv("AGR_SCHEDULER_POOL_SIZE", "-4", 1);
	ck_assert_int_eq(agr_supplier_new("worker", 0, &sup), -EINVAL);
}
END_TEST

START_TEST(rejects_bad_arguments)
{
	static const agr_named_aggregate no_context = { NULL, "Order" };
	static const agr_named_aggregate empty_context = { "", "Order" };
	static const agr_named_aggregate no_aggregate = { "sales", NULL };
	static const agr_named_aggregate empty_aggregate = { "sales", "" };
	agr_supplier *sup = NULL, *view = NULL;
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_new(NULL, 1, &sup), -EINVAL);
	ck_assert_int_eq(agr_supplier_new("", 1, &sup), -EINVAL);
	ck_assert_int_eq(agr_supplier_new("worker", -1, &sup), -EINVAL);
	ck_assert_int_eq(agr_supplier_new("worker", 1, NULL), -EINVAL);
	ck_assert_ptr_null(sup);

	sup = new_supplier("worker", 1);
	ck_assert_int_eq(agr_supplier_get_or_init(NULL, &order, &s), -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, NULL, &s), -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, NULL), -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &no_context, &s),
			 -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &empty_context, &s),
			 -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &no_aggregate, &s),
			 -EINVAL);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &empty_aggregate, &s),
			 -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(agr_supplier_size(sup), 0);

	ck_assert_int_eq(agr_supplier_borrow(NULL, &view), -EINVAL);
	ck_assert_int_eq(agr_supplier_borrow(sup, NULL), -EINVAL);
	ck_assert_int_eq(agr_supplier_stop_gracefully(NULL, 0), -EINVAL);
	ck_assert_int_eq(agr_supplier_force_stop(NULL), -EINVAL);
	ck_assert_int_eq(agr_supplier_parallelism(NULL), -EINVAL);
	ck_assert_ptr_null(agr_supplier_name(NULL));
	agr_supplier_free(NULL);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(caches_by_materialized_name)
{
	static const agr_named_aggregate order_copy = { "sales", "Order" };
	static const agr_named_aggregate other_context = { "billing",
							   "Order" };
	agr_supplier *sup = new_supplier("worker", 1);
	agr_scheduler *a = lookup(sup, &order);
	agr_scheduler *b = lookup(sup, &order_copy);
	agr_scheduler *c = lookup(sup, &cart);
	agr_scheduler *d = lookup(sup, &other_context);

	ck_assert_ptr_eq(a, b);
	ck_assert_ptr_ne(a, c);
	/* Context is part of the key, not of the name. */
	ck_assert_ptr_ne(a, d);
	ck_assert_str_eq(agr_scheduler_name(a), "worker-Order");
	ck_assert_str_eq(agr_scheduler_name(c), "worker-Cart");
	ck_assert_str_eq(agr_scheduler_name(d), "worker-Order");
	ck_assert_int_eq(agr_scheduler_parallelism(a), 1);
	ck_assert_int_eq(agr_supplier_size(sup), 3);
	agr_supplier_free(sup);
}
END_TEST

/* ---- 64 concurrent lookups on 8 threads ---- */

#define LOOKUP_THREADS 8
#define LOOKUPS_PER_THREAD 8

struct lookup_race {
	agr_supplier *sup;
	pthread_barrier_t start;
	agr_scheduler *seen[LOOKUP_THREADS * LOOKUPS_PER_THREAD];
	atomic_int next;
	atomic_int errors;
};

static void *lookup_many(void *arg)
{
	struct lookup_race *r = arg;
	agr_scheduler *s;
	int i;

	pthread_barrier_wait(&r->start);
	for (i = 0; i < LOOKUPS_PER_THREAD; i++) {
		s = NULL;
		if (agr_supplier_get_or_init(r->sup, &order, &s) != 0)
			atomic_fetch_add(&r->errors, 1);
		r->seen[atomic_fetch_add(&r->next, 1)] = s;
	}
	return NULL;
}

START_TEST(concurrent_lookups_create_one_scheduler)
{
	struct lookup_race r = { .sup = new_supplier("worker", 2) };
	pthread_t threads[LOOKUP_THREADS];
	int i;

	pthread_barrier_init(&r.start, NULL, LOOKUP_THREADS);
	for (i = 0; i < LOOKUP_THREADS; i++)
		ck_assert_int_eq(pthread_create(&threads[i], NULL, lookup_many,
						&r), 0);
	for (i = 0; i < LOOKUP_THREADS; i++)
		pthread_join(threads[i], NULL);
	ck_assert_int_eq(atomic_load(&r.errors), 0);
	ck_assert_int_eq(atomic_load(&r.next),
			 LOOKUP_THREADS * LOOKUPS_PER_THREAD);
	for (i = 1; i < LOOKUP_THREADS * LOOKUPS_PER_THREAD; i++)
		ck_assert_ptr_eq(r.seen[i], r.seen[0]);
	ck_assert_int_eq(agr_supplier_size(r.sup), 1);
	pthread_barrier_destroy(&r.start);
	agr_supplier_free(r.sup);
}
END_TEST

/* ---- thread names ---- */

struct name_probe {
	struct tu_latch done;
	char name[32];
};

static void read_thread_name(void *arg)
{
	struct name_probe *p = arg;

	pthread_getname_np(pthread_self(), p->name, sizeof(p->name));
	tu_latch_count_down(&p->done);
}

START_TEST(task_thread_name_contains_supplier_and_aggregate)
{
	agr_supplier *sup = new_supplier("worker", 2);
	agr_scheduler *s = lookup(sup, &order);
	struct name_probe p = { .name = "" };

	tu_latch_init(&p.done, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 1, read_thread_name, &p),
			 0);
	ck_assert(tu_latch_wait(&p.done, TU_LONG_NS));
	ck_assert_ptr_nonnull(strstr(p.name, "worker-Order"));
	ck_assert_str_eq(p.name, "worker-Order-1");
	tu_latch_destroy(&p.done);
	agr_supplier_free(sup);
}
END_TEST

/* ---- stopping ---- */

START_TEST(lookup_fails_after_graceful_stop)
{
	agr_supplier *sup = new_supplier("worker", 2);
	agr_scheduler *s = lookup(sup, &order), *t = NULL;

	assert_runs_task(s);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_disposed(s));
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &t),
			 -ESHUTDOWN);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &cart, &t),
			 -ESHUTDOWN);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, tu_count_down, NULL),
			 -ESHUTDOWN);
	/* The terminal result is kept for every later caller. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, 0), 0);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(force_stop_disposes_every_cached_scheduler)
{
	agr_supplier *sup = new_supplier("worker", 2);
	agr_scheduler *a = lookup(sup, &order);
	agr_scheduler *b = lookup(sup, &cart);
	agr_scheduler *t = NULL;

	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	ck_assert(agr_scheduler_is_disposed(a));
	ck_assert(agr_scheduler_is_disposed(b));
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &t),
			 -ESHUTDOWN);
	ck_assert_int_eq(agr_supplier_force_stop(sup), 0); /* idempotent */
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(a));
	ck_assert(agr_scheduler_is_terminated(b));
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &cart, &t),
			 -ESHUTDOWN);
	agr_supplier_free(sup);
}
END_TEST

/* ---- force takes over a graceful stop ---- */

struct blocker {
	struct tu_latch started;
	atomic_bool saw_interrupt;
};

/* Blocks until the worker is interrupted, as a stuck handler would. */
static void block_until_interrupted(void *arg)
{
	struct blocker *b = arg;
	const struct timespec tick = { 0, 1000000 };

	tu_latch_count_down(&b->started);
	while (!agr_worker_interrupted())
		nanosleep(&tick, NULL); /* a poll interval, not a sync */
	atomic_store(&b->saw_interrupt, true);
}

struct observer {
	pthread_t thread;
	agr_supplier *sup;
	uint64_t timeout_ns;
	int result;
	uint64_t returned_at;
};

static void *observe_stop(void *arg)
{
	struct observer *o = arg;

	o->result = agr_supplier_stop_gracefully(o->sup, o->timeout_ns);
	o->returned_at = tu_now_ns();
	return NULL;
}

START_TEST(force_takes_over_graceful_stop)
{
	agr_supplier *sup = new_supplier("worker", 1);
	agr_scheduler *s = lookup(sup, &order);
	struct blocker b = { .saw_interrupt = false };
	struct observer early[2], late[2];
	uint64_t forced_at;
	int i;

	tu_latch_init(&b.started, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_until_interrupted,
						&b), 0);
	ck_assert(tu_latch_wait(&b.started, TU_LONG_NS));

	/* Before the force, no observer completes: each times out. */
	for (i = 0; i < 2; i++) {
		early[i] = (struct observer){ .sup = sup,
					      .timeout_ns = 50 * MS };
		pthread_create(&early[i].thread, NULL, observe_stop, &early[i]);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(early[i].thread, NULL);
		ck_assert_int_eq(early[i].result, -ETIMEDOUT);
	}
	ck_assert(!agr_scheduler_is_terminated(s));

	for (i = 0; i < 2; i++) {
		late[i] = (struct observer){ .sup = sup,
					     .timeout_ns = TU_LONG_NS };
		pthread_create(&late[i].thread, NULL, observe_stop, &late[i]);
	}
	forced_at = tu_now_ns();
	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	for (i = 0; i < 2; i++) {
		pthread_join(late[i].thread, NULL);
		ck_assert_int_eq(late[i].result, 0);
		/* The reference's bound: both complete within 1 s. */
		ck_assert_uint_lt(late[i].returned_at - forced_at,
				  1000 * MS);
	}
	ck_assert(atomic_load(&b.saw_interrupt));
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &cart, &s),
			 -ESHUTDOWN);
	tu_latch_destroy(&b.started);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(concurrent_graceful_stops_share_one_result)
{
	agr_supplier *sup = new_supplier("worker", 2);
	struct observer o[8];
	int i;

	lookup(sup, &order);
	lookup(sup, &cart);
	for (i = 0; i < 8; i++) {
		o[i] = (struct observer){ .sup = sup, .timeout_ns = TU_LONG_NS };
		pthread_create(&o[i].thread, NULL, observe_stop, &o[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(o[i].thread, NULL);
		ck_assert_int_eq(o[i].result, 0);
	}
	agr_supplier_free(sup);
}
END_TEST

/* ---- the borrowed view ---- */

START_TEST(borrowed_view_cannot_stop_the_owner)
{
	agr_supplier *owner = new_supplier("worker", 2);
	agr_supplier *view = NULL, *view2 = NULL;
	agr_scheduler *via_view, *via_owner;

	ck_assert_int_eq(agr_supplier_borrow(owner, &view), 0);
	ck_assert(agr_supplier_is_borrowed(view));
	ck_assert_str_eq(agr_supplier_name(view), "worker");
	ck_assert_int_eq(agr_supplier_parallelism(view), 2);

	via_view = lookup(view, &order);
	via_owner = lookup(owner, &order);
	ck_assert_ptr_eq(via_view, via_owner);
	ck_assert_int_eq(agr_supplier_size(owner), 1);

	ck_assert_int_eq(agr_supplier_stop_gracefully(view, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_supplier_force_stop(view), 0);
	ck_assert(!agr_scheduler_is_disposed(via_owner));
	assert_runs_task(via_owner);
	ck_assert_ptr_eq(lookup(owner, &order), via_owner);

	/* A view of a view still borrows the owner; freeing views is safe. */
	ck_assert_int_eq(agr_supplier_borrow(view, &view2), 0);
	ck_assert_ptr_eq(lookup(view2, &cart), lookup(owner, &cart));
	agr_supplier_free(view2);
	agr_supplier_free(view);
	assert_runs_task(via_owner);

	ck_assert_int_eq(agr_supplier_stop_gracefully(owner, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(via_owner));
	agr_supplier_free(owner);
}
END_TEST

START_TEST(view_lookup_fails_after_owner_stops)
{
	agr_supplier *owner = new_supplier("worker", 1);
	agr_supplier *view = NULL;
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_borrow(owner, &view), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(owner, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(view, &order, &s),
			 -ESHUTDOWN);
	agr_supplier_free(view);
	agr_supplier_free(owner);
}
END_TEST

START_TEST(free_without_stop_forces_and_joins)
{
	agr_supplier *sup = new_supplier("worker", 2);
	struct blocker b = { .saw_interrupt = false };
	agr_scheduler *s = lookup(sup, &order);

	tu_latch_init(&b.started, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_until_interrupted,
						&b), 0);
	ck_assert(tu_latch_wait(&b.started, TU_LONG_NS));
	agr_supplier_free(sup); /* must interrupt the task, then join */
	ck_assert(atomic_load(&b.saw_interrupt));
	tu_latch_destroy(&b.started);
}
END_TEST

/* A task blocked in a call that ignores agr_worker_interrupted(). */
struct deaf {
	struct tu_latch started, release;
};

static void block_until_released(void *arg)
{
	struct deaf *t = arg;

	tu_latch_count_down(&t->started);
	TU_EXPECT(tu_latch_wait(&t->release, TU_LONG_NS * 2));
}

static void free_supplier(void *sup)
{
	agr_supplier_free(sup);
}

/*
 * A task blocked in a call holds agr_supplier_free() (C cannot stop a
 * thread): the free names the worker and the cause within 5 s, rather
 * than wait in silence, and returns once the task does.
 */
START_TEST(free_names_a_task_that_holds_it)
{
	agr_supplier *sup = new_supplier("deaf", 1);
	agr_scheduler *s = lookup(sup, &order);
	struct tu_logbook book;
	struct tu_aside f;
	struct deaf t;
	uint64_t before;
	int n;

	tu_logbook_init(&book);
	agr_set_log_hook(tu_logbook_keep, &book);
	tu_latch_init(&t.started, 1);
	tu_latch_init(&t.release, 1);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_until_released,
						&t), 0);
	ck_assert(tu_latch_wait(&t.started, TU_LONG_NS));
	before = tu_now_ns();
	tu_aside_start(&f, free_supplier, sup);
	n = tu_logbook_wait(&book, AGR_LOG_WARN, "agr_supplier_free()",
			    "deaf-Order-0", "has not returned", 8000 * MS);
	if (n < 1)
		tu_logbook_dump(&book);
	ck_assert_msg(n >= 1, "nothing named the task that holds the free");
	ck_assert_uint_lt(tu_now_ns() - before, 8000 * MS);
	ck_assert(!tu_aside_wait(&f, 0));
	tu_latch_count_down(&t.release);
	ck_assert(tu_aside_wait(&f, TU_LONG_NS));
	tu_aside_join(&f);
	agr_set_log_hook(NULL, NULL);
	tu_latch_destroy(&t.started);
	tu_latch_destroy(&t.release);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("supplier");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, reports_name_and_parallelism);
	tcase_add_test(tc, default_parallelism_is_cpus);
	tcase_add_test(tc, pool_size_env_overrides_default);
	tcase_add_test(tc, rejects_bad_arguments);
	tcase_add_test(tc, caches_by_materialized_name);
	tcase_add_test(tc, concurrent_lookups_create_one_scheduler);
	tcase_add_test(tc, task_thread_name_contains_supplier_and_aggregate);
	tcase_add_test(tc, lookup_fails_after_graceful_stop);
	tcase_add_test(tc, force_stop_disposes_every_cached_scheduler);
	tcase_add_test(tc, force_takes_over_graceful_stop);
	tcase_add_test(tc, concurrent_graceful_stops_share_one_result);
	tcase_add_test(tc, borrowed_view_cannot_stop_the_owner);
	tcase_add_test(tc, view_lookup_fails_after_owner_stops);
	tcase_add_test(tc, free_without_stop_forces_and_joins);
	tcase_add_test(tc, free_names_a_task_that_holds_it);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
