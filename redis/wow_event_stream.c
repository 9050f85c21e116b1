/* SPDX-License-Identifier: MIT */
/*
 * wow_event_stream.c - Wow's domain event stream, the `msg` of an
 * ":event" stream entry and a member of the event store's stream ZSET
 * (AbstractEventStreamJsonSerializer.kt, EventStreamRecord.kt). A state
 * event (wow_state_event.c) is a stream with more fields, so the
 * writing and reading of a stream's own fields are shared from here.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include <json.h>

#define WHAT "wow event stream"

struct decoded_stream {
	agr_wow_event_stream pub; /* first: decode hands it out as this */
	struct json_object *root;
	struct agr__wow_stream_parts parts;
};

bool agr__wow_stream_ok(const agr_wow_event_stream *s)
{
	size_t i;

	if (!s->id || !s->context_name || !s->aggregate_name ||
	    !s->aggregate_id || !s->command_id || s->version < 1 ||
	    !s->events || !s->event_count || (!s->header && s->header_count))
		return false;
	for (i = 0; i < s->event_count; i++) {
		const agr_wow_event *e = &s->events[i];

		if (!e->id || !e->name || !e->body_type || !e->body)
			return false;
	}
	return true;
}

size_t agr__wow_stream_size_hint(const agr_wow_event_stream *s)
{
	size_t i, hint = 512;

	for (i = 0; i < s->event_count; i++)
		hint += s->events[i].body_len + 192;
	return hint;
}

void agr__wow_stream_write_head(struct agr__wow_buf *b,
				const agr_wow_event_stream *s)
{
	agr__wow_buf_bytes(b, "{", 1);
	agr__wow_json_key(b, "id", true);
	agr__wow_json_string(b, s->id);
	agr__wow_json_field_str(b, "contextName", s->context_name);
	agr__wow_json_field_str(b, "aggregateName", s->aggregate_name);
	agr__wow_json_header(b, s->header, s->header_count);
	agr__wow_json_field_str(b, "aggregateId", s->aggregate_id);
	agr__wow_json_field_str(b, "tenantId", s->tenant_id ? s->tenant_id :
						AGR_WOW_DEFAULT_TENANT);
	agr__wow_json_field_str(b, "ownerId", s->owner_id ? s->owner_id : "");
	agr__wow_json_field_str(b, "spaceId", s->space_id ? s->space_id : "");
	agr__wow_json_field_str(b, "commandId", s->command_id);
	agr__wow_json_field_str(b, "requestId", s->request_id ?
						s->request_id : s->command_id);
	agr__wow_json_field_int(b, "version", s->version);
}

static void write_event(struct agr__wow_buf *b, const agr_wow_event *e,
			bool first)
{
	if (!first)
		agr__wow_buf_bytes(b, ",", 1);
	agr__wow_buf_bytes(b, "{", 1);
	agr__wow_json_key(b, "id", true);
	agr__wow_json_string(b, e->id);
	agr__wow_json_field_str(b, "name", e->name);
	agr__wow_json_field_str(b, "revision", e->revision ? e->revision :
						AGR_WOW_DEFAULT_REVISION);
	agr__wow_json_field_str(b, "bodyType", e->body_type);
	agr__wow_json_key(b, "body", false);
	agr__wow_json_raw(b, WHAT " event body", e->body, e->body_len, false);
	agr__wow_buf_bytes(b, "}", 1);
}

void agr__wow_stream_write_tail(struct agr__wow_buf *b,
				const agr_wow_event_stream *s)
{
	size_t i;

	agr__wow_json_key(b, "body", false);
	agr__wow_buf_bytes(b, "[", 1);
	for (i = 0; i < s->event_count; i++)
		write_event(b, &s->events[i], i == 0);
	agr__wow_buf_bytes(b, "]", 1);
	agr__wow_json_field_int(b, "createTime", s->create_time);
	agr__wow_buf_bytes(b, "}", 1);
}

AGR_API int agr_wow_event_stream_encode(const agr_wow_event_stream *s,
					char **json, size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!s || !json || !agr__wow_stream_ok(s))
		return -EINVAL;
	agr__wow_buf_hint(&b, agr__wow_stream_size_hint(s));
	agr__wow_stream_write_head(&b, s);
	agr__wow_stream_write_tail(&b, s);
	return agr__wow_buf_finish(&b, json, len);
}

static int read_event(struct json_object *o, const char *what,
		      agr_wow_event *e)
{
	int err;

	if (!o || !json_object_is_type(o, json_type_object)) {
		agr_log(AGR_LOG_WARN, "%s: a body item is not an object",
			what);
		return -EBADMSG;
	}
	if ((err = agr__wow_json_get_str(o, what, "id", true, &e->id)) ||
	    (err = agr__wow_json_get_str(o, what, "name", true, &e->name)) ||
	    (err = agr__wow_json_get_str(o, what, "revision", true,
					 &e->revision)) ||
	    (err = agr__wow_json_get_str(o, what, "bodyType", true,
					 &e->body_type)) ||
	    (err = agr__wow_json_get_raw(o, what, "body", -1, &e->body,
					 &e->body_len, NULL)))
		return err;
	return 0;
}

static int read_events(struct json_object *o, const char *what,
		       agr_wow_event_stream *s, struct agr__wow_stream_parts *p)
{
	struct json_object *body = NULL;
	size_t n, i;
	int err;

	if (!json_object_object_get_ex(o, "body", &body) ||
	    !json_object_is_type(body, json_type_array)) {
		agr_log(AGR_LOG_WARN, "%s: field \"body\" is missing or not "
				      "an array", what);
		return -EBADMSG;
	}
	n = json_object_array_length(body);
	if (!n) {
		agr_log(AGR_LOG_WARN, "%s: field \"body\" is empty", what);
		return -EBADMSG;
	}
	p->events = calloc(n, sizeof(*p->events));
	if (!p->events)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		err = read_event(json_object_array_get_idx(body, i), what,
				 &p->events[i]);
		if (err)
			return err;
	}
	s->events = p->events;
	s->event_count = n;
	return 0;
}

int agr__wow_stream_read(struct json_object *o, const char *what,
			 agr_wow_event_stream *s,
			 struct agr__wow_stream_parts *p)
{
	int err;

	s->owner_id = "";
	s->space_id = "";
	if ((err = agr__wow_json_get_str(o, what, "id", true, &s->id)) ||
	    (err = agr__wow_json_get_str(o, what, "contextName", true,
					 &s->context_name)) ||
	    (err = agr__wow_json_get_str(o, what, "aggregateName", true,
					 &s->aggregate_name)) ||
	    (err = agr__wow_json_get_header(o, what, "header", &p->header,
					    &s->header_count)) ||
	    (err = agr__wow_json_get_str(o, what, "aggregateId", true,
					 &s->aggregate_id)) ||
	    (err = agr__wow_json_get_str(o, what, "tenantId", true,
					 &s->tenant_id)) ||
	    (err = agr__wow_json_get_str(o, what, "ownerId", false,
					 &s->owner_id)) ||
	    (err = agr__wow_json_get_str(o, what, "spaceId", false,
					 &s->space_id)) ||
	    (err = agr__wow_json_get_str(o, what, "commandId", true,
					 &s->command_id)) ||
	    (err = agr__wow_json_get_str(o, what, "requestId", true,
					 &s->request_id)) ||
	    (err = agr__wow_json_get_int32(o, what, "version", true, NULL,
					   &s->version)) ||
	    (err = read_events(o, what, s, p)) ||
	    (err = agr__wow_json_get_int64(o, what, "createTime", true,
					   &s->create_time)))
		return err;
	if (s->version < 1) {
		agr_log(AGR_LOG_WARN, "%s: version %d is below 1", what,
			(int)s->version);
		return -EBADMSG;
	}
	s->header = p->header;
	return 0;
}

void agr__wow_stream_parts_free(struct agr__wow_stream_parts *p)
{
	free(p->header);
	free(p->events);
	p->header = NULL;
	p->events = NULL;
}

static int read_doc(struct json_object *root, void *doc)
{
	struct decoded_stream *d = doc;

	return agr__wow_stream_read(root, WHAT, &d->pub, &d->parts);
}

static void free_stream_parts(void *doc)
{
	struct decoded_stream *d = doc;

	agr__wow_stream_parts_free(&d->parts);
}

static const struct agr__wow_doc_kind stream_doc = {
	WHAT, sizeof(struct decoded_stream),
	offsetof(struct decoded_stream, root), read_doc, free_stream_parts
};

AGR_API int agr_wow_event_stream_decode(const char *json, size_t len,
					agr_wow_event_stream **out)
{
	int err;

	if (!json || !out)
		return -EINVAL;
	*out = agr__wow_doc_decode(&stream_doc, json, len, &err);
	return err;
}

AGR_API void agr_wow_event_stream_free(agr_wow_event_stream *s)
{
	agr__wow_doc_free(&stream_doc, s);
}
