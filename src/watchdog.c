/* SPDX-License-Identifier: MIT */
/*
 * watchdog.c - the blocking detector: one thread that looks at what
 * every worker of the process runs and reports a handler or task that
 * has held its worker longer than a threshold (the seed's "accidental
 * blocking calls"). Workers only publish a start time and a label; the
 * watchdog does the rest, so a disabled detector costs one relaxed load
 * per item.
 */
#include "scheduler.h"

#include <aggring/watchdog.h>

#include <stdlib.h>
#include <string.h>

#define DEFAULT_THRESHOLD_NS (100ull * 1000000ull)

struct registered {
	struct registered *next;
	struct agr_scheduler *sched;
};

/* Start and stop one at a time, across the join. */
static pthread_mutex_t control = PTHREAD_MUTEX_INITIALIZER;
/* The registry and the watchdog thread share one lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
static struct registered *schedulers;
static pthread_t thread;
static bool running, stopping;
static uint64_t threshold_ns;

static void init_wake(void)
{
	agr__cond_init_monotonic(&wake);
}

void agr__watchdog_register(struct agr_scheduler *s)
{
	struct registered *r = malloc(sizeof(*r));

	if (!r) {
		agr__log(AGR_LOG_WARN, "%s: out of memory: the blocking "
			 "detector will not watch it", s->name);
		return;
	}
	r->sched = s;
	pthread_mutex_lock(&lock);
	r->next = schedulers;
	schedulers = r;
	pthread_mutex_unlock(&lock);
}

void agr__watchdog_unregister(struct agr_scheduler *s)
{
	struct registered **p, *r;

	pthread_mutex_lock(&lock);
	for (p = &schedulers; (r = *p) != NULL; p = &r->next) {
		if (r->sched == s) {
			*p = r->next;
			free(r);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

static void inspect(struct agr_worker *w, uint64_t now)
{
	char what[96];
	uint64_t since;

	/* A run that began after `now` was read is young, not ancient. */
	if (!agr__worker_read_running(w, &since, what, sizeof(what)) ||
	    since == 0 || since > now || now - since < threshold_ns ||
	    w->running.reported_since == since)
		return;
	w->running.reported_since = since; /* once per run */
	agr__bump(&w->stats.blocking_detected);
	agr__log(AGR_LOG_WARN,
		 "blocking detected: %s has held worker %s for %llu ms; "
		 "handlers must not block (use agr_io_* and AGR_PENDING)",
		 what, w->thread_name,
		 (unsigned long long)((now - since) / 1000000u));
}

static void *watch(void *arg)
{
	struct registered *r;
	struct timespec ts;
	uint64_t now;
	int i;

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		now = agr__now_ns();
		for (r = schedulers; r; r = r->next)
			for (i = 0; i < r->sched->parallelism; i++)
				inspect(r->sched->workers[i], now);
		/* Look four times per threshold: reports come late by 25%. */
		ts = agr__timespec_of(agr__now_ns() + threshold_ns / 4);
		pthread_cond_timedwait(&wake, &lock, &ts);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

AGR_API int agr_watchdog_start(uint64_t threshold)
{
	int ret = 0;

	pthread_once(&wake_once, init_wake);
	pthread_mutex_lock(&control);
	pthread_mutex_lock(&lock);
	threshold_ns = threshold ? threshold : DEFAULT_THRESHOLD_NS;
	if (!running) {
		stopping = false;
		ret = -pthread_create(&thread, NULL, watch, NULL);
		running = ret == 0;
	}
	pthread_mutex_unlock(&lock);
	if (ret == 0)
		atomic_store(&agr__watchdog_on, true);
	pthread_mutex_unlock(&control);
	return ret;
}

AGR_API void agr_watchdog_stop(void)
{
	bool was_running;

	pthread_once(&wake_once, init_wake);
	pthread_mutex_lock(&control);
	atomic_store(&agr__watchdog_on, false);
	pthread_mutex_lock(&lock);
	was_running = running;
	stopping = true;
	running = false;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	if (was_running)
		pthread_join(thread, NULL);
	pthread_mutex_unlock(&control);
}
