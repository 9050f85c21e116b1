/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_input.c - check_dispatcher's bad input (options, sends,
 * registrations, a function's garbage return, a second done), custom
 * group keys, the watchdog naming stuck messages, and the parallelism's
 * default and environment.
 */
#include <dirent.h>
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
#include <liburing.h>

#include "dispatcher_test.h"
#include "testutil.h"

/* ---- bad input ---- */

START_TEST(new_rejects_bad_options)
{
	static const agr_named_aggregate no_context = { NULL, "Order" };
	static const agr_named_aggregate empty_aggregate = { "sales", "" };
	agr_supplier *sup = new_supplier(1);
	agr_dispatcher_options good = options(sup, false, 8, NULL), o;
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(NULL, &d), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_new(&good, NULL), -EINVAL);
	o = good;
	o.name = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.name = "";
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.supplier = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.on_complete = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.parallelism = -1;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.named_aggregate = no_context;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.named_aggregate = empty_aggregate;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(agr_supplier_size(sup), 0); /* nothing was made */

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_dispatcher_new(&good, &d), -ESHUTDOWN);
	ck_assert_ptr_null(d);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(send_and_register_reject_bad_input)
{
	struct tmsg ok, no_id;
	agr_message *batch[2];
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	size_t admitted = 99;

	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	ck_assert_int_eq(agr_dispatcher_register(d, "A", NULL, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_register(NULL, "A", handle, &j),
			 -EINVAL);
	add_fn(d, NULL, handle, &j);
	start(d);
	ck_assert_int_eq(agr_dispatcher_register(d, "A", handle, &j), -EBUSY);
	ck_assert_int_eq(agr_dispatcher_register(d, NULL, handle, &j), -EBUSY);

	tmsg_init(&ok, "order-1", 1);
	tmsg_init(&no_id, NULL, 2);
	ck_assert_int_eq(agr_dispatcher_send(NULL, &ok.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &no_id.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_group_of(d, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &no_id.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send_batch(d, NULL, 1, &admitted),
			 -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 0, &admitted), 0);
	ck_assert_uint_eq(admitted, 0);
	batch[0] = &ok.m;
	batch[1] = NULL;
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 2, &admitted),
			 -EINVAL);
	ck_assert_uint_eq(admitted, 1); /* stops at the bad one */
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(ok.status, 0);
	ck_assert_uint_eq(stats_of(d).refused, 0);
	ck_assert_int_eq(agr_dispatcher_stats_get(d, NULL), -EINVAL);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&no_id.completions), 0);
	journal_destroy(&j);
}
END_TEST

/* Routes by the test message's seq, in range or not. */
static int key_is_seq(const agr_message *msg, int parallelism, void *arg)
{
	(void)parallelism;
	atomic_fetch_add((atomic_int *)arg, 1);
	return ((const struct tmsg *)msg->user)->seq;
}

START_TEST(custom_group_key)
{
	struct tmsg in_range, too_big, negative;
	atomic_int calls = 0;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	o = owned_options(2, 8, &j);
	o.group_key = key_is_seq;
	o.group_key_arg = &calls;
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	start(d);
	tmsg_init(&in_range, "order-1", 3);
	tmsg_init(&too_big, "order-1", 8);
	tmsg_init(&negative, "order-1", -1);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &in_range.m), 3);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &too_big.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &too_big.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &negative.m), -EINVAL);
	send_ok(d, &in_range);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(in_range.group, 3);
	ck_assert_int_eq(in_range.worker, 1);
	ck_assert_int_gt(atomic_load(&calls), 0);
	ck_assert_int_gt(atomic_load(&logged[AGR_LOG_ERROR]), 0);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&too_big.completions), 0);
	ck_assert_int_eq(atomic_load(&negative.completions), 0);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

static int return_garbage(agr_exchange *ex, void *arg)
{
	journal_add(arg, EV_START + current_tmsg(ex)->seq);
	return 42;
}

START_TEST(garbage_return_is_einval)
{
	struct journal j;
	struct tmsg t;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	d = started_dispatcher(1, 8, &j, NULL, return_garbage, &j);
	tmsg_init(&t, "order-1", 1);
	send_ok(d, &t);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(t.status, -EINVAL);
	ck_assert_uint_eq(stop_and_get_stats(d).failed, 1);
	ck_assert_int_gt(atomic_load(&logged[AGR_LOG_ERROR]), 0);
	agr_dispatcher_free(d);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

/* Finishes itself, twice, before returning AGR_PENDING once. */
static int done_twice(agr_exchange *ex, void *arg)
{
	journal_add(arg, EV_START + current_tmsg(ex)->seq);
	agr_exchange_done(ex, 0);
	agr_exchange_done(ex, -EIO); /* nothing pending: ignored */
	return AGR_PENDING;
}

/* ---- the watchdog names stuck messages ---- */

struct stuck {
	pthread_mutex_t lock;
	agr_exchange *ex;
	char line[512];
	struct tu_tally reports, started;
};

static struct stuck *stuck_now; /* the log hook's view */

static void stuck_log(agr_log_level level, const char *msg, void *arg)
{
	struct stuck *st = stuck_now;

	(void)arg;
	if (level != AGR_LOG_WARN || !st || !strstr(msg, "stuck message"))
		return;
	pthread_mutex_lock(&st->lock);
	snprintf(st->line, sizeof(st->line), "%s", msg);
	pthread_mutex_unlock(&st->lock);
	tu_tally_add(&st->reports);
}

static int pend_forever(agr_exchange *ex, void *arg)
{
	struct stuck *st = arg;

	pthread_mutex_lock(&st->lock);
	st->ex = ex;
	pthread_mutex_unlock(&st->lock);
	tu_tally_add(&st->started);
	return AGR_PENDING;
}

static void finish_stuck(struct stuck *st)
{
	agr_exchange *ex;

	pthread_mutex_lock(&st->lock);
	ex = st->ex;
	st->ex = NULL;
	pthread_mutex_unlock(&st->lock);
	agr_exchange_done(ex, 0);
}

/*
 * A dispatcher whose function for `type` pends until finish_stuck(),
 * started with the watchdog looking every 20 ms and its reports kept.
 */
static agr_dispatcher *watched_start(struct stuck *st, struct journal *j,
				     const char *type)
{
	agr_dispatcher *d;

	journal_init(j);
	tu_tally_init(&st->reports);
	tu_tally_init(&st->started);
	stuck_now = st;
	agr_set_log_hook(stuck_log, NULL);
	d = started_dispatcher(1, 4, j, type, pend_forever, st);
	ck_assert_int_eq(agr_watchdog_start(20 * MS), 0);
	return d;
}

static void watched_end(struct stuck *st, struct journal *j,
			agr_dispatcher *d)
{
	stop_and_free(d);
	agr_set_log_hook(NULL, NULL);
	stuck_now = NULL;
	tu_tally_destroy(&st->reports);
	tu_tally_destroy(&st->started);
	journal_destroy(j);
}

/*
 * A function that returned AGR_PENDING and never finishes is named by
 * the watchdog (dispatcher, group, worker, type, age), once per
 * message, and counted in the stats and the exposition.
 */
START_TEST(watchdog_names_a_stuck_message)
{
	struct stuck st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct journal j;
	struct tmsg a, b;
	agr_dispatcher *d;
	char page[16384], want[96];

	d = watched_start(&st, &j, "Pay");
	tmsg_init(&a, "order-1", 1);
	a.m.type = "Pay";
	send_ok(d, &a);
	ck_assert(tu_tally_wait(&st.reports, 1, TU_LONG_NS));
	snprintf(want, sizeof(want), "orders group %d (worker 0)",
		 agr_dispatcher_group_of(d, &a.m));
	pthread_mutex_lock(&st.lock);
	ck_assert_msg(strstr(st.line, want), "report: %s", st.line);
	ck_assert(strstr(st.line, "type \"Pay\""));
	ck_assert(strstr(st.line, " ms: a function returned AGR_PENDING"));
	pthread_mutex_unlock(&st.lock);
	finish_stuck(&st);
	ck_assert(journal_wait(&j, 1));

	/* A second stuck message is a second report, not more of the first. */
	tmsg_init(&b, "order-1", 2);
	b.m.type = "Pay";
	send_ok(d, &b);
	ck_assert(tu_tally_wait(&st.reports, 2, TU_LONG_NS));
	finish_stuck(&st);
	ck_assert(journal_wait(&j, 2));
	ck_assert_uint_eq(stats_of(d).stuck, 2);
	ck_assert_int_gt(agr_metrics_write_prometheus(
				 (agr_dispatcher *const[]){ d }, 1,
				 page, sizeof(page)), 0);
	ck_assert(strstr(page, "\naggring_stuck_messages_total{context=\"sales"
			       "\",aggregate=\"Order\",dispatcher=\"orders\"} "
			       "2\n"));
	agr_watchdog_stop();
	ck_assert_int_eq(tu_tally_value(&st.reports), 2);
	watched_end(&st, &j, d);
}
END_TEST

/* A message without a type is reported as such, not as type "". */
START_TEST(watchdog_names_a_message_without_a_type)
{
	struct stuck st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct journal j;
	struct tmsg a;
	agr_dispatcher *d;

	d = watched_start(&st, &j, NULL);
	tmsg_init(&a, "order-1", 1); /* a.m.type stays NULL */
	send_ok(d, &a);
	ck_assert(tu_tally_wait(&st.reports, 1, TU_LONG_NS));
	pthread_mutex_lock(&st.lock);
	ck_assert_msg(strstr(st.line, "message of no type (NULL)"),
		      "report: %s", st.line);
	pthread_mutex_unlock(&st.lock);
	agr_watchdog_stop();
	finish_stuck(&st);
	ck_assert(journal_wait(&j, 1));
	watched_end(&st, &j, d);
}
END_TEST

START_TEST(second_done_is_ignored)
{
	struct tmsg t1, t2;
	struct journal j;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	d = started_dispatcher(1, 8, &j, NULL, done_twice, &j);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(journal_wait(&j, 2));
	stop_and_free(d); /* every message done, nothing left to complete */
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ck_assert_int_eq(atomic_load(&t2.completions), 1);
	ck_assert_int_eq(t1.status, 0);
	ck_assert_int_eq(t2.status, 0);
	ck_assert_int_eq(tu_tally_value(&j.completed), 2);
	ck_assert_int_ge(atomic_load(&logged[AGR_LOG_WARN]), 2);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

/* Creates a dispatcher with `parallelism` and returns its group count. */
static int resolved_parallelism(int parallelism)
{
	agr_dispatcher_options o = owned_options(1, parallelism, NULL);
	agr_dispatcher *d = NULL;
	int ret = agr_dispatcher_new(&o, &d), groups;

	if (ret) {
		agr_supplier_free(o.supplier);
		return ret;
	}
	groups = agr_dispatcher_parallelism(d);
	agr_dispatcher_free(d);
	return groups;
}

START_TEST(default_parallelism_is_64_per_cpu)
{
	unsetenv("AGR_PARALLELISM");
	ck_assert_int_eq(resolved_parallelism(0),
			 64 * (int)sysconf(_SC_NPROCESSORS_ONLN));
	ck_assert_int_eq(resolved_parallelism(5), 5);
}
END_TEST

START_TEST(parallelism_env_overrides_default)
{
	agr_set_log_hook(count_log, NULL);
	setenv("AGR_PARALLELISM", "7", 1);
	ck_assert_int_eq(resolved_parallelism(0), 7);
	ck_assert_int_eq(resolved_parallelism(5), 5); /* explicit wins */
	setenv("AGR_PARALLELISM", "zero", 1);
	ck_assert_int_eq(resolved_parallelism(0), -EINVAL);
	setenv("AGR_PARALLELISM", "-3", 1);
	ck_assert_int_eq(resolved_parallelism(0), -EINVAL);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

void dispatcher_input_tests(TCase *core)
{
	tcase_add_test(core, new_rejects_bad_options);
	tcase_add_test(core, send_and_register_reject_bad_input);
	tcase_add_test(core, custom_group_key);
	tcase_add_test(core, garbage_return_is_einval);
	tcase_add_test(core, second_done_is_ignored);
	tcase_add_test(core, watchdog_names_a_stuck_message);
	tcase_add_test(core, watchdog_names_a_message_without_a_type);
	tcase_add_test(core, default_parallelism_is_64_per_cpu);
	tcase_add_test(core, parallelism_env_overrides_default);
}
