/* SPDX-License-Identifier: MIT */
/*
 * wow_state_event.c - Wow's state event, the `msg` of a ":state" stream
 * entry (StateEventJsonSerializer.kt): a domain event stream with the
 * aggregate's state, written between the stream's version and its body.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stddef.h>

#include <json.h>

#define WHAT "wow state event"

struct decoded_state {
	agr_wow_state_event pub; /* first: decode hands it out as this */
	struct json_object *root;
	struct agr__wow_stream_parts parts;
};

AGR_API int agr_wow_state_event_encode(const agr_wow_state_event *e,
				       char **json, size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!e || !json || !agr__wow_stream_ok(&e->stream) || !e->state)
		return -EINVAL;
	agr__wow_buf_hint(&b, agr__wow_stream_size_hint(&e->stream) +
				      e->state_len + e->tags_len);
	agr__wow_stream_write_head(&b, &e->stream);
	agr__wow_json_field_str(&b, "firstOperator",
				e->first_operator ? e->first_operator : "");
	agr__wow_json_field_int(&b, "firstEventTime", e->first_event_time);
	agr__wow_json_key(&b, "state", false);
	agr__wow_json_raw(&b, WHAT " state", e->state, e->state_len, true);
	agr__wow_json_field_tags(&b, WHAT " tags", e->tags, e->tags_len);
	agr__wow_json_field_bool(&b, "deleted", e->deleted);
	agr__wow_stream_write_tail(&b, &e->stream);
	return agr__wow_buf_finish(&b, json, len);
}

static int read_state_fields(struct json_object *o, void *doc)
{
	struct decoded_state *d = doc;
	agr_wow_state_event *e = &d->pub;
	int err;

	e->first_operator = "";
	if ((err = agr__wow_stream_read(o, WHAT, &e->stream, &d->parts)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "firstOperator", false,
					 &e->first_operator)) ||
	    (err = agr__wow_json_get_int64(o, WHAT, "firstEventTime", false,
					   &e->first_event_time)) ||
	    (err = agr__wow_json_get_raw(o, WHAT, "state", json_type_object,
					 &e->state, &e->state_len, NULL)) ||
	    (err = agr__wow_json_get_tags(o, WHAT, &e->tags,
					  &e->tags_len)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "deleted", true,
					  &e->deleted)))
		return err;
	return 0;
}

static void free_state_parts(void *doc)
{
	struct decoded_state *d = doc;

	agr__wow_stream_parts_free(&d->parts);
}

static const struct agr__wow_doc_kind state_doc = {
	WHAT, sizeof(struct decoded_state),
	offsetof(struct decoded_state, root), read_state_fields,
	free_state_parts
};

AGR_API int agr_wow_state_event_decode(const char *json, size_t len,
				       agr_wow_state_event **out)
{
	int err;

	if (!json || !out)
		return -EINVAL;
	*out = agr__wow_doc_decode(&state_doc, json, len, &err);
	return err;
}

AGR_API void agr_wow_state_event_free(agr_wow_state_event *e)
{
	agr__wow_doc_free(&state_doc, e);
}
