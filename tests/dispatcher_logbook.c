/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_logbook.c - what the library logged, kept word for word
 * for check_dispatcher's tests to wait for and read.
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

/* ==== misuse refused, and a force stop bounds every message ==== */

/* ---- what the library logged, word for word ---- */

#define LOG_LINES 128

static struct {
	pthread_mutex_t lock;
	pthread_cond_t grew;
	int n;
	char line[LOG_LINES][400];
} logbook = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void keep_log(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	pthread_mutex_lock(&logbook.lock);
	if (logbook.n < LOG_LINES) {
		snprintf(logbook.line[logbook.n], sizeof(logbook.line[0]),
			 "%s", msg);
		logbook.n++;
		pthread_cond_broadcast(&logbook.grew);
	}
	pthread_mutex_unlock(&logbook.lock);
}

void logbook_open(void)
{
	pthread_mutex_lock(&logbook.lock);
	logbook.n = 0;
	pthread_mutex_unlock(&logbook.lock);
	agr_set_log_hook(keep_log, NULL);
}

void logbook_close(void)
{
	agr_set_log_hook(NULL, NULL);
}

/* Once, before the tests: waits on the log book use tu_now_ns()'s clock. */
void logbook_init(void)
{
	tu_cond_init_monotonic(&logbook.grew);
}

static bool has(const char *line, const char *part)
{
	return !part || strstr(line, part);
}

/* Lines that hold a, b and c (NULL: anything). */
static int count_lines_locked(const char *a, const char *b, const char *c)
{
	int i, n = 0;

	for (i = 0; i < logbook.n; i++)
		if (has(logbook.line[i], a) && has(logbook.line[i], b) &&
		    has(logbook.line[i], c))
			n++;
	return n;
}

/* As count_lines_locked, once there is one or `timeout_ns` passed. */
int log_wait(const char *a, const char *b, const char *c,
	     uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	int n;

	pthread_mutex_lock(&logbook.lock);
	while ((n = count_lines_locked(a, b, c)) < 1 &&
	       pthread_cond_timedwait(&logbook.grew, &logbook.lock, &ts) !=
		       ETIMEDOUT)
		;
	pthread_mutex_unlock(&logbook.lock);
	return n;
}

void dump_logbook(void)
{
	int i;

	pthread_mutex_lock(&logbook.lock);
	for (i = 0; i < logbook.n; i++)
		fprintf(stderr, "log[%d]: %s\n", i, logbook.line[i]);
	pthread_mutex_unlock(&logbook.lock);
}

const char *or_any(const char *s)
{
	return s ? s : "";
}
