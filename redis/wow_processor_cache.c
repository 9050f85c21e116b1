/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_cache.c - a worker's aggregate states, keyed by
 * (tenant, id): Wow's identity is both (AggregateId; the event store
 * keys carry both), so one id under two tenants is two aggregates.
 * Only a floor: every command reads the versions after it.
 */
#include "wow_processor_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_BUCKETS 4096u

struct agr__wow_cache {
	struct agr__wow_agg *bucket[CACHE_BUCKETS];
};

static unsigned key_hash(const char *tenant, const char *id)
{
	unsigned h = 2166136261u;

	for (const char *s = tenant; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	h = (h ^ 0xffu) * 16777619u; /* the separator */
	for (const char *s = id; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % CACHE_BUCKETS;
}

struct agr__wow_cache *agr__wow_cache_new(void)
{
	return calloc(1, sizeof(struct agr__wow_cache));
}

void agr__wow_agg_clear(struct agr__wow_agg *a)
{
	free(a->state);
	free(a->owner_id);
	free(a->space_id);
	free(a->first_operator);
	a->state = NULL;
	a->owner_id = a->space_id = a->first_operator = NULL;
	a->version = 0;
	a->deleted = false;
	a->loaded = false;
	a->first_event_time = 0;
}

/* Version 0, "{}": a state nobody wrote yet. */
int agr__wow_agg_fresh(struct agr__wow_agg *a)
{
	agr__wow_agg_clear(a);
	a->state = strdup("{}");
	a->state_len = 2;
	a->owner_id = strdup("");
	a->space_id = strdup("");
	a->first_operator = strdup("");
	if (!a->state || !a->owner_id || !a->space_id || !a->first_operator)
		return -ENOMEM;
	return 0;
}

static void agg_free(struct agr__wow_agg *a)
{
	agr__wow_agg_clear(a);
	free(a->tenant_id);
	free(a->aggregate_id);
	free(a);
}

void agr__wow_cache_free(struct agr__wow_cache *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < CACHE_BUCKETS; i++)
		while (c->bucket[i]) {
			struct agr__wow_agg *a = c->bucket[i];

			c->bucket[i] = a->next;
			agg_free(a);
		}
	free(c);
}

struct agr__wow_agg *agr__wow_cache_get(struct agr__wow_cache *c,
					const char *tenant, const char *id)
{
	unsigned h = key_hash(tenant, id);
	struct agr__wow_agg *a;

	for (a = c->bucket[h]; a; a = a->next)
		if (!strcmp(a->aggregate_id, id) &&
		    !strcmp(a->tenant_id, tenant))
			return a;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->tenant_id = strdup(tenant);
	a->aggregate_id = strdup(id);
	if (!a->tenant_id || !a->aggregate_id || agr__wow_agg_fresh(a) < 0) {
		agg_free(a);
		return NULL;
	}
	a->next = c->bucket[h];
	c->bucket[h] = a;
	return a;
}

/* Moves the state of `from` (a fresh isCreate state) into `to`. */
void agr__wow_agg_take(struct agr__wow_agg *to, struct agr__wow_agg *from)
{
	agr__wow_agg_clear(to);
	to->version = from->version;
	to->state = from->state;
	to->state_len = from->state_len;
	to->owner_id = from->owner_id;
	to->space_id = from->space_id;
	to->first_operator = from->first_operator;
	to->first_event_time = from->first_event_time;
	to->deleted = from->deleted;
	from->state = from->owner_id = from->space_id = NULL;
	from->first_operator = NULL;
	agr__wow_agg_clear(from);
}

static int replace(char **dst, const char *src)
{
	char *copy = strdup(src);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static const char *stream_operator(const agr_wow_event_stream *s)
{
	for (size_t i = 0; i < s->header_count; i++)
		if (!strcmp(s->header[i].key, "command_operator"))
			return s->header[i].value;
	return "";
}

/*
 * Applies stream `s` and the state `o` made of it: version, owner and
 * space (a non-blank stream value wins), the first event's operator
 * and time, deleted (Wow's StateAggregate sourcing).
 */
int agr__wow_agg_apply(struct agr__wow_agg *a, const agr_wow_event_stream *s,
		       agr_wow_outcome *o)
{
	int ret = 0;

	if (!o->has_state)
		return -EINVAL;
	free(a->state);
	a->state = o->state;
	a->state_len = o->state_len;
	o->state = NULL;
	o->has_state = false;
	a->deleted = o->deleted;
	if (s->owner_id && *s->owner_id)
		ret = replace(&a->owner_id, s->owner_id);
	if (ret == 0 && s->space_id && *s->space_id)
		ret = replace(&a->space_id, s->space_id);
	if (ret == 0 && s->version == 1) {
		ret = replace(&a->first_operator, stream_operator(s));
		a->first_event_time = s->create_time;
	}
	a->version = s->version;
	return ret;
}

void agr__wow_agg_view(const struct agr__wow_agg *a, const char *tenant,
		       const char *id, agr_wow_aggregate_state *st)
{
	st->aggregate_id = id;
	st->tenant_id = tenant;
	st->version = a->version;
	st->state = a->state;
	st->state_len = a->state_len;
	st->owner_id = a->owner_id;
	st->space_id = a->space_id;
	st->deleted = a->deleted;
}
