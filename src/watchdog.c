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
#include "util.h"

#include <aggring/watchdog.h>

#include <string.h>

#define DEFAULT_THRESHOLD_NS (100ull * 1000000ull)

/* Start and stop one at a time, across the join. */
static pthread_mutex_t control = PTHREAD_MUTEX_INITIALIZER;
/* The watchdog thread's state and its wake-up. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
static pthread_t thread;
static bool running, stopping;
static uint64_t threshold_ns;

static void init_wake(void)
{
	agr__cond_init_monotonic(&wake);
}

/* Reports what has run on `w` too long; `arg` points at now_ns. */
static void inspect(struct agr_worker *w, void *arg)
{
	char what[96];
	uint64_t held = agr__worker_take_blocked(w, *(uint64_t *)arg,
						 threshold_ns, what,
						 sizeof(what));

	if (held == 0)
		return;
	agr__log(AGR_LOG_WARN,
		 "blocking detected: %s has held worker %s for %llu ms; "
		 "handlers must not block (use agr_io_* and AGR_PENDING)",
		 what, agr__worker_name(w),
		 (unsigned long long)(held / 1000000u));
}

static void *watch(void *arg)
{
	struct timespec ts;
	uint64_t now;

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		now = agr__now_ns();
		agr__scheduler_for_each_worker(inspect, &now);
		agr__scheduler_run_watches(now, threshold_ns);
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
