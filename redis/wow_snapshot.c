/* SPDX-License-Identifier: MIT */
/*
 * wow_snapshot.c - Wow's Redis snapshot store (R/eventsourcing/
 * RedisSnapshotStore.kt, snapshot_save.lua): one STRING per aggregate,
 * saved unless a newer version is stored.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <aggring/wow_event_store.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <json.h>

struct save_op {
	agr_wow_status_fn cb;
	void *arg;
	agr_wow_es_keys keys;
	char version[24];
	char *json;
	size_t json_len;
};

static void save_op_free(struct save_op *op)
{
	agr_wow_es_keys_free(&op->keys);
	free(op->json);
	free(op);
}

static void save_done(agr_wow_event_store *es, const struct redisReply *reply,
		      int err, void *arg)
{
	struct save_op *op = arg;
	const char *text;

	if (!err) {
		text = agr__wow_reply_text(reply, "snapshot save", &err);
		if (text && !strcmp(text, "Ok")) {
			err = 0;
		} else if (text && !strcmp(text, "Ignored")) {
			err = AGR_WOW_SNAPSHOT_IGNORED;
		} else if (text) {
			agr_log(AGR_LOG_WARN, "wow event store: unexpected "
					      "snapshot result [%s]", text);
			err = -EPROTO;
		}
	}
	op->cb(es, err, op->arg);
	save_op_free(op);
	agr__wow_es_release(es);
}

/* The snapshot's integer "version", which the script compares. */
static int snapshot_version(const char *json, size_t len, int64_t *v)
{
	struct json_object *o = agr__wow_json_parse("wow snapshot", json, len);
	int err;

	if (!o)
		return -EBADMSG;
	if (!json_object_is_type(o, json_type_object)) {
		agr_log(AGR_LOG_WARN, "wow snapshot: not a JSON object");
		err = -EBADMSG;
	} else {
		err = agr__wow_json_get_int64(o, "wow snapshot", "version",
					      true, v);
	}
	json_object_put(o);
	return err;
}

static int save_send(agr_wow_event_store *es, struct save_op *op)
{
	const char *args[3] = { op->keys.snapshot, op->version, op->json };
	const size_t lens[3] = { op->keys.snapshot_len, strlen(op->version),
				 op->json_len };

	return agr__wow_es_script(es, agr__wow_snapshot_lua,
				  agr__wow_snapshot_sha1, 1, 2, args, lens,
				  save_done, op);
}

AGR_API int agr_wow_snapshot_save(agr_wow_event_store *es,
				  const char *aggregate_id,
				  const char *tenant_id, const char *json,
				  size_t len, agr_wow_status_fn cb, void *arg)
{
	struct save_op *op;
	int64_t version;
	int err;

	if (!es || !json || !len || !cb)
		return -EINVAL;
	err = agr__wow_es_enter(es, "snapshot save");
	if (err)
		return err;
	err = snapshot_version(json, len, &version);
	if (err)
		return err;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->cb = cb;
	op->arg = arg;
	snprintf(op->version, sizeof(op->version), "%lld", (long long)version);
	op->json = malloc(len);
	op->json_len = len;
	err = op->json ? 0 : -ENOMEM;
	if (!err) {
		memcpy(op->json, json, len);
		err = agr__wow_es_keys(es, aggregate_id, tenant_id, &op->keys);
	}
	if (err) {
		save_op_free(op);
		return err;
	}
	/* held first: the client may fail the command before it returns */
	agr__wow_es_hold(es);
	err = save_send(es, op);
	if (err) {
		save_op_free(op);
		agr__wow_es_release(es);
	}
	return err;
}

struct load_op {
	agr_wow_event_store *es;
	agr_wow_snapshot_fn cb;
	void *arg;
};

static void load_reply(agr_redis *r, const struct redisReply *reply, int err,
		       void *arg)
{
	struct load_op *op = arg;
	agr_wow_event_store *es = op->es;

	(void)r;
	if (err)
		op->cb(es, err, NULL, 0, op->arg);
	else if (reply->type == REDIS_REPLY_NIL)
		op->cb(es, -ENOENT, NULL, 0, op->arg);
	else if (reply->type == REDIS_REPLY_STRING)
		op->cb(es, 0, reply->str, reply->len, op->arg);
	else {
		if (reply->type == REDIS_REPLY_ERROR)
			agr_log(AGR_LOG_WARN, "wow snapshot load: %.*s",
				(int)reply->len, reply->str);
		op->cb(es, -EPROTO, NULL, 0, op->arg);
	}
	free(op);
	agr__wow_es_release(es);
}

AGR_API int agr_wow_snapshot_load(agr_wow_event_store *es,
				  const char *aggregate_id,
				  const char *tenant_id,
				  agr_wow_snapshot_fn cb, void *arg)
{
	agr_wow_es_keys k;
	struct load_op *op;
	const char *argv[2];
	size_t lens[2];
	int err;

	if (!es || !cb)
		return -EINVAL;
	err = agr__wow_es_enter(es, "snapshot load");
	if (err)
		return err;
	err = agr__wow_es_keys(es, aggregate_id, tenant_id, &k);
	if (err)
		return err;
	op = calloc(1, sizeof(*op));
	if (!op) {
		agr_wow_es_keys_free(&k);
		return -ENOMEM;
	}
	*op = (struct load_op){ es, cb, arg };
	argv[0] = "GET";
	lens[0] = 3;
	argv[1] = k.snapshot;
	lens[1] = k.snapshot_len;
	agr__wow_es_hold(es);
	err = agr_redis_command_argv(agr_wow_event_store_redis(es), k.snapshot,
				     k.snapshot_len, 2, argv, lens, load_reply,
				     op);
	agr_wow_es_keys_free(&k);
	if (err) {
		free(op);
		agr__wow_es_release(es);
	}
	return err;
}
