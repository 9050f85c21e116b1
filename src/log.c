/* SPDX-License-Identifier: MIT */
/*
 * log.c - the log hook, the version and error strings.
 */
#include "internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pthread.h>

/* The hook and its argument change together, so a lock guards both. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static agr_log_fn log_fn;
static void *log_arg;

static const char *level_name(agr_log_level level)
{
	switch (level) {
	case AGR_LOG_ERROR:
		return "error";
	case AGR_LOG_WARN:
		return "warning";
	case AGR_LOG_INFO:
		return "info";
	case AGR_LOG_DEBUG:
		break;
	}
	return "debug"; /* also any level out of range: the least severe */
}

static void default_log(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= AGR_LOG_WARN)
		fprintf(stderr, "aggring: %s: %s\n", level_name(level), msg);
}

AGR_API void agr_set_log_hook(agr_log_fn fn, void *arg)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_arg = arg;
	pthread_mutex_unlock(&log_lock);
}

void agr__log(agr_log_level level, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	agr_log_fn fn;
	void *arg;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	fn = log_fn ? log_fn : default_log;
	arg = log_arg;
	pthread_mutex_unlock(&log_lock);
	fn(level, line, arg);
}

AGR_API const char *agr_version(void)
{
	return PACKAGE_VERSION;
}

AGR_API const char *agr_strerror(int err)
{
	/* strerror() is not thread-safe; the common codes are spelled here. */
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -ENOMEM:
		return "out of memory";
	case -ESHUTDOWN:
		return "shut down: no longer accepting work";
	case -ETIMEDOUT:
		return "timed out";
	case -EAGAIN:
		return "queue full, try again";
	case -ECANCELED:
		return "cancelled";
	case -ENOSYS:
		return "function not implemented (for io_uring: blocked by "
		       "seccomp or not built into the kernel)";
	case -EPERM:
		return "operation not permitted (for io_uring: "
		       "kernel.io_uring_disabled or a security policy)";
	case -EBUSY:
		return "busy";
	case -EALREADY:
		return "already in progress";
	case -EEXIST:
		return "already exists";
	case -ENOENT:
		return "not found";
	default:
		return "unknown error";
	}
}

int agr__online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (n > INT_MAX ? INT_MAX : (int)n);
}

int agr__env_positive_int(const char *name)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > INT_MAX) {
		agr__log(AGR_LOG_ERROR, "%s=\"%s\" is not a positive integer",
			 name, s);
		return -EINVAL;
	}
	return (int)v;
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
