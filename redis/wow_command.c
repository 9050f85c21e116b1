/* SPDX-License-Identifier: MIT */
/*
 * wow_command.c - Wow's command message, the `msg` of a ":command"
 * stream entry (CommandJsonSerializer.kt, CommandRecord.kt).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include <json.h>

#define WHAT "wow command"

/* A decoded command: its strings point into the json-c tree it keeps. */
struct decoded_command {
	agr_wow_command pub; /* first: decode hands it out as this */
	struct json_object *root;
	agr_wow_header *header;
};

static bool required_ok(const agr_wow_command *c)
{
	return c->id && c->context_name && c->aggregate_name && c->name &&
	       c->aggregate_id && c->body_type && c->body &&
	       (c->header || !c->header_count);
}

AGR_API int agr_wow_command_encode(const agr_wow_command *c, char **json,
				   size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!c || !json || !required_ok(c))
		return -EINVAL;
	agr__wow_buf_hint(&b, c->body_len + 512);
	agr__wow_buf_bytes(&b, "{", 1);
	agr__wow_json_key(&b, "id", true);
	agr__wow_json_string(&b, c->id);
	agr__wow_json_field_str(&b, "contextName", c->context_name);
	agr__wow_json_field_str(&b, "aggregateName", c->aggregate_name);
	agr__wow_json_field_str(&b, "name", c->name);
	agr__wow_json_header(&b, c->header, c->header_count);
	agr__wow_json_field_str(&b, "tenantId", c->tenant_id ? c->tenant_id :
						AGR_WOW_DEFAULT_TENANT);
	agr__wow_json_field_str(&b, "aggregateId", c->aggregate_id);
	agr__wow_json_field_str(&b, "ownerId", c->owner_id ? c->owner_id : "");
	agr__wow_json_field_str(&b, "spaceId", c->space_id ? c->space_id : "");
	agr__wow_json_field_str(&b, "requestId",
				c->request_id ? c->request_id : c->id);
	if (c->has_aggregate_version)
		agr__wow_json_field_int(&b, "aggregateVersion",
					c->aggregate_version);
	agr__wow_json_field_bool(&b, "isCreate", c->is_create);
	agr__wow_json_field_bool(&b, "isVoid", c->is_void);
	agr__wow_json_field_bool(&b, "allowCreate", c->allow_create);
	agr__wow_json_field_str(&b, "bodyType", c->body_type);
	agr__wow_json_key(&b, "body", false);
	agr__wow_json_raw(&b, WHAT " body", c->body, c->body_len, true);
	agr__wow_json_field_int(&b, "createTime", c->create_time);
	agr__wow_buf_bytes(&b, "}", 1);
	return agr__wow_buf_finish(&b, json, len);
}

static int read_fields(struct json_object *o, void *doc)
{
	struct decoded_command *d = doc;
	agr_wow_command *c = &d->pub;
	int err;

	c->owner_id = "";
	c->space_id = "";
	if ((err = agr__wow_json_get_str(o, WHAT, "id", true, &c->id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "contextName", true,
					 &c->context_name)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "aggregateName", true,
					 &c->aggregate_name)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "name", true, &c->name)) ||
	    (err = agr__wow_json_get_header(o, WHAT, "header", &d->header,
					    &c->header_count)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "tenantId", true,
					 &c->tenant_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "aggregateId", true,
					 &c->aggregate_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "ownerId", false,
					 &c->owner_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "spaceId", false,
					 &c->space_id)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "requestId", true,
					 &c->request_id)) ||
	    (err = agr__wow_json_get_int32(o, WHAT, "aggregateVersion", false,
					   &c->has_aggregate_version,
					   &c->aggregate_version)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "isCreate", true,
					  &c->is_create)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "isVoid", false,
					  &c->is_void)) ||
	    (err = agr__wow_json_get_bool(o, WHAT, "allowCreate", false,
					  &c->allow_create)) ||
	    (err = agr__wow_json_get_str(o, WHAT, "bodyType", true,
					 &c->body_type)) ||
	    (err = agr__wow_json_get_raw(o, WHAT, "body", json_type_object,
					 &c->body, &c->body_len, NULL)) ||
	    (err = agr__wow_json_get_int64(o, WHAT, "createTime", true,
					   &c->create_time)))
		return err;
	c->header = d->header;
	return 0;
}

static void free_command_parts(void *doc)
{
	struct decoded_command *d = doc;

	free(d->header);
}

static const struct agr__wow_doc_kind command_doc = {
	WHAT, sizeof(struct decoded_command),
	offsetof(struct decoded_command, root), read_fields, free_command_parts
};

AGR_API int agr_wow_command_decode(const char *json, size_t len,
				   agr_wow_command **out)
{
	int err;

	if (!json || !out)
		return -EINVAL;
	*out = agr__wow_doc_decode(&command_doc, json, len, &err);
	return err;
}

AGR_API void agr_wow_command_free(agr_wow_command *c)
{
	agr__wow_doc_free(&command_doc, c);
}
