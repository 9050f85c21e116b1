/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_life.c - making, closing and freeing a command
 * processor (aggring/wow_processor.h), and its workers' clients.
 */
#include "wow_processor_core.h"
#include "wow_processor_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring/worker.h>

static int copy_str(const char *s, char **own, const char **view)
{
	if (!s) {
		*view = NULL;
		return 0;
	}
	*own = strdup(s);
	*view = *own;
	return *own ? 0 : -ENOMEM;
}

static int check_processor_options(const agr_wow_processor_options *o)
{
	const char *bad = NULL;

	if (!o || o->size < sizeof(*o))
		bad = "size";
	else if (!o->named.context_name || !*o->named.context_name)
		bad = "named.context_name";
	else if (!o->named.aggregate_name || !*o->named.aggregate_name)
		bad = "named.aggregate_name";
	else if (!o->workers)
		bad = "workers";
	else if (!o->on_command)
		bad = "on_command";
	else if (!o->on_sourcing)
		bad = "on_sourcing";
	if (!bad)
		return 0;
	agr_log(AGR_LOG_ERROR, "wow processor: option %s is missing or bad",
		bad);
	return -EINVAL;
}

static int copy_names(agr_wow_processor *p, const agr_wow_processor_options *o)
{
	int ret = copy_str(o->named.context_name, &p->names[0],
			   &p->named.context_name);

	if (ret == 0)
		ret = copy_str(o->named.alias, &p->names[1], &p->named.alias);
	if (ret == 0)
		ret = copy_str(o->named.aggregate_name, &p->names[2],
			       &p->named.aggregate_name);
	if (o->redis.size)
		p->redis = o->redis;
	else
		agr_redis_options_init(&p->redis);
	if (ret == 0)
		ret = copy_str(o->redis.host, &p->redis_strings[0],
			       &p->redis.host);
	if (ret == 0)
		ret = copy_str(o->redis.name, &p->redis_strings[1],
			       &p->redis.name);
	if (ret == 0)
		ret = copy_str(o->redis.username, &p->redis_strings[2],
			       &p->redis.username);
	if (ret == 0)
		ret = copy_str(o->redis.password, &p->redis_strings[3],
			       &p->redis.password);
	if (ret == 0)
		ret = agr_wow_topic(&p->named, AGR_WOW_TOPIC_EVENT,
				    &p->event_topic, NULL);
	if (ret == 0)
		ret = agr_wow_topic(&p->named, AGR_WOW_TOPIC_STATE,
				    &p->state_topic, NULL);
	return ret;
}

int agr_wow_processor_new(const agr_wow_processor_options *o,
			  agr_wow_processor **out)
{
	agr_wow_processor *p;
	int ret;

	if (!out || check_processor_options(o) < 0)
		return -EINVAL;
	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->workers = o->workers;
	p->on_command = o->on_command;
	p->on_sourcing = o->on_sourcing;
	p->arg = o->arg;
	p->max_retries = o->max_retries ? o->max_retries : 3;
	p->min_backoff_ms = o->min_backoff_ms ? o->min_backoff_ms : 500;
	p->max_backoff_ms = o->max_backoff_ms;
	p->republish_duplicate = o->republish_duplicate;
	p->retry_create_conflict = o->retry_create_conflict;
	p->trust_cache = o->trust_cache;
	p->no_state_events = o->no_state_events;
	p->no_notify = o->no_wait_notify;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->pw = calloc(o->workers, sizeof(*p->pw));
	p->processor_name = strdup(o->processor_name ? o->processor_name
						     : o->named.aggregate_name);
	p->function_name = strdup(o->function_name ? o->function_name
						   : "onCommand");
	ret = p->pw && p->processor_name && p->function_name ? 0 : -ENOMEM;
	if (ret == 0)
		ret = copy_names(p, o);
	for (unsigned i = 0; p->pw && i < o->workers; i++) {
		p->pw[i].p = p;
		p->pw[i].notify.ok = &p->stats.notified;
		p->pw[i].notify.failed = &p->stats.notify_failed;
		p->pw[i].notify.timeout_ns =
			(o->notify_timeout_ms ? o->notify_timeout_ms : 5000) *
			1000000ull;
	}
	if (ret < 0) {
		agr_wow_processor_free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void agr_wow_processor_free(agr_wow_processor *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < 3; i++)
		free(p->names[i]);
	for (unsigned i = 0; i < 4; i++)
		free(p->redis_strings[i]);
	free(p->pw);
	free(p->processor_name);
	free(p->function_name);
	free(p->event_topic);
	free(p->state_topic);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

static struct agr__wow_pworker *pworker_of(agr_wow_processor *p,
					   agr_worker *w)
{
	int i = w ? agr_worker_index(w) : -1;

	if (!p || i < 0 || (unsigned)i >= p->workers) {
		agr_log(AGR_LOG_ERROR, "wow processor: worker %d is not one "
			"of its %u", i, p ? p->workers : 0);
		return NULL;
	}
	return &p->pw[i];
}

struct agr__wow_pworker *agr__wow_pworker(agr_wow_processor *p,
					  agr_exchange *ex)
{
	return pworker_of(p, agr_exchange_worker(ex));
}

int agr_wow_processor_worker_init(agr_worker *w, void *proc)
{
	struct agr__wow_pworker *pw = pworker_of(proc, w);
	int ret;

	if (!pw)
		return -EINVAL;
	pw->w = w;
	pw->cache = agr__wow_cache_new();
	if (!pw->cache)
		return -ENOMEM;
	ret = agr_redis_new(w, &pw->p->redis, &pw->redis);
	if (ret == 0)
		ret = agr_wow_event_store_new(pw->redis, &pw->p->named,
					      &pw->store);
	if (ret < 0)
		agr_wow_processor_worker_exit(w, proc);
	return ret;
}

void agr_wow_processor_worker_exit(agr_worker *w, void *proc)
{
	struct agr__wow_pworker *pw = pworker_of(proc, w);

	if (!pw)
		return;
	agr__wow_notify_free_all(&pw->notify); /* the loop has ended */
	agr_wow_event_store_free(pw->store);
	pw->store = NULL;
	if (pw->redis)
		agr_redis_free(pw->redis);
	pw->redis = NULL;
	agr__wow_cache_free(pw->cache);
	pw->cache = NULL;
}

static void closed_one(void *arg)
{
	agr_wow_processor *p = arg;

	pthread_mutex_lock(&p->lock);
	p->closing--;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* On the worker: no more retries of notifications, the client closes. */
static void close_on_worker(void *arg)
{
	struct agr__wow_pworker *pw = arg;
	agr_redis *r = pw->redis;

	if (pw->w)
		agr__wow_notify_cancel_all(pw->w, &pw->notify);
	agr_wow_event_store_free(pw->store);
	pw->store = NULL;
	pw->redis = NULL;
	if (r)
		agr_redis_close(r, closed_one, pw->p);
	else
		closed_one(pw->p);
}

static int wait_closed(agr_wow_processor *p, uint64_t timeout_ns)
{
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(timeout_ns / 1000000000ull);
	until.tv_nsec += (long)(timeout_ns % 1000000000ull);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->lock);
	while (p->closing > 0 && ret == 0)
		ret = pthread_cond_timedwait(&p->cond, &p->lock, &until);
	ret = p->closing > 0 ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

int agr_wow_processor_close(agr_wow_processor *p, agr_scheduler *sched,
			    uint64_t timeout_ns)
{
	if (!p || !sched)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	p->closing = p->workers;
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->workers; i++)
		if (agr_scheduler_schedule(sched, i, close_on_worker,
					   &p->pw[i]) < 0)
			closed_one(p);
	return wait_closed(p, timeout_ns);
}

int agr_wow_processor_stats_get(const agr_wow_processor *p,
				agr_wow_processor_stats *out)
{
	if (!p || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->processed = atomic_load(&p->stats.processed);
	out->failed = atomic_load(&p->stats.failed);
	out->local_first = atomic_load(&p->stats.local_first);
	out->void_dropped = atomic_load(&p->stats.void_dropped);
	out->conflicts = atomic_load(&p->stats.conflicts);
	out->notified = atomic_load(&p->stats.notified);
	out->notify_failed = atomic_load(&p->stats.notify_failed);
	out->republished = atomic_load(&p->stats.republished);
	return 0;
}

const char *agr__wow_header_value(const agr_wow_event_stream *s,
				  const char *key)
{
	for (size_t i = 0; i < s->header_count; i++)
		if (!strcmp(s->header[i].key, key))
			return s->header[i].value;
	return "";
}
