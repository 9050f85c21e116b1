/* SPDX-License-Identifier: MIT */
/*
 * watchdog.c - the blocking detector: one thread that looks at what
 * every worker of the process runs and reports a handler or task that
 * has held its worker longer than a threshold (the seed's "accidental
 * blocking calls"). Workers only publish a start time and a label; the
 * watchdog does the rest, so a disabled detector costs one relaxed load
 * per item.
 */
#include "watchdog.h"

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
/* agr_watchdog_start(): every scheduler is watched with its threshold. */
static bool global_on;
static uint64_t global_threshold_ns;
/* Suppliers with a watchdog of their own, and their least threshold. */
static int retained;
static uint64_t least_retained_ns = UINT64_MAX;

static void init_wake(void)
{
	agr__cond_init_monotonic(&wake);
}

struct look {
	uint64_t now, threshold_ns;
};

/* Reports what has run on `w` too long. */
static void inspect(struct agr_worker *w, void *arg)
{
	struct look *l = arg;
	char what[96];
	uint64_t held = agr__worker_take_blocked(w, l->now, l->threshold_ns,
						 what, sizeof(what));

	if (held == 0)
		return;
	agr__log(AGR_LOG_WARN,
		 "blocking detected: %s has held worker %s for %llu ms; "
		 "handlers must not block (use agr_io_* and AGR_PENDING)",
		 what, agr__worker_name(w),
		 (unsigned long long)(held / 1000000u));
}

/*
 * One scheduler, with its supplier's threshold or else the process's;
 * its reports go to its supplier's log hook, if it has one.
 */
static void visit(struct agr_scheduler *s, void *arg)
{
	const struct agr__worker_settings *st = agr__scheduler_settings(s);
	struct look l = { .now = *(uint64_t *)arg };

	l.threshold_ns = st->watchdog_ns ? st->watchdog_ns :
		global_on ? global_threshold_ns : 0;
	if (!l.threshold_ns)
		return;
	agr__log_set_thread_hook(st->log_fn, st->log_arg);
	agr__scheduler_each_worker(s, inspect, &l);
	agr__scheduler_run_watches_of(s, l.now, l.threshold_ns);
	agr__log_set_thread_hook(NULL, NULL);
}

/* Four looks per threshold: reports come late by 25% at most. */
static uint64_t tick_ns(void)
{
	uint64_t least = least_retained_ns;

	if (global_on && global_threshold_ns < least)
		least = global_threshold_ns;
	return least / 4;
}

static void *watch(void *arg)
{
	struct timespec ts;
	uint64_t now;

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		now = agr__now_ns();
		agr__scheduler_for_each(visit, &now);
		ts = agr__timespec_of(agr__now_ns() + tick_ns());
		pthread_cond_timedwait(&wake, &lock, &ts);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* With `control` held: the thread runs while anybody wants it. */
static int start_thread_locked(void)
{
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (!running) {
		stopping = false;
		ret = -pthread_create(&thread, NULL, watch, NULL);
		running = ret == 0;
	}
	pthread_cond_broadcast(&wake); /* a new tick */
	pthread_mutex_unlock(&lock);
	return ret;
}

static void stop_thread_locked(void)
{
	bool was_running;

	pthread_mutex_lock(&lock);
	was_running = running;
	stopping = true;
	running = false;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	if (was_running)
		pthread_join(thread, NULL);
}

static void watchdog_publish_locked(void)
{
	atomic_store(&agr__watchdog_on, global_on || retained > 0);
}

AGR_API int agr_watchdog_start(uint64_t threshold)
{
	int ret;

	pthread_once(&wake_once, init_wake);
	pthread_mutex_lock(&control);
	pthread_mutex_lock(&lock);
	global_threshold_ns = threshold ? threshold : DEFAULT_THRESHOLD_NS;
	global_on = true;
	pthread_mutex_unlock(&lock);
	ret = start_thread_locked();
	if (ret) {
		pthread_mutex_lock(&lock);
		global_on = false;
		pthread_mutex_unlock(&lock);
	}
	watchdog_publish_locked();
	pthread_mutex_unlock(&control);
	return ret;
}

AGR_API void agr_watchdog_stop(void)
{
	pthread_once(&wake_once, init_wake);
	pthread_mutex_lock(&control);
	pthread_mutex_lock(&lock);
	global_on = false;
	pthread_mutex_unlock(&lock);
	if (retained == 0)
		stop_thread_locked();
	watchdog_publish_locked();
	pthread_mutex_unlock(&control);
}

int agr__watchdog_retain(uint64_t threshold_ns)
{
	int ret;

	pthread_once(&wake_once, init_wake);
	pthread_mutex_lock(&control);
	pthread_mutex_lock(&lock);
	retained++;
	if (threshold_ns < least_retained_ns)
		least_retained_ns = threshold_ns;
	pthread_mutex_unlock(&lock);
	ret = start_thread_locked();
	if (ret) {
		pthread_mutex_lock(&lock);
		retained--;
		pthread_mutex_unlock(&lock);
	}
	watchdog_publish_locked();
	pthread_mutex_unlock(&control);
	return ret;
}

void agr__watchdog_release(void)
{
	pthread_mutex_lock(&control);
	pthread_mutex_lock(&lock);
	if (--retained == 0)
		least_retained_ns = UINT64_MAX;
	pthread_mutex_unlock(&lock);
	if (retained == 0 && !global_on)
		stop_thread_locked();
	watchdog_publish_locked();
	pthread_mutex_unlock(&control);
}
