/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_functions.c - check_dispatcher's functions per message:
 * several that match run together, none is a skip, a held group takes a
 * send without an activation, and idle workers burn no CPU after a
 * burst.
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

/* ---- several functions for one message ---- */

enum { FN_A1 = 1, FN_A2 = 2, FN_ANY = 3 };

#define EV_FN_OF(fn, seq) (EV_FN + 100 * (fn) + (seq))

/*
 * Held groups: X to group A starts A; A's function sends Y to group B
 * (B idle: an activation); B's function sends Z back to A. A was
 * drained and held by then, so Z is pushed and picked up without a
 * second activation of A: the worker runs two items, not three.
 */
struct relay {
	struct journal j;
	struct tmsg x, y, z;
};

static int relay_fn(agr_exchange *ex, void *arg)
{
	struct relay *r = arg;
	struct tmsg *t = current_tmsg(ex);
	agr_dispatcher *d = agr_exchange_dispatcher(ex);

	journal_add(&r->j, EV_START + t->seq);
	if (t == &r->x)
		ck_assert_int_eq(agr_dispatcher_send(d, &r->y.m), 0);
	else if (t == &r->y)
		ck_assert_int_eq(agr_dispatcher_send(d, &r->z.m), 0);
	return 0;
}

static uint64_t worker_items(agr_dispatcher *d)
{
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(
				 agr_dispatcher_scheduler(d), 0, &m), 0);
	return m.items;
}

START_TEST(held_group_takes_a_send_without_an_activation)
{
	char id_a[32], id_b[32];
	struct relay r;
	agr_dispatcher *d;
	uint64_t before;
	int ga;

	journal_init(&r.j);
	ga = pick_id(id_a, sizeof(id_a), "a", 8, 1, 0, -1);
	pick_id(id_b, sizeof(id_b), "b", 8, 1, 0, ga);
	tmsg_init(&r.x, id_a, 1);
	tmsg_init(&r.y, id_b, 2);
	tmsg_init(&r.z, id_a, 3);
	d = started_dispatcher(1, 8, &r.j, NULL, relay_fn, &r);
	before = worker_items(d);
	send_ok(d, &r.x);
	ck_assert(journal_wait(&r.j, 3));
	ASSERT_ORDER(&r.j, EV_START + 1, EV_START + 2, EV_START + 3);
	ck_assert_uint_eq(worker_items(d) - before, 2);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&r.z.completions), 1);
	journal_destroy(&r.j);
}
END_TEST

/*
 * CPU time (clock ticks) of this process's threads whose name starts
 * with `prefix`: the workers of a supplier of that name.
 */
static long worker_ticks(const char *prefix)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], buf[1024];
	unsigned long utime, stime;
	long ticks = 0;
	const char *p;
	FILE *f;
	size_t n;

	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* it just ended */
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		p = strchr(buf, '(');
		if (!p || strncmp(p + 1, prefix, strlen(prefix)) != 0)
			continue;
		p = strrchr(buf, ')');
		/* After the name: state and 10 more fields, then the times. */
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &utime, &stime) == 2)
			ticks += (long)(utime + stime);
	}
	closedir(dir);
	return ticks;
}

/*
 * Held groups must not keep an idle worker awake: once the messages
 * are done, the workers let their groups go and sleep in the kernel.
 * Two seconds of idle time cost them at most a tick each (one may
 * land on the last microseconds of a spin), not the 200 a spinning
 * worker would take.
 */
static int do_nothing(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void tally_completion(agr_message *msg, int status, void *arg)
{
	(void)msg;
	(void)status;
	tu_tally_add(arg);
}

START_TEST(idle_workers_burn_no_cpu_after_a_burst)
{
	const struct timespec window = { 2, 0 };
	agr_message *msgs = calloc(1000, sizeof(*msgs));
	char (*ids)[16] = calloc(1000, 16);
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_supplier *sup = NULL;
	agr_dispatcher *d;
	long before;
	int i;

	ck_assert_ptr_nonnull(msgs);
	ck_assert_ptr_nonnull(ids);
	tu_tally_init(&done);
	ck_assert_int_eq(agr_supplier_new("idlecpu", 2, &sup), 0);
	o = options(sup, true, 64, &done);
	o.on_complete = tally_completion;
	d = new_dispatcher(&o);
	add_fn(d, NULL, do_nothing, NULL);
	start(d);
	for (i = 0; i < 1000; i++) {
		snprintf(ids[i], sizeof(ids[i]), "acct-%d", i % 97);
		msgs[i].aggregate_id = ids[i];
		ck_assert_int_eq(agr_dispatcher_send(d, &msgs[i]), 0);
	}
	ck_assert(tu_tally_wait(&done, 1000, TU_LONG_NS));
	before = worker_ticks("idlecpu-");
	nanosleep(&window, NULL); /* the window measured, not a wait */
	ck_assert_int_le(worker_ticks("idlecpu-") - before, 2);
	stop_and_free(d);
	tu_tally_destroy(&done);
	free(ids);
	free(msgs);
}
END_TEST

struct fanout {
	struct journal j;
	struct tu_latch started; /* the three functions of message 1 */
	struct tu_latch finished;
	agr_exchange *ex;
	long after_first, after_second;
};

static void fan_note(agr_exchange *ex, struct fanout *f, int fn)
{
	journal_add(&f->j, EV_FN_OF(fn, current_tmsg(ex)->seq));
	tu_latch_count_down(&f->started);
}

static int fan_a1(agr_exchange *ex, void *arg)
{
	struct fanout *f = arg;

	fan_note(ex, f, FN_A1);
	f->ex = ex;
	return AGR_PENDING;
}

static int fan_a2(agr_exchange *ex, void *arg)
{
	struct fanout *f = arg;

	fan_note(ex, f, FN_A2);
	f->ex = ex;
	return AGR_PENDING;
}

static int fan_any(agr_exchange *ex, void *arg)
{
	fan_note(ex, arg, FN_ANY);
	return 0;
}

/* On the group's worker: finishes both pending functions, with errors. */
static void finish_both(void *arg)
{
	struct fanout *f = arg;
	agr_exchange *ex = f->ex;

	agr_exchange_done(ex, -EIO);
	f->after_first = tu_tally_value(&f->j.completed);
	agr_exchange_done(ex, -ENOENT); /* a later error is not the status */
	f->after_second = tu_tally_value(&f->j.completed);
	tu_latch_count_down(&f->finished);
}

START_TEST(matching_functions_run_together)
{
	struct fanout f = { .ex = NULL };
	struct tmsg a, b, n;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	int fn;

	journal_init(&f.j);
	tu_latch_init(&f.started, 3);
	tu_latch_init(&f.finished, 1);
	o = owned_options(1, 8, &f.j);
	d = new_dispatcher(&o);
	add_fn(d, "A", fan_a1, &f);
	add_fn(d, "A", fan_a2, &f);
	add_fn(d, NULL, fan_any, &f);
	start(d);
	tmsg_init(&a, "order-1", 1);
	a.m.type = "A";
	send_ok(d, &a);
	ck_assert(tu_latch_wait(&f.started, TU_LONG_NS));
	/* All three started; the message waits for the two pending ones. */
	ck_assert_int_eq(tu_tally_value(&f.j.completed), 0);
	ck_assert_int_eq(agr_scheduler_schedule(agr_dispatcher_scheduler(d),
						0, finish_both, &f), 0);
	ck_assert(tu_latch_wait(&f.finished, TU_LONG_NS));
	ck_assert_int_eq(f.after_first, 0);
	ck_assert_int_eq(f.after_second, 1);
	ck_assert_int_eq(a.status, -EIO);
	for (fn = FN_A1; fn <= FN_ANY; fn++)
		ASSERT_ORDER(&f.j, EV_FN_OF(fn, 1), EV_DONE + 1);

	tmsg_init(&b, "order-1", 2);
	b.m.type = "B";
	tmsg_init(&n, "order-1", 3); /* no type */
	send_ok(d, &b);
	send_ok(d, &n);
	ck_assert(journal_wait(&f.j, 3));
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(n.status, 0);
	ASSERT_ORDER(&f.j, EV_FN_OF(FN_ANY, 2), EV_DONE + 2,
		     EV_FN_OF(FN_ANY, 3), EV_DONE + 3);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A1, 2)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A2, 2)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A1, 3)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A2, 3)), -1);
	ck_assert_int_eq(atomic_load(&a.completions), 1);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.handled, 2);
	agr_dispatcher_free(d);
	tu_latch_destroy(&f.finished);
	tu_latch_destroy(&f.started);
	journal_destroy(&f.j);
}
END_TEST

START_TEST(unmatched_message_is_skipped)
{
	struct journal j;
	struct tmsg b;
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	journal_init(&j);
	d = started_dispatcher(1, 8, &j, "A", handle, &j);
	tmsg_init(&b, "order-1", 1);
	b.m.type = "B";
	send_ok(d, &b);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(journal_pos(&j, EV_START + 1), -1);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.skipped, 1);
	ck_assert_uint_eq(st.handled, 0);
	agr_dispatcher_free(d);
	journal_destroy(&j);
}
END_TEST

void dispatcher_function_tests(TCase *core)
{
	tcase_add_test(core, matching_functions_run_together);
	tcase_add_test(core, held_group_takes_a_send_without_an_activation);
	tcase_add_test(core, idle_workers_burn_no_cpu_after_a_burst);
	tcase_add_test(core, unmatched_message_is_skipped);
}
