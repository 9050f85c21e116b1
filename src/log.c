/* SPDX-License-Identifier: MIT */
/*
 * log.c - the log hook and the library's own log lines.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

#include <pthread.h>

/* The hook and its argument change together, so a lock guards both. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static agr_log_fn log_fn;
static void *log_arg;
/* A supplier's own hook, on the threads of its workers. */
static _Thread_local agr_log_fn thread_fn;
static _Thread_local void *thread_arg;

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

__attribute__((format(printf, 2, 0)))
static void log_line(agr_log_level level, const char *fmt, va_list ap)
{
	char line[512];
	agr_log_fn fn;
	void *arg;

	vsnprintf(line, sizeof(line), fmt, ap);
	if (thread_fn) {
		thread_fn(level, line, thread_arg);
		return;
	}
	pthread_mutex_lock(&log_lock);
	fn = log_fn ? log_fn : default_log;
	arg = log_arg;
	pthread_mutex_unlock(&log_lock);
	fn(level, line, arg);
}

void agr__log(agr_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}

AGR_API void agr_log(agr_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(level, fmt, ap);
	va_end(ap);
}

void agr__log_set_thread_hook(agr_log_fn fn, void *arg)
{
	thread_fn = fn;
	thread_arg = arg;
}
