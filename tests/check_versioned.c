/* SPDX-License-Identifier: MIT */
/*
 * check_versioned.c - the options structs that open with `size` and
 * keep reserved words (agr_dispatcher_options, agr_composite_options,
 * agr_runtime_options, agr_component_ops) are read by one rule: size 0
 * reads the first version, an older caller's smaller struct is read
 * without a byte beyond its size, a size below any version, a newer
 * caller's unknown fields set, and non-zero reserved words are refused
 * with -EINVAL and a log line naming the struct. And the stats structs
 * that the library fills come back with their reserved words zero.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <aggring.h>

#include "testutil.h"

static const agr_named_aggregate order = { "sales", "Order" };

/* ---- log capture ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];

static void capture(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != AGR_LOG_ERROR)
		return;
	pthread_mutex_lock(&log_lock);
	snprintf(last_error, sizeof(last_error), "%s", msg);
	pthread_mutex_unlock(&log_lock);
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

/* ---- the structs, each with a valid filling and its call ---- */

static void complete(agr_message *msg, int status, void *arg)
{
	(void)msg;
	(void)status;
	(void)arg;
}

static agr_supplier *supplier(void)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("versioned", 1, &sup), 0);
	return sup;
}

static void fill_dispatcher(void *p)
{
	*(agr_dispatcher_options *)p = (agr_dispatcher_options){
		.size = sizeof(agr_dispatcher_options),
		.name = "versioned",
		.named_aggregate = order,
		.parallelism = 4,
		.on_complete = complete,
	};
}

/* Calls agr_dispatcher_new() on `p` (its supplier set here). */
static int new_dispatcher(void *p)
{
	agr_dispatcher_options *o = p;
	agr_dispatcher *d = NULL;
	int ret;

	o->supplier = supplier();
	ret = agr_dispatcher_new(o, &d);
	agr_dispatcher_free(d);
	agr_supplier_free(o->supplier);
	return ret;
}

static void fill_composite(void *p)
{
	agr_composite_options *o = p;

	*o = (agr_composite_options)AGR_COMPOSITE_OPTIONS_INIT;
	o->name = "versioned";
	o->named_aggregate = order;
	o->event_stream.on_complete = complete;
	o->state_event.on_complete = complete;
}

static int new_composite(void *p)
{
	agr_composite_options *o = p;
	agr_composite *c = NULL;
	int ret;

	o->supplier = supplier();
	ret = agr_composite_new(o, &c);
	agr_composite_free(c);
	agr_supplier_free(o->supplier);
	return ret;
}

static void fill_runtime(void *p)
{
	agr_runtime_options_init(p);
}

static int new_runtime(void *p)
{
	agr_runtime *rt = NULL;
	int ret = agr_runtime_new(p, &rt);

	agr_runtime_free(rt);
	return ret;
}

static int quiesce_nothing(void *self)
{
	(void)self;
	return 0;
}

static void fill_ops(void *p)
{
	agr_component_ops *ops = p;

	*ops = (agr_component_ops)AGR_COMPONENT_OPS_INIT;
	ops->quiesce = quiesce_nothing;
}

static int add_component(void *p)
{
	agr_runtime *rt = NULL;
	int ret;

	ck_assert_int_eq(agr_runtime_new(NULL, &rt), 0);
	ret = agr_runtime_add_component(rt, "versioned", p, NULL);
	agr_runtime_free(rt);
	return ret;
}

struct kind {
	const char *type; /* as the log line names it */
	size_t size, first_size;
	void (*fill)(void *p);
	int (*call)(void *p);
};

/* Each versioned struct's first version ends where `reserved` starts. */
#define KIND(type_, fill_, call_)                                         \
	{ #type_, sizeof(type_), offsetof(type_, reserved), fill_, call_ }

static const struct kind kinds[] = {
	KIND(agr_dispatcher_options, fill_dispatcher, new_dispatcher),
	KIND(agr_composite_options, fill_composite, new_composite),
	KIND(agr_runtime_options, fill_runtime, new_runtime),
	KIND(agr_component_ops, fill_ops, add_component),
};

/* Room for any of them and a newer caller's fields beyond. */
#define ROOM 4096

static void set_size(void *p, size_t size)
{
	memcpy(p, &size, sizeof(size));
}

static void expect_refused(const struct kind *k, void *p, const char *why)
{
	char type_size[128];

	capture_logs();
	ck_assert_int_eq(k->call(p), -EINVAL);
	agr_set_log_hook(NULL, NULL);
	snprintf(type_size, sizeof(type_size), "%s.%s", k->type, why);
	ck_assert_msg(logged(type_size), "no log line names %s (last: %s)",
		      type_size, last_error);
}

/* ---- reading ---- */

START_TEST(this_version_is_accepted)
{
	const struct kind *k = &kinds[_i];
	_Alignas(16) unsigned char buf[ROOM] = { 0 };

	ck_assert_uint_lt(k->size, ROOM / 2);
	k->fill(buf);
	ck_assert_int_eq(k->call(buf), 0);
}
END_TEST

/*
 * A zero-initialised struct or designated initialisers without size,
 * as every caller wrote before size existed: the first version is
 * read, and what lies beyond it (here a reserved word) is not.
 */
START_TEST(size_zero_reads_the_first_version)
{
	const struct kind *k = &kinds[_i];
	_Alignas(16) unsigned char buf[ROOM] = { 0 };

	k->fill(buf);
	set_size(buf, 0);
	memset(buf + k->first_size, 0xff, k->size - k->first_size);
	ck_assert_int_eq(k->call(buf), 0);
}
END_TEST

/*
 * An older caller's struct ends at its size: it is placed against a
 * page the process may not read, so reading one byte beyond would
 * crash the test.
 */
START_TEST(older_size_is_read_no_further)
{
	const struct kind *k = &kinds[_i];
	long page = sysconf(_SC_PAGESIZE);
	_Alignas(16) unsigned char full[ROOM] = { 0 };
	unsigned char *map, *old;
	/* Aligned as the struct (8), which ends right at the guard page. */
	size_t at = ((size_t)page - k->first_size) & ~(size_t)7;

	map = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map + page, (size_t)page, PROT_NONE), 0);
	k->fill(full);
	set_size(full, k->first_size);
	old = map + at;
	memcpy(old, full, k->first_size);
	ck_assert_int_eq(k->call(old), 0);
	munmap(map, 2 * (size_t)page);
}
END_TEST

START_TEST(size_below_any_version_is_refused)
{
	const struct kind *k = &kinds[_i];
	_Alignas(16) unsigned char buf[ROOM] = { 0 };

	k->fill(buf);
	set_size(buf, k->first_size - 1);
	expect_refused(k, buf, "size");
}
END_TEST

/* A newer caller's struct: its unknown fields may be zero, not set. */
START_TEST(newer_fields_must_be_zero)
{
	const struct kind *k = &kinds[_i];
	_Alignas(16) unsigned char buf[ROOM] = { 0 };

	k->fill(buf);
	set_size(buf, k->size + 16);
	ck_assert_int_eq(k->call(buf), 0);
	k->fill(buf);
	set_size(buf, k->size + 16);
	buf[k->size + 15] = 1;
	expect_refused(k, buf, "size");
	ck_assert(logged("holds fields this version"));
}
END_TEST

START_TEST(reserved_words_must_be_zero)
{
	const struct kind *k = &kinds[_i];
	_Alignas(16) unsigned char buf[ROOM] = { 0 };

	k->fill(buf);
	buf[k->size - 1] = 1; /* the last reserved word's last byte */
	expect_refused(k, buf, "reserved");
}
END_TEST

/* ---- filled by the library ---- */

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

START_TEST(stats_come_back_with_reserved_words_zero)
{
	agr_dispatcher_options o = AGR_DISPATCHER_OPTIONS_INIT;
	agr_dispatcher_stats st;
	agr_dispatcher_metrics m;
	agr_worker_metrics wm;
	agr_dispatcher *d = NULL;

	o.name = "versioned";
	o.named_aggregate = order;
	o.on_complete = complete;
	o.supplier = supplier();
	o.owns_supplier = true;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	memset(&st, 0xff, sizeof(st));
	memset(&m, 0xff, sizeof(m));
	memset(&wm, 0xff, sizeof(wm));
	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	ck_assert_int_eq(agr_dispatcher_metrics_get(d, &m), 0);
	ck_assert_int_eq(agr_scheduler_worker_metrics(
				 agr_dispatcher_scheduler(d), 0, &wm), 0);
	ck_assert(all_zero(st.reserved, sizeof(st.reserved)));
	ck_assert(all_zero(m.reserved, sizeof(m.reserved)));
	ck_assert(all_zero(m.messages.reserved, sizeof(m.messages.reserved)));
	ck_assert(all_zero(wm.reserved, sizeof(wm.reserved)));
	agr_dispatcher_free(d);
}
END_TEST

START_TEST(reports_come_back_with_reserved_words_zero)
{
	agr_component_ops ops = AGR_COMPONENT_OPS_INIT;
	agr_runtime_report r;
	agr_component_report c;
	agr_runtime *rt = NULL;

	ops.quiesce = quiesce_nothing;
	ck_assert_int_eq(agr_runtime_new(NULL, &rt), 0);
	ck_assert_int_eq(agr_runtime_add_component(rt, "c", &ops, NULL), 0);
	ck_assert_int_eq(agr_runtime_start(rt), 0);
	ck_assert_int_eq(agr_runtime_stop(rt), 0);
	memset(&r, 0xff, sizeof(r));
	memset(&c, 0xff, sizeof(c));
	ck_assert_int_eq(agr_runtime_report_get(rt, &r, &c, 1), 0);
	ck_assert(all_zero(r.reserved, sizeof(r.reserved)));
	ck_assert(all_zero(c.reserved, sizeof(c.reserved)));
	agr_runtime_free(rt);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("versioned");
	TCase *c = tcase_create("core");
	int n = (int)(sizeof(kinds) / sizeof(kinds[0]));

	tcase_set_timeout(c, 60);
	tcase_add_loop_test(c, this_version_is_accepted, 0, n);
	tcase_add_loop_test(c, size_zero_reads_the_first_version, 0, n);
	tcase_add_loop_test(c, older_size_is_read_no_further, 0, n);
	tcase_add_loop_test(c, size_below_any_version_is_refused, 0, n);
	tcase_add_loop_test(c, newer_fields_must_be_zero, 0, n);
	tcase_add_loop_test(c, reserved_words_must_be_zero, 0, n);
	tcase_add_test(c, stats_come_back_with_reserved_words_zero);
	tcase_add_test(c, reports_come_back_with_reserved_words_zero);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
