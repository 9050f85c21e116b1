/* SPDX-License-Identifier: MIT */
/*
 * wow_snapshot_json.c - Wow's snapshot document
 * (AbstractStateAggregateSerializer.kt, SnapshotSerializer.kt), what
 * the snapshot store (wow_snapshot.c) keeps.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stddef.h>

#include <json.h>

#define WHAT "wow snapshot"

struct decoded_snapshot {
	agr_wow_snapshot pub; /* first: decode hands it out as this */
	struct json_object *root;
};

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

AGR_API int agr_wow_snapshot_encode(const agr_wow_snapshot *s, char **json,
				    size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!s || !json || !s->context_name || !s->aggregate_name ||
	    !s->aggregate_id || !s->state || s->version < 1)
		return -EINVAL;
	agr__wow_buf_hint(&b, 512 + s->state_len + s->tags_len);
	agr__wow_buf_bytes(&b, "{", 1);
	agr__wow_json_key(&b, "contextName", true);
	agr__wow_json_string(&b, s->context_name);
	agr__wow_json_field_str(&b, "aggregateName", s->aggregate_name);
	agr__wow_json_field_str(&b, "aggregateId", s->aggregate_id);
	agr__wow_json_field_str(&b, "tenantId", s->tenant_id ? s->tenant_id :
						AGR_WOW_DEFAULT_TENANT);
	agr__wow_json_field_str(&b, "ownerId", or_empty(s->owner_id));
	agr__wow_json_field_str(&b, "spaceId", or_empty(s->space_id));
	agr__wow_json_field_int(&b, "version", s->version);
	agr__wow_json_field_str(&b, "eventId", or_empty(s->event_id));
	agr__wow_json_field_str(&b, "firstOperator",
				or_empty(s->first_operator));
	agr__wow_json_field_str(&b, "operator", or_empty(s->operator_));
	agr__wow_json_field_int(&b, "firstEventTime", s->first_event_time);
	agr__wow_json_field_int(&b, "eventTime", s->event_time);
	agr__wow_json_key(&b, "state", false);
	agr__wow_json_raw(&b, WHAT " state", s->state, s->state_len, true);
	agr__wow_json_field_int(&b, "snapshotTime", s->snapshot_time);
	agr__wow_json_field_tags(&b, WHAT " tags", s->tags, s->tags_len);
	agr__wow_json_field_bool(&b, "deleted", s->deleted);
	agr__wow_buf_bytes(&b, "}", 1);
	return agr__wow_buf_finish(&b, json, len);
}

static int read_snapshot_fields(struct json_object *o, void *doc)
{
	agr_wow_snapshot *s = doc; /* the public struct comes first */
	int err;

	s->owner_id = "";
	s->space_id = "";
	s->event_id = "";
	s->first_operator = "";
	s->operator_ = "";
	if ((err = agr__wow_json_get_str(o, WHAT, "contextName", true,
					 &s->context_name)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "aggregateName", true,
					 &s->aggregate_name)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "aggregateId", true,
					 &s->aggregate_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "tenantId", true,
					 &s->tenant_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "ownerId", false,
					 &s->owner_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "spaceId", false,
					 &s->space_id)) ||
	    (err = agr__wow_json_get_int32(o, WHAT, "version", true, NULL,
					   &s->version)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "eventId", false,
					 &s->event_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "firstOperator", false,
					 &s->first_operator)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "operator", false,
					 &s->operator_)) ||
	    (err = agr__wow_json_get_int64(o, WHAT, "firstEventTime", false,
					   &s->first_event_time)) ||
	    (err = agr__wow_json_get_int64(o, WHAT, "eventTime", false,
					   &s->event_time)) ||
	    (err = agr__wow_json_get_raw(o, WHAT, "state", json_type_object,
					 &s->state, &s->state_len, NULL)) ||
	    (err = agr__wow_json_get_int64(o, WHAT, "snapshotTime", true,
					   &s->snapshot_time)) ||
	    (err = agr__wow_json_get_tags(o, WHAT, &s->tags,
					  &s->tags_len)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "deleted", true,
					  &s->deleted)))
		return err;
	return 0;
}

static const struct agr__wow_doc_kind snapshot_doc = {
	WHAT, sizeof(struct decoded_snapshot),
	offsetof(struct decoded_snapshot, root), read_snapshot_fields, NULL
};

AGR_API int agr_wow_snapshot_decode(const char *json, size_t len,
				    agr_wow_snapshot **out)
{
	int err;

	if (!json || !out)
		return -EINVAL;
	*out = agr__wow_doc_decode(&snapshot_doc, json, len, &err);
	return err;
}

AGR_API void agr_wow_snapshot_free(agr_wow_snapshot *s)
{
	agr__wow_doc_free(&snapshot_doc, s);
}
