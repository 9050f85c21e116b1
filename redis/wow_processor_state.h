/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_state.h - a worker's cache of aggregate states
 * (wow_processor_cache.c); not installed.
 */
#ifndef AGGRING_WOW_PROCESSOR_STATE_H
#define AGGRING_WOW_PROCESSOR_STATE_H

#include "wow_processor_internal.h"

struct agr__wow_agg {
	struct agr__wow_agg *next;
	char *tenant_id;
	char *aggregate_id;
	int32_t version;
	char *state;
	size_t state_len;
	char *owner_id;
	char *space_id;
	char *first_operator;
	int64_t first_event_time;
	bool deleted;
	bool loaded; /* read from the store once: trust_cache may skip reads */
};

struct agr__wow_cache;

struct agr__wow_cache *agr__wow_cache_new(void);
void agr__wow_cache_free(struct agr__wow_cache *c);
/* The entry of (tenant, id), made fresh if absent; NULL: -ENOMEM. */
struct agr__wow_agg *agr__wow_cache_get(struct agr__wow_cache *c,
					const char *tenant, const char *id);
int agr__wow_agg_fresh(struct agr__wow_agg *a);
void agr__wow_agg_clear(struct agr__wow_agg *a);
void agr__wow_agg_take(struct agr__wow_agg *to, struct agr__wow_agg *from);
int agr__wow_agg_apply(struct agr__wow_agg *a, const agr_wow_event_stream *s,
		       agr_wow_outcome *o);
void agr__wow_agg_view(const struct agr__wow_agg *a, const char *tenant,
		       const char *id, agr_wow_aggregate_state *st);

#endif
