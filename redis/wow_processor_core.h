/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_core.h - the processor object and its workers
 * (wow_processor_life.c); not installed.
 */
#ifndef AGGRING_WOW_PROCESSOR_CORE_H
#define AGGRING_WOW_PROCESSOR_CORE_H

#include <pthread.h>
#include <stdatomic.h>

#include <aggring/wow_event_store.h>

#include "wow_processor_internal.h"

struct agr__wow_cache;

struct agr__wow_pworker {
	agr_wow_processor *p;
	agr_worker *w;
	agr_redis *redis;
	agr_wow_event_store *store;
	struct agr__wow_cache *cache;
	struct agr__wow_notify_list notify;
};

struct agr_wow_processor {
	agr_wow_named named;
	char *names[3];
	agr_redis_options redis;
	char *redis_strings[4];
	unsigned workers;
	struct agr__wow_pworker *pw;
	agr_wow_command_fn on_command;
	agr_wow_sourcing_fn on_sourcing;
	void *arg;
	char *processor_name, *function_name;
	unsigned max_retries;
	uint64_t min_backoff_ms, max_backoff_ms;
	bool no_state_events, no_notify, republish_duplicate,
		retry_create_conflict, trust_cache;
	char *event_topic, *state_topic;
	struct {
		_Atomic uint64_t processed, failed, local_first, void_dropped,
			conflicts, notified, notify_failed,
			republished;
	} stats;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned closing; /* workers whose close has not finished */
};

/* The worker state of the exchange's worker, or NULL. */
struct agr__wow_pworker *agr__wow_pworker(agr_wow_processor *p,
					  agr_exchange *ex);
/* A stream header's value, or "". */
const char *agr__wow_header_value(const agr_wow_event_stream *s,
				  const char *key);

#endif
