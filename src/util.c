/* SPDX-License-Identifier: MIT */
/*
 * util.c - the CPU count, settings from the environment and condition
 * variables on the monotonic clock.
 */
#include "util.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

int agr__online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (n > INT_MAX ? INT_MAX : (int)n);
}

/* Like agr__env_long(), but silent; `*text` gets the value read. */
static int parse_env(const char *name, long min, long max, long *out,
		     const char **text)
{
	const char *s = getenv(name);
	char *end;
	long v;

	*text = s;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 1;
}

int agr__env_long(const char *name, long min, long max, long *out)
{
	const char *text;
	int ret = parse_env(name, min, max, out, &text);

	if (ret < 0)
		agr__log(AGR_LOG_ERROR, "%s=\"%s\" is not an integer in "
			 "%ld..%ld", name, text, min, max);
	return ret;
}

long agr__env_long_or(const char *name, long dflt, long min, long max)
{
	const char *text;
	long v;
	int ret = parse_env(name, min, max, &v, &text);

	if (ret < 0)
		agr__log(AGR_LOG_ERROR, "%s=\"%s\" is not an integer in "
			 "%ld..%ld; using %ld", name, text, min, max, dflt);
	return ret == 1 ? v : dflt;
}

int agr__env_positive_int(const char *name)
{
	long v;
	int ret = agr__env_long(name, 1, INT_MAX, &v);

	return ret == 1 ? (int)v : ret;
}

int agr__resolve_parallelism(int parallelism, const char *env, int fallback)
{
	int from_env;

	if (parallelism < 0)
		return -EINVAL;
	if (parallelism > 0)
		return parallelism;
	from_env = agr__env_positive_int(env);
	return from_env != 0 ? from_env : fallback;
}

void agr__cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
}
