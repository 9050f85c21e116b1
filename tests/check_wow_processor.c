/* SPDX-License-Identifier: MIT */
/*
 * check_wow_processor.c - Wow's command processor rules
 * (aggring/wow_processor.h) against a redis-server of its own, with
 * the JVM side played by hand: commands are XADDed as Wow's
 * CommandJsonSerializer writes them (field order and defaults of
 * wow-core's JsonSerializerCommandTest; headers as Wow's propagators
 * and wait plans write them: local_first, trace_id, command_operator,
 * command_wait_* of WaitPlanHeaderExtractionTest), results are read back
 * as a JVM reader would (the :event and :state entries, the event
 * store, and the wait signal POSTed to an HTTP endpoint of the test's).
 * Skips (77) without redis-server or io_uring.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>
#include <aggring/wow_bus.h>
#include <aggring/wow_processor.h>

#include "testutil.h"
#include "testutil_redis.h"

/* The `msg` of entry `i` of stream `topic` (malloc()ed), or NULL. */
static char *entry_msg(const char *topic, size_t i, size_t *count)
{
	redisContext *c = tu_redis_connect();
	redisReply *r = redisCommand(c, "XRANGE %s - +", topic);
	char *msg = NULL;

	ck_assert_ptr_nonnull(r);
	*count = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
	if (i < *count)
		msg = strdup(r->element[i]->element[1]->element[1]->str);
	freeReplyObject(r);
	redisFree(c);
	return msg;
}

static size_t entries(const char *topic)
{
	size_t n;

	free(entry_msg(topic, (size_t)-1, &n));
	return n;
}

/* ---- a wait endpoint: the JVM gateway's /wow/command/wait ---- */

struct endpoint {
	int fd, port;
	pthread_t thread;
	struct tu_latch got;
	char body[4096];
	char path[128];
};

static void *endpoint_main(void *arg)
{
	struct endpoint *e = arg;
	char req[8192];
	size_t n = 0;
	int c = accept(e->fd, NULL, NULL);
	char *body = NULL, *cl;
	long len = -1;
	ssize_t r;

	while (c >= 0 && n + 1 < sizeof(req) &&
	       (r = recv(c, req + n, sizeof(req) - 1 - n, 0)) > 0) {
		n += (size_t)r;
		req[n] = '\0';
		body = strstr(req, "\r\n\r\n");
		cl = strstr(req, "Content-Length: ");
		if (cl)
			len = strtol(cl + 16, NULL, 10);
		if (body && len >= 0 && (long)(n - (size_t)(body + 4 - req)) >= len)
			break;
	}
	if (c >= 0 && body) {
		sscanf(req, "POST %127s", e->path);
		snprintf(e->body, sizeof(e->body), "%.*s", (int)len, body + 4);
		if (send(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38,
			 MSG_NOSIGNAL) < 0)
			perror("endpoint send");
	}
	if (c >= 0)
		close(c);
	tu_latch_count_down(&e->got);
	return NULL;
}

static void endpoint_start(struct endpoint *e)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);

	memset(e, 0, sizeof(*e));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	e->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(e->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(e->fd, 4), 0);
	ck_assert_int_eq(getsockname(e->fd, (struct sockaddr *)&a, &len), 0);
	e->port = ntohs(a.sin_port);
	tu_latch_init(&e->got, 1);
	ck_assert_int_eq(pthread_create(&e->thread, NULL, endpoint_main, e),
			 0);
}

static void endpoint_stop(struct endpoint *e)
{
	shutdown(e->fd, SHUT_RDWR);
	pthread_join(e->thread, NULL);
	close(e->fd);
	tu_latch_destroy(&e->got);
}

/* ---- the C aggregate: an account; Deposit {"amount":N} ---- */

static long long json_number(const char *json, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

static int on_command(const agr_wow_aggregate_state *st,
		      const agr_wow_command *cmd, agr_wow_outcome *out,
		      void *arg)
{
	long long amount = json_number(cmd->body, "amount");
	long long balance = json_number(st->state, "balance") + amount;
	char ev[96], state[64];

	(void)arg;
	if (amount <= 0)
		return agr_wow_outcome_error(out, "IllegalArgument",
					     "amount must be positive");
	snprintf(ev, sizeof(ev), "{\"amount\":%lld,\"balance\":%lld}", amount,
		 balance);
	snprintf(state, sizeof(state), "{\"balance\":%lld}", balance);
	ck_assert_int_eq(agr_wow_outcome_event(out, "Deposited",
					       "bank.account.Deposited", ev,
					       strlen(ev), NULL),
			 0);
	return agr_wow_outcome_state(out, state, strlen(state), false);
}

static int on_sourcing(const agr_wow_aggregate_state *st,
		       const agr_wow_event_stream *s, agr_wow_outcome *out,
		       void *arg)
{
	const agr_wow_event *last = &s->events[s->event_count - 1];
	char state[64];

	(void)st, (void)arg;
	snprintf(state, sizeof(state), "{\"balance\":%lld}",
		 json_number(last->body, "balance"));
	return agr_wow_outcome_state(out, state, strlen(state), false);
}

/* ---- a C service in the JVM's command group ---- */

struct service {
	char topic[64], event_topic[64], state_topic[64];
	agr_wow_processor *proc;
	agr_supplier *sup;
	agr_scheduler *sched;
	agr_dispatcher *disp;
	agr_wow_bus *bus;
};

#define GROUP "bank.CommandDispatcher"

static bool republish; /* the next service's republish_duplicate */
static bool departures; /* retry_create_conflict and trust_cache */

static void service_start(struct service *sv, const char *aggregate)
{
	agr_named_aggregate na = { "bank", aggregate };
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_wow_processor_options po = AGR_WOW_PROCESSOR_OPTIONS_INIT;
	agr_dispatcher_options d = { .name = "wowproc", .named_aggregate = na,
				     .parallelism = 8,
				     .on_complete = agr_wow_bus_complete };
	agr_wow_bus_options bo = AGR_WOW_BUS_OPTIONS_INIT;
	const char *topics[1];

	snprintf(sv->topic, sizeof(sv->topic), "bank.%s:command", aggregate);
	topics[0] = sv->topic;
	snprintf(sv->event_topic, sizeof(sv->topic), "bank.%s:event", aggregate);
	snprintf(sv->state_topic, sizeof(sv->topic), "bank.%s:state", aggregate);
	po.named.context_name = "bank";
	po.named.aggregate_name = aggregate;
	po.redis.port = tu_redis_port();
	po.workers = 2;
	po.on_command = on_command;
	po.on_sourcing = on_sourcing;
	po.min_backoff_ms = 10;
	po.republish_duplicate = republish;
	po.retry_create_conflict = departures;
	po.trust_cache = departures;
	po.max_retries = departures ? 100 : 0;
	po.max_backoff_ms = 50;
	ck_assert_int_eq(agr_wow_processor_new(&po, &sv->proc), 0);
	so.parallelism = 2;
	so.worker_init = agr_wow_processor_worker_init;
	so.worker_exit = agr_wow_processor_worker_exit;
	so.hook_arg = sv->proc;
	ck_assert_int_eq(agr_supplier_new_opts("wowproc", &so, &sv->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sv->sup, &na, &sv->sched), 0);
	d.supplier = sv->sup;
	ck_assert_int_eq(agr_dispatcher_new(&d, &sv->disp), 0);
	ck_assert_int_eq(agr_dispatcher_register(sv->disp, NULL,
						 agr_wow_processor_handle,
						 sv->proc), 0);
	ck_assert_int_eq(agr_dispatcher_start(sv->disp), 0);
	bo.redis.port = tu_redis_port();
	bo.scheduler = sv->sched;
	bo.dispatcher = sv->disp;
	bo.topics = topics;
	bo.ntopics = 1;
	bo.group = GROUP;
	bo.block_ms = 100;
	ck_assert_int_eq(agr_wow_bus_new(&bo, &sv->bus), 0);
	ck_assert_int_eq(agr_wow_bus_start(sv->bus), 0);
	ck_assert_int_eq(agr_wow_bus_wait_ready(sv->bus, TU_LONG_NS), 0);
}

static void service_stop(struct service *sv)
{
	ck_assert_int_eq(agr_wow_bus_stop(sv->bus, TU_LONG_NS), 0);
	agr_wow_bus_free(sv->bus);
	ck_assert_int_eq(agr_wow_processor_close(sv->proc, sv->sched,
						 TU_LONG_NS), 0);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(sv->disp, TU_LONG_NS),
			 0);
	agr_dispatcher_free(sv->disp);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sv->sup, TU_LONG_NS), 0);
	agr_supplier_free(sv->sup);
	agr_wow_processor_free(sv->proc);
}

static long long acked(struct service *sv)
{
	agr_wow_bus_stats st;

	ck_assert_int_eq(agr_wow_bus_stats_get(sv->bus, &st), 0);
	return (long long)st.acked;
}

static agr_wow_processor_stats pstats(struct service *sv)
{
	agr_wow_processor_stats st;

	ck_assert_int_eq(agr_wow_processor_stats_get(sv->proc, &st), 0);
	return st;
}

/*
 * A command as Wow's CommandJsonSerializer writes it (wow-core
 * JsonSerializerCommandTest's field order), for aggregate `agg`.
 * `extra` is spliced in after requestId (aggregateVersion ...).
 */
static void send_command(struct service *sv, const char *id,
			 const char *header, const char *tenant,
			 const char *agg_id, const char *owner, bool create,
			 bool is_void, bool allow_create, const char *extra,
			 long long amount)
{
	char msg[2048];
	const char *agg = strchr(sv->topic, '.') + 1;

	snprintf(msg, sizeof(msg),
		 "{\"id\":\"%s\",\"contextName\":\"bank\",\"aggregateName\":"
		 "\"%.*s\",\"name\":\"Deposit\",\"header\":%s,\"tenantId\":"
		 "\"%s\",\"aggregateId\":\"%s\",\"ownerId\":\"%s\",\"spaceId\":"
		 "\"\",\"requestId\":\"%s\"%s,\"isCreate\":%s,\"isVoid\":%s,"
		 "\"allowCreate\":%s,\"bodyType\":\"bank.account.Deposit\","
		 "\"body\":{\"amount\":%lld},\"createTime\":1000}",
		 id, (int)(strchr(agg, ':') - agg), agg, header, tenant,
		 agg_id, owner, id, extra ? extra : "",
		 create ? "true" : "false", is_void ? "true" : "false",
		 allow_create ? "true" : "false", amount);
	tu_redis_ok("XADD %s * msg %s", sv->topic, msg);
}

static agr_wow_event_stream *event_at(struct service *sv, size_t i)
{
	size_t n;
	char *msg = entry_msg(sv->event_topic, i, &n);
	agr_wow_event_stream *s = NULL;

	ck_assert_ptr_nonnull(msg);
	ck_assert_int_eq(agr_wow_event_stream_decode(msg, strlen(msg), &s), 0);
	free(msg);
	return s;
}

static const char *hdr(const agr_wow_event_stream *s, const char *key)
{
	for (size_t i = 0; i < s->header_count; i++)
		if (!strcmp(s->header[i].key, key))
			return s->header[i].value;
	return NULL;
}

/* ---- tests ---- */

/* LocalFirstMessageBus.kt: a "true" copy is acked and dropped. */
START_TEST(test_local_first_copy_and_void_dropped)
{
	struct service sv = { .proc = NULL };

	service_start(&sv, "Lf");
	send_command(&sv, "c-lf", "{\"local_first\":\"true\"}", "(0)", "a-1",
		     "", true, false, false, NULL, 5);
	send_command(&sv, "c-lf2", "{\"local_first\":\"TRUE\"}", "(0)", "a-1",
		     "", true, false, false, NULL, 5);
	send_command(&sv, "c-void", "{}", "(0)", "a-1", "", true, true, false,
		     NULL, 5);
	/* "false": local delivery failed, the copy must be processed */
	send_command(&sv, "c-lf-false", "{\"local_first\":\"false\"}", "(0)",
		     "a-1", "", true, false, false, NULL, 5);
	TU_WAIT_EQ(acked(&sv), 4);
	ck_assert_int_eq(tu_redis_pending(sv.topic, GROUP), 0);
	ck_assert_uint_eq(pstats(&sv).local_first, 2);
	ck_assert_uint_eq(pstats(&sv).void_dropped, 1);
	ck_assert_uint_eq(pstats(&sv).processed, 1);
	ck_assert_uint_eq(entries(sv.event_topic), 1);
	service_stop(&sv);
}
END_TEST

/* SimpleCommandAggregate.kt's checks, each acked as a failure. */
START_TEST(test_preconditions)
{
	struct service sv = { .proc = NULL };

	service_start(&sv, "Pre");
	/* not initialised, neither isCreate nor allowCreate: NotFound */
	send_command(&sv, "p-1", "{}", "(0)", "b-1", "", false, false, false,
		     NULL, 5);
	TU_WAIT_EQ(acked(&sv), 1);
	ck_assert_uint_eq(pstats(&sv).failed, 1);
	/* allowCreate creates, owned by o-1 */
	send_command(&sv, "p-2", "{}", "(0)", "b-1", "o-1", false, false, true,
		     NULL, 5);
	TU_WAIT_EQ(acked(&sv), 2);
	ck_assert_uint_eq(pstats(&sv).processed, 1);
	/* aggregateVersion 5 != 1: CommandExpectVersionConflict */
	send_command(&sv, "p-3", "{}", "(0)", "b-1", "", false, false, false,
		     ",\"aggregateVersion\":5", 5);
	/* another owner: IllegalAccessOwnerAggregate */
	send_command(&sv, "p-4", "{}", "(0)", "b-1", "o-2", false, false,
		     false, NULL, 5);
	/* the aggregate refuses: its own error */
	send_command(&sv, "p-5", "{}", "(0)", "b-1", "", false, false, false,
		     NULL, -1);
	/* aggregateVersion 1 == 1, the right owner: applied, version 2 */
	send_command(&sv, "p-6", "{}", "(0)", "b-1", "o-1", false, false,
		     false, ",\"aggregateVersion\":1", 7);
	TU_WAIT_EQ(acked(&sv), 6);
	ck_assert_uint_eq(pstats(&sv).failed, 4);
	ck_assert_uint_eq(pstats(&sv).processed, 2);
	ck_assert_uint_eq(entries(sv.event_topic), 2);
	{
		agr_wow_event_stream *s = event_at(&sv, 1);

		ck_assert_int_eq(s->version, 2);
		ck_assert_ptr_nonnull(strstr(s->events[0].body,
					     "\"balance\":12"));
		agr_wow_event_stream_free(s);
	}
	service_stop(&sv);
}
END_TEST

/*
 * Issue 30's livelock: one id under two tenants. The second tenant's
 * create gets DuplicateAggregateId from Wow's script, is acked, and
 * the consumer stops at once.
 */
START_TEST(test_one_id_two_tenants)
{
	struct service sv = { .proc = NULL };
	uint64_t t0;

	service_start(&sv, "Ten");
	send_command(&sv, "t-1", "{}", "tenant-a", "same-id", "", true, false,
		     false, NULL, 5);
	TU_WAIT_EQ(acked(&sv), 1);
	send_command(&sv, "t-2", "{}", "tenant-b", "same-id", "", true, false,
		     false, NULL, 5);
	/* allowCreate under tenant b: fresh state there, version 1 again */
	send_command(&sv, "t-3", "{}", "tenant-b", "same-id", "", false,
		     false, true, NULL, 5);
	TU_WAIT_EQ(acked(&sv), 3);
	ck_assert_int_eq(tu_redis_pending(sv.topic, GROUP), 0);
	ck_assert_uint_eq(pstats(&sv).processed, 1);
	ck_assert_uint_eq(pstats(&sv).failed, 2);
	/* tenant a goes on from its own version */
	send_command(&sv, "t-4", "{}", "tenant-a", "same-id", "", false,
		     false, false, ",\"aggregateVersion\":1", 5);
	TU_WAIT_EQ(acked(&sv), 4);
	ck_assert_uint_eq(pstats(&sv).processed, 2);
	t0 = tu_now_ns();
	service_stop(&sv);
	ck_assert_uint_lt(tu_now_ns() - t0, 10ull * 1000000000ull);
}
END_TEST

/* The state event of test_headers_...: StateEventJsonDeserializer's
 * fields. */
static void expect_state_event(struct service *sv)
{
	agr_wow_state_event *st = NULL;
	size_t n;
	char *msg = entry_msg(sv->state_topic, 0, &n);

	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(agr_wow_state_event_decode(msg, strlen(msg), &st), 0);
	ck_assert_int_eq(st->stream.version, 1);
	ck_assert_str_eq(st->first_operator, "op-1");
	ck_assert_int_gt(st->first_event_time, 0);
	ck_assert_int_eq(st->first_event_time, st->stream.create_time);
	ck_assert_str_eq(st->state, "{\"balance\":9}");
	ck_assert(!st->deleted);
	agr_wow_state_event_free(st);
	free(msg);
}

/* The wait signal of test_headers_..., as CommandWaitHandlerFunction
 * reads it. */
static void expect_wait_signal(const struct endpoint *ep)
{
	ck_assert_str_eq(ep->path, "/wow/command/wait");
	ck_assert_ptr_nonnull(
		strstr(ep->body, "\"waitCommandId\":\"wait-id\""));
	ck_assert_ptr_nonnull(strstr(ep->body, "\"stage\":\"PROCESSED\""));
	ck_assert_ptr_nonnull(strstr(ep->body, "\"commandId\":\"h-1\""));
	ck_assert_ptr_nonnull(strstr(ep->body, "\"aggregateVersion\":1"));
	ck_assert_ptr_nonnull(strstr(ep->body, "\"errorCode\":\"Ok\""));
	ck_assert_ptr_nonnull(strstr(
		ep->body, "\"aggregateId\":{\"contextName\":\"bank\","
			  "\"aggregateName\":\"Hdr\",\"aggregateId\":\"h-1\","
			  "\"tenantId\":\"(0)\"}"));
	ck_assert_ptr_nonnull(strstr(
		ep->body, "\"function\":{\"functionKind\":\"COMMAND\","
			  "\"contextName\":\"bank\",\"processorName\":\"Hdr\","
			  "\"name\":\"onCommand\"}"));
}

/*
 * A create carrying the headers a JVM gateway writes: the events carry
 * the propagated ones, the :state entry reads as Wow's StateEvent, and
 * the waiter gets the PROCESSED signal over HTTP.
 */
START_TEST(test_headers_state_event_and_wait_signal)
{
	struct service sv = { .proc = NULL };
	struct endpoint ep;
	char header[512];
	agr_wow_event_stream *s;

	endpoint_start(&ep);
	service_start(&sv, "Hdr");
	snprintf(header, sizeof(header),
		 "{\"trace_id\":\"trace-1\",\"command_operator\":\"op-1\","
		 "\"command_wait_id\":\"wait-id\",\"command_wait_endpoint\":"
		 "\"http://127.0.0.1:%d/wow/command/wait\","
		 "\"command_wait_stage\":\"PROCESSED\",\"other\":\"x\"}",
		 ep.port);
	send_command(&sv, "h-1", header, "(0)", "h-1", "", true, false, false,
		     NULL, 9);
	TU_WAIT_EQ(acked(&sv), 1);
	s = event_at(&sv, 0);
	ck_assert_str_eq(hdr(s, "trace_id"), "trace-1");
	ck_assert_str_eq(hdr(s, "upstream_id"), "h-1");
	ck_assert_str_eq(hdr(s, "upstream_name"), "Deposit");
	ck_assert_str_eq(hdr(s, "command_operator"), "op-1");
	ck_assert_str_eq(hdr(s, "command_wait_id"), "wait-id");
	ck_assert_str_eq(hdr(s, "command_wait_stage"), "PROCESSED");
	ck_assert_ptr_null(hdr(s, "other"));
	ck_assert_str_eq(s->command_id, "h-1");
	ck_assert_str_eq(s->request_id, "h-1");
	ck_assert_int_eq(s->version, 1);
	agr_wow_event_stream_free(s);
	expect_state_event(&sv);
	/* the wait signal, as CommandWaitHandlerFunction reads it */
	ck_assert(tu_latch_wait(&ep.got, TU_LONG_NS));
	expect_wait_signal(&ep);
	TU_WAIT_EQ((long long)pstats(&sv).notified, 1);
	service_stop(&sv);
	endpoint_stop(&ep);
}
END_TEST

/*
 * A redelivered command (same request id) after it was stored: Wow
 * fails it with DuplicateRequestId; with republish_duplicate the stored
 * stream is published again instead.
 */
START_TEST(test_duplicate_request)
{
	struct service sv = { .proc = NULL };

	service_start(&sv, "Dup");
	send_command(&sv, "d-1", "{}", "(0)", "d-1", "", true, false, false,
		     NULL, 5);
	send_command(&sv, "d-1", "{}", "(0)", "d-1", "", false, false, true,
		     NULL, 5);
	TU_WAIT_EQ(acked(&sv), 2);
	ck_assert_uint_eq(pstats(&sv).processed, 1);
	ck_assert_uint_eq(pstats(&sv).failed, 1);
	ck_assert_uint_eq(entries(sv.event_topic), 1);
	service_stop(&sv);
	republish = true;
	service_start(&sv, "Dup");
	send_command(&sv, "d-1", "{}", "(0)", "d-1", "", false, false, true,
		     NULL, 5);
	TU_WAIT_EQ(acked(&sv), 1);
	republish = false;
	ck_assert_uint_eq(pstats(&sv).republished, 1);
	ck_assert_uint_eq(pstats(&sv).failed, 0);
	ck_assert_uint_eq(entries(sv.event_topic), 2);
	{
		agr_wow_event_stream *s = event_at(&sv, 1);

		ck_assert_int_eq(s->version, 1);
		ck_assert_str_eq(s->request_id, "d-1");
		agr_wow_event_stream_free(s);
	}
	service_stop(&sv);
}
END_TEST

/*
 * Two instances in one group on one account, as wow_ledger runs them
 * (retry_create_conflict, trust_cache): every command is applied once,
 * the versions contiguous, though the two race to create the account
 * and each other's cached state goes stale.
 */
START_TEST(test_two_instances_one_account)
{
	struct service a = { .proc = NULL }, b = { .proc = NULL };
	char id[32];
	agr_wow_event_stream *s;
	bool seen[41] = { false };
	int n = 40;

	departures = true;
	service_start(&a, "Two");
	service_start(&b, "Two");
	departures = false;
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "two-%d", i);
		send_command(&a, id, "{}", "(0)", "acct", "", false, false, true,
			     NULL, 1);
	}
	TU_WAIT_EQ(acked(&a) + acked(&b), n);
	ck_assert_uint_eq(pstats(&a).failed + pstats(&b).failed, 0);
	ck_assert_uint_eq(pstats(&a).processed + pstats(&b).processed,
			  (uint64_t)n);
	ck_assert_uint_eq(entries(a.event_topic), (size_t)n);
	ck_assert_uint_eq(entries(a.state_topic), (size_t)n);
	/* versions 1..n once each (two publishers: in any order) */
	for (int i = 0; i < n; i++) {
		s = event_at(&a, (size_t)i);
		ck_assert_int_ge(s->version, 1);
		ck_assert_int_le(s->version, n);
		ck_assert(!seen[s->version]);
		seen[s->version] = true;
		if (s->version == n)
			ck_assert_ptr_nonnull(strstr(s->events[0].body,
						     "\"balance\":40"));
		agr_wow_event_stream_free(s);
	}
	service_stop(&a);
	service_stop(&b);
}
END_TEST

/* Pure rules: the wait plan (ExtractedWaitPlan.kt, CommandStage.kt). */
START_TEST(test_wait_wanted)
{
	agr_wow_header h[4] = {
		{ "command_wait_id", "w" },
		{ "command_wait_endpoint", "http://127.0.0.1:1/wow/command/wait" },
		{ "command_wait_stage", "SENT" },
	};
	agr_wow_command c = { .header = h, .header_count = 3 };
	const char *ep = NULL;

	ck_assert(!agr_wow_wait_wanted(&c, &ep)); /* SENT: the gateway's */
	h[2].value = "PROJECTED"; /* PROCESSED is a previous stage */
	ck_assert(agr_wow_wait_wanted(&c, &ep));
	ck_assert_str_eq(ep, h[1].value);
	h[2].key = "command_wait_chain";
	h[2].value = "simple";
	ck_assert(!agr_wow_wait_wanted(&c, NULL)); /* a chain needs a tail */
	h[3].key = "command_wait_tail_stage";
	h[3].value = "PROJECTED";
	c.header_count = 4;
	ck_assert(agr_wow_wait_wanted(&c, NULL));
	c.header_count = 1; /* no endpoint */
	ck_assert(!agr_wow_wait_wanted(&c, NULL));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wow_processor");
	TCase *tc = tcase_create("redis");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_wait_wanted);
	tcase_add_test(tc, test_local_first_copy_and_void_dropped);
	tcase_add_test(tc, test_preconditions);
	tcase_add_test(tc, test_one_id_two_tenants);
	tcase_add_test(tc, test_duplicate_request);
	tcase_add_test(tc, test_two_instances_one_account);
	tcase_add_test(tc, test_headers_state_event_and_wait_signal);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_redis_run("check_wow_proc", suite);
}
