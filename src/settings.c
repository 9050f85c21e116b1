/* SPDX-License-Identifier: MIT */
/*
 * settings.c - the library's environment variables: the table, and the
 * only getenv() calls in the library.
 */
#include "settings.h"

#include "placement.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_CREATE "at each agr_supplier_new() or agr_supplier_new_opts()"
#define AT_WORKER_START "by each worker as it starts"

const struct agr__setting agr__settings[AGR__SETTINGS] = {
	[AGR__SETTING_SCHEDULER_POOL_SIZE] = {
		.name = "AGR_SCHEDULER_POOL_SIZE",
		.dflt = "the online CPUs",
		.range = "1..2147483647",
		.option = "the parallelism of agr_supplier_new() and "
			  "agr_supplier_options.parallelism, when > 0",
		.when = AT_CREATE,
		.meaning = "workers per scheduler of a supplier",
		.min = 1, .max = INT_MAX,
		.bad = AGR__BAD_REFUSED,
	},
	[AGR__SETTING_PARALLELISM] = {
		.name = "AGR_PARALLELISM",
		.dflt = "64 x the online CPUs",
		.range = "1..2147483647",
		.option = "agr_dispatcher_options.parallelism, when > 0",
		.when = "at each agr_dispatcher_new()",
		.meaning = "groups per dispatcher",
		.min = 1, .max = INT_MAX,
		.bad = AGR__BAD_REFUSED,
	},
	[AGR__SETTING_IDLE_SPIN_US] = {
		.name = "AGR_IDLE_SPIN_US",
		.dflt = "20, or 100 where the online CPUs are at least the "
			"process's workers + 2",
		.range = "0..1000000 (0: no spin)",
		.option = "agr_supplier_options.idle_spin_us, when >= 0",
		.when = AT_WORKER_START,
		.meaning = "microseconds an idle worker watches its inbox "
			   "before it sleeps in the kernel",
		.min = 0, .max = 1000000,
		.bad = AGR__BAD_FALLS_BACK,
	},
	[AGR__SETTING_SUBMIT_BATCH] = {
		.name = "AGR_SUBMIT_BATCH",
		.dflt = "4",
		.range = "0..the SQ's entries (256 unless "
			 "agr_supplier_options.sq_entries)",
		.option = "agr_supplier_options.submit_batch, when >= 0",
		.when = AT_WORKER_START,
		.meaning = "prepared I/O operations that may wait for the end "
			   "of the worker's turn (0: all wait)",
		.min = 0, .max = 32768,
		.bad = AGR__BAD_FALLS_BACK,
	},
	[AGR__SETTING_WORKER_CPUS] = {
		.name = "AGR_WORKER_CPUS",
		.dflt = "unset: nothing is pinned",
		.range = "a CPU list such as 1 or 0,2-3",
		.option = "agr_supplier_options.worker_cpus and "
			  "nworker_cpus, when given",
		.when = AT_WORKER_START,
		.meaning = "worker i of every scheduler, and its ring's io-wq "
			   "threads, run on the i-th CPU of the list",
		.bad = AGR__BAD_FALLS_BACK,
	},
	[AGR__SETTING_WAIT_MODE] = {
		.name = "AGR_WAIT_MODE",
		.dflt = "enter, or eventfd under Valgrind",
		.range = "enter or eventfd",
		.option = "agr_supplier_options.wait_mode, when not "
			  "AGR_WAIT_DEFAULT",
		.when = "once per process, when a worker first sleeps",
		.meaning = "how an idle worker sleeps: in io_uring_enter() or "
			   "in poll() on an eventfd",
		.bad = AGR__BAD_FALLS_BACK,
	},
	[AGR__SETTING_NO_SYNC_MSG] = {
		.name = "AGR_NO_SYNC_MSG",
		.dflt = "unset: the synchronous send where the kernel has it",
		.range = "set to anything, or unset",
		.option = NULL,
		.when = "once per process, at the first doorbell from a "
			"thread without a ring",
		.meaning = "doorbells from threads without a ring always go "
			   "through a thread-local sender ring",
		.bad = AGR__BAD_FALLS_BACK,
	},
};

/*
 * Reads the integer of row `id`, in min..max (at most the row's max).
 * Returns 1 with `*out`, 0 when unset or empty, -EINVAL when bad (not
 * logged); `*text` gets the value read.
 */
static int read_long(enum agr__setting_id id, long max, long *out,
		     const char **text)
{
	const struct agr__setting *row = &agr__settings[id];
	const char *s = getenv(row->name);
	char *end;
	long v;

	*text = s;
	if (max > row->max)
		max = row->max;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < row->min || v > max)
		return -EINVAL;
	*out = v;
	return 1;
}

/* The log line of a bad value: the variable, the value, what follows. */
static void log_bad_long(enum agr__setting_id id, const char *text, long max,
			 const char *then)
{
	const struct agr__setting *row = &agr__settings[id];

	if (max > row->max)
		max = row->max;
	agr__log(AGR_LOG_ERROR, "%s=\"%s\" is not an integer in %ld..%ld%s",
		 row->name, text, row->min, max, then);
}

int agr__setting_count(enum agr__setting_id id, int given, int fallback)
{
	const char *text;
	long v;
	int ret;

	if (given < 0)
		return -EINVAL;
	if (given > 0)
		return given;
	ret = read_long(id, LONG_MAX, &v, &text);
	if (ret < 0) {
		log_bad_long(id, text, LONG_MAX, "");
		return ret;
	}
	return ret == 1 ? (int)v : fallback;
}

bool agr__setting_idle_spin_us(int option, long *us)
{
	enum agr__setting_id id = AGR__SETTING_IDLE_SPIN_US;
	const char *text;
	int ret;

	if (option >= 0) {
		*us = option;
		return true;
	}
	ret = read_long(id, LONG_MAX, us, &text);
	if (ret < 0)
		log_bad_long(id, text, LONG_MAX, "; the worker picks its own");
	return ret == 1;
}

unsigned agr__setting_submit_batch(int option, unsigned sq_entries,
				   unsigned dflt)
{
	enum agr__setting_id id = AGR__SETTING_SUBMIT_BATCH;
	const char *text;
	char then[32];
	long v;
	int ret;

	if (option >= 0)
		return (unsigned)option;
	ret = read_long(id, sq_entries, &v, &text);
	if (ret < 0) {
		snprintf(then, sizeof(then), "; using %u", dflt);
		log_bad_long(id, text, sq_entries, then);
	}
	return ret == 1 ? (unsigned)v : dflt;
}

int agr__setting_worker_cpus(const char *who, int *cpus, int max,
			     const char **text)
{
	const char *name = agr__settings[AGR__SETTING_WORKER_CPUS].name;
	const char *s = getenv(name);
	int n;

	*text = s;
	if (!s || !*s)
		return 0;
	n = agr__parse_cpu_list(s, cpus, max);
	if (n <= 0) {
		agr__log(AGR_LOG_ERROR, "%s: %s=\"%s\" is not a list of CPUs "
			 "such as \"1\" or \"0,2-3\"; not pinned", who, name,
			 s);
		return -EINVAL;
	}
	return n;
}

enum agr__wait_setting agr__setting_wait_mode(void)
{
	const char *name = agr__settings[AGR__SETTING_WAIT_MODE].name;
	const char *mode = getenv(name);

	if (!mode)
		return AGR__WAIT_UNSET;
	if (strcmp(mode, "eventfd") == 0)
		return AGR__WAIT_SET_EVENTFD;
	if (*mode && strcmp(mode, "enter") != 0)
		agr__log(AGR_LOG_WARN, "%s=%s is neither enter nor eventfd; "
			 "using enter", name, mode);
	return AGR__WAIT_SET_ENTER;
}

bool agr__setting_no_sync_msg(void)
{
	return getenv(agr__settings[AGR__SETTING_NO_SYNC_MSG].name) != NULL;
}
