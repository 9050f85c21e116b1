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
#include <stdlib.h>

#include <json.h>

#define WHAT "wow state event"

struct decoded_state {
	agr_wow_state_event pub; /* first: _free() casts back */
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
	agr__wow_json_key(&b, "tags", false);
	if (e->tags)
		agr__wow_json_raw(&b, WHAT " tags", e->tags, e->tags_len, true);
	else
		agr__wow_buf_bytes(&b, "{}", 2);
	agr__wow_json_field_bool(&b, "deleted", e->deleted);
	agr__wow_stream_write_tail(&b, &e->stream);
	return agr__wow_buf_finish(&b, json, len);
}

static int read_tags(struct json_object *o, agr_wow_state_event *e)
{
	struct json_object *tags = json_object_object_get(o, "tags");

	if (!tags) {
		e->tags = "{}";
		e->tags_len = 2;
		return 0;
	}
	return agr__wow_json_get_raw(o, WHAT, "tags", json_type_object,
				     &e->tags, &e->tags_len, NULL);
}

static int read_fields(struct json_object *o, struct decoded_state *d)
{
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
	    (err = read_tags(o, e)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "deleted", true,
					  &e->deleted)))
		return err;
	return 0;
}

AGR_API int agr_wow_state_event_decode(const char *json, size_t len,
				       agr_wow_state_event **out)
{
	struct decoded_state *d;
	int err;

	if (!json || !out)
		return -EINVAL;
	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->root = agr__wow_json_parse_object(WHAT, json, len);
	err = d->root ? read_fields(d->root, d) : -EBADMSG;
	if (err) {
		agr_wow_state_event_free(&d->pub);
		return err;
	}
	*out = &d->pub;
	return 0;
}

AGR_API void agr_wow_state_event_free(agr_wow_state_event *e)
{
	struct decoded_state *d = (struct decoded_state *)e;

	if (!d)
		return;
	json_object_put(d->root);
	agr__wow_stream_parts_free(&d->parts);
	free(d);
}
