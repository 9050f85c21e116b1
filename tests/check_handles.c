/* SPDX-License-Identifier: MIT */
/*
 * check_handles.c - a second free of a handle is caught, logged and
 * ignored; the first free finishes the job (src/handle.h).
 *
 * Only the sound case is tested: the second free comes while the first
 * is still inside the free function, blocked on work that cannot finish,
 * so the handle's memory is alive when the second free reads it. A free
 * after the first has returned reads freed memory, which is undefined
 * (AddressSanitizer reports it); no test does that.
 */
#include "testutil.h"

#include <aggring.h>
#include <aggring/io.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOUR_NS (3600ull * 1000000000ull)

/* Reports of a double free by the function named in `arg`. */
static atomic_int double_frees_reported;

static void count_double_frees(agr_log_level level, const char *msg,
			       void *arg)
{
	const char *fn = arg;

	if (level == AGR_LOG_ERROR && strstr(msg, fn) &&
	    strstr(msg, "already freed (double free); ignored"))
		atomic_fetch_add(&double_frees_reported, 1);
}

static struct tu_latch io_started, inside_free, never;

/* A timer's callback: -ECANCELED means a force stop is under way. */
static void timer_cb(int res, void *arg)
{
	if (res != -ECANCELED)
		return;
	tu_latch_count_down(&inside_free);
	/* Keep the first free waiting: the handle must stay alive. */
	tu_latch_wait(&never, HOUR_NS); /* until the test lets it go */
	if (arg) /* the dispatcher's exchange, which waits for us */
		agr_exchange_done(arg, res);
}

static int start_timer(agr_exchange *ex, void *arg)
{
	(void)arg;
	TU_EXPECT(agr_io_timeout(agr_exchange_worker(ex), HOUR_NS, timer_cb,
				 ex) == 0);
	tu_latch_count_down(&io_started);
	return AGR_PENDING;
}

static void on_complete(agr_message *m, int status, void *arg)
{
	(void)m;
	(void)status;
	(void)arg;
}

static void *free_dispatcher(void *d)
{
	agr_dispatcher_free(d);
	return NULL;
}

static void *free_supplier(void *sup)
{
	agr_supplier_free(sup);
	return NULL;
}

static void setup(void)
{
	tu_latch_init(&io_started, 1);
	tu_latch_init(&inside_free, 1);
	tu_latch_init(&never, 1);
	atomic_store(&double_frees_reported, 0);
}

START_TEST(dispatcher_freed_twice_is_ignored)
{
	agr_dispatcher_options o = { 0 };
	agr_message m = { .aggregate_id = "a" };
	agr_supplier *sup;
	agr_dispatcher *d;
	pthread_t first;

	agr_set_log_hook(count_double_frees, "agr_dispatcher_free");
	ck_assert_int_eq(agr_supplier_new("handles", 1, &sup), 0);
	o.name = "twice";
	o.named_aggregate.context_name = "C";
	o.named_aggregate.aggregate_name = "A";
	o.supplier = sup;
	o.on_complete = on_complete;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, NULL, start_timer, NULL),
			 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	ck_assert_int_eq(agr_dispatcher_send(d, &m), 0);
	ck_assert(tu_latch_wait(&io_started, TU_LONG_NS));

	/* The first free force-stops (cancelling the timer) and waits. */
	ck_assert_int_eq(pthread_create(&first, NULL, free_dispatcher, d), 0);
	ck_assert(tu_latch_wait(&inside_free, TU_LONG_NS));
	agr_dispatcher_free(d);
	ck_assert_int_eq(atomic_load(&double_frees_reported), 1);

	/* Let the first free go on: it finishes alone. */
	tu_latch_count_down(&never);
	ck_assert_int_eq(pthread_join(first, NULL), 0);
	agr_supplier_free(sup);
	ck_assert_int_eq(atomic_load(&double_frees_reported), 1);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

static void block_on_timer(void *arg)
{
	(void)arg;
	TU_EXPECT(agr_io_timeout(agr_worker_current(), HOUR_NS, timer_cb,
				 NULL) == 0);
	tu_latch_count_down(&io_started);
}

START_TEST(supplier_freed_twice_is_ignored)
{
	agr_named_aggregate named = { "C", "A" };
	agr_scheduler *s;
	agr_supplier *sup;
	pthread_t first;

	agr_set_log_hook(count_double_frees, "agr_supplier_free");
	ck_assert_int_eq(agr_supplier_new("handles", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &named, &s), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_on_timer, NULL),
			 0);
	ck_assert(tu_latch_wait(&io_started, TU_LONG_NS));

	/* The first free force-stops (cancelling the timer) and joins. */
	ck_assert_int_eq(pthread_create(&first, NULL, free_supplier, sup), 0);
	ck_assert(tu_latch_wait(&inside_free, TU_LONG_NS));
	agr_supplier_free(sup);
	ck_assert_int_eq(atomic_load(&double_frees_reported), 1);

	tu_latch_count_down(&never);
	ck_assert_int_eq(pthread_join(first, NULL), 0);
	ck_assert_int_eq(atomic_load(&double_frees_reported), 1);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

/* A single free of each kind is quiet and NULL is a no-op. */
static int errors_logged;

static void count_errors(agr_log_level level, const char *msg, void *arg)
{
	(void)msg;
	(void)arg;
	if (level == AGR_LOG_ERROR)
		errors_logged++;
}

START_TEST(single_free_is_quiet)
{
	agr_dispatcher_options o = { 0 };
	agr_supplier *sup, *view;
	agr_dispatcher *d;

	agr_set_log_hook(count_errors, NULL);
	ck_assert_int_eq(agr_supplier_new("handles", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_borrow(sup, &view), 0);
	o.name = "once";
	o.named_aggregate.context_name = "C";
	o.named_aggregate.aggregate_name = "A";
	o.supplier = view;
	o.owns_supplier = true; /* frees the view */
	o.on_complete = on_complete;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	agr_dispatcher_free(d);
	agr_dispatcher_free(NULL);
	agr_supplier_free(sup);
	agr_supplier_free(NULL);
	ck_assert_int_eq(errors_logged, 0);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handles");
	TCase *tc = tcase_create("core");

	tu_require_io_uring();
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, single_free_is_quiet);
	tcase_add_test(tc, dispatcher_freed_twice_is_ignored);
	tcase_add_test(tc, supplier_freed_twice_is_ignored);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
