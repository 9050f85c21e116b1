/* SPDX-License-Identifier: MIT */
/*
 * check_wow_bus.c - Wow's Redis Streams bus (aggring/wow_bus.h) against
 * a redis-server of its own: group setup, delivery by aggregate id,
 * XACK after completion (failures too), undecodable and refused entries
 * left pending, the lease and its release, pending recovery of a dead
 * consumer's entries (and not of a live one's), and the publisher.
 * Skips (77) without redis-server or io_uring.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>
#include <aggring/wow_bus.h>

#include "testutil.h"
#include "testutil_redis.h"
#include "wow_spec_docs.h"

/* ---- a service: supplier, dispatcher, consumer ---- */

struct seen {
	_Atomic int count;
	_Atomic int spec_ok; /* the spec's command arrived as decoded */
	_Atomic int streams, states; /* :event and :state values seen */
	int status;	     /* what the handler returns */
};

/* test_backlog_read_in_bounded_batches: the bus whose in-flight peak
 * the handler records. */
static agr_wow_bus *_Atomic peak_bus;
static _Atomic long long peak_in_flight;

static void note_in_flight(void)
{
	agr_wow_bus *b = atomic_load(&peak_bus);
	agr_wow_bus_stats st;
	long long now;

	if (!b || agr_wow_bus_stats_get(b, &st) < 0)
		return;
	now = (long long)st.in_flight;
	if (now > atomic_load(&peak_in_flight))
		atomic_store(&peak_in_flight, now); /* a max: races only lower */
}

static int handler(agr_exchange *ex, void *arg)
{
	struct seen *s = arg;
	agr_message *m = agr_exchange_message(ex);
	const agr_wow_command *c = agr_wow_message_value(m);

	const char *topic = agr_wow_message_topic(m);

	const agr_wow_event_stream *es = agr_wow_message_value(m);

	if (strstr(topic, ":event") && !m->type && es->version == 5)
		atomic_fetch_add(&s->streams, 1);
	else if (strstr(topic, ":state") && !m->type &&
		 !strcmp(((const agr_wow_state_event *)agr_wow_message_value(m))
				 ->first_operator, "op-1"))
		atomic_fetch_add(&s->states, 1);
	else if (c && !strcmp(m->aggregate_id, "order-1") && m->type &&
	    !strcmp(m->type, "CreateOrder") && !strcmp(c->request_id,
						       "request-1") &&
	    agr_wow_message_entry_id(m) && agr_wow_message_topic(m))
		atomic_fetch_add(&s->spec_ok, 1);
	note_in_flight();
	atomic_fetch_add(&s->count, 1);
	return s->status;
}

struct service {
	agr_supplier *sup;
	agr_scheduler *sched;
	agr_dispatcher *disp;
	agr_wow_bus *bus;
};

static void service_start(struct service *sv, struct seen *seen,
			  agr_wow_bus_options *o, unsigned queue_limit)
{
	agr_named_aggregate na = { "sales", "Order" };
	agr_dispatcher_options d = {
		.name = "wowbus",
		.named_aggregate = na,
		.parallelism = 8,
		.on_complete = agr_wow_bus_complete,
		.queue_limit = queue_limit,
	};

	ck_assert_int_eq(agr_supplier_new("wowbus", 2, &sv->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sv->sup, &na, &sv->sched), 0);
	d.supplier = sv->sup;
	ck_assert_int_eq(agr_dispatcher_new(&d, &sv->disp), 0);
	ck_assert_int_eq(agr_dispatcher_register(sv->disp, NULL, handler, seen),
			 0);
	ck_assert_int_eq(agr_dispatcher_start(sv->disp), 0);
	o->redis.port = tu_redis_port();
	o->scheduler = sv->sched;
	o->dispatcher = sv->disp;
	o->block_ms = 100;
	ck_assert_int_eq(agr_wow_bus_new(o, &sv->bus), 0);
	ck_assert_int_eq(agr_wow_bus_start(sv->bus), 0);
	ck_assert_int_eq(agr_wow_bus_wait_ready(sv->bus, TU_LONG_NS), 0);
}

static void service_stop(struct service *sv)
{
	ck_assert_int_eq(agr_wow_bus_stop(sv->bus, TU_LONG_NS), 0);
	agr_wow_bus_free(sv->bus);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(sv->disp, TU_LONG_NS),
			 0);
	agr_dispatcher_free(sv->disp);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sv->sup, TU_LONG_NS), 0);
	agr_supplier_free(sv->sup);
}

static uint64_t stat_of(agr_wow_bus *b, size_t offset)
{
	agr_wow_bus_stats st;

	ck_assert_int_eq(agr_wow_bus_stats_get(b, &st), 0);
	return *(uint64_t *)(void *)((char *)&st + offset);
}

#define STAT(b, field) \
	((long long)stat_of((b), offsetof(agr_wow_bus_stats, field)))

/* ---- tests ---- */

/* Options for `n` topics read as group "g"; the rest as initialised. */
static agr_wow_bus_options bus_options(const char *const *topics, unsigned n)
{
	agr_wow_bus_options o = AGR_WOW_BUS_OPTIONS_INIT;

	o.topics = topics;
	o.ntopics = n;
	o.group = "g";
	return o;
}

START_TEST(test_spec_command_consumed_and_acked)
{
	const char *topics[] = { "t1.Order:command" };
	agr_wow_bus_options o = AGR_WOW_BUS_OPTIONS_INIT;
	struct seen seen = { 0 };
	struct service sv;

	o.topics = topics;
	o.ntopics = 1;
	o.group = "sales.CommandDispatcher";
	o.consumer = "c-one";
	service_start(&sv, &seen, &o, 0);
	/* XGROUP CREATE ... MKSTREAM made the stream and the group. */
	ck_assert_int_eq(tu_redis_integer("EXISTS %s", topics[0]), 1);
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, acked), 1);
	ck_assert_int_eq(atomic_load(&seen.spec_ok), 1);
	ck_assert_int_eq(tu_redis_pending(topics[0], o.group), 0);
	service_stop(&sv);
}
END_TEST

START_TEST(test_event_and_state_topics)
{
	const char *topics[] = { "t9.Order:event", "t9.Order:state" };
	agr_wow_bus_options o = AGR_WOW_BUS_OPTIONS_INIT;
	struct seen seen = { 0 };
	struct service sv;

	o.topics = topics;
	o.ntopics = 2;
	o.group = "sales.ProjectionDispatcher";
	service_start(&sv, &seen, &o, 0);
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_stream);
	tu_redis_ok("XADD %s * msg %s", topics[1], spec_state);
	TU_WAIT_EQ(STAT(sv.bus, acked), 2);
	ck_assert_int_eq(atomic_load(&seen.streams), 1);
	ck_assert_int_eq(atomic_load(&seen.states), 1);
	ck_assert_int_eq(tu_redis_pending(topics[0], o.group), 0);
	ck_assert_int_eq(tu_redis_pending(topics[1], o.group), 0);
	service_stop(&sv);
}
END_TEST

START_TEST(test_failure_is_acked_as_wow_does)
{
	const char *topics[] = { "t2.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { .status = -EIO };
	struct service sv;

	service_start(&sv, &seen, &o, 0);
	for (int i = 0; i < 50; i++)
		tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, acked), 50);
	ck_assert_int_eq(atomic_load(&seen.count), 50);
	ck_assert_int_eq(tu_redis_pending(topics[0], "g"), 0);
	service_stop(&sv);
}
END_TEST

START_TEST(test_undecodable_stays_pending)
{
	const char *topics[] = { "t3.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;

	o.no_recovery = true;
	service_start(&sv, &seen, &o, 0);
	tu_redis_ok("XADD %s * msg %s", topics[0], "{not json");
	tu_redis_ok("XADD %s * other %s", topics[0], spec_command);
	tu_redis_ok("XADD %s * msg %s", topics[0], "{\"id\":\"x\"}");
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, acked), 1);
	TU_WAIT_EQ(STAT(sv.bus, undecodable), 3);
	ck_assert_int_eq(atomic_load(&seen.count), 1);
	ck_assert_int_eq(tu_redis_pending(topics[0], "g"), 3);
	service_stop(&sv);
}
END_TEST

START_TEST(test_busygroup_ignored_and_new_group_skips_old)
{
	const char *topics[] = { "t4.Order:command", "t4.Order:event" };
	agr_wow_bus_options o = bus_options(topics, 2);
	struct seen seen = { 0 };
	struct service sv;

	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command); /* before $ */
	tu_redis_ok("XGROUP CREATE %s g $ MKSTREAM", topics[1]);
	service_start(&sv, &seen, &o, 0);
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, acked), 1);
	ck_assert_int_eq(STAT(sv.bus, read), 1);
	service_stop(&sv);
}
END_TEST

START_TEST(test_lease_held_and_released)
{
	const char *topics[] = { "t5.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;
	char *key;

	o.consumer = "c-lease";
	o.recovery_interval_ms = 1000;
	ck_assert_int_eq(agr_wow_lease_key(topics[0], "g", "c-lease", &key,
					   NULL), 0);
	service_start(&sv, &seen, &o, 0);
	TU_WAIT_EQ(tu_redis_integer("EXISTS %s", key), 1);
	/* TTL = 3 x interval, renewed by the heartbeat. */
	ck_assert_int_le(tu_redis_integer("PTTL %s", key), 3000);
	ck_assert_int_gt(tu_redis_integer("PTTL %s", key), 0);
	/* Lost (a node restarted without it): the heartbeat takes it again. */
	ck_assert_int_eq(tu_redis_integer("DEL %s", key), 1);
	TU_WAIT_EQ(tu_redis_integer("EXISTS %s", key), 1);
	service_stop(&sv);
	ck_assert_int_eq(tu_redis_integer("EXISTS %s", key), 0);
	free(key);
}
END_TEST

/* Entries read by `owner` into its PEL and never acked. */
static void strand_entries(const char *topic, const char *owner, int n)
{
	redisContext *c = tu_redis_connect();
	redisReply *r;

	for (int i = 0; i < n; i++)
		tu_redis_ok("XADD %s * msg %s", topic, spec_command);
	r = redisCommand(c, "XREADGROUP GROUP g %s STREAMS %s >", owner, topic);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	freeReplyObject(r);
	redisFree(c);
}

START_TEST(test_recovery_claims_dead_not_live)
{
	const char *topics[] = { "t6.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;
	char *live_key;

	tu_redis_ok("XGROUP CREATE %s g $ MKSTREAM", topics[0]);
	strand_entries(topics[0], "dead", 120); /* more than one page */
	strand_entries(topics[0], "live", 3);
	ck_assert_int_eq(agr_wow_lease_key(topics[0], "g", "live", &live_key,
					   NULL), 0);
	tu_redis_ok("SET %s token EX 60", live_key);
	o.min_idle_ms = 200;
	o.recovery_interval_ms = 100;
	o.recovery_batch = 50;
	o.max_in_flight = 60; /* the backlog comes over several sweeps */
	service_start(&sv, &seen, &o, 0);
	TU_WAIT_EQ(STAT(sv.bus, acked), 120);
	ck_assert_int_eq(STAT(sv.bus, claimed), 120);
	TU_WAIT_EQ(STAT(sv.bus, sweeps) >= 3 ? 1 : 0, 1);
	/* The live consumer's entries are left to it. */
	ck_assert_int_eq(tu_redis_pending(topics[0], "g"), 3);
	ck_assert_int_eq(atomic_load(&seen.count), 120);
	service_stop(&sv);
	free(live_key);
}
END_TEST

/*
 * Entries Redis delivered to us in replies we never read (the node was
 * killed after its AOF write, or the connection reset with the reply in
 * it): they are ours and idle, so no other consumer takes them; the
 * sweep claims them again. An undecodable one of ours stays kept.
 */
START_TEST(test_lost_delivery_claimed_again)
{
	const char *topics[] = { "t10.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;

	tu_redis_ok("XGROUP CREATE %s g $ MKSTREAM", topics[0]);
	tu_redis_ok("XADD %s * msg %s", topics[0], "{not json");
	strand_entries(topics[0], "c-lost", 5);
	o.consumer = "c-lost";
	o.min_idle_ms = 200;
	o.recovery_interval_ms = 100;
	service_start(&sv, &seen, &o, 0);
	TU_WAIT_EQ(STAT(sv.bus, acked), 5);
	ck_assert_int_eq(atomic_load(&seen.count), 5);
	TU_WAIT_EQ(tu_redis_pending(topics[0], "g"), 1);
	/* The undecodable entry is decoded once, then left alone. */
	TU_WAIT_EQ(STAT(sv.bus, sweeps) >= 10 ? 1 : 0, 1);
	ck_assert_int_eq(STAT(sv.bus, undecodable), 1);
	ck_assert_int_eq(STAT(sv.bus, claimed), 6);
	ck_assert_int_eq(tu_redis_pending(topics[0], "g"), 1);
	service_stop(&sv);
}
END_TEST

/*
 * A consumer behind a backlog of 400 entries, allowed 20 in flight:
 * each XREADGROUP asks for what that leaves room for, so the bus never
 * holds more than 20 (an unbounded read, as Wow's, delivered all 400 at
 * once).
 */
START_TEST(test_backlog_read_in_bounded_batches)
{
	const char *topics[] = { "t11.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;
	long long peak;

	o.no_recovery = true;
	o.max_in_flight = 20;
	atomic_store(&peak_in_flight, 0);
	service_start(&sv, &seen, &o, 0);
	atomic_store(&peak_bus, sv.bus);
	/* All 400 at once (a script is atomic): the blocked read sees them. */
	tu_redis_ok("EVAL %s 1 %s %s",
		"for i = 1, 400 do redis.call('XADD', KEYS[1], '*', 'msg', "
		"ARGV[1]) end", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, acked), 400);
	atomic_store(&peak_bus, NULL);
	ck_assert_int_eq(atomic_load(&seen.count), 400);
	peak = atomic_load(&peak_in_flight);
	ck_assert_int_ge(peak, 1);
	ck_assert_int_le(peak, 20);
	service_stop(&sv);
}
END_TEST

START_TEST(test_not_admitted_stays_pending)
{
	const char *topics[] = { "t7.Order:command" };
	agr_wow_bus_options o = bus_options(topics, 1);
	struct seen seen = { 0 };
	struct service sv;

	o.no_recovery = true;
	service_start(&sv, &seen, &o, 0);
	ck_assert_int_eq(agr_dispatcher_quiesce(sv.disp), 0);
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(STAT(sv.bus, not_admitted), 1);
	ck_assert_int_eq(tu_redis_pending(topics[0], "g"), 1);
	service_stop(&sv);
}
END_TEST

struct pub {
	agr_redis *r;
	struct tu_latch done;
	int err;
	char id[64];
};

static void on_published(int err, const char *id, void *arg)
{
	struct pub *p = arg;

	p->err = err;
	if (id)
		snprintf(p->id, sizeof(p->id), "%s", id);
	agr_redis_close(p->r, NULL, NULL);
	tu_latch_count_down(&p->done);
}

static void publish_task(void *arg)
{
	struct pub *p = arg;
	agr_redis_options ro = AGR_REDIS_OPTIONS_INIT;
	int ret;

	ro.port = tu_redis_port();
	ret = agr_redis_new(agr_worker_current(), &ro, &p->r);
	if (ret == 0)
		ret = agr_wow_publish(p->r, "t8.Order:command", spec_command,
				      strlen(spec_command), on_published, p);
	if (ret < 0) {
		p->err = ret;
		tu_latch_count_down(&p->done);
	}
}

START_TEST(test_publish)
{
	agr_named_aggregate na = { "sales", "Order" };
	agr_supplier *sup;
	agr_scheduler *sched;
	struct pub p = { 0 };
	redisContext *c;
	redisReply *r;

	tu_latch_init(&p.done, 1);
	ck_assert_int_eq(agr_supplier_new("wowpub", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &na, &sched), 0);
	ck_assert_int_eq(agr_scheduler_schedule(sched, 0, publish_task, &p), 0);
	ck_assert(tu_latch_wait(&p.done, TU_LONG_NS));
	ck_assert_int_eq(p.err, 0);
	c = tu_redis_connect();
	r = redisCommand(c, "XRANGE t8.Order:command %s %s", p.id, p.id);
	ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
	ck_assert_uint_eq(r->elements, 1);
	ck_assert_str_eq(r->element[0]->element[1]->element[0]->str, "msg");
	ck_assert_str_eq(r->element[0]->element[1]->element[1]->str,
			 spec_command);
	freeReplyObject(r);
	redisFree(c);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&p.done);
}
END_TEST

/*
 * Issue 30: a handler that retries without end (the old wow_ledger's
 * conflict loop, here on a 1 ms timer) holds a graceful stop for good;
 * agr_wow_bus_shutdown() forces the dispatcher at the deadline, and the
 * entry stays pending for a later claim.
 */
static _Atomic long spins;

static void spin(int res, void *arg)
{
	agr_exchange *ex = arg;

	(void)res;
	atomic_fetch_add(&spins, 1);
	/* refused once the dispatcher is forced: the chain ends here */
	agr_io_timeout(agr_exchange_worker(ex), 1000000, spin, ex);
}

static int spinning_handler(agr_exchange *ex, void *arg)
{
	(void)arg;
	if (agr_io_timeout(agr_exchange_worker(ex), 1000000, spin, ex) < 0)
		return -EIO;
	return AGR_PENDING;
}

START_TEST(test_shutdown_ends_a_livelocked_handler)
{
	const char *topics[] = { "live.Order:command" };
	agr_named_aggregate na = { "sales", "Order" };
	agr_dispatcher_options d = { .name = "spin", .named_aggregate = na,
				     .parallelism = 4,
				     .on_complete = agr_wow_bus_complete };
	agr_wow_bus_options o = AGR_WOW_BUS_OPTIONS_INIT;
	struct service sv;
	uint64_t t0;

	ck_assert_int_eq(agr_supplier_new("spin", 2, &sv.sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sv.sup, &na, &sv.sched), 0);
	d.supplier = sv.sup;
	ck_assert_int_eq(agr_dispatcher_new(&d, &sv.disp), 0);
	ck_assert_int_eq(agr_dispatcher_register(sv.disp, NULL,
						 spinning_handler, NULL), 0);
	ck_assert_int_eq(agr_dispatcher_start(sv.disp), 0);
	o.redis.port = tu_redis_port();
	o.scheduler = sv.sched;
	o.dispatcher = sv.disp;
	o.topics = topics;
	o.ntopics = 1;
	o.group = "sales.CommandDispatcher";
	o.block_ms = 100;
	ck_assert_int_eq(agr_wow_bus_new(&o, &sv.bus), 0);
	ck_assert_int_eq(agr_wow_bus_start(sv.bus), 0);
	ck_assert_int_eq(agr_wow_bus_wait_ready(sv.bus, TU_LONG_NS), 0);
	tu_redis_ok("XADD %s * msg %s", topics[0], spec_command);
	TU_WAIT_EQ(atomic_load(&spins) > 20, 1);
	/* the bug: a graceful stop waits on the handler, whatever the time */
	ck_assert_int_eq(agr_wow_bus_stop(sv.bus, 300000000ull), -ETIMEDOUT);
	t0 = tu_now_ns();
	ck_assert_int_eq(agr_wow_bus_shutdown(sv.bus, 2000000000ull),
			 -ECANCELED);
	ck_assert_uint_lt(tu_now_ns() - t0, 7000000000ull);
	agr_wow_bus_free(sv.bus);
	agr_dispatcher_free(sv.disp);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sv.sup, TU_LONG_NS), 0);
	agr_supplier_free(sv.sup);
	ck_assert_int_eq(tu_redis_pending(topics[0], o.group), 1); /* not acked */
}
END_TEST

START_TEST(test_options_checked)
{
	agr_wow_bus_options o = AGR_WOW_BUS_OPTIONS_INIT;
	agr_wow_bus *b;
	const char *topics[] = { "x:command" };

	ck_assert_int_eq(agr_wow_bus_new(NULL, &b), -EINVAL);
	ck_assert_int_eq(agr_wow_bus_new(&o, &b), -EINVAL);
	o.topics = topics;
	o.ntopics = 1;
	ck_assert_int_eq(agr_wow_bus_new(&o, &b), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wow_bus");
	TCase *tc = tcase_create("redis");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_options_checked);
	tcase_add_test(tc, test_spec_command_consumed_and_acked);
	tcase_add_test(tc, test_event_and_state_topics);
	tcase_add_test(tc, test_failure_is_acked_as_wow_does);
	tcase_add_test(tc, test_undecodable_stays_pending);
	tcase_add_test(tc, test_busygroup_ignored_and_new_group_skips_old);
	tcase_add_test(tc, test_lease_held_and_released);
	tcase_add_test(tc, test_recovery_claims_dead_not_live);
	tcase_add_test(tc, test_lost_delivery_claimed_again);
	tcase_add_test(tc, test_not_admitted_stays_pending);
	tcase_add_test(tc, test_backlog_read_in_bounded_batches);
	tcase_add_test(tc, test_publish);
	tcase_add_test(tc, test_shutdown_ends_a_livelocked_handler);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_redis_run("check_wow_bus", suite);
}
