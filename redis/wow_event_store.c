/* SPDX-License-Identifier: MIT */
/*
 * wow_event_store.c - Wow's Redis event store (R/eventsourcing/
 * RedisEventStore.kt): the append script, loads by version range, the
 * last version, request ids; and the store's lifecycle and script
 * runner, which the snapshot store (wow_snapshot.c) shares.
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

struct agr_wow_event_store {
	agr_redis *redis;
	agr_worker *worker;
	agr_wow_named named; /* points at the copies below */
	char *context_name;
	char *alias;
	char *aggregate_name;
	unsigned holds; /* the owner's, and one per call in flight */
};

/* ---- lifecycle ---- */

static bool name_ok(const char *s)
{
	return s && *s && agr__wow_utf8_valid(s, strlen(s));
}

static void store_destroy(agr_wow_event_store *es)
{
	free(es->context_name);
	free(es->alias);
	free(es->aggregate_name);
	free(es);
}

AGR_API int agr_wow_event_store_new(agr_redis *r, const agr_wow_named *n,
				    agr_wow_event_store **out)
{
	agr_wow_event_store *es;

	if (!r || !n || !out || !n->context_name || !*n->context_name ||
	    !n->aggregate_name || !*n->aggregate_name) {
		agr_log(AGR_LOG_ERROR, "wow event store: a client and a "
				       "context and aggregate name are needed");
		return -EINVAL;
	}
	if (!name_ok(n->context_name) || !name_ok(n->aggregate_name) ||
	    (n->alias && *n->alias && !name_ok(n->alias))) {
		agr_log(AGR_LOG_ERROR, "wow event store: a name is not UTF-8");
		return -EILSEQ;
	}
	if (agr_worker_current() != agr_redis_worker(r))
		return -EPERM;
	es = calloc(1, sizeof(*es));
	if (!es)
		return -ENOMEM;
	es->context_name = strdup(n->context_name);
	es->aggregate_name = strdup(n->aggregate_name);
	es->alias = n->alias ? strdup(n->alias) : NULL;
	if (!es->context_name || !es->aggregate_name ||
	    (n->alias && !es->alias)) {
		store_destroy(es);
		return -ENOMEM;
	}
	es->redis = r;
	es->worker = agr_redis_worker(r);
	es->named = (agr_wow_named){ es->context_name, es->alias,
				     es->aggregate_name };
	es->holds = 1;
	*out = es;
	return 0;
}

void agr__wow_es_hold(agr_wow_event_store *es)
{
	es->holds++;
}

void agr__wow_es_release(agr_wow_event_store *es)
{
	if (--es->holds == 0)
		store_destroy(es);
}

AGR_API void agr_wow_event_store_free(agr_wow_event_store *es)
{
	if (es)
		agr__wow_es_release(es);
}

AGR_API agr_redis *agr_wow_event_store_redis(const agr_wow_event_store *es)
{
	return es ? es->redis : NULL;
}

AGR_API const agr_wow_named *
agr_wow_event_store_named(const agr_wow_event_store *es)
{
	return es ? &es->named : NULL;
}

const agr_wow_named *agr__wow_es_named(agr_wow_event_store *es)
{
	return &es->named;
}

int agr__wow_es_enter(agr_wow_event_store *es, const char *call)
{
	if (agr_worker_current() != es->worker) {
		agr_log(AGR_LOG_ERROR, "wow event store: %s called off the "
				       "client's worker", call);
		return -EPERM;
	}
	return 0;
}

int agr__wow_es_keys(agr_wow_event_store *es, const char *id,
		     const char *tenant, agr_wow_es_keys *k)
{
	int err = agr_wow_es_keys_build(&es->named, id, tenant, k);

	if (err)
		agr_log(AGR_LOG_WARN, "wow event store: no keys for "
				      "aggregate id \"%s\": %s",
			id ? id : "(null)", agr_strerror(err));
	return err;
}

/* ---- scripts: EVALSHA, then EVAL once on NOSCRIPT ---- */

#define SCRIPT_MAX_ARGS 12

struct script_call {
	agr_wow_event_store *es;
	const char *script;
	const char *sha1;
	int argc;
	const char *argv[SCRIPT_MAX_ARGS + 3];
	size_t lens[SCRIPT_MAX_ARGS + 3];
	char nkeys[12];
	bool evaled;
	agr__wow_script_fn done;
	void *op;
};

static int script_send(struct script_call *sc);

static bool is_noscript(const redisReply *reply)
{
	return reply && reply->type == REDIS_REPLY_ERROR && reply->len >= 8 &&
	       !memcmp(reply->str, "NOSCRIPT", 8);
}

static void script_reply(agr_redis *r, const redisReply *reply, int err,
			 void *arg)
{
	struct script_call *sc = arg;
	agr_wow_event_store *es = sc->es;

	(void)r;
	if (!err && !sc->evaled && is_noscript(reply)) {
		sc->evaled = true;
		err = script_send(sc);
		if (!err)
			return;
		reply = NULL;
	}
	sc->done(es, reply, err, sc->op);
	free(sc);
}

static int script_send(struct script_call *sc)
{
	sc->argv[0] = sc->evaled ? "EVAL" : "EVALSHA";
	sc->lens[0] = strlen(sc->argv[0]);
	sc->argv[1] = sc->evaled ? sc->script : sc->sha1;
	sc->lens[1] = strlen(sc->argv[1]);
	/* the first key (argv[3]) routes: all keys share one hash tag */
	return agr_redis_command_argv(sc->es->redis, sc->argv[3], sc->lens[3],
				      sc->argc, sc->argv, sc->lens,
				      script_reply, sc);
}

int agr__wow_es_script(agr_wow_event_store *es, const char *script,
		       const char *sha1, int nkeys, int nargv,
		       const char *const *args, const size_t *lens,
		       agr__wow_script_fn done, void *op)
{
	struct script_call *sc;
	int i, err;

	if (nkeys < 1 || nargv < 0 || nkeys + nargv > SCRIPT_MAX_ARGS)
		return -EINVAL;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->es = es;
	sc->script = script;
	sc->sha1 = sha1;
	sc->done = done;
	sc->op = op;
	snprintf(sc->nkeys, sizeof(sc->nkeys), "%d", nkeys);
	sc->argv[2] = sc->nkeys;
	sc->lens[2] = strlen(sc->nkeys);
	for (i = 0; i < nkeys + nargv; i++) {
		sc->argv[3 + i] = args[i];
		sc->lens[3 + i] = lens[i];
	}
	sc->argc = 3 + nkeys + nargv;
	err = script_send(sc);
	if (err)
		free(sc);
	return err;
}

const char *agr__wow_reply_text(const redisReply *reply, const char *what,
				int *err)
{
	if (reply->type == REDIS_REPLY_STRING ||
	    reply->type == REDIS_REPLY_STATUS)
		return reply->str;
	if (reply->type == REDIS_REPLY_ERROR)
		agr_log(AGR_LOG_WARN, "wow event store: %s: %.*s", what,
			(int)reply->len, reply->str);
	else
		agr_log(AGR_LOG_WARN, "wow event store: %s: unexpected reply "
				      "type %d", what, reply->type);
	*err = -EPROTO;
	return NULL;
}

/* ---- append ---- */

struct append_op {
	agr_wow_status_fn cb;
	void *arg;
	agr_wow_es_keys keys;
	char *request_id;
	char version[12];
	char *json;
	size_t json_len;
};

static void append_op_free(struct append_op *op)
{
	agr_wow_es_keys_free(&op->keys);
	free(op->request_id);
	free(op->json);
	free(op);
}

static int append_result(const char *text)
{
	if (!strcmp(text, "Ok"))
		return 0;
	if (!strcmp(text, "EventVersionConflict"))
		return AGR_WOW_EVERSION_CONFLICT;
	if (!strcmp(text, "DuplicateAggregateId"))
		return AGR_WOW_EDUPLICATE_AGGREGATE;
	if (!strcmp(text, "DuplicateRequestId"))
		return AGR_WOW_EDUPLICATE_REQUEST;
	agr_log(AGR_LOG_WARN, "wow event store: unexpected append result "
			      "[%s]", text);
	return -EPROTO;
}

static void append_done(agr_wow_event_store *es, const redisReply *reply,
			int err, void *arg)
{
	struct append_op *op = arg;
	const char *text;

	if (!err) {
		text = agr__wow_reply_text(reply, "append", &err);
		if (text)
			err = append_result(text);
	}
	op->cb(es, err, op->arg);
	append_op_free(op);
	agr__wow_es_release(es);
}

static int append_send(agr_wow_event_store *es, struct append_op *op)
{
	const char *args[9] = {
		op->keys.stream, op->keys.ids, op->keys.req_idx,
		op->request_id, op->version, op->json, op->keys.member,
		op->keys.member_prefix, op->keys.member_after,
	};
	const size_t lens[9] = {
		op->keys.stream_len, op->keys.ids_len, op->keys.req_idx_len,
		strlen(op->request_id), strlen(op->version), op->json_len,
		op->keys.member_len, op->keys.member_prefix_len,
		op->keys.member_after_len,
	};

	/* the runner copies the pointers; the strings stay in op */
	return agr__wow_es_script(es, agr__wow_append_lua,
				  agr__wow_append_sha1, 3, 6, args, lens,
				  append_done, op);
}

/* Takes `json` (malloc()ed) whatever the outcome. */
static int append_owned(agr_wow_event_store *es, const char *aggregate_id,
			const char *tenant_id, const char *request_id,
			int32_t version, char *json, size_t len,
			agr_wow_status_fn cb, void *arg)
{
	struct append_op *op;
	int err;

	if (!cb || !request_id || !*request_id || version < 1) {
		free(json);
		return -EINVAL;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		free(json);
		return -ENOMEM;
	}
	op->json = json;
	op->json_len = len;
	op->cb = cb;
	op->arg = arg;
	snprintf(op->version, sizeof(op->version), "%d", (int)version);
	op->request_id = strdup(request_id);
	err = op->request_id ? 0 : -ENOMEM;
	if (!err && !agr__wow_utf8_valid(request_id, strlen(request_id)))
		err = -EILSEQ;
	if (!err)
		err = agr__wow_es_keys(es, aggregate_id, tenant_id, &op->keys);
	if (err) {
		append_op_free(op);
		return err;
	}
	/* held first: the client may fail the command before it returns */
	agr__wow_es_hold(es);
	err = append_send(es, op);
	if (err) {
		append_op_free(op);
		agr__wow_es_release(es);
	}
	return err;
}

AGR_API int agr_wow_event_store_append_json(agr_wow_event_store *es,
					    const char *aggregate_id,
					    const char *tenant_id,
					    const char *request_id,
					    int32_t version, const char *json,
					    size_t len, agr_wow_status_fn cb,
					    void *arg)
{
	char *copy;
	int err;

	if (!es || !json || !len)
		return -EINVAL;
	err = agr__wow_es_enter(es, "append");
	if (err)
		return err;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, json, len);
	return append_owned(es, aggregate_id, tenant_id, request_id, version,
			    copy, len, cb, arg);
}

AGR_API int agr_wow_event_store_append(agr_wow_event_store *es,
				       const agr_wow_event_stream *s,
				       agr_wow_status_fn cb, void *arg)
{
	char *json;
	size_t len;
	int err;

	if (!es || !s)
		return -EINVAL;
	err = agr__wow_es_enter(es, "append");
	if (err)
		return err;
	if (!s->context_name || !s->aggregate_name ||
	    strcmp(s->context_name, es->context_name) ||
	    strcmp(s->aggregate_name, es->aggregate_name)) {
		agr_log(AGR_LOG_ERROR, "wow event store: a stream of %s.%s "
				       "appended to the store of %s.%s",
			s->context_name ? s->context_name : "(null)",
			s->aggregate_name ? s->aggregate_name : "(null)",
			es->context_name, es->aggregate_name);
		return -EINVAL;
	}
	err = agr_wow_event_stream_encode(s, &json, &len);
	if (err)
		return err;
	return append_owned(es, s->aggregate_id, s->tenant_id,
			    s->request_id ? s->request_id : s->command_id,
			    s->version, json, len, cb, arg);
}

/* ---- reads ---- */

enum read_kind { READ_LOAD, READ_LAST, READ_EXISTS };

struct read_op {
	agr_wow_event_store *es;
	enum read_kind kind;
	union {
		agr_wow_load_fn load;
		agr_wow_value_fn value;
	} cb;
	void *arg;
};

static void load_deliver(struct read_op *op, const redisReply *reply)
{
	size_t n = reply->elements, i;
	agr_wow_event_stream **streams = calloc(n ? n : 1, sizeof(*streams));
	const char **json = calloc(n ? n : 1, sizeof(*json));
	size_t *lens = calloc(n ? n : 1, sizeof(*lens));
	int err = (streams && json && lens) ? 0 : -ENOMEM;

	for (i = 0; i < n && !err; i++) {
		const redisReply *e = reply->element[i];

		if (e->type != REDIS_REPLY_STRING) {
			err = -EPROTO;
			break;
		}
		json[i] = e->str;
		lens[i] = e->len;
		err = agr_wow_event_stream_decode(e->str, e->len, &streams[i]);
	}
	if (err)
		op->cb.load(op->es, err, NULL, NULL, NULL, 0, op->arg);
	else
		op->cb.load(op->es, 0, streams, json, lens, n, op->arg);
	for (i = 0; streams && i < n; i++)
		agr_wow_event_stream_free(streams[i]);
	free(streams);
	free(json);
	free(lens);
}

/* ZREVRANGE ... WITHSCORES: [member, score] or [] */
static int last_version(const redisReply *reply)
{
	const redisReply *score;
	char *end;
	long v;

	if (reply->elements == 0)
		return 0;
	score = reply->elements == 2 ? reply->element[1] : NULL;
	if (!score || score->type != REDIS_REPLY_STRING)
		return -EPROTO;
	v = strtol(score->str, &end, 10);
	if (end == score->str || *end || v < 1 || v > INT32_MAX)
		return -EBADMSG;
	return (int)v;
}

static void read_reply(agr_redis *r, const redisReply *reply, int err,
		       void *arg)
{
	struct read_op *op = arg;
	agr_wow_event_store *es = op->es;
	int want = op->kind == READ_EXISTS ? REDIS_REPLY_INTEGER :
					     REDIS_REPLY_ARRAY;

	(void)r;
	if (!err && reply->type != want) {
		if (reply->type == REDIS_REPLY_ERROR)
			agr_log(AGR_LOG_WARN, "wow event store: %.*s",
				(int)reply->len, reply->str);
		err = -EPROTO;
	}
	if (err && op->kind == READ_LOAD)
		op->cb.load(es, err, NULL, NULL, NULL, 0, op->arg);
	else if (err)
		op->cb.value(es, err, op->arg);
	else if (op->kind == READ_LOAD)
		load_deliver(op, reply);
	else if (op->kind == READ_LAST)
		op->cb.value(es, last_version(reply), op->arg);
	else
		op->cb.value(es, reply->integer ? 1 : 0, op->arg);
	free(op);
	agr__wow_es_release(es);
}

static int read_send(agr_wow_event_store *es, struct read_op *op,
		     const char *id, const char *tenant, int32_t head,
		     int32_t tail, const char *request_id)
{
	agr_wow_es_keys k;
	char h[12], t[12];
	const char *argv[5];
	size_t lens[5];
	int argc, err;

	err = agr__wow_es_keys(es, id, tenant, &k);
	if (err)
		return err;
	if (op->kind == READ_LOAD) {
		snprintf(h, sizeof(h), "%d", (int)head);
		snprintf(t, sizeof(t), "%d", (int)tail);
		argv[0] = "ZRANGEBYSCORE";
		argv[1] = k.stream;
		argv[2] = h;
		argv[3] = t;
		argc = 4;
	} else if (op->kind == READ_LAST) {
		argv[0] = "ZREVRANGE";
		argv[1] = k.stream;
		argv[2] = "0";
		argv[3] = "0";
		argv[4] = "WITHSCORES";
		argc = 5;
	} else {
		argv[0] = "SISMEMBER";
		argv[1] = k.req_idx;
		argv[2] = request_id;
		argc = 3;
	}
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	/* the client copies the command into its output at once */
	err = agr_redis_command_argv(es->redis, argv[1], lens[1], argc, argv,
				     lens, read_reply, op);
	agr_wow_es_keys_free(&k);
	return err;
}

static int read_start(agr_wow_event_store *es, enum read_kind kind,
		      const char *id, const char *tenant, int32_t head,
		      int32_t tail, const char *request_id,
		      agr_wow_load_fn load, agr_wow_value_fn value, void *arg)
{
	struct read_op *op;
	int err;

	if (!es || (kind == READ_LOAD ? !load : !value))
		return -EINVAL;
	err = agr__wow_es_enter(es, "a read");
	if (err)
		return err;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->es = es;
	op->kind = kind;
	op->arg = arg;
	if (kind == READ_LOAD)
		op->cb.load = load;
	else
		op->cb.value = value;
	agr__wow_es_hold(es);
	err = read_send(es, op, id, tenant, head, tail, request_id);
	if (err) {
		free(op);
		agr__wow_es_release(es);
	}
	return err;
}

AGR_API int agr_wow_event_store_load(agr_wow_event_store *es,
				     const char *aggregate_id,
				     const char *tenant_id, int32_t head,
				     int32_t tail, agr_wow_load_fn cb,
				     void *arg)
{
	if (head < 0 || head > tail)
		return -EINVAL;
	return read_start(es, READ_LOAD, aggregate_id, tenant_id, head, tail,
			  NULL, cb, NULL, arg);
}

AGR_API int agr_wow_event_store_last_version(agr_wow_event_store *es,
					     const char *aggregate_id,
					     const char *tenant_id,
					     agr_wow_value_fn cb, void *arg)
{
	return read_start(es, READ_LAST, aggregate_id, tenant_id, 0, 0, NULL,
			  NULL, cb, arg);
}

AGR_API int agr_wow_event_store_request_exists(agr_wow_event_store *es,
					       const char *aggregate_id,
					       const char *tenant_id,
					       const char *request_id,
					       agr_wow_value_fn cb, void *arg)
{
	if (!request_id)
		return -EINVAL;
	return read_start(es, READ_EXISTS, aggregate_id, tenant_id, 0, 0,
			  request_id, NULL, cb, arg);
}
