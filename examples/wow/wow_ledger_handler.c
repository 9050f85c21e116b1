/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger_handler.c - Deposit on bank.Account, as an event-sourced
 * command handler on Wow's Redis event store:
 *
 *   cached state (or load) -> append version+1 -> publish on :event
 *   -> done
 *
 * A version conflict (another instance appended first) reloads and
 * tries again. A duplicate request id means this command was applied
 * before (a redelivery after a crash): the stored stream of that
 * request is published again and nothing is appended, so the effect
 * stays exactly once. The message completes (and so is acked) only
 * after the publish, so a crash before it redelivers the command and
 * the republish fills what the crash left out. Transient failures
 * (a node restarting, a lost connection) retry from a reload until
 * retry_for_ms.
 */
#include "wow_ledger_handler.h"
#include "wow_accounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/wow_bus.h>
#include <aggring/wow_event_store.h>

#define RETRY_DELAY_NS 100000000ull /* 100 ms */

struct deposit {
	agr_exchange *ex;
	struct wow_ledger *ledger;
	struct wow_worker_state *st;
	const agr_wow_command *cmd;
	struct wow_account *acct;
	int64_t amount;
	int32_t version; /* being appended */
	int64_t balance;
	bool republish;	 /* find the stored stream of this request */
	uint64_t give_up_ms;
	char *json;
	size_t json_len;
};

static void step_load(struct deposit *d);
static void step_append(struct deposit *d);

static void finish(struct deposit *d, int status)
{
	agr_exchange *ex = d->ex;

	if (status < 0 && status != AGR_DISCARDED)
		atomic_fetch_add(&d->ledger->failed, 1);
	free(d->json);
	free(d);
	agr_exchange_done(ex, status);
}

static void on_retry_timer(int res, void *arg)
{
	struct deposit *d = arg;

	if (res == -ECANCELED) {
		finish(d, AGR_DISCARDED);
		return;
	}
	step_load(d);
}

/* A transient failure: reload (it may have been applied) and go again. */
static void retry(struct deposit *d, int err, const char *what)
{
	if (err == -ECANCELED) {
		finish(d, AGR_DISCARDED);
		return;
	}
	if (wow_now_ms() > d->give_up_ms) {
		fprintf(stderr, "wow_ledger: %s %s: %s; giving up\n", what,
			d->cmd->aggregate_id, strerror(-err));
		finish(d, err);
		return;
	}
	atomic_fetch_add(&d->ledger->retries, 1);
	d->acct->loaded = false;
	if (agr_io_timeout(agr_exchange_worker(d->ex), RETRY_DELAY_NS,
			   on_retry_timer, d) < 0)
		finish(d, err);
}

static void on_published(int err, const char *entry_id, void *arg)
{
	struct deposit *d = arg;

	(void)entry_id;
	if (err) {
		retry(d, err, "publish");
		return;
	}
	finish(d, 0);
}

static void step_publish(struct deposit *d)
{
	int ret = agr_wow_publish(d->st->redis, d->ledger->event_topic,
				  d->json, d->json_len, on_published, d);

	if (ret < 0)
		retry(d, ret, "publish");
}

static void on_append(agr_wow_event_store *es, int status, void *arg)
{
	struct deposit *d = arg;

	(void)es;
	switch (status) {
	case 0:
		d->acct->version = d->version;
		d->acct->balance = d->balance;
		atomic_fetch_add(&d->ledger->applied, 1);
		step_publish(d);
		return;
	case AGR_WOW_EVERSION_CONFLICT:
		atomic_fetch_add(&d->ledger->conflicts, 1);
		d->acct->loaded = false;
		step_load(d);
		return;
	case AGR_WOW_EDUPLICATE_REQUEST:
		atomic_fetch_add(&d->ledger->duplicates, 1);
		d->republish = true;
		d->acct->loaded = false;
		step_load(d);
		return;
	case AGR_WOW_EDUPLICATE_AGGREGATE:
		finish(d, status);
		return;
	default:
		retry(d, status, "append");
	}
}

static int encode_stream(struct deposit *d)
{
	char id[160], event_id[160], body[96];
	agr_wow_event ev = { 0 };
	agr_wow_event_stream s = { 0 };

	snprintf(id, sizeof(id), "%s-s", d->cmd->id);
	snprintf(event_id, sizeof(event_id), "%s-e", d->cmd->id);
	snprintf(body, sizeof(body), "{\"amount\":%lld,\"balance\":%lld}",
		 (long long)d->amount, (long long)d->balance);
	ev.id = event_id;
	ev.name = WOW_DEPOSITED;
	ev.body_type = WOW_DEPOSITED_TYPE;
	ev.body = body;
	ev.body_len = strlen(body);
	s.id = id;
	s.context_name = WOW_CONTEXT;
	s.aggregate_name = WOW_AGGREGATE;
	s.aggregate_id = d->cmd->aggregate_id;
	s.tenant_id = d->cmd->tenant_id;
	s.owner_id = d->cmd->owner_id;
	s.space_id = d->cmd->space_id;
	s.command_id = d->cmd->id;
	s.request_id = d->cmd->request_id;
	s.version = d->version;
	s.events = &ev;
	s.event_count = 1;
	s.create_time = (int64_t)wow_now_ms();
	free(d->json);
	d->json = NULL;
	return agr_wow_event_stream_encode(&s, &d->json, &d->json_len);
}

static void step_append(struct deposit *d)
{
	int ret;

	d->version = d->acct->version + 1;
	d->balance = d->acct->balance + d->amount;
	ret = encode_stream(d);
	if (ret == 0)
		ret = agr_wow_event_store_append_json(
			d->st->store, d->cmd->aggregate_id, d->cmd->tenant_id,
			d->cmd->request_id, d->version, d->json, d->json_len,
			on_append, d);
	if (ret < 0)
		retry(d, ret, "append");
}

/* The balance after the stream: its last event's body says it. */
static int stream_balance(const agr_wow_event_stream *s, int64_t *balance)
{
	int64_t amount;
	const agr_wow_event *last = &s->events[s->event_count - 1];

	return wow_deposited_parse(last->body, &amount, balance);
}

static void on_load(agr_wow_event_store *es, int status,
		    agr_wow_event_stream *const *streams,
		    const char *const *json, const size_t *json_len,
		    size_t count, void *arg)
{
	struct deposit *d = arg;
	int64_t balance = 0;

	(void)es;
	if (status < 0) {
		retry(d, status, "load");
		return;
	}
	if (count && stream_balance(streams[count - 1], &balance) < 0) {
		finish(d, -EBADMSG);
		return;
	}
	if (count) { /* the versions after what the cache had */
		d->acct->version = streams[count - 1]->version;
		d->acct->balance = balance;
	}
	d->acct->loaded = true;
	if (!d->republish) {
		step_append(d);
		return;
	}
	for (size_t i = 0; i < count; i++)
		if (!strcmp(streams[i]->request_id, d->cmd->request_id)) {
			free(d->json);
			d->json = strndup(json[i], json_len[i]);
			d->json_len = json_len[i];
			if (!d->json) {
				finish(d, -ENOMEM);
				return;
			}
			step_publish(d);
			return;
		}
	finish(d, 0); /* the request id belongs to no stream here */
}

static void step_load(struct deposit *d)
{
	int ret;

	if (d->acct->loaded && !d->republish) {
		step_append(d);
		return;
	}
	/*
	 * Versions only grow, so the cached one is a floor: a reload reads
	 * only what came after it. A republish searches the whole stream.
	 */
	if (d->republish) {
		d->acct->version = 0;
		d->acct->balance = 0;
	}
	ret = agr_wow_event_store_load(d->st->store, d->cmd->aggregate_id,
				       d->cmd->tenant_id, d->acct->version + 1,
				       AGR_WOW_VERSION_MAX, on_load, d);
	if (ret < 0)
		retry(d, ret, "load");
}

int wow_ledger_deposit(agr_exchange *ex, void *arg)
{
	struct wow_ledger *ledger = arg;
	agr_message *m = agr_exchange_message(ex);
	const agr_wow_command *cmd = agr_wow_message_value(m);
	struct wow_worker_state *st =
		wow_worker_state(ledger->workers, agr_exchange_worker(ex));
	struct deposit *d;
	int64_t amount;

	if (!cmd || wow_deposit_amount(cmd->body, &amount) < 0) {
		fprintf(stderr, "wow_ledger: %s: not a Deposit\n",
			m->aggregate_id);
		return -EBADMSG; /* acked, as Wow acks a failed command */
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ex = ex;
	d->ledger = ledger;
	d->st = st;
	d->cmd = cmd;
	d->amount = amount;
	d->acct = wow_accounts_get(st->user, cmd->aggregate_id);
	d->give_up_ms = wow_now_ms() + ledger->retry_for_ms;
	if (!d->acct) {
		free(d);
		return -ENOMEM;
	}
	step_load(d);
	return AGR_PENDING;
}
