/* SPDX-License-Identifier: MIT */
/*
 * worker_settings.c - check_worker's settings from the environment:
 * AGR_IDLE_SPIN_US, and AGR_WORKER_CPUS (lists, ranges, bad lists).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>

#include "worker_test.h"
#include "testutil.h"

/* ---- AGR_IDLE_SPIN_US ---- */

static atomic_int spin_errors;

static void count_spin_errors(agr_log_level level, const char *msg,
			      void *arg)
{
	(void)arg;
	if (level == AGR_LOG_ERROR && strstr(msg, "AGR_IDLE_SPIN_US=\"abc\""))
		atomic_fetch_add(&spin_errors, 1);
}

/*
 * Tasks sent one at a time from this thread, each after the last ran:
 * with no spin every one finds its worker asleep and rings it; with a
 * spin most find it watching. Either way each runs, once.
 */
static void tasks_run_with_spin(const char *setting)
{
	agr_supplier *sup;
	agr_scheduler *s;
	struct probe p;
	int i;

	ck_assert_int_eq(setenv("AGR_IDLE_SPIN_US", setting, 1), 0);
	sup = new_supplier(2);
	s = lookup(sup, "Spin");
	for (i = 0; i < 200; i++)
		probe(s, (unsigned)i, &p);
	agr_supplier_free(sup);
	unsetenv("AGR_IDLE_SPIN_US");
}

START_TEST(idle_spin_is_set_by_the_environment)
{
	atomic_store(&spin_errors, 0);
	agr_set_log_hook(count_spin_errors, NULL);
	tasks_run_with_spin("0");
	tasks_run_with_spin("1000");
	ck_assert_int_eq(atomic_load(&spin_errors), 0);
	/* A bad value is reported once per worker; the default applies. */
	tasks_run_with_spin("abc");
	ck_assert_int_eq(atomic_load(&spin_errors), 2);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

/* ---- AGR_WORKER_CPUS ---- */

struct placement {
	int cpus;    /* in the worker's affinity mask */
	int only;    /* the one CPU in it, if cpus == 1 */
	int running; /* sched_getcpu() */
	struct tu_latch done;
};

static void placement_task(void *arg)
{
	struct placement *p = arg;
	cpu_set_t set;
	int c;

	CPU_ZERO(&set);
	TU_EXPECT(pthread_getaffinity_np(pthread_self(), sizeof(set), &set) ==
		  0);
	p->cpus = CPU_COUNT(&set);
	p->only = -1;
	for (c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			p->only = c;
	p->running = sched_getcpu();
	tu_latch_count_down(&p->done);
}

static void place(agr_scheduler *s, unsigned worker, struct placement *p)
{
	memset(p, 0, sizeof(*p));
	tu_latch_init(&p->done, 1);
	run_on(s, worker, placement_task, p);
	ck_assert(tu_latch_wait(&p->done, TU_LONG_NS));
	tu_latch_destroy(&p->done);
	tu_assert_no_worker_failure();
}

/* The first two CPUs this process may run on (the same one twice if one). */
static void two_allowed_cpus(int *a, int *b)
{
	cpu_set_t set;
	int c;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	*a = *b = -1;
	for (c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		if (*a < 0)
			*a = c;
		else if (*b < 0)
			*b = c;
	}
	ck_assert_int_ge(*a, 0);
	if (*b < 0)
		*b = *a;
}

static atomic_int pin_errors;

static void count_pin_errors(agr_log_level level, const char *msg,
			       void *arg)
{
	(void)arg;
	if (level == AGR_LOG_ERROR && strstr(msg, "not pinned"))
		atomic_fetch_add(&pin_errors, 1);
}

/* Worker i runs on the i-th CPU of the list, modulo its length. */
START_TEST(workers_run_on_the_cpus_listed)
{
	struct placement p;
	agr_supplier *sup;
	agr_scheduler *s;
	char list[64];
	int a, b, i;

	two_allowed_cpus(&a, &b);
	snprintf(list, sizeof(list), "%d,%d", b, a);
	ck_assert_int_eq(setenv("AGR_WORKER_CPUS", list, 1), 0);
	sup = new_supplier(3);
	s = lookup(sup, "Pinned");
	for (i = 0; i < 3; i++) {
		int want = i % 2 ? a : b;

		place(s, (unsigned)i, &p);
		ck_assert_int_eq(p.cpus, 1);
		ck_assert_int_eq(p.only, want);
		ck_assert_int_eq(p.running, want);
	}
	agr_supplier_free(sup);
	unsetenv("AGR_WORKER_CPUS");
}
END_TEST

/* A range is expanded; worker 0 takes its first CPU. */
START_TEST(a_cpu_range_is_expanded)
{
	struct placement p;
	agr_supplier *sup;
	agr_scheduler *s;
	char list[64];
	int a, b;

	two_allowed_cpus(&a, &b);
	snprintf(list, sizeof(list), "%d-%d", a, b);
	ck_assert_int_eq(setenv("AGR_WORKER_CPUS", list, 1), 0);
	sup = new_supplier(2);
	s = lookup(sup, "Range");
	place(s, 0, &p);
	ck_assert_int_eq(p.only, a);
	place(s, 1, &p);
	ck_assert_int_eq(p.only, a + 1 <= b ? a + 1 : a);
	agr_supplier_free(sup);
	unsetenv("AGR_WORKER_CPUS");
}
END_TEST

/* Bad lists and CPUs that do not exist: an error per worker, no pin. */
START_TEST(a_bad_cpu_list_pins_nothing)
{
	static const char *const bad[] = { "x", "1,", "-1", "3-1", "1-",
					   "0;1", "100000", "1023" };
	cpu_set_t mine;
	struct placement p;
	agr_supplier *sup;
	agr_scheduler *s;
	size_t k;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
	agr_set_log_hook(count_pin_errors, NULL);
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		atomic_store(&pin_errors, 0);
		ck_assert_int_eq(setenv("AGR_WORKER_CPUS", bad[k], 1), 0);
		sup = new_supplier(2);
		s = lookup(sup, "Unpinned");
		place(s, 0, &p);
		ck_assert_int_eq(p.cpus, CPU_COUNT(&mine));
		place(s, 1, &p);
		ck_assert_int_eq(p.cpus, CPU_COUNT(&mine));
		agr_supplier_free(sup);
		ck_assert_msg(atomic_load(&pin_errors) == 2,
			      "AGR_WORKER_CPUS=\"%s\": %d errors", bad[k],
			      atomic_load(&pin_errors));
	}
	unsetenv("AGR_WORKER_CPUS");
	agr_set_log_hook(NULL, NULL);
}
END_TEST

void worker_settings_tests(TCase *tc)
{
	tcase_add_test(tc, idle_spin_is_set_by_the_environment);
	tcase_add_test(tc, workers_run_on_the_cpus_listed);
	tcase_add_test(tc, a_cpu_range_is_expanded);
	tcase_add_test(tc, a_bad_cpu_list_pins_nothing);
}
