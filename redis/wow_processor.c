/* SPDX-License-Identifier: MIT */
/*
 * wow_processor.c - one command through Wow's processor rules
 * (aggring/wow_processor.h): filter, state, preconditions, the C
 * aggregate, append (bounded retries), publish, notify, complete.
 * Every step runs on the message's worker; the order of the steps and
 * the source of each rule are in the header.
 */
#include "wow_processor_state.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring/io.h>
#include <aggring/wow_bus.h>
#include <aggring/wow_event_store.h>

#include "wow_processor_core.h"

/* Wow's SimpleCommandAggregate processorFunction: set before the checks. */
#define WOW_CONTEXT "wow"
#define WOW_PROCESSOR "SimpleCommandAggregate"
#define WOW_PROCESS "process"

struct op {
	agr_exchange *ex;
	struct agr__wow_pworker *pw;
	const agr_wow_command *cmd;
	struct agr__wow_agg *agg;	/* the cached entry */
	struct agr__wow_agg fresh;	/* isCreate's state */
	struct agr__wow_agg *cur;	/* agg or &fresh */
	agr_wow_outcome out;
	struct agr__wow_headers hdr;
	unsigned attempt;
	int32_t version;		/* being appended */
	int64_t create_time;		/* of the stream */
	char *stream_json, *state_json;
	size_t stream_len, state_len;
	unsigned published;		/* bits: 1 stream, 2 state event */
	unsigned outstanding;		/* of those, XADDs not answered */
	int pub_err;
	char state_arg;			/* the state XADD's callback arg */
	enum { STAGE_DECIDE, STAGE_PUBLISH, STAGE_REPUBLISH } stage;
	char stream_id[96];
	char event_ids[AGR__WOW_MAX_EVENTS][128]; /* stream id . index */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void op_free(struct op *op)
{
	agr__wow_outcome_reset(&op->out);
	agr__wow_headers_free(&op->hdr);
	agr__wow_agg_clear(&op->fresh);
	free(op->stream_json);
	free(op->state_json);
	free(op);
}

/* The PROCESSED signal, when the command's wait plan asks for it. */
static void notify(struct op *op, bool aggregate_fn, int32_t version,
		   const char *code, const char *msg)
{
	agr_wow_processor *p = op->pw->p;
	const char *endpoint;
	char *json;
	size_t len;

	if (p->no_notify || !agr_wow_wait_wanted(op->cmd, &endpoint))
		return;
	if (agr_wow_wait_signal_encode(
		    op->cmd, aggregate_fn ? p->named.context_name : WOW_CONTEXT,
		    aggregate_fn ? p->processor_name : WOW_PROCESSOR,
		    aggregate_fn ? p->function_name : WOW_PROCESS, version,
		    code, msg, now_ms(), &json, &len) < 0) {
		atomic_fetch_add(&p->stats.notify_failed, 1);
		return;
	}
	agr__wow_notify_post(agr_exchange_worker(op->ex), &op->pw->notify,
			     endpoint, json, len);
}

static void finish(struct op *op, int status)
{
	agr_exchange *ex = op->ex;

	if (status < 0 && status != AGR_DISCARDED)
		atomic_fetch_add(&op->pw->p->stats.failed, 1);
	op_free(op);
	agr_exchange_done(ex, status);
}

/* The command failed with Wow error `code`: tell the waiter, complete. */
static void fail(struct op *op, int status, const char *code,
		 const char *msg, bool aggregate_fn)
{
	if (status == -ECANCELED || status == AGR_DISCARDED) {
		finish(op, AGR_DISCARDED); /* a force stop */
		return;
	}
	agr_log(AGR_LOG_INFO, "wow processor: command %s (%s %s/%s): %s",
		op->cmd->id, op->cmd->name, op->cmd->tenant_id,
		op->cmd->aggregate_id, code);
	notify(op, aggregate_fn, op->cur ? op->cur->version : -1, code,
	       msg ? msg : "");
	finish(op, status);
}

static void step_load(struct op *op);
static void step_decide(struct op *op);

/* ---- publish ---- */

static void step_publish(struct op *op);
static void step_republish(struct op *op);
static void retry_or_fail(struct op *op, int status, const char *code);

static void publish_done(struct op *op);

/* The two publications, each its own callback argument. */
static void on_published(struct op *op, int which, int err)
{
	op->outstanding &= ~(1u << which);
	if (err) {
		agr_log(AGR_LOG_WARN, "wow processor: publish of command %s's "
			"%s: %s", op->cmd->id, which ? "state event" : "stream",
			agr_strerror(err));
		op->pub_err = err;
	} else {
		op->published |= 1u << which;
	}
	if (op->outstanding)
		return;
	publish_done(op);
}

/* Both answered (and step_publish returned: bit 4 held it). */
static void publish_done(struct op *op)
{
	int err;

	if (op->pub_err) { /* again, only what is missing */
		err = op->pub_err;
		op->pub_err = 0;
		retry_or_fail(op, err, "InternalServerError");
		return;
	}
	atomic_fetch_add(&op->pw->p->stats.processed, 1);
	notify(op, true, op->version, NULL, NULL);
	finish(op, 0);
}

static void on_stream_published(int err, const char *entry_id, void *arg)
{
	(void)entry_id;
	on_published(arg, 0, err);
}

static void on_state_published(int err, const char *entry_id, void *arg)
{
	struct op *op = (struct op *)(void *)((char *)arg -
					       offsetof(struct op, state_arg));

	(void)entry_id;
	on_published(op, 1, err);
}

/*
 * SendDomainEventStreamFilter, then SendStateEventFilter.kt: the
 * stream on :event and the state event on :state, sent together (two
 * streams, no order between them that a reader could see: each reader
 * group reads one); a retry resends only what is missing.
 */
static void step_publish(struct op *op)
{
	agr_wow_processor *p = op->pw->p;
	int ret;

	op->stage = STAGE_PUBLISH;
	if (!op->state_json)
		op->published |= 2u;
	/* bit 4: not done sending, so that a failure at once frees nothing */
	op->outstanding = (~op->published & 3u) | 4u;
	if (!(op->published & 1u)) {
		ret = agr_wow_publish(op->pw->redis, p->event_topic,
				      op->stream_json, op->stream_len,
				      on_stream_published, op);
		if (ret < 0)
			on_published(op, 0, ret);
	}
	if (!(op->published & 2u)) {
		ret = agr_wow_publish(op->pw->redis, p->state_topic,
				      op->state_json, op->state_len,
				      on_state_published, &op->state_arg);
		if (ret < 0)
			on_published(op, 1, ret);
	}
	op->outstanding &= ~4u;
	if (!op->outstanding)
		publish_done(op);
}

/* ---- append ---- */

static void on_backoff(int res, void *arg)
{
	struct op *op = arg;

	if (res == -ECANCELED) {
		finish(op, AGR_DISCARDED);
		return;
	}
	if (op->stage == STAGE_PUBLISH)
		step_publish(op);
	else if (op->stage == STAGE_REPUBLISH)
		step_republish(op);
	else
		step_load(op);
}

/*
 * Worth another try: a conflict, a timeout, a lost connection, a slot
 * without a master, and a server error (-EPROTO: CLUSTERDOWN, TRYAGAIN
 * or LOADING while a node restarts; a lasting one fails after the
 * retries all the same).
 */
static bool transient(int status)
{
	return status == AGR_WOW_EVERSION_CONFLICT || status == -ETIMEDOUT ||
	       status == -ECONNRESET || status == -ENXIO || status == -ELOOP ||
	       status == -EPROTO;
}

/*
 * RetryableAggregateProcessor.kt: Retry.backoff(3, 500 ms) on RECOVERABLE
 * errors (a version conflict, a timeout); here also a lost connection
 * or a slot without a master. The backoff doubles up to max_backoff_ms.
 */
static void retry_or_fail(struct op *op, int status, const char *code)
{
	agr_wow_processor *p = op->pw->p;
	uint64_t ms = p->min_backoff_ms << (op->attempt < 20 ? op->attempt : 20);

	if (op->attempt >= p->max_retries || !transient(status)) {
		fail(op, status, code, status == AGR_WOW_EVERSION_CONFLICT ?
			 NULL : agr_strerror(status), true);
		return;
	}
	if (p->max_backoff_ms && ms > p->max_backoff_ms)
		ms = p->max_backoff_ms;
	op->attempt++;
	if (status == AGR_WOW_EVERSION_CONFLICT)
		atomic_fetch_add(&p->stats.conflicts, 1);
	if (op->stage == STAGE_DECIDE) {
		agr__wow_outcome_reset(&op->out);
		agr__wow_headers_free(&op->hdr);
		op->agg->loaded = false; /* a conflict: read what came after */
	}
	if (agr_io_timeout(agr_exchange_worker(op->ex), ms * 1000000ull,
			   on_backoff, op) < 0)
		fail(op, status, code, NULL, true);
}

/* ---- a duplicate request id: its stored stream published again ---- */

static void on_republish_load(agr_wow_event_store *es, int status,
			      agr_wow_event_stream *const *streams,
			      const char *const *json, const size_t *json_len,
			      size_t count, void *arg)
{
	struct op *op = arg;

	(void)es;
	if (status < 0) {
		retry_or_fail(op, status, "DuplicateRequestId");
		return;
	}
	for (size_t i = 0; i < count; i++)
		if (!strcmp(streams[i]->request_id, op->cmd->request_id)) {
			free(op->stream_json);
			free(op->state_json);
			op->state_json = NULL;
			op->stream_json = strndup(json[i], json_len[i]);
			op->stream_len = json_len[i];
			op->version = streams[i]->version;
			if (!op->stream_json) {
				fail(op, -ENOMEM, "DuplicateRequestId", NULL,
				     true);
				return;
			}
			op->published = 0;
			op->pub_err = 0;
			step_publish(op);
			return;
		}
	fail(op, AGR_WOW_EDUPLICATE_REQUEST, "DuplicateRequestId", NULL, true);
}

/* Reads the whole stream for the one that request made. */
static void step_republish(struct op *op)
{
	int ret;

	op->stage = STAGE_REPUBLISH;
	ret = agr_wow_event_store_load(op->pw->store, op->cmd->aggregate_id,
				       op->cmd->tenant_id, AGR_WOW_VERSION_MIN,
				       AGR_WOW_VERSION_MAX, on_republish_load,
				       op);
	if (ret < 0)
		fail(op, ret, "DuplicateRequestId", agr_strerror(ret), true);
}

/* The cache takes the state the aggregate made (isCreate's included). */
static void applied(struct op *op)
{
	agr_wow_event_stream s = { 0 };

	if (op->cur == &op->fresh)
		agr__wow_agg_take(op->agg, &op->fresh);
	op->cur = op->agg;
	s.header = op->hdr.owned;
	s.header_count = op->hdr.count;
	s.owner_id = op->cmd->owner_id;
	s.space_id = op->cmd->space_id;
	s.version = op->version;
	s.create_time = op->create_time;
	if (agr__wow_agg_apply(op->agg, &s, &op->out) < 0)
		agr__wow_agg_fresh(op->agg); /* read it again next time */
	else
		op->agg->loaded = true;
}

static void on_append(agr_wow_event_store *es, int status, void *arg)
{
	struct op *op = arg;

	(void)es;
	if (status == 0) {
		applied(op);
		step_publish(op);
		return;
	}
	if (status == AGR_WOW_EVERSION_CONFLICT && op->version == 1 &&
	    (op->cmd->is_create || !op->pw->p->retry_create_conflict))
		status = AGR_WOW_EDUPLICATE_AGGREGATE; /* AbstractEventStore */
	switch (status) {
	case AGR_WOW_EVERSION_CONFLICT: /* recoverable: fresh state, again */
		retry_or_fail(op, status, "EventVersionConflict");
		return;
	case AGR_WOW_EDUPLICATE_AGGREGATE:
		fail(op, status, "DuplicateAggregateId", NULL, true);
		return;
	case AGR_WOW_EDUPLICATE_REQUEST:
		if (op->pw->p->republish_duplicate) {
			atomic_fetch_add(&op->pw->p->stats.republished, 1);
			agr__wow_outcome_reset(&op->out);
			step_republish(op);
		} else {
			fail(op, status, "DuplicateRequestId", NULL, true);
		}
		return;
	default: /* a timeout is recoverable in Wow too */
		retry_or_fail(op, status, "InternalServerError");
	}
}

/* The state event: the stream and the aggregate after it. */
static int encode_state_event(struct op *op, const agr_wow_event_stream *s)
{
	agr_wow_state_event e = { 0 };
	const struct agr__wow_agg *a = op->cur;
	bool first = s->version == 1;

	if (op->pw->p->no_state_events)
		return 0;
	e.stream = *s;
	e.first_operator = first ? agr__wow_header_value(s, "command_operator")
				 : a->first_operator;
	e.first_event_time = first ? s->create_time : a->first_event_time;
	e.state = op->out.state;
	e.state_len = op->out.state_len;
	e.deleted = op->out.deleted;
	return agr_wow_state_event_encode(&e, &op->state_json, &op->state_len);
}

static int encode_stream(struct op *op)
{
	agr_wow_event_stream s = { 0 };
	const agr_wow_command *c = op->cmd;
	int ret;

	snprintf(op->stream_id, sizeof(op->stream_id), "%.64s.%d", c->id,
		 (int)op->version);
	for (size_t i = 0; i < op->out.event_count; i++) {
		snprintf(op->event_ids[i], sizeof(op->event_ids[i]), "%s.%zu",
			 op->stream_id, i + 1);
		op->out.events[i].id = op->event_ids[i];
	}
	s.id = op->stream_id;
	s.context_name = c->context_name;
	s.aggregate_name = c->aggregate_name;
	s.header = op->hdr.owned;
	s.header_count = op->hdr.count;
	s.aggregate_id = c->aggregate_id;
	s.tenant_id = c->tenant_id;
	s.owner_id = c->owner_id;
	s.space_id = c->space_id;
	s.command_id = c->id;
	s.request_id = c->request_id;
	s.version = op->version;
	s.events = op->out.events;
	s.event_count = op->out.event_count;
	s.create_time = op->create_time = now_ms();
	free(op->stream_json);
	free(op->state_json);
	op->stream_json = op->state_json = NULL;
	ret = agr_wow_event_stream_encode(&s, &op->stream_json,
					  &op->stream_len);
	return ret < 0 ? ret : encode_state_event(op, &s);
}

static void step_append(struct op *op)
{
	int ret = agr__wow_headers_propagate(op->cmd, &op->hdr);

	op->version = op->cur->version + 1;
	if (ret == 0)
		ret = encode_stream(op);
	if (ret == 0)
		ret = agr_wow_event_store_append_json(
			op->pw->store, op->cmd->aggregate_id,
			op->cmd->tenant_id, op->cmd->request_id, op->version,
			op->stream_json, op->stream_len, on_append, op);
	if (ret < 0)
		fail(op, ret, "IllegalState", agr_strerror(ret), true);
}

/* ---- the aggregate ---- */

static void step_decide(struct op *op)
{
	agr_wow_processor *p = op->pw->p;
	agr_wow_aggregate_state st;
	const char *code;
	int ret;

	agr__wow_agg_view(op->cur, op->cmd->tenant_id, op->cmd->aggregate_id,
			  &st);
	ret = agr__wow_precondition(op->cmd, &st, &code);
	if (ret < 0) {
		fail(op, ret, code, NULL, false);
		return;
	}
	ret = p->on_command(&st, op->cmd, &op->out, p->arg);
	if (op->out.error_code) {
		fail(op, ret < 0 ? ret : -EPERM, op->out.error_code,
		     op->out.error_msg, true);
		return;
	}
	if (ret == 0 && (!op->out.event_count || !op->out.has_state))
		ret = -EINVAL; /* no events, or no state after them */
	if (ret < 0) {
		fail(op, ret, "IllegalState", agr_strerror(ret), true);
		return;
	}
	step_append(op);
}

/* ---- sourcing ---- */

static void on_load(agr_wow_event_store *es, int status,
		    agr_wow_event_stream *const *streams,
		    const char *const *json, const size_t *json_len,
		    size_t count, void *arg)
{
	struct op *op = arg;
	agr_wow_processor *p = op->pw->p;
	agr_wow_aggregate_state st;
	agr_wow_outcome o = { 0 };
	int ret = 0;

	(void)es, (void)json, (void)json_len;
	if (status < 0) {
		retry_or_fail(op, status, "RequestTimeout");
		return;
	}
	for (size_t i = 0; ret == 0 && i < count; i++) {
		agr__wow_agg_view(op->agg, op->cmd->tenant_id,
				  op->cmd->aggregate_id, &st);
		ret = p->on_sourcing(&st, streams[i], &o, p->arg);
		if (ret == 0)
			ret = agr__wow_agg_apply(op->agg, streams[i], &o);
		agr__wow_outcome_reset(&o);
	}
	if (ret < 0) {
		/* the cache holds a half-applied state: read it all again */
		agr__wow_agg_fresh(op->agg);
		fail(op, -EBADMSG, "IllegalState", "sourcing failed", false);
		return;
	}
	op->agg->loaded = true;
	step_decide(op);
}

/* isCreate starts from a fresh state; else the versions after the cache. */
static void step_load(struct op *op)
{
	int ret;

	op->stage = STAGE_DECIDE;
	if (op->cmd->is_create) {
		op->cur = &op->fresh;
		if (agr__wow_agg_fresh(&op->fresh) < 0)
			fail(op, -ENOMEM, "IllegalState", NULL, false);
		else
			step_decide(op);
		return;
	}
	op->cur = op->agg;
	if (op->pw->p->trust_cache && op->agg->loaded &&
	    !op->cmd->has_aggregate_version) {
		step_decide(op); /* the append's version check catches staleness */
		return;
	}
	ret = agr_wow_event_store_load(op->pw->store, op->cmd->aggregate_id,
				       op->cmd->tenant_id, op->agg->version + 1,
				       AGR_WOW_VERSION_MAX, on_load, op);
	if (ret < 0)
		fail(op, ret, "IllegalState", agr_strerror(ret), false);
}

/* Filters Wow applies before its processor, acking what they drop. */
static bool filtered(agr_wow_processor *p, const agr_wow_command *c)
{
	if (agr__wow_is_local_first_copy(c)) { /* LocalFirstMessageBus.kt */
		atomic_fetch_add(&p->stats.local_first, 1);
		return true;
	}
	if (c->is_void) { /* CommandDispatcher.kt */
		atomic_fetch_add(&p->stats.void_dropped, 1);
		return true;
	}
	return false;
}

int agr_wow_processor_handle(agr_exchange *ex, void *proc)
{
	agr_wow_processor *p = proc;
	const agr_wow_command *cmd =
		agr_wow_message_value(agr_exchange_message(ex));
	struct agr__wow_pworker *pw = agr__wow_pworker(p, ex);
	struct op *op;

	if (!cmd || !pw || !pw->store) {
		agr_log(AGR_LOG_ERROR, "wow processor: a message without a "
			"command, or a worker without a client");
		return -EBADMSG;
	}
	if (filtered(p, cmd))
		return 0;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->ex = ex;
	op->pw = pw;
	op->cmd = cmd;
	op->agg = agr__wow_cache_get(pw->cache, cmd->tenant_id,
				     cmd->aggregate_id);
	if (!op->agg) {
		free(op);
		return -ENOMEM;
	}
	step_load(op);
	return AGR_PENDING;
}
