/* SPDX-License-Identifier: MIT */
/*
 * wow_bus_life.c - a bus consumer's creation, start and stop
 * (aggring/wow_bus.h). The stop runs on the consumer's worker: it
 * closes the readers, releases the leases and ends once every client is
 * closed; agr_wow_bus_stop() waits for it within its deadline.
 */
#include "wow_bus_state.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <aggring/io.h>
#include <aggring/worker.h>

/* ---- stop ---- */

static void on_reader_closed(void *arg)
{
	struct reader *rd = arg;

	rd->r = NULL;
	rd->bus->closing--;
	agr__wowbus_try_finish_stop(rd->bus);
}

static void stop_on_worker(void *arg)
{
	agr_wow_bus *b = arg;

	if (b->phase == P_STOPPING || b->phase == P_STOPPED)
		return;
	agr__wowbus_set_phase(b, P_STOPPING);
	agr__wowbus_set_ready(b, -ESHUTDOWN);
	agr_io_cancel(b->w, &b->heartbeat);
	for (unsigned i = 0; i < b->ntopics; i++) {
		agr_io_cancel(b->w, &b->retry[i]);
		agr_io_cancel(b->w, &b->sweep_timer[i]);
	}
	for (unsigned i = 0; i < b->ntopics; i++)
		if (b->readers[i].r) {
			b->closing++;
			agr_redis_close(b->readers[i].r, on_reader_closed,
					&b->readers[i]);
		}
	agr__wowbus_try_finish_stop(b);
}

/* ---- start ---- */

static void start_on_worker(void *arg)
{
	agr_wow_bus *b = arg;
	agr_redis_options ro = b->redis;
	int ret;

	b->w = agr_worker_current();
	ro.name = b->name;
	ret = agr_redis_new(b->w, &ro, &b->ctl);
	for (unsigned i = 0; ret == 0 && i < b->ntopics; i++)
		ret = agr_redis_new(b->w, &ro, &b->readers[i].r);
	if (ret < 0) {
		agr_log(AGR_LOG_ERROR,
			"consumer %s: no Redis client (%s)", b->consumer,
			strerror(-ret));
		agr__wowbus_set_ready(b, ret);
		stop_on_worker(b);
		return;
	}
	/* The leases go first, so the first read already holds them. */
	if (b->recovery)
		for (unsigned i = 0; i < b->ntopics; i++)
			agr__wowbus_lease_take(&b->leases[i], b->ctl, NULL,
					       NULL);
	agr__wowbus_create_group(b, 0);
}

int agr_wow_bus_start(agr_wow_bus *b)
{
	int ret;

	if (!b)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if (b->phase != P_NEW) {
		pthread_mutex_unlock(&b->lock);
		return -EALREADY;
	}
	b->phase = P_SETUP;
	pthread_mutex_unlock(&b->lock);
	ret = agr_scheduler_schedule(b->sched, b->hint, start_on_worker, b);
	if (ret < 0)
		agr__wowbus_set_phase(b, P_STOPPED);
	return ret;
}

static void deadline_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec += (long)(ns % 1000000000ull);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int agr_wow_bus_wait_ready(agr_wow_bus *b, uint64_t timeout_ns)
{
	struct timespec ts;
	int ret = 0;

	if (!b)
		return -EINVAL;
	deadline_after(&ts, timeout_ns);
	pthread_mutex_lock(&b->lock);
	while (!b->ready && ret == 0 && b->phase != P_STOPPED)
		ret = pthread_cond_timedwait(&b->cond, &b->lock, &ts);
	if (b->ready)
		ret = b->setup_err;
	else if (ret)
		ret = -ETIMEDOUT;
	else
		ret = -ESHUTDOWN;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int agr_wow_bus_stop(agr_wow_bus *b, uint64_t timeout_ns)
{
	struct timespec ts;
	bool scheduled;
	int ret = 0;

	if (!b)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	if (b->phase == P_NEW)
		b->phase = P_STOPPED;
	scheduled = b->phase == P_STOPPED;
	pthread_mutex_unlock(&b->lock);
	if (!scheduled &&
	    agr_scheduler_schedule(b->sched, b->hint, stop_on_worker, b) < 0) {
		agr_log(AGR_LOG_ERROR,
			"consumer %s: its scheduler is gone; stopped "
			"without acking", b->consumer);
		agr__wowbus_set_phase(b, P_STOPPED);
	}
	deadline_after(&ts, timeout_ns);
	pthread_mutex_lock(&b->lock);
	while (b->phase != P_STOPPED && ret == 0)
		ret = pthread_cond_timedwait(&b->cond, &b->lock, &ts);
	ret = b->phase == P_STOPPED ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

/*
 * A stop that always ends: a handler that never finishes (or retries
 * forever, issue 30's livelock) cannot hold it past its deadline. The
 * force completes the messages in flight with AGR_DISCARDED (never
 * handled) or AGR_INTERRUPTED (handled, cut short), and either leaves
 * its entry pending for a later claim (not acked).
 */
int agr_wow_bus_shutdown(agr_wow_bus *b, uint64_t timeout_ns)
{
	int ret = b ? agr_wow_bus_stop(b, timeout_ns) : -EINVAL;

	if (ret != -ETIMEDOUT)
		return ret;
	agr_log(AGR_LOG_WARN, "consumer %s: messages still in flight at the "
		"stop's deadline; forcing dispatcher %s", b->consumer,
		agr_dispatcher_name(b->disp));
	agr_dispatcher_force_stop(b->disp);
	/* Every admitted message completes now, discarded if need be. */
	if (agr_dispatcher_stop_gracefully(b->disp, timeout_ns) < 0)
		agr_log(AGR_LOG_ERROR, "consumer %s: dispatcher %s did not "
			"stop after the force", b->consumer,
			agr_dispatcher_name(b->disp));
	ret = agr_wow_bus_stop(b, timeout_ns);
	if (ret == -ETIMEDOUT && agr_scheduler_is_terminated(b->sched)) {
		agr_log(AGR_LOG_WARN, "consumer %s: its workers are gone; "
			"stopped, entries in flight stay pending",
			b->consumer);
		agr__wowbus_set_phase(b, P_STOPPED);
		ret = 0;
	}
	return ret == 0 ? -ECANCELED : ret;
}

void agr_wow_bus_free(agr_wow_bus *b)
{
	struct wow_entry *en, *next;

	if (!b)
		return;
	while (agr_wow_bus_stop(b, 5000000000ull) == -ETIMEDOUT) {
		/* With its workers gone, nothing can finish the stop. */
		if (agr_scheduler_is_terminated(b->sched)) {
			agr_log(AGR_LOG_ERROR, "consumer %s: freed while its "
				"scheduler is gone; unacked entries stay "
				"pending", b->consumer);
			break;
		}
		agr_log(AGR_LOG_WARN, "consumer %s: stop waits for messages "
			"in flight", b->consumer);
	}
	for (en = atomic_load(&b->acks); en; en = next) {
		next = en->next;
		agr__wowbus_entry_free(en);
	}
	for (unsigned i = 0; i < b->ntopics; i++) {
		struct kept_id *k, *knext;

		free(b->topics[i]);
		agr__wowbus_lease_fini(&b->leases[i]);
		for (k = b->kept[i]; k; k = knext) {
			knext = k->next;
			free(k);
		}
	}
	free(b->host);
	free(b->username);
	if (b->password)
		explicit_bzero(b->password, strlen(b->password));
	free(b->password);
	free(b->name);
	free(b->group);
	free(b->consumer);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cond);
	free(b);
}

/* ---- new ---- */

void agr_wow_bus_options_init(agr_wow_bus_options *o)
{
	if (o)
		*o = (agr_wow_bus_options)AGR_WOW_BUS_OPTIONS_INIT;
}

/* The waits' deadlines are on CLOCK_MONOTONIC: so is the condition. */
static void cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &a);
	pthread_condattr_destroy(&a);
}

static char *fresh_consumer_name(void)
{
	unsigned char raw[8];
	char *s = malloc(32);

	if (!s)
		return NULL;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0, sizeof(raw));
	snprintf(s, 32, "c%08x%02x%02x%02x%02x%02x%02x%02x%02x",
		 (unsigned)getpid(), raw[0], raw[1], raw[2], raw[3], raw[4],
		 raw[5], raw[6], raw[7]);
	return s;
}

static int invalid(const agr_wow_bus_options *o, const char *what)
{
	(void)o;
	agr_log(AGR_LOG_ERROR, "agr_wow_bus_new: %s", what);
	return -EINVAL;
}

static int check_options(const agr_wow_bus_options *o)
{
	if (!o || o->size < sizeof(*o))
		return invalid(o, "options missing or of an older size");
	if (!o->scheduler)
		return invalid(o, "no scheduler");
	if (!o->dispatcher)
		return invalid(o, "no dispatcher");
	if (!o->topics || o->ntopics == 0 || o->ntopics > MAX_TOPICS)
		return invalid(o, "ntopics must be 1..8");
	for (unsigned i = 0; i < o->ntopics; i++)
		if (!o->topics[i] || !*o->topics[i])
			return invalid(o, "a topic is NULL or empty");
	if (!o->group || !*o->group)
		return invalid(o, "no group");
	if (o->consumer && !*o->consumer)
		return invalid(o, "empty consumer name");
	return 0;
}

static void copy_settings(agr_wow_bus *b, const agr_wow_bus_options *o)
{
	b->redis = o->redis;
	if (!b->redis.size) {
		agr_redis_options_init(&b->redis);
		b->redis.port = o->redis.port;
		b->redis.cluster = o->redis.cluster;
	}
	b->sched = o->scheduler;
	b->hint = o->worker_hint;
	b->disp = o->dispatcher;
	b->ntopics = o->ntopics;
	b->block_ms = o->block_ms ? o->block_ms : 2000;
	b->count = o->count;
	b->max_in_flight = o->max_in_flight ? o->max_in_flight : 4096;
	b->recovery = !o->no_recovery;
	b->min_idle_ms = o->min_idle_ms ? o->min_idle_ms : 300000;
	b->interval_ms = o->recovery_interval_ms ? o->recovery_interval_ms :
						     30000;
	b->batch = o->recovery_batch ? o->recovery_batch : 100;
	b->decode = o->decode ? o->decode : agr_wow_decode_default;
	b->decode_arg = o->decode_arg;
}

/* The client is made at start: the option strings are copied now. */
static bool copy_string(const char *s, char **copy, const char **field)
{
	*field = NULL;
	if (!s)
		return false;
	*copy = strdup(s);
	*field = *copy;
	return !*copy;
}

int agr_wow_bus_new(const agr_wow_bus_options *o, agr_wow_bus **out)
{
	agr_wow_bus *b;
	bool oom = false;
	int ret = check_options(o);

	if (ret < 0)
		return ret;
	if (!out)
		return invalid(o, "no out pointer");
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	copy_settings(b, o);
	for (unsigned i = 0; i < b->ntopics; i++)
		oom |= !(b->topics[i] = strdup(o->topics[i]));
	b->group = strdup(o->group);
	b->consumer = o->consumer ? strdup(o->consumer) : fresh_consumer_name();
	b->name = b->consumer ? strdup(b->consumer) : NULL;
	oom |= copy_string(o->redis.host, &b->host, &b->redis.host);
	oom |= copy_string(o->redis.username, &b->username,
			   &b->redis.username);
	oom |= copy_string(o->redis.password, &b->password,
			   &b->redis.password);
	oom |= !b->group || !b->consumer || !b->name;
	pthread_mutex_init(&b->lock, NULL);
	cond_init_monotonic(&b->cond);
	ret = oom ? -ENOMEM : agr__wowbus_init_parts(b);
	if (ret < 0) {
		agr_wow_bus_free(b);
		return ret;
	}
	*out = b;
	return 0;
}

const char *agr_wow_bus_consumer_name(const agr_wow_bus *b)
{
	return b ? b->consumer : NULL;
}

int agr_wow_bus_stats_get(const agr_wow_bus *b, agr_wow_bus_stats *out)
{
	agr_wow_bus *m = (agr_wow_bus *)(uintptr_t)b;

	if (!b || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->read = atomic_load(&m->st_read);
	out->dispatched = atomic_load(&m->st_dispatched);
	out->acked = atomic_load(&m->st_acked);
	out->undecodable = atomic_load(&m->st_undecodable);
	out->not_admitted = atomic_load(&m->st_not_admitted);
	out->claimed = atomic_load(&m->st_claimed);
	out->sweeps = atomic_load(&m->st_sweeps);
	out->redis_errors = atomic_load(&m->st_redis_errors);
	out->in_flight = atomic_load(&m->st_in_flight);
	return 0;
}
