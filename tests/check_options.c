/* SPDX-License-Identifier: MIT */
/*
 * check_options.c - agr_supplier_new_opts(): every option is honoured,
 * every bad value is refused with -EINVAL and a log line that names it,
 * and the worker init and exit hooks run on each worker's thread.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "testutil.h"

static const agr_named_aggregate order = { "sales", "Order" };

/* ---- log capture ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];
static atomic_int errors;

static void capture(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != AGR_LOG_ERROR)
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(last_error, sizeof(last_error), "%s", msg);
	pthread_mutex_unlock(&log_lock);
	atomic_fetch_add(&errors, 1);
}

static bool logged(const char *needle)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(last_error, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

static void capture_logs(void)
{
	pthread_mutex_lock(&log_lock);
	last_error[0] = '\0';
	pthread_mutex_unlock(&log_lock);
	agr_set_log_hook(capture, NULL);
}

/* ---- bad values ---- */

static void expect_refused(const agr_supplier_options *o, const char *field)
{
	agr_supplier *sup = NULL;

	capture_logs();
	ck_assert_int_eq(agr_supplier_new_opts("opts", o, &sup), -EINVAL);
	ck_assert_ptr_null(sup);
	ck_assert_msg(logged(field), "no log line names %s (last: %s)", field,
		      last_error);
	agr_set_log_hook(NULL, NULL);
}

START_TEST(bad_ring_values_are_refused_by_name)
{
	agr_supplier_options o;

	agr_supplier_options_init(&o);
	o.size = 0;
	expect_refused(&o, "options.size=0");

	agr_supplier_options_init(&o);
	o.sq_entries = 100;
	expect_refused(&o, "options.sq_entries=100 is not a power of two");
	o.sq_entries = 65536;
	expect_refused(&o, "options.sq_entries=65536");

	agr_supplier_options_init(&o);
	o.cq_entries = 3;
	expect_refused(&o, "options.cq_entries=3 is not a power of two");
	o.sq_entries = 512;
	o.cq_entries = 256;
	expect_refused(&o, "options.cq_entries=256 is smaller than sq_entries");

	agr_supplier_options_init(&o);
	o.ring_flags = 0x80;
	expect_refused(&o, "options.ring_flags=128 has a flag");
	agr_supplier_options_init(&o);
	o.sqpoll_cpu = 0;
	expect_refused(&o, "options.sqpoll_cpu=0 is set without AGR_RING_SQPOLL");
	agr_supplier_options_init(&o);
	o.sqpoll_idle_ms = 10;
	expect_refused(&o, "options.sqpoll_idle_ms=10 is set without");
}
END_TEST

START_TEST(bad_worker_values_are_refused_by_name)
{
	static const int cpus[] = { 0, 99999 };
	agr_supplier_options o;

	agr_supplier_options_init(&o);
	o.worker_cpus = cpus;
	expect_refused(&o, "options.nworker_cpus=0 does not match");
	o.nworker_cpus = 2;
	expect_refused(&o, "options.worker_cpus[i]=99999");

	agr_supplier_options_init(&o);
	o.idle_spin_us = 2000000;
	expect_refused(&o, "options.idle_spin_us=2000000");
	agr_supplier_options_init(&o);
	o.submit_batch = 257;
	expect_refused(&o, "options.submit_batch=257");
	agr_supplier_options_init(&o);
	o.wait_mode = (agr_wait_mode)7;
	expect_refused(&o, "options.wait_mode=7");
	agr_supplier_options_init(&o);
	o.parallelism = -1;
	expect_refused(&o, "options.parallelism=-1");
	agr_supplier_options_init(&o);
	o.reserved[3] = 1;
	expect_refused(&o, "options.reserved=3");

	capture_logs();
	ck_assert_int_eq(agr_supplier_new_opts("opts", NULL, &(agr_supplier *){
							     NULL }),
			 -EINVAL);
	ck_assert(logged("opts is NULL"));
	agr_set_log_hook(NULL, NULL);
}
END_TEST

/* A struct from a newer caller: known fields work, unknown set ones not. */
START_TEST(size_versions_the_struct)
{
	struct {
		agr_supplier_options o;
		uint64_t newer_field;
	} big;
	agr_supplier *sup = NULL;

	memset(&big, 0, sizeof(big));
	agr_supplier_options_init(&big.o);
	big.o.size = sizeof(big);
	ck_assert_int_eq(agr_supplier_new_opts("opts", &big.o, &sup), 0);
	agr_supplier_free(sup);
	big.newer_field = 1;
	expect_refused(&big.o, "holds fields this version");
}
END_TEST

/* ---- what the workers see ---- */

struct look {
	struct tu_latch done;
	unsigned sq_entries, cq_entries, setup_flags;
	int cpu;
};

static void look_at_ring(void *arg)
{
	struct look *l = arg;
	struct io_uring *ring = agr_worker_ring(agr_worker_current());

	l->sq_entries = ring->sq.ring_entries;
	l->cq_entries = ring->cq.ring_entries;
	l->setup_flags = ring->flags;
	l->cpu = sched_getcpu();
	tu_latch_count_down(&l->done);
}

static struct look look_on(agr_supplier_options *o)
{
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;
	struct look l;

	memset(&l, 0, sizeof(l));
	tu_latch_init(&l.done, 1);
	ck_assert_int_eq(agr_supplier_new_opts("opts", o, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, look_at_ring, &l), 0);
	ck_assert(tu_latch_wait(&l.done, TU_LONG_NS));
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&l.done);
	return l;
}

START_TEST(ring_entries_and_flags_are_honoured)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct look l;

	o.parallelism = 1;
	l = look_on(&o);
	ck_assert_uint_eq(l.sq_entries, 256);
	ck_assert_uint_eq(l.cq_entries, 4096);

	o.sq_entries = 64;
	o.cq_entries = 512;
	l = look_on(&o);
	ck_assert_uint_eq(l.sq_entries, 64);
	ck_assert_uint_eq(l.cq_entries, 512);

	o.ring_flags = AGR_RING_COOP_TASKRUN;
	l = look_on(&o);
	ck_assert(l.setup_flags & IORING_SETUP_COOP_TASKRUN);
	ck_assert(!(l.setup_flags & IORING_SETUP_DEFER_TASKRUN));
}
END_TEST

START_TEST(sqpoll_ring_runs_work)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct look l;

	o.parallelism = 1;
	o.ring_flags = AGR_RING_SQPOLL;
	o.sqpoll_idle_ms = 50;
	l = look_on(&o);
	ck_assert(l.setup_flags & IORING_SETUP_SQPOLL);
}
END_TEST

/* A CPU the machine does not have: the kernel's error, logged. */
START_TEST(sqpoll_refused_by_the_kernel_is_reported)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;
	int ret;

	o.parallelism = 1;
	o.ring_flags = AGR_RING_SQPOLL | AGR_RING_NO_FALLBACK;
	o.sqpoll_cpu = CPU_SETSIZE - 1;
	ck_assert_int_eq(agr_supplier_new_opts("opts", &o, &sup), 0);
	capture_logs();
	ret = agr_supplier_get_or_init(sup, &order, &s);
	ck_assert_int_lt(ret, 0);
	ck_assert_ptr_null(s);
	ck_assert_int_gt(atomic_load(&errors), 0);
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_msg(logged("io_uring_setup refused these settings with "
			     "EINVAL") && logged("sqpoll_cpu 1023"),
		      "logged: %s", last_error);
	agr_set_log_hook(NULL, NULL);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(worker_cpus_pin_workers)
{
	static const int cpu0[] = { 0 };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct look l;

	o.parallelism = 1;
	o.worker_cpus = cpu0;
	o.nworker_cpus = 1;
	l = look_on(&o);
	ck_assert_int_eq(l.cpu, 0);
}
END_TEST

/* ---- hooks ---- */

struct hooks {
	atomic_int inits, exits, on_own_thread;
	int fail_index; /* the worker whose init fails, or -1 */
	int fail_with;
};

static int init_hook(agr_worker *w, void *arg)
{
	struct hooks *h = arg;

	if (agr_worker_current() == w && agr_worker_ring(w))
		atomic_fetch_add(&h->on_own_thread, 1);
	atomic_fetch_add(&h->inits, 1);
	if (agr_worker_index(w) == h->fail_index)
		return h->fail_with;
	return 0;
}

static void exit_hook(agr_worker *w, void *arg)
{
	struct hooks *h = arg;

	if (agr_worker_current() == w)
		atomic_fetch_add(&h->on_own_thread, 1);
	atomic_fetch_add(&h->exits, 1);
}

/*
 * Threads of this process named after the supplier "opts" (its
 * workers): the runtime's own helpers (a sanitizer's, a timer's) may
 * come and go and are not counted.
 */
static int worker_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], comm[32];
	FILE *f;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* it just ended */
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "opts-", 5))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* A joined thread may linger in /proc for a moment after its exit. */
static bool no_worker_threads_within(uint64_t timeout_ns)
{
	uint64_t deadline = tu_now_ns() + timeout_ns;

	while (worker_threads() > 0) {
		if (tu_now_ns() > deadline)
			return false;
		sched_yield();
	}
	return true;
}

START_TEST(init_and_exit_hooks_run_on_each_worker)
{
	struct hooks h = { .fail_index = -1 };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;

	o.parallelism = 3;
	o.worker_init = init_hook;
	o.worker_exit = exit_hook;
	o.hook_arg = &h;
	ck_assert_int_eq(agr_supplier_new_opts("opts", &o, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	/* Creation returns once every worker's init hook has run. */
	ck_assert_int_eq(atomic_load(&h.inits), 3);
	ck_assert_int_eq(atomic_load(&h.exits), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(atomic_load(&h.exits), 3);
	ck_assert_int_eq(atomic_load(&h.on_own_thread), 6);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(failing_init_hook_fails_creation_and_leaves_nothing)
{
	struct hooks h = { .fail_index = 1, .fail_with = -ENOSPC };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;

	o.parallelism = 3;
	o.worker_init = init_hook;
	o.worker_exit = exit_hook;
	o.hook_arg = &h;
	ck_assert_int_eq(agr_supplier_new_opts("opts", &o, &sup), 0);
	capture_logs();
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), -ENOSPC);
	ck_assert_ptr_null(s);
	ck_assert(logged("worker init hook failed"));
	agr_set_log_hook(NULL, NULL);
	ck_assert_int_eq(atomic_load(&h.inits), 3);
	/* The two that succeeded are told; the one that failed is not. */
	ck_assert_int_eq(atomic_load(&h.exits), 2);
	ck_assert_int_eq(agr_supplier_size(sup), 0);
	ck_assert(no_worker_threads_within(TU_LONG_NS));
	agr_supplier_free(sup);
}
END_TEST

/* ---- the supplier's own log hook ---- */

static atomic_int own_hook_lines, global_hook_lines;

static void own_hook(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	ck_assert_ptr_eq(arg, &own_hook_lines);
	atomic_fetch_add(&own_hook_lines, 1);
}

static void global_hook(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
	atomic_fetch_add(&global_hook_lines, 1);
}

START_TEST(supplier_log_hook_gets_its_workers_lines)
{
	struct hooks h = { .fail_index = 0, .fail_with = -EIO };
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;

	o.parallelism = 1;
	o.worker_init = init_hook;
	o.hook_arg = &h;
	o.log_fn = own_hook;
	o.log_arg = &own_hook_lines;
	agr_set_log_hook(global_hook, NULL);
	ck_assert_int_eq(agr_supplier_new_opts("opts", &o, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), -EIO);
	/* "the worker init hook failed" is logged on the worker. */
	ck_assert_int_ge(atomic_load(&own_hook_lines), 1);
	ck_assert_int_eq(atomic_load(&global_hook_lines), 0);
	agr_set_log_hook(NULL, NULL);
	agr_supplier_free(sup);
}
END_TEST

/* ---- the supplier's own watchdog ---- */

struct watched {
	struct tu_tally reports;
	atomic_int blocked_lines;
	struct tu_latch ran;
};

static void watched_log(agr_log_level level, const char *msg, void *arg)
{
	struct watched *wd = arg;

	if (level == AGR_LOG_WARN && strstr(msg, "blocking detected")) {
		atomic_fetch_add(&wd->blocked_lines, 1);
		tu_tally_add(&wd->reports);
	}
}

/* The blocking handler the watchdog is there to find. */
static void block_a_while(void *arg)
{
	struct watched *wd = arg;

	usleep(300 * 1000);
	tu_latch_count_down(&wd->ran);
}

static agr_supplier *watched_supplier(struct watched *wd, uint64_t threshold)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup = NULL;

	tu_tally_init(&wd->reports);
	tu_latch_init(&wd->ran, 1);
	o.parallelism = 1;
	o.log_fn = watched_log;
	o.log_arg = wd;
	o.watchdog_threshold_ns = threshold;
	ck_assert_int_eq(agr_supplier_new_opts("watched", &o, &sup), 0);
	return sup;
}

/*
 * With the process-wide watchdog off, a supplier's own watchdog reports
 * its blocking worker to its own log hook; another supplier without one
 * is not watched at all.
 */
START_TEST(supplier_watchdog_reports_to_its_hook)
{
	struct watched a = { 0 }, b = { 0 };
	agr_supplier *sa = watched_supplier(&a, 20 * 1000000ull);
	agr_supplier *sb = watched_supplier(&b, 0);
	agr_scheduler *s;

	agr_watchdog_stop();
	ck_assert_int_eq(agr_supplier_get_or_init(sa, &order, &s), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_a_while, &a), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sb, &order, &s), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, block_a_while, &b), 0);
	ck_assert(tu_tally_wait(&a.reports, 1, TU_LONG_NS));
	ck_assert(tu_latch_wait(&a.ran, TU_LONG_NS));
	ck_assert(tu_latch_wait(&b.ran, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&a.blocked_lines), 1);
	ck_assert_int_eq(atomic_load(&b.blocked_lines), 0);
	agr_supplier_free(sa);
	agr_supplier_free(sb);
	tu_latch_destroy(&a.ran);
	tu_latch_destroy(&b.ran);
	tu_tally_destroy(&a.reports);
	tu_tally_destroy(&b.reports);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("options");
	TCase *c = tcase_create("core");

	tcase_set_timeout(c, 60);
	tcase_add_test(c, bad_ring_values_are_refused_by_name);
	tcase_add_test(c, bad_worker_values_are_refused_by_name);
	tcase_add_test(c, size_versions_the_struct);
	tcase_add_test(c, ring_entries_and_flags_are_honoured);
	tcase_add_test(c, sqpoll_ring_runs_work);
	tcase_add_test(c, sqpoll_refused_by_the_kernel_is_reported);
	tcase_add_test(c, worker_cpus_pin_workers);
	tcase_add_test(c, init_and_exit_hooks_run_on_each_worker);
	tcase_add_test(c, failing_init_hook_fails_creation_and_leaves_nothing);
	tcase_add_test(c, supplier_log_hook_gets_its_workers_lines);
	tcase_add_test(c, supplier_watchdog_reports_to_its_hook);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
