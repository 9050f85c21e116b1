/* SPDX-License-Identifier: MIT */
/*
 * check_settings.c - the settings table (src/settings.c): every row is
 * complete; the option field wins over the variable; a good value is
 * taken; a bad one is logged, naming the variable and the value, and
 * then falls back to the default or, for the two counts, is refused.
 *
 * Built with src/settings.c, src/placement.c and src/log.c themselves
 * (no ring, no library), so that the internal accessors can be called.
 * tests/check-settings.sh checks that the table, src/ and
 * aggring-environment(7) name the same variables.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

/* ---- what was logged ---- */

static char last_line[512];
static int lines;

static void keep_line(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	snprintf(last_line, sizeof(last_line), "%s", msg);
	lines++;
}

static void setup(void)
{
	int i;

	for (i = 0; i < AGR__SETTINGS; i++)
		unsetenv(agr__settings[i].name);
	last_line[0] = '\0';
	lines = 0;
	agr_set_log_hook(keep_line, NULL);
}

static void teardown(void)
{
	agr_set_log_hook(NULL, NULL);
}

/* Sets row `id` to `value`; nothing is logged yet. */
static void set(enum agr__setting_id id, const char *value)
{
	ck_assert_int_eq(setenv(agr__settings[id].name, value, 1), 0);
	lines = 0;
	last_line[0] = '\0';
}

/* One line was logged, and it names the variable and its value. */
static void assert_logged(enum agr__setting_id id, const char *value)
{
	char both[128];

	ck_assert_int_eq(lines, 1);
	snprintf(both, sizeof(both), "%s=", agr__settings[id].name);
	ck_assert_msg(strstr(last_line, both) && strstr(last_line, value),
		      "\"%s\" does not name %s and \"%s\"", last_line,
		      agr__settings[id].name, value);
}

/* ---- the table ---- */

START_TEST(every_row_is_complete)
{
	int i;

	for (i = 0; i < AGR__SETTINGS; i++) {
		const struct agr__setting *row = &agr__settings[i];

		ck_assert_ptr_nonnull(row->name);
		ck_assert_msg(strncmp(row->name, "AGR_", 4) == 0, "%s",
			      row->name);
		ck_assert_msg(row->dflt && *row->dflt, "%s: default", row->name);
		ck_assert_msg(row->range && *row->range, "%s: range",
			      row->name);
		ck_assert_msg(row->when && *row->when, "%s: when", row->name);
		ck_assert_msg(row->meaning && *row->meaning, "%s: meaning",
			      row->name);
		ck_assert_msg(row->min <= row->max, "%s: bounds", row->name);
	}
	/* AGR_NO_SYNC_MSG alone has no option field. */
	ck_assert_ptr_null(agr__settings[AGR__SETTING_NO_SYNC_MSG].option);
}
END_TEST

/* ---- bad values: logged, then the default ---- */

static const char *const bad_integers[] = { "abc", "4x", "-1", "" };

START_TEST(a_bad_idle_spin_is_logged_and_the_worker_picks)
{
	long us = 7;

	set(AGR__SETTING_IDLE_SPIN_US, "1000001");
	ck_assert(!agr__setting_idle_spin_us(-1, &us));
	assert_logged(AGR__SETTING_IDLE_SPIN_US, "1000001");
	set(AGR__SETTING_IDLE_SPIN_US, bad_integers[_i]);
	ck_assert(!agr__setting_idle_spin_us(-1, &us));
	if (*bad_integers[_i]) /* empty is unset: nothing to say */
		assert_logged(AGR__SETTING_IDLE_SPIN_US, bad_integers[_i]);
	else
		ck_assert_int_eq(lines, 0);
	set(AGR__SETTING_IDLE_SPIN_US, "250");
	ck_assert(agr__setting_idle_spin_us(-1, &us));
	ck_assert_int_eq(us, 250);
	ck_assert(agr__setting_idle_spin_us(0, &us)); /* the option wins */
	ck_assert_int_eq(us, 0);
	ck_assert_int_eq(lines, 0);
}
END_TEST

START_TEST(a_bad_submit_batch_is_logged_and_the_default_applies)
{
	set(AGR__SETTING_SUBMIT_BATCH, "257"); /* above the SQ's 256 */
	ck_assert_uint_eq(agr__setting_submit_batch(-1, 256, 4), 4);
	assert_logged(AGR__SETTING_SUBMIT_BATCH, "257");
	ck_assert_msg(strstr(last_line, "0..256; using 4"), "%s", last_line);
	set(AGR__SETTING_SUBMIT_BATCH, bad_integers[_i]);
	ck_assert_uint_eq(agr__setting_submit_batch(-1, 256, 4), 4);
	if (*bad_integers[_i])
		assert_logged(AGR__SETTING_SUBMIT_BATCH, bad_integers[_i]);
	set(AGR__SETTING_SUBMIT_BATCH, "0");
	ck_assert_uint_eq(agr__setting_submit_batch(-1, 256, 4), 0);
	ck_assert_uint_eq(agr__setting_submit_batch(9, 256, 4), 9);
	ck_assert_int_eq(lines, 0);
}
END_TEST

START_TEST(a_bad_cpu_list_is_logged_and_nothing_is_pinned)
{
	int cpus[8];
	const char *text;

	set(AGR__SETTING_WORKER_CPUS, "0;1");
	ck_assert_int_eq(agr__setting_worker_cpus("w0", cpus, 8, &text),
			 -EINVAL);
	assert_logged(AGR__SETTING_WORKER_CPUS, "0;1");
	ck_assert_msg(strstr(last_line, "not pinned"), "%s", last_line);
	set(AGR__SETTING_WORKER_CPUS, "0,2-3");
	ck_assert_int_eq(agr__setting_worker_cpus("w0", cpus, 8, &text), 3);
	ck_assert_int_eq(cpus[2], 3);
	ck_assert_str_eq(text, "0,2-3");
	unsetenv(agr__settings[AGR__SETTING_WORKER_CPUS].name);
	ck_assert_int_eq(agr__setting_worker_cpus("w0", cpus, 8, &text), 0);
	ck_assert_int_eq(lines, 0);
}
END_TEST

START_TEST(a_bad_wait_mode_is_logged_and_is_enter)
{
	ck_assert_int_eq(agr__setting_wait_mode(), AGR__WAIT_UNSET);
	set(AGR__SETTING_WAIT_MODE, "futex");
	ck_assert_int_eq(agr__setting_wait_mode(), AGR__WAIT_SET_ENTER);
	assert_logged(AGR__SETTING_WAIT_MODE, "futex");
	set(AGR__SETTING_WAIT_MODE, "eventfd");
	ck_assert_int_eq(agr__setting_wait_mode(), AGR__WAIT_SET_EVENTFD);
	set(AGR__SETTING_WAIT_MODE, "enter");
	ck_assert_int_eq(agr__setting_wait_mode(), AGR__WAIT_SET_ENTER);
	ck_assert_int_eq(lines, 0);
}
END_TEST

START_TEST(no_sync_msg_is_any_value)
{
	ck_assert(!agr__setting_no_sync_msg());
	set(AGR__SETTING_NO_SYNC_MSG, "");
	ck_assert(agr__setting_no_sync_msg());
	set(AGR__SETTING_NO_SYNC_MSG, "0");
	ck_assert(agr__setting_no_sync_msg());
}
END_TEST

/* ---- the two counts: a bad value is refused ---- */

START_TEST(a_bad_count_is_logged_and_refused)
{
	static const enum agr__setting_id counts[] = {
		AGR__SETTING_SCHEDULER_POOL_SIZE, AGR__SETTING_PARALLELISM
	};
	enum agr__setting_id id = counts[_i];

	ck_assert_int_eq(agr__setting_count(id, 0, 12), 12);
	set(id, "0");
	ck_assert_int_eq(agr__setting_count(id, 0, 12), -EINVAL);
	assert_logged(id, "\"0\"");
	set(id, "many");
	ck_assert_int_eq(agr__setting_count(id, 0, 12), -EINVAL);
	assert_logged(id, "many");
	ck_assert_int_eq(agr__setting_count(id, 5, 12), 5); /* given wins */
	ck_assert_int_eq(agr__setting_count(id, -1, 12), -EINVAL);
	set(id, "3");
	ck_assert_int_eq(agr__setting_count(id, 0, 12), 3);
	ck_assert_int_eq(lines, 0);
}
END_TEST

static Suite *settings_suite(void)
{
	Suite *s = suite_create("settings");
	TCase *tc = tcase_create("core");
	int nbad = (int)(sizeof(bad_integers) / sizeof(bad_integers[0]));

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, every_row_is_complete);
	tcase_add_loop_test(tc, a_bad_idle_spin_is_logged_and_the_worker_picks,
			    0, nbad);
	tcase_add_loop_test(tc,
			    a_bad_submit_batch_is_logged_and_the_default_applies,
			    0, nbad);
	tcase_add_test(tc, a_bad_cpu_list_is_logged_and_nothing_is_pinned);
	tcase_add_test(tc, a_bad_wait_mode_is_logged_and_is_enter);
	tcase_add_test(tc, no_sync_msg_is_any_value);
	tcase_add_loop_test(tc, a_bad_count_is_logged_and_refused, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(settings_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
