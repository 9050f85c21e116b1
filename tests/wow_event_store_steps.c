/* SPDX-License-Identifier: MIT */
/*
 * wow_event_store_steps.c - check_wow_event_store's steps: each call
 * of the event store (open, append, load, snapshot, scan, close) run on
 * the worker where the store lives, its callback's answer kept for the
 * test thread, which waits on a latch.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>

#include "wow_event_store_test.h"
#include "testutil.h"

/* ---- steps on the worker ---- */

struct env E;

static void step_run(void *arg)
{
	struct step *s = arg;

	s->fn(s);
}

void run(struct step *s, void (*fn)(struct step *))
{
	s->fn = fn;
	tu_latch_init(&s->done, 1);
	ck_assert_int_eq(agr_scheduler_schedule(E.sched, 0, step_run, s), 0);
	ck_assert_msg(tu_latch_wait(&s->done, TU_LONG_NS), "step timed out");
	tu_latch_destroy(&s->done);
}

void finish(struct step *s, int status)
{
	s->status = status;
	tu_latch_count_down(&s->done);
}

void open_step(struct step *s)
{
	agr_redis_options o;
	int err;

	agr_redis_options_init(&o);
	o.host = "127.0.0.1";
	o.port = server->port;
	o.cluster = server->cluster;
	err = agr_redis_new(agr_worker_current(), &o, &E.redis);
	if (!err)
		err = agr_wow_event_store_new(E.redis, &bank, &E.es);
	finish(s, err);
}

/* The fixture checks that the client answers before the steps run. */
static void ping_reply(agr_redis *r, const struct redisReply *reply, int err,
		       void *arg)
{
	(void)r;
	finish(arg, err ? err : reply->type == REDIS_REPLY_STATUS ? 0 : -EPROTO);
}

void ping_step(struct step *s)
{
	int err = agr_redis_command(E.redis, NULL, ping_reply, s, "PING");

	if (err)
		finish(s, err);
}

static void closed(void *arg)
{
	finish(arg, 0);
}

void close_step(struct step *s)
{
	agr_wow_event_store_free(E.es);
	E.es = NULL;
	agr_redis_close(E.redis, closed, s);
}

static void status_cb(agr_wow_event_store *es, int status, void *arg)
{
	(void)es;
	finish(arg, status);
}

void value_cb(agr_wow_event_store *es, int value, void *arg)
{
	struct step *s = arg;

	(void)es;
	s->value = value;
	finish(s, value < 0 ? value : 0);
}

/* One stream of one event, "Deposited" with the version in its body. */
void append_step(struct step *s)
{
	char stream_id[32], body[32];
	agr_wow_event ev = { "ev", "Deposited", NULL, "bank.Deposited", body,
			     0 };
	agr_wow_event_stream st = {
		.id = stream_id, .context_name = "bank",
		.aggregate_name = "Account", .aggregate_id = s->id,
		.tenant_id = s->tenant, .command_id = s->request,
		.request_id = s->request, .version = s->version,
		.events = &ev, .event_count = 1, .create_time = 1733000000000,
	};
	int err;

	snprintf(stream_id, sizeof(stream_id), "s-%d", (int)s->version);
	ev.body_len = (size_t)snprintf(body, sizeof(body), "{\"amount\":%d}",
				       (int)s->version);
	err = agr_wow_event_store_append(E.es, &st, status_cb, s);
	if (err)
		finish(s, err);
}

static void load_cb(agr_wow_event_store *es, int status,
		    agr_wow_event_stream *const *streams,
		    const char *const *json, const size_t *json_len,
		    size_t count, void *arg)
{
	struct step *s = arg;

	(void)es;
	(void)json;
	(void)json_len;
	s->count = count;
	for (size_t i = 0; i < count && i < 8; i++) {
		s->versions[i] = streams[i]->version;
		snprintf(s->request_ids[i], 32, "%s", streams[i]->request_id);
		snprintf(s->event_names[i], 32, "%s",
			 streams[i]->events[0].name);
	}
	finish(s, status);
}

void load_step(struct step *s)
{
	int err = agr_wow_event_store_load(E.es, s->id, s->tenant, s->head,
					   s->tail, load_cb, s);

	if (err)
		finish(s, err);
}

void last_step(struct step *s)
{
	int err = agr_wow_event_store_last_version(E.es, s->id, s->tenant,
						   value_cb, s);

	if (err)
		finish(s, err);
}

void exists_step(struct step *s)
{
	int err = agr_wow_event_store_request_exists(E.es, s->id, s->tenant,
						     s->request, value_cb, s);

	if (err)
		finish(s, err);
}

void save_step(struct step *s)
{
	int err = agr_wow_snapshot_save(E.es, s->id, s->tenant, s->json,
					strlen(s->json), status_cb, s);

	if (err)
		finish(s, err);
}

static void snapshot_cb(agr_wow_event_store *es, int status,
			const char *json, size_t len, void *arg)
{
	struct step *s = arg;

	(void)es;
	if (!status)
		snprintf(s->snapshot, sizeof(s->snapshot), "%.*s", (int)len,
			 json);
	finish(s, status);
}

void snapshot_load_step(struct step *s)
{
	int err = agr_wow_snapshot_load(E.es, s->id, s->tenant, snapshot_cb,
					s);

	if (err)
		finish(s, err);
}

static void ids_cb(agr_wow_event_store *es, int status,
		   const char *const *ids, const char *const *tenants,
		   size_t count, void *arg)
{
	struct step *s = arg;

	(void)es;
	s->count = count;
	for (size_t i = 0; i < count && i < 8; i++) {
		snprintf(s->ids[i], 32, "%s", ids[i]);
		snprintf(s->tenants[i], 32, "%s", tenants[i]);
	}
	finish(s, status);
}

void scan_step(struct step *s)
{
	int err = agr_wow_event_store_scan_ids(E.es, s->after, s->limit,
					       ids_cb, s);

	if (err)
		finish(s, err);
}
