/* SPDX-License-Identifier: MIT */
/*
 * wow_bus_consumer.c - Wow's Redis Streams consumer feeding a
 * dispatcher (aggring/wow_bus.h; spec/wow-redis.md sections 1-2): the
 * reads, setup, recovery and acks. Its start, stop and creation are in
 * wow_bus_life.c.
 *
 * Everything but the completion path runs on the consumer's worker:
 * setup (XGROUP CREATE per topic, in order), one blocking XREADGROUP
 * per topic on a client of its own, leases and sweeps on a control
 * client, and the XACKs. A completion (on a group's worker) pushes its
 * entry onto a lock-free stack; the push that finds it empty schedules
 * one drain task on the consumer's worker, which acks everything the
 * stack holds with one XACK per topic.
 *
 * The worker knows which of its entries it holds (in flight, or kept
 * undecodable), so that a sweep can claim again an entry of ours that
 * Redis delivered in a reply we never read.
 */
#include "wow_bus_state.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <aggring/io.h>
#include <aggring/worker.h>
#include <hiredis/hiredis.h>

#define ACK_BATCH 512 /* ids per XACK */
#define NS_PER_MS 1000000ull
#define MAX_KEPT 1024 /* undecodable ids remembered per topic */

static void count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- decoding ---- */

static int decode_entry(agr_wow_bus *b, unsigned topic, const redisReply *e,
			struct wow_entry **out)
{
	const redisReply *id, *fields, *msg = NULL;
	agr_wow_decoded d = { 0 };
	struct wow_entry *en;
	int ret;

	if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
	    e->element[0]->type != REDIS_REPLY_STRING)
		return -EBADMSG;
	id = e->element[0];
	fields = e->element[1];
	if (fields->type == REDIS_REPLY_ARRAY)
		for (size_t k = 0; k + 1 < fields->elements; k += 2)
			if (fields->element[k]->type == REDIS_REPLY_STRING &&
			    !strcmp(fields->element[k]->str, "msg") &&
			    fields->element[k + 1]->type == REDIS_REPLY_STRING)
				msg = fields->element[k + 1];
	if (!msg) {
		agr_log(AGR_LOG_WARN,
			"%s %s: no msg field; left pending",
			b->topics[topic], id->str);
		return -EBADMSG;
	}
	ret = b->decode(b->topics[topic], msg->str, msg->len, &d,
			b->decode_arg);
	if (ret == 0 && (!d.aggregate_id || !*d.aggregate_id)) {
		if (d.free_value)
			d.free_value(d.value);
		ret = -EBADMSG;
	}
	if (ret < 0) {
		agr_log(AGR_LOG_WARN,
			"%s %s: msg does not decode (%s); left pending",
			b->topics[topic], id->str, strerror(-ret));
		return ret;
	}
	en = malloc(sizeof(*en) + id->len + 1 + msg->len + 1);
	if (!en) {
		if (d.free_value)
			d.free_value(d.value);
		return -ENOMEM;
	}
	memset(en, 0, sizeof(*en));
	memcpy(en->id, id->str, id->len + 1);
	en->json = en->id + id->len + 1;
	memcpy(en->json, msg->str, msg->len + 1);
	en->bus = b;
	en->topic = topic;
	en->d = d;
	en->msg.aggregate_id = d.aggregate_id;
	en->msg.type = d.type;
	en->msg.body = en->json;
	en->msg.body_len = msg->len;
	*out = en;
	return 0;
}

void agr__wowbus_entry_free(struct wow_entry *en)
{
	if (en->d.free_value)
		en->d.free_value(en->d.value);
	free(en);
}

/* ---- what we hold ---- */

static void hold(agr_wow_bus *b, struct wow_entry *en)
{
	struct wow_entry **head = &b->held[en->topic];

	en->held_prev = NULL;
	en->held_next = *head;
	if (*head)
		(*head)->held_prev = en;
	*head = en;
}

/* An entry leaves the worker: acked, or left pending for a sweep. */
static void entry_done(agr_wow_bus *b, struct wow_entry *en)
{
	if (en->held_prev)
		en->held_prev->held_next = en->held_next;
	else
		b->held[en->topic] = en->held_next;
	if (en->held_next)
		en->held_next->held_prev = en->held_prev;
	agr__wowbus_entry_free(en);
}

static void keep_undecodable(agr_wow_bus *b, unsigned topic, const char *id)
{
	size_t n = strlen(id) + 1;
	struct kept_id *k;

	if (b->nkept[topic] >= MAX_KEPT)
		return; /* claimed again at each sweep, failing again */
	k = malloc(sizeof(*k) + n);
	if (!k)
		return;
	memcpy(k->id, id, n);
	k->next = b->kept[topic];
	b->kept[topic] = k;
	b->nkept[topic]++;
}

static bool holds(void *owner, unsigned topic, const char *id)
{
	const agr_wow_bus *b = owner;

	for (const struct wow_entry *en = b->held[topic]; en;
	     en = en->held_next)
		if (!strcmp(en->id, id))
			return true;
	for (const struct kept_id *k = b->kept[topic]; k; k = k->next)
		if (!strcmp(k->id, id))
			return true;
	return false;
}

/* Reading and claiming end here: each entry is decoded and sent. */
static void deliver(agr_wow_bus *b, unsigned topic, const redisReply *entries)
{
	for (size_t i = 0; i < entries->elements; i++) {
		const redisReply *e = entries->element[i];
		struct wow_entry *en;
		int ret;

		if (e->type == REDIS_REPLY_NIL)
			continue; /* XCLAIM of an entry deleted meanwhile */
		count(&b->st_read, 1);
		if (decode_entry(b, topic, e, &en) < 0) {
			count(&b->st_undecodable, 1);
			if (e->type == REDIS_REPLY_ARRAY && e->elements &&
			    e->element[0]->type == REDIS_REPLY_STRING &&
			    !holds(b, topic, e->element[0]->str))
				keep_undecodable(b, topic, e->element[0]->str);
			continue;
		}
		ret = agr_dispatcher_send(b->disp, &en->msg);
		if (ret < 0) {
			/* Not admitted: not acked, it stays pending. */
			count(&b->st_not_admitted, 1);
			agr_log(AGR_LOG_WARN,
				"%s %s: not admitted (%s); left pending",
				b->topics[topic], en->id,
				strerror(-ret));
			agr__wowbus_entry_free(en);
			continue;
		}
		hold(b, en);
		b->in_flight++;
		count(&b->st_dispatched, 1);
		count(&b->st_in_flight, 1);
	}
}

/* ---- timers ---- */

static void timer_cb(int res, void *arg)
{
	struct timer *t = arg;
	agr_wow_bus *b = t->bus;

	(void)res;
	t->armed = false;
	b->timers--;
	if (b->phase == P_RUNNING || b->phase == P_SETUP ||
	    (t == &b->ack_timer && b->phase == P_STOPPING))
		t->fire(b, t->index);
	else
		agr__wowbus_try_finish_stop(b);
}

static void timer_arm(struct timer *t, uint64_t ms)
{
	agr_wow_bus *b = t->bus;

	if (t->armed)
		return;
	if (agr_io_timeout(b->w, ms * NS_PER_MS, timer_cb, t) < 0) {
		agr_log(AGR_LOG_ERROR,
			"consumer %s: no timer could be armed",
			b->consumer);
		return;
	}
	t->armed = true;
	b->timers++;
}

static uint64_t retry_ms(const agr_wow_bus *b)
{
	uint64_t ms = b->redis.reconnect_delay_ns / NS_PER_MS;

	return ms ? ms : 100;
}

/* ---- reading ---- */

static void read_next(struct reader *rd);

static bool reply_is(const redisReply *reply, const char *token)
{
	size_t n = strlen(token);

	return reply->type == REDIS_REPLY_ERROR && reply->str &&
	       !strncmp(reply->str, token, n) &&
	       (reply->str[n] == ' ' || reply->str[n] == '\0');
}

static void on_read(agr_redis *r, const redisReply *reply, int err,
		    void *arg)
{
	struct reader *rd = arg;
	agr_wow_bus *b = rd->bus;

	(void)r;
	rd->reading = false;
	if (b->phase != P_RUNNING)
		return;
	if (err || reply->type == REDIS_REPLY_ERROR) {
		count(&b->st_redis_errors, 1);
		agr_log(AGR_LOG_WARN,
			"XREADGROUP %s %s: %s; retrying", b->topics[rd->index],
			b->group, err ? strerror(-err) :
			agr__wowbus_reply_text(reply));
		if (!err && reply_is(reply, "NOGROUP")) {
			/* The stream or group went away (a node lost data). */
			rd->group_ok = false;
			agr__wowbus_create_group(b, rd->index);
			return;
		}
		rd->waiting = true;
		timer_arm(&b->retry[rd->index], retry_ms(b));
		return;
	}
	if (reply->type == REDIS_REPLY_ARRAY)
		for (size_t i = 0; i < reply->elements; i++) {
			const redisReply *s = reply->element[i];

			if (s->type == REDIS_REPLY_ARRAY && s->elements == 2 &&
			    s->element[1]->type == REDIS_REPLY_ARRAY)
				deliver(b, rd->index, s->element[1]);
		}
	read_next(rd);
}

/*
 * The COUNT of the next read: what max_in_flight leaves room for, shared
 * by the topics, and at most `count` when set. Wow reads without a
 * COUNT; a consumer behind a backlog then got all of it in one reply
 * (200,000 entries: 1.2 GB held).
 */
static unsigned long read_count(const agr_wow_bus *b)
{
	unsigned long room = b->max_in_flight - b->in_flight;

	room = room / b->ntopics ? room / b->ntopics : 1;
	return b->count && b->count < room ? b->count : room;
}

static void read_next(struct reader *rd)
{
	agr_wow_bus *b = rd->bus;
	const char *t = b->topics[rd->index];
	char block[16], cnt[16];
	int ret;

	if (b->phase != P_RUNNING || rd->reading || rd->waiting ||
	    !rd->group_ok || b->in_flight >= b->max_in_flight)
		return;
	snprintf(block, sizeof(block), "%u", b->block_ms);
	snprintf(cnt, sizeof(cnt), "%lu", read_count(b));
	rd->reading = true; /* first: a failing client may call back at once */
	ret = agr_redis_command(rd->r, t, on_read, rd,
				"XREADGROUP GROUP %s %s COUNT %s BLOCK %s "
				"STREAMS %s >", b->group, b->consumer, cnt,
				block, t);
	if (ret < 0) {
		rd->reading = false;
		agr_log(AGR_LOG_ERROR, "XREADGROUP %s: %s", t, strerror(-ret));
		rd->waiting = true;
		timer_arm(&b->retry[rd->index], retry_ms(b));
	}
}

static void resume_readers(agr_wow_bus *b)
{
	for (unsigned i = 0; i < b->ntopics; i++)
		read_next(&b->readers[i]);
}

/* ---- setup ---- */

void agr__wowbus_set_ready(agr_wow_bus *b, int err)
{
	pthread_mutex_lock(&b->lock);
	if (!b->ready) {
		b->ready = true;
		b->setup_err = err;
	}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void start_sweep(agr_wow_bus *b, unsigned index);

static void group_made(agr_wow_bus *b, unsigned index)
{
	struct reader *rd = &b->readers[index];
	bool first = !rd->group_ok && b->groups_made <= index;

	rd->group_ok = true;
	if (first) {
		b->groups_made = index + 1;
		if (b->groups_made < b->ntopics) {
			agr__wowbus_create_group(b, b->groups_made);
			return;
		}
		/* Every group exists: the consumer runs. */
		pthread_mutex_lock(&b->lock);
		if (b->phase == P_SETUP)
			b->phase = P_RUNNING;
		pthread_mutex_unlock(&b->lock);
		agr__wowbus_set_ready(b, 0);
		for (unsigned i = 0; i < b->ntopics; i++) {
			if (b->recovery)
				start_sweep(b, i);
			read_next(&b->readers[i]);
		}
		if (b->recovery)
			timer_arm(&b->heartbeat, b->interval_ms);
		return;
	}
	read_next(rd);
}

static void on_group(agr_redis *r, const redisReply *reply, int err,
		     void *arg)
{
	struct reader *rd = arg;
	agr_wow_bus *b = rd->bus;

	(void)r;
	if (b->phase != P_SETUP && b->phase != P_RUNNING)
		return;
	if (!err && (reply->type != REDIS_REPLY_ERROR ||
		     reply_is(reply, "BUSYGROUP"))) {
		group_made(b, rd->index);
		return;
	}
	count(&b->st_redis_errors, 1);
	agr_log(AGR_LOG_WARN,
		"XGROUP CREATE %s %s: %s; retrying", b->topics[rd->index],
		b->group, err ? strerror(-err) :
		agr__wowbus_reply_text(reply));
	rd->waiting = true;
	timer_arm(&b->retry[rd->index], retry_ms(b));
}

void agr__wowbus_create_group(agr_wow_bus *b, unsigned index)
{
	const char *t = b->topics[index];
	int ret = agr_redis_command(b->ctl, t, on_group, &b->readers[index],
				    "XGROUP CREATE %s %s $ MKSTREAM", t,
				    b->group);

	if (ret < 0) {
		b->readers[index].waiting = true;
		timer_arm(&b->retry[index], retry_ms(b));
	}
}

/* The retry timer: the group if it is missing, else the read. */
static void retry_fire(agr_wow_bus *b, unsigned index)
{
	struct reader *rd = &b->readers[index];

	rd->waiting = false;
	if (!rd->group_ok)
		agr__wowbus_create_group(b, index);
	else
		read_next(rd);
}

/* ---- recovery ---- */

static void sweep_deliver(void *owner, unsigned topic,
			  const redisReply *entries)
{
	agr_wow_bus *b = owner;

	if (b->phase != P_RUNNING)
		return; /* they stay ours and pending: recovered after us */
	count(&b->st_claimed, entries->elements);
	deliver(b, topic, entries);
}

static void sweep_done(void *owner, unsigned topic, int err)
{
	agr_wow_bus *b = owner;

	b->sweeping[topic] = false;
	if (err && err != -ECANCELED)
		count(&b->st_redis_errors, 1);
	else if (!err)
		count(&b->st_sweeps, 1);
	if (b->phase == P_RUNNING)
		timer_arm(&b->sweep_timer[topic], b->interval_ms);
	else
		agr__wowbus_try_finish_stop(b);
}

static bool sweep_has_room(void *owner)
{
	const agr_wow_bus *b = owner;

	return b->phase == P_RUNNING && b->in_flight < b->max_in_flight;
}

static const struct agr__wowbus_sweep_ops sweep_ops = {
	.deliver = sweep_deliver,
	.has_room = sweep_has_room,
	.held = holds,
	.done = sweep_done,
};

static void start_sweep(agr_wow_bus *b, unsigned index)
{
	int ret;

	if (b->sweeping[index] || b->phase != P_RUNNING)
		return;
	b->sweeping[index] = true; /* first: it may end at once */
	ret = agr__wowbus_sweep_start(b->ctl, b->topics[index], index,
				      b->group, b->consumer, b->min_idle_ms,
				      b->batch, &sweep_ops, b);
	if (ret < 0) {
		b->sweeping[index] = false;
		timer_arm(&b->sweep_timer[index], b->interval_ms);
	}
}

static void heartbeat_fire(agr_wow_bus *b, unsigned index)
{
	(void)index;
	for (unsigned i = 0; i < b->ntopics; i++)
		agr__wowbus_lease_heartbeat(&b->leases[i], b->ctl);
	timer_arm(&b->heartbeat, b->interval_ms);
}

/* ---- acks ---- */

struct ack_batch {
	agr_wow_bus *bus;
	struct wow_entry *entries;
	unsigned n;
	struct ack_batch *next; /* on the retry list */
};

static void send_batch(agr_wow_bus *b, struct ack_batch *ab);

/* The ack timer: batches whose XACK failed go again. */
static void ack_retry_fire(agr_wow_bus *b, unsigned index)
{
	struct ack_batch *ab = b->ack_retry, *next;

	(void)index;
	b->ack_retry = NULL;
	for (; ab; ab = next) {
		next = ab->next;
		send_batch(b, ab);
	}
}

static void on_ack(agr_redis *r, const redisReply *reply, int err,
		   void *arg)
{
	struct ack_batch *ab = arg;
	agr_wow_bus *b = ab->bus;
	struct wow_entry *en = ab->entries, *next;

	(void)r;
	if ((err && err != -ECANCELED) ||
	    (!err && reply->type == REDIS_REPLY_ERROR)) {
		/* XACK is idempotent: the batch goes again after a delay. */
		count(&b->st_redis_errors, 1);
		agr_log(AGR_LOG_WARN, "XACK %s: %s (%u entries); retrying",
			b->topics[en->topic], err ? strerror(-err) :
			agr__wowbus_reply_text(reply), ab->n);
		ab->next = b->ack_retry;
		b->ack_retry = ab;
		b->acks_out--;
		timer_arm(&b->ack_timer, retry_ms(b));
		return;
	}
	if (err) {
		agr_log(AGR_LOG_WARN, "XACK %s: %s; %u entries stay pending",
			b->topics[en->topic], strerror(-err), ab->n);
	} else {
		count(&b->st_acked, ab->n);
	}
	for (; en; en = next) {
		next = en->next;
		entry_done(b, en);
	}
	b->in_flight -= ab->n;
	atomic_fetch_sub_explicit(&b->st_in_flight, ab->n,
				  memory_order_relaxed);
	b->acks_out--;
	free(ab);
	if (b->phase == P_RUNNING)
		resume_readers(b);
	else
		agr__wowbus_try_finish_stop(b);
}

static void send_batch(agr_wow_bus *b, struct ack_batch *ab)
{
	unsigned n = ab->n;
	const char **argv = malloc((3 + n) * sizeof(*argv));
	size_t *len = malloc((3 + n) * sizeof(*len));
	const char *t = b->topics[ab->entries->topic];
	struct wow_entry *en = ab->entries, *next;
	int ret = -ENOMEM;

	if (argv && len && b->ctl) {
		argv[0] = "XACK";
		argv[1] = t;
		argv[2] = b->group;
		for (unsigned i = 0; i < n; i++, en = en->next)
			argv[3 + i] = en->id;
		for (unsigned i = 0; i < 3 + n; i++)
			len[i] = strlen(argv[i]);
		b->acks_out++; /* first: the reply may come at once */
		ret = agr_redis_command_argv(b->ctl, t, strlen(t), (int)(3 + n),
					     argv, len, on_ack, ab);
		if (ret < 0)
			b->acks_out--;
	}
	free(argv);
	free(len);
	if (ret == 0)
		return;
	agr_log(AGR_LOG_ERROR, "XACK %s: %s; %u entries stay pending", t,
		strerror(-ret), n);
	count(&b->st_redis_errors, 1);
	for (en = ab->entries; en; en = next) {
		next = en->next;
		entry_done(b, en);
	}
	b->in_flight -= n;
	atomic_fetch_sub_explicit(&b->st_in_flight, n, memory_order_relaxed);
	free(ab);
}

static void send_acks(agr_wow_bus *b, struct wow_entry *list, unsigned n)
{
	struct ack_batch *ab = malloc(sizeof(*ab));

	if (!ab) {
		struct wow_entry *next;

		agr_log(AGR_LOG_ERROR, "XACK: out of memory; %u entries stay "
			"pending", n);
		for (; list; list = next) {
			next = list->next;
			entry_done(b, list);
		}
		b->in_flight -= n;
		atomic_fetch_sub_explicit(&b->st_in_flight, n,
					  memory_order_relaxed);
		return;
	}
	ab->bus = b;
	ab->entries = list;
	ab->n = n;
	ab->next = NULL;
	send_batch(b, ab);
}

/* Splits what the stack held into one batch per topic, ACK_BATCH at most. */
static void drain_acks(void *arg)
{
	agr_wow_bus *b = arg;
	struct wow_entry *all = atomic_exchange_explicit(&b->acks, NULL,
							 memory_order_acquire);
	struct wow_entry *head[MAX_TOPICS] = { 0 };
	unsigned n[MAX_TOPICS] = { 0 };

	while (all) {
		struct wow_entry *en = all;
		unsigned t = en->topic;

		all = en->next;
		if (en->no_ack) {
			entry_done(b, en);
			b->in_flight--;
			atomic_fetch_sub_explicit(&b->st_in_flight, 1,
						  memory_order_relaxed);
			continue;
		}
		en->next = head[t];
		head[t] = en;
		if (++n[t] == ACK_BATCH) {
			send_acks(b, head[t], n[t]);
			head[t] = NULL;
			n[t] = 0;
		}
	}
	for (unsigned t = 0; t < b->ntopics; t++)
		if (head[t])
			send_acks(b, head[t], n[t]);
	if (b->phase == P_RUNNING)
		resume_readers(b);
	else
		agr__wowbus_try_finish_stop(b);
}

void agr_wow_bus_complete(agr_message *msg, int status, void *arg)
{
	struct wow_entry *en = (struct wow_entry *)msg;
	agr_wow_bus *b = en->bus;
	struct wow_entry *old =
		atomic_load_explicit(&b->acks, memory_order_relaxed);
	int ret;

	/*
	 * Wow acks failures as well as successes; a message discarded
	 * unhandled, or interrupted (its I/O cancelled), by a force stop
	 * was not fully processed and stays pending: the event store's
	 * request id check makes handling it again harmless.
	 */
	en->no_ack = status == AGR_DISCARDED || status == AGR_INTERRUPTED;
	(void)arg;
	do {
		en->next = old;
	} while (!atomic_compare_exchange_weak_explicit(
		&b->acks, &old, en, memory_order_release,
		memory_order_relaxed));
	if (old)
		return; /* a drain is already due */
	ret = agr_scheduler_schedule(b->sched, b->hint, drain_acks, b);
	if (ret < 0)
		agr_log(AGR_LOG_ERROR,
			"consumer %s: acks cannot reach its worker (%s); "
			"the entries stay pending", b->consumer,
			strerror(-ret));
}

/* The leases, readers and timers of a new bus. */
int agr__wowbus_init_parts(agr_wow_bus *b)
{
	for (unsigned i = 0; i < b->ntopics; i++) {
		int ret = agr__wowbus_lease_init(&b->leases[i], b->topics[i],
					      b->group, b->consumer,
					      3 * b->interval_ms);

		if (ret < 0)
			return ret;
		b->readers[i] = (struct reader){ .bus = b, .index = i };
		b->retry[i] = (struct timer){ b, retry_fire, i, false };
		b->sweep_timer[i] = (struct timer){ b, start_sweep, i, false };
	}
	b->heartbeat = (struct timer){ b, heartbeat_fire, 0, false };
	b->ack_timer = (struct timer){ b, ack_retry_fire, 0, false };
	return 0;
}

/* ---- finishing a stop ---- */

void agr__wowbus_set_phase(agr_wow_bus *b, enum phase p)
{
	pthread_mutex_lock(&b->lock);
	b->phase = p;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void on_ctl_closed(void *arg)
{
	agr_wow_bus *b = arg;

	b->closing--;
	b->ctl = NULL;
	agr__wowbus_try_finish_stop(b);
}

static void on_released(void *arg)
{
	agr_wow_bus *b = arg;

	b->releasing--;
	agr__wowbus_try_finish_stop(b);
}

static bool sweeps_running(const agr_wow_bus *b)
{
	for (unsigned i = 0; i < b->ntopics; i++)
		if (b->sweeping[i])
			return true;
	return false;
}

/*
 * Stop, in steps, each retried when something it waits for ends: the
 * messages in flight are acked; then the leases are released; then the
 * control client closes; when timers and clients are gone, stopped.
 */
void agr__wowbus_try_finish_stop(agr_wow_bus *b)
{
	if (b->phase != P_STOPPING)
		return;
	if (b->in_flight || b->acks_out || b->ack_retry ||
	    atomic_load_explicit(&b->acks, memory_order_acquire))
		return;
	if (b->ctl && !b->leases[0].released && b->recovery) {
		b->releasing++; /* held while the releases are sent */
		for (unsigned i = 0; i < b->ntopics; i++) {
			b->releasing++;
			if (agr__wowbus_lease_release(&b->leases[i], b->ctl,
						      on_released, b) < 0)
				b->releasing--;
		}
		if (--b->releasing)
			return;
	}
	if (b->releasing || sweeps_running(b))
		return;
	if (b->ctl && !b->closing) {
		b->closing++;
		agr_redis_close(b->ctl, on_ctl_closed, b);
		return;
	}
	if (b->closing || b->timers)
		return;
	agr__wowbus_set_phase(b, P_STOPPED);
}
