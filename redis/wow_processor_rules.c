/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_rules.c - the pure parts of Wow's command processor
 * rules (aggring/wow_processor.h): filters, preconditions, header
 * propagation, the wait plan and its signal, and the outcome a C
 * aggregate fills. No I/O here.
 */
#include "wow_processor_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wow_internal.h"

/* Frees what this file allocated and keeps behind a const pointer. */
static void free_const(const void *p)
{
	free((void *)(uintptr_t)p);
}

static const char *header_get(const agr_wow_command *c, const char *key)
{
	for (size_t i = 0; i < c->header_count; i++)
		if (c->header[i].key && !strcmp(c->header[i].key, key))
			return c->header[i].value;
	return NULL;
}

/*
 * messaging/LocalFirstMessageBus.kt: isLocalHandled() =
 * header["local_first"].toBoolean() (Kotlin: equals "true" ignoring
 * case) && isLocal(); the processor serves its own aggregate, so local.
 */
bool agr__wow_is_local_first_copy(const agr_wow_command *c)
{
	const char *v = header_get(c, "local_first");

	return v && !strcasecmp(v, "true");
}

static bool is_blank(const char *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
			return false;
	return true;
}

/*
 * modeling/command/SimpleCommandAggregate.kt, process(): the checks
 * before the command function, in its order. Returns 0, or the errno
 * and Wow's error code in *code.
 */
int agr__wow_precondition(const agr_wow_command *c,
			  const agr_wow_aggregate_state *st, const char **code)
{
	bool initialized = st->version > 0;

	if (c->has_aggregate_version && c->aggregate_version != st->version) {
		*code = "CommandExpectVersionConflict";
		return -ESTALE;
	}
	if (!initialized && !c->is_create && !c->allow_create) {
		*code = "NotFound";
		return -ENOENT;
	}
	if (initialized && !is_blank(c->owner_id) &&
	    strcmp(c->owner_id, st->owner_id)) {
		*code = "IllegalAccessOwnerAggregate";
		return -EACCES;
	}
	if (initialized && !is_blank(c->space_id) &&
	    strcmp(c->space_id, st->space_id)) {
		*code = "IllegalAccessSpaceAggregate";
		return -EACCES;
	}
	if (st->deleted) {
		*code = "IllegalAccessDeletedAggregate";
		return -EIDRM;
	}
	return 0;
}

/* ---- header propagation ---- */

static int header_add(struct agr__wow_headers *h, const char *key,
		      const char *value)
{
	char *k, *v;

	if (h->count == AGR__WOW_MAX_HEADERS)
		return -E2BIG;
	k = strdup(key);
	v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	h->owned[h->count].key = k;
	h->owned[h->count].value = v;
	h->count++;
	return 0;
}

void agr__wow_headers_free(struct agr__wow_headers *h)
{
	for (size_t i = 0; i < h->count; i++) {
		free_const(h->owned[i].key);
		free_const(h->owned[i].value);
	}
	h->count = 0;
}

/*
 * The headers of the events of command `c`, as Wow's propagators write
 * them (event/DomainEventStreamFactory.kt runs them over the command):
 * TraceMessagePropagator.kt (trace_id: the command's, which
 * ensureTraceId() set to the command id when absent; upstream_id; and
 * upstream_name, a command being Named), CommandOperatorMessagePropagator
 * (command_operator) and WaitPlanMessagePropagator (the command_wait_*
 * keys, when the header holds a wait plan).
 */
int agr__wow_headers_propagate(const agr_wow_command *c,
			       struct agr__wow_headers *h)
{
	const char *trace = header_get(c, "trace_id");
	const char *op = header_get(c, "command_operator");
	int ret = header_add(h, "trace_id", trace ? trace : c->id);

	if (ret == 0)
		ret = header_add(h, "upstream_id", c->id);
	if (ret == 0)
		ret = header_add(h, "upstream_name", c->name);
	if (ret == 0 && op)
		ret = header_add(h, "command_operator", op);
	if (ret == 0 && agr_wow_wait_wanted(c, NULL)) {
		for (size_t i = 0; ret == 0 && i < c->header_count; i++)
			if (!strncmp(c->header[i].key, "command_wait_", 13))
				ret = header_add(h, c->header[i].key,
						 c->header[i].value);
	}
	if (ret < 0)
		agr__wow_headers_free(h);
	return ret;
}

/* ---- the wait plan (command/wait/ExtractedWaitPlan.kt) ---- */

/*
 * extractWaitPlan(): command_wait_id, command_wait_endpoint and a
 * target: a simple chain with a tail (stage SAGA_HANDLED), a stage, or
 * a tail's stage. The processor notifies PROCESSED when the target's
 * stage is PROCESSED or lists it as previous (CommandStage.kt: every
 * stage but SENT).
 */
bool agr_wow_wait_wanted(const agr_wow_command *c, const char **endpoint)
{
	const char *id, *ep, *stage, *tail, *chain;

	if (!c)
		return false;
	id = header_get(c, "command_wait_id");
	ep = header_get(c, "command_wait_endpoint");
	stage = header_get(c, "command_wait_stage");
	tail = header_get(c, "command_wait_tail_stage");
	chain = header_get(c, "command_wait_chain");
	if (!id || !ep)
		return false;
	if (endpoint)
		*endpoint = ep;
	if (chain && !strcmp(chain, "simple") && tail)
		return true; /* SAGA_HANDLED */
	if (stage)
		return strcmp(stage, "SENT") != 0;
	return tail && strcmp(tail, "SENT") != 0;
}

/* "{"key":"value" : an object's first string field */
static void json_open(struct agr__wow_buf *b, const char *key,
		      const char *value)
{
	agr__wow_buf_str(b, "{");
	agr__wow_json_key(b, key, true);
	agr__wow_json_string(b, value);
}

static void json_function(struct agr__wow_buf *b, const char *ctx,
			  const char *processor, const char *name)
{
	agr__wow_json_key(b, "function", false);
	json_open(b, "functionKind", "COMMAND");
	agr__wow_json_field_str(b, "contextName", ctx);
	agr__wow_json_field_str(b, "processorName", processor);
	agr__wow_json_field_str(b, "name", name);
	agr__wow_buf_str(b, "}");
}

static void json_aggregate_id(struct agr__wow_buf *b,
			      const agr_wow_command *c)
{
	agr__wow_json_key(b, "aggregateId", false);
	json_open(b, "contextName", c->context_name);
	agr__wow_json_field_str(b, "aggregateName", c->aggregate_name);
	agr__wow_json_field_str(b, "aggregateId", c->aggregate_id);
	agr__wow_json_field_str(b, "tenantId", c->tenant_id);
	agr__wow_buf_str(b, "}");
}

/*
 * SimpleWaitSignal (command/wait/WaitSignal.kt) as Jackson writes it
 * (AggregateIdJsonSerializer for aggregateId); its schema in Wow's
 * wow-openapi example-domain-openapi.snapshot.json. id and commandId
 * are the command's (MonoCommandWaitNotifier.kt, notifySignal()).
 */
int agr_wow_wait_signal_encode(const agr_wow_command *c,
			       const char *function_context,
			       const char *processor_name,
			       const char *function_name,
			       int32_t aggregate_version,
			       const char *error_code, const char *error_msg,
			       int64_t signal_time, char **json, size_t *len)
{
	struct agr__wow_buf b = { 0 };
	const char *wait_id = c ? header_get(c, "command_wait_id") : NULL;
	const char *code = error_code ? error_code : "Ok";

	if (!c || !wait_id || !c->id || !c->aggregate_id || !json ||
	    !c->context_name || !c->aggregate_name || !c->tenant_id ||
	    !function_context || !processor_name || !function_name)
		return -EINVAL;
	agr__wow_buf_hint(&b, 512);
	json_open(&b, "id", c->id);
	agr__wow_json_field_str(&b, "waitCommandId", wait_id);
	agr__wow_json_field_str(&b, "commandId", c->id);
	json_aggregate_id(&b, c);
	agr__wow_json_field_str(&b, "stage", "PROCESSED");
	json_function(&b, function_context, processor_name, function_name);
	if (aggregate_version < 0) {
		agr__wow_json_key(&b, "aggregateVersion", false);
		agr__wow_buf_str(&b, "null");
	} else {
		agr__wow_json_field_int(&b, "aggregateVersion",
					aggregate_version);
	}
	agr__wow_json_field_bool(&b, "isLastProjection", false);
	agr__wow_json_field_str(&b, "errorCode", code);
	agr__wow_json_field_str(&b, "errorMsg", error_msg ? error_msg : "");
	agr__wow_buf_str(&b, ",\"bindingErrors\":[],\"result\":{},"
			     "\"commands\":[]");
	agr__wow_json_field_int(&b, "signalTime", signal_time);
	agr__wow_json_field_bool(&b, "succeeded", !strcmp(code, "Ok"));
	agr__wow_buf_str(&b, "}");
	return agr__wow_buf_finish(&b, json, len);
}

/* ---- the outcome a C aggregate fills ---- */

void agr__wow_outcome_reset(agr_wow_outcome *o)
{
	for (size_t i = 0; i < o->event_count; i++) {
		free_const(o->events[i].name);
		free_const(o->events[i].body_type);
		free_const(o->events[i].body);
		free_const(o->events[i].revision);
	}
	free(o->state);
	free(o->error_code);
	free(o->error_msg);
	memset(o, 0, sizeof(*o));
}

int agr_wow_outcome_event(agr_wow_outcome *o, const char *name,
			  const char *body_type, const char *body,
			  size_t body_len, const char *revision)
{
	agr_wow_event *e;

	if (!o || !name || !*name || !body_type || !*body_type || !body ||
	    !body_len)
		return -EINVAL;
	if (o->event_count == AGR__WOW_MAX_EVENTS)
		return -E2BIG;
	e = &o->events[o->event_count];
	e->name = strdup(name);
	e->body_type = strdup(body_type);
	e->body = strndup(body, body_len);
	e->body_len = body_len;
	e->revision = strdup(revision ? revision : AGR_WOW_DEFAULT_REVISION);
	o->event_count++; /* so that reset frees what was copied */
	if (!e->name || !e->body_type || !e->body || !e->revision)
		return -ENOMEM;
	return 0;
}

int agr_wow_outcome_state(agr_wow_outcome *o, const char *state, size_t len,
			  bool deleted)
{
	char *copy;

	if (!o || !state || !len)
		return -EINVAL;
	copy = strndup(state, len);
	if (!copy)
		return -ENOMEM;
	free(o->state);
	o->state = copy;
	o->state_len = len;
	o->deleted = deleted;
	o->has_state = true;
	return 0;
}

int agr_wow_outcome_error(agr_wow_outcome *o, const char *code,
			  const char *msg)
{
	char *c, *m;

	if (!o || !code || !*code)
		return -EINVAL;
	c = strdup(code);
	m = strdup(msg ? msg : "");
	if (!c || !m) {
		free(c);
		free(m);
		return -ENOMEM;
	}
	free(o->error_code);
	free(o->error_msg);
	o->error_code = c;
	o->error_msg = m;
	return 0;
}
