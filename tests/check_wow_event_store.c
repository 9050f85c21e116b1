/* SPDX-License-Identifier: MIT */
/*
 * check_wow_event_store.c - Wow's Redis event store on a real
 * redis-server (libaggring-redis, aggring/wow_event_store.h).
 *
 * A private redis-server runs on a free loopback port (the test SKIPs
 * without one). Each step (wow_event_store_steps.c) runs on a worker,
 * where the event store lives, and the test thread waits for its
 * callback with a latch; what Redis then holds is read back apart,
 * with hiredis's blocking client, so the checks do not trust the code
 * under test.
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

const agr_wow_named bank = { "bank", NULL, "Account" };

static struct server servers[2] = { { .cluster = false },
				    { .cluster = true } };

struct server *server = &servers[0]; /* the fixture's */

/* Binds loopback port `want` (0: any) and returns the port, or -1. */
static int try_port(int want)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)want),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* A cluster node also listens on port + 10000, its cluster bus. */
static int free_port(bool cluster)
{
	for (int i = 0; i < 100; i++) {
		int port = try_port(0);

		if (port < 0 || !cluster)
			return port;
		if (port <= 65535 - 10000 && try_port(port + 10000) > 0)
			return port;
	}
	return -1;
}

static redisContext *connect_to(int port)
{
	struct timeval tv = { 5, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	if (c && c->err) {
		redisFree(c);
		return NULL;
	}
	return c;
}

static redisContext *sync_connect(void)
{
	return connect_to(server->port);
}

static _Noreturn void server_exec(struct server *sv)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", sv->port);
	if (!freopen("/dev/null", "w", stdout))
		_exit(127);
	/*
	 * A lone cluster node that never met another does not know its
	 * address and announces "" in CLUSTER SHARDS: announce it.
	 */
	if (sv->cluster)
		execlp("redis-server", "redis-server", "--port", port,
		       "--bind", "127.0.0.1", "--save", "", "--appendonly",
		       "no", "--loglevel", "warning", "--dir", sv->dir,
		       "--cluster-enabled", "yes", "--cluster-config-file",
		       "nodes.conf", "--cluster-announce-ip", "127.0.0.1",
		       (char *)NULL);
	else
		execlp("redis-server", "redis-server", "--port", port,
		       "--bind", "127.0.0.1", "--save", "", "--appendonly",
		       "no", "--loglevel", "warning", (char *)NULL);
	_exit(127);
}

/* Polls (the server is another process) until `ok` says it is ready. */
static bool wait_until(struct server *sv, bool (*ok)(redisContext *c))
{
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;
	int status;

	while (tu_now_ns() < deadline) {
		redisContext *c = connect_to(sv->port);
		bool ready = c && ok(c);

		if (c)
			redisFree(c);
		if (ready)
			return true;
		if (waitpid(sv->pid, &status, WNOHANG) == sv->pid) {
			sv->pid = 0;
			return false;
		}
		usleep(20000);
	}
	return false;
}

static bool answers(redisContext *c)
{
	(void)c;
	return true;
}

static bool cluster_ok(redisContext *c)
{
	redisReply *r = redisCommand(c, "CLUSTER INFO");
	bool ok = r && r->type == REDIS_REPLY_STRING &&
		  strstr(r->str, "cluster_state:ok");

	freeReplyObject(r);
	return ok;
}

static bool server_start(struct server *sv)
{
	redisContext *c;
	redisReply *r;
	bool ok;

	sv->port = free_port(sv->cluster);
	if (sv->port < 0)
		return false;
	if (sv->cluster) {
		snprintf(sv->dir, sizeof(sv->dir), "/tmp/wowes.XXXXXX");
		if (!mkdtemp(sv->dir))
			return false;
	}
	sv->pid = fork();
	if (sv->pid == 0)
		server_exec(sv);
	if (sv->pid < 0 || !wait_until(sv, answers))
		return false;
	if (!sv->cluster)
		return true;
	c = connect_to(sv->port);
	if (!c)
		return false;
	r = redisCommand(c, "CLUSTER ADDSLOTSRANGE 0 16383");
	ok = r && r->type == REDIS_REPLY_STATUS;
	freeReplyObject(r);
	redisFree(c);
	return ok && wait_until(sv, cluster_ok);
}

static void server_stop(struct server *sv)
{
	char path[96];

	if (sv->pid > 0) {
		kill(sv->pid, SIGTERM);
		waitpid(sv->pid, NULL, 0);
		sv->pid = 0;
	}
	if (sv->cluster && sv->dir[0]) {
		snprintf(path, sizeof(path), "%s/nodes.conf", sv->dir);
		unlink(path);
		rmdir(sv->dir);
	}
}

static redisReply *sync_cmd(redisContext *c, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	ck_assert_ptr_nonnull(r);
	return r;
}

/* ---- fixture ---- */

static void setup_plain(void)
{
	server = &servers[0];
}

static void setup_cluster(void)
{
	server = &servers[1];
}

static void setup(void)
{
	const agr_named_aggregate na = { "bank", "Account" };
	struct step s = { 0 };
	redisReply *r;

	E.sync = sync_connect();
	ck_assert_ptr_nonnull(E.sync);
	r = sync_cmd(E.sync, "FLUSHALL");
	freeReplyObject(r);
	ck_assert_int_eq(agr_supplier_new("wowes", 1, &E.sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(E.sup, &na, &E.sched), 0);
	run(&s, open_step);
	ck_assert_int_eq(s.status, 0);
	run(&s, ping_step);
	ck_assert_int_eq(s.status, 0);
}

static void teardown(void)
{
	struct step s = { 0 };

	run(&s, close_step);
	ck_assert_int_eq(agr_supplier_stop_gracefully(E.sup, TU_LONG_NS), 0);
	agr_supplier_free(E.sup);
	redisFree(E.sync);
	E = (struct env){ 0 };
}

static int append(const char *id, const char *tenant, const char *request,
		  int32_t version)
{
	struct step s = { .id = id, .tenant = tenant, .request = request,
			  .version = version };

	run(&s, append_step);
	return s.status;
}

/* ---- tests ---- */

START_TEST(test_scripts_are_wows)
{
	redisReply *r = sync_cmd(E.sync, "SCRIPT LOAD %s",
				 agr_wow_append_script());

	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	ck_assert_str_eq(r->str, "5c0053be2bb93f9a071d8f90686a8dce76789de5");
	freeReplyObject(r);
	r = sync_cmd(E.sync, "SCRIPT LOAD %s", agr_wow_snapshot_script());
	ck_assert_str_eq(r->str, "dfef088884d9cf1ebb26d32480caa133aa00b4de");
	freeReplyObject(r);
}
END_TEST

START_TEST(test_append_and_conflicts)
{
	agr_wow_es_keys k;
	redisReply *r;

	/* SCRIPT FLUSH first: the first append must fall back to EVAL */
	freeReplyObject(sync_cmd(E.sync, "SCRIPT FLUSH"));
	ck_assert_int_eq(append("acc-1", "t1", "req-1", 1), 0);
	ck_assert_int_eq(append("acc-1", "t1", "req-2", 2), 0);
	/* version 2 again: the stream holds 2 */
	ck_assert_int_eq(append("acc-1", "t1", "req-3", 2),
			 AGR_WOW_EVERSION_CONFLICT);
	/* a gap */
	ck_assert_int_eq(append("acc-1", "t1", "req-3", 4),
			 AGR_WOW_EVERSION_CONFLICT);
	/* a request id seen before, at the right version */
	ck_assert_int_eq(append("acc-1", "t1", "req-1", 3),
			 AGR_WOW_EDUPLICATE_REQUEST);
	ck_assert_int_eq(append("acc-1", "t1", "req-3", 3), 0);
	/* the same id under another tenant, and under the default one */
	ck_assert_int_eq(append("acc-1", "t2", "req-x", 1),
			 AGR_WOW_EDUPLICATE_AGGREGATE);
	ck_assert_int_eq(append("acc-1", NULL, "req-y", 1),
			 AGR_WOW_EDUPLICATE_AGGREGATE);
	/* a prefix of the id is another id */
	ck_assert_int_eq(append("acc-", "t2", "req-z", 1), 0);

	/* what Redis holds: 3 versions, 3 request ids, 2 index members */
	ck_assert_int_eq(agr_wow_es_keys_build(&bank, "acc-1", "t1", &k), 0);
	r = sync_cmd(E.sync, "ZCARD %s", k.stream);
	ck_assert_int_eq(r->integer, 3);
	freeReplyObject(r);
	r = sync_cmd(E.sync, "SCARD %s", k.req_idx);
	ck_assert_int_eq(r->integer, 3);
	freeReplyObject(r);
	r = sync_cmd(E.sync, "ZRANGE %s 0 -1", k.ids);
	ck_assert_int_eq(r->elements, 1);
	ck_assert_str_eq(r->element[0]->str, k.member);
	freeReplyObject(r);
	/* the rejected appends wrote nothing under the other tenants */
	r = sync_cmd(E.sync, "KEYS *dDI*"); /* b64("t2") */
	ck_assert_int_eq(r->elements, 2); /* acc-'s stream and req_idx */
	freeReplyObject(r);
	agr_wow_es_keys_free(&k);
}
END_TEST

/* The stored members parse back with what Wow requires, byte for byte. */
START_TEST(test_appended_streams_are_wows)
{
	agr_wow_es_keys k;
	redisReply *r;

	ck_assert_int_eq(append("acc-1", "t1", "req-1", 1), 0);
	ck_assert_int_eq(append("acc-1", "t1", "req-2", 2), 0);
	ck_assert_int_eq(append("acc-1", "t1", "req-3", 3), 0);
	ck_assert_int_eq(agr_wow_es_keys_build(&bank, "acc-1", "t1", &k), 0);
	r = sync_cmd(E.sync, "ZRANGE %s 0 -1 WITHSCORES", k.stream);
	ck_assert_int_eq(r->elements, 6);
	for (size_t i = 0; i < 3; i++) {
		agr_wow_event_stream *st;

		ck_assert_int_eq(agr_wow_event_stream_decode(
					 r->element[2 * i]->str,
					 r->element[2 * i]->len, &st), 0);
		ck_assert_int_eq(st->version, (int)i + 1);
		ck_assert_int_eq(atoi(r->element[2 * i + 1]->str), (int)i + 1);
		ck_assert_str_eq(st->context_name, "bank");
		ck_assert_str_eq(st->aggregate_name, "Account");
		ck_assert_str_eq(st->aggregate_id, "acc-1");
		ck_assert_str_eq(st->tenant_id, "t1");
		ck_assert_uint_eq(st->event_count, 1);
		ck_assert_str_eq(st->events[0].revision, "0.0.1");
		ck_assert_str_eq(st->events[0].body_type, "bank.Deposited");
		agr_wow_event_stream_free(st);
	}
	/* byte for byte what the encoder writes */
	ck_assert_str_eq(r->element[0]->str,
		"{\"id\":\"s-1\",\"contextName\":\"bank\",\"aggregateName\":"
		"\"Account\",\"header\":{},\"aggregateId\":\"acc-1\","
		"\"tenantId\":\"t1\",\"ownerId\":\"\",\"spaceId\":\"\","
		"\"commandId\":\"req-1\",\"requestId\":\"req-1\",\"version\":1,"
		"\"body\":[{\"id\":\"ev\",\"name\":\"Deposited\",\"revision\":"
		"\"0.0.1\",\"bodyType\":\"bank.Deposited\",\"body\":"
		"{\"amount\":1}}],\"createTime\":1733000000000}");
	freeReplyObject(r);
	agr_wow_es_keys_free(&k);
}
END_TEST

START_TEST(test_load_last_exists)
{
	struct step s = { .id = "\xe8\xb4\xa6\xe6\x88\xb7-\xf0\x9f\x98\x80",
			  .tenant = "" };
	char req[16];

	for (int v = 1; v <= 5; v++) {
		snprintf(req, sizeof(req), "r%d", v);
		ck_assert_int_eq(append(s.id, "", req, v), 0);
	}
	s.head = 2;
	s.tail = 4;
	run(&s, load_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_uint_eq(s.count, 3);
	for (int i = 0; i < 3; i++) {
		snprintf(req, sizeof(req), "r%d", i + 2);
		ck_assert_int_eq(s.versions[i], i + 2);
		ck_assert_str_eq(s.request_ids[i], req);
		ck_assert_str_eq(s.event_names[i], "Deposited");
	}
	s.head = AGR_WOW_VERSION_MIN;
	s.tail = AGR_WOW_VERSION_MAX;
	run(&s, load_step);
	ck_assert_uint_eq(s.count, 5);
	s.head = 6;
	run(&s, load_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_uint_eq(s.count, 0);

	run(&s, last_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_int_eq(s.value, 5);
	s.id = "nobody";
	run(&s, last_step);
	ck_assert_int_eq(s.value, 0);

	s.id = "\xe8\xb4\xa6\xe6\x88\xb7-\xf0\x9f\x98\x80";
	s.request = "r3";
	run(&s, exists_step);
	ck_assert_int_eq(s.value, 1);
	s.request = "r9";
	run(&s, exists_step);
	ck_assert_int_eq(s.value, 0);

	/* bad input fails the call, and the callback never runs */
	s.head = 3;
	s.tail = 2;
	run(&s, load_step);
	ck_assert_int_eq(s.status, -EINVAL);
	s.id = "\xed\xa0\x80";
	run(&s, last_step);
	ck_assert_int_eq(s.status, -EILSEQ);
}
END_TEST

START_TEST(test_load_rejects_foreign_member)
{
	struct step s = { .id = "acc-9", .tenant = "t1", .head = 1,
			  .tail = AGR_WOW_VERSION_MAX };
	agr_wow_es_keys k;

	ck_assert_int_eq(agr_wow_es_keys_build(&bank, "acc-9", "t1", &k), 0);
	freeReplyObject(sync_cmd(E.sync, "ZADD %s 1 %s", k.stream,
				 "{\"id\":\"x\"}"));
	agr_wow_es_keys_free(&k);
	run(&s, load_step);
	ck_assert_int_eq(s.status, -EBADMSG);
	ck_assert_uint_eq(s.count, 0);
}
END_TEST

START_TEST(test_snapshot_guard)
{
	struct step s = { .id = "acc-1", .tenant = "t1" };
	agr_wow_es_keys k;
	redisReply *r;

	run(&s, snapshot_load_step);
	ck_assert_int_eq(s.status, -ENOENT);

	s.json = "{\"contextName\":\"bank\",\"version\":5,\"state\":{}}";
	run(&s, save_step);
	ck_assert_int_eq(s.status, 0);
	s.json = "{\"contextName\":\"bank\",\"version\":4,\"state\":{\"old\":1}}";
	run(&s, save_step);
	ck_assert_int_eq(s.status, AGR_WOW_SNAPSHOT_IGNORED);
	s.json = "{\"contextName\":\"bank\",\"version\":5,\"state\":{\"tie\":1}}";
	run(&s, save_step);
	ck_assert_int_eq(s.status, 0);
	run(&s, snapshot_load_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_str_eq(s.snapshot,
			 "{\"contextName\":\"bank\",\"version\":5,"
			 "\"state\":{\"tie\":1}}");

	/* the key Wow reads */
	ck_assert_int_eq(agr_wow_es_keys_build(&bank, "acc-1", "t1", &k), 0);
	r = sync_cmd(E.sync, "GET %s", k.snapshot);
	ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
	ck_assert_str_eq(r->str, s.snapshot);
	freeReplyObject(r);

	/* a stored snapshot without a numeric version: the script's error */
	freeReplyObject(sync_cmd(E.sync, "SET %s %s", k.snapshot,
				 "{\"version\":\"x\"}"));
	s.json = "{\"version\":6}";
	run(&s, save_step);
	ck_assert_int_eq(s.status, -EPROTO);
	agr_wow_es_keys_free(&k);

	/* no version in the new one: refused before Redis */
	s.json = "{\"state\":{}}";
	run(&s, save_step);
	ck_assert_int_eq(s.status, -EBADMSG);
}
END_TEST

START_TEST(test_scan_ids)
{
	static const char *const expect[] = { "A", "acc-1", "acc-2", "b",
					      "\xf0\x9f\x98\x80" };
	struct step s = { .limit = 10 };

	/* "(" sorts below Wow's default start "(0)": skipped, as in Wow */
	ck_assert_int_eq(append("\xf0\x9f\x98\x80", "t1", "r", 1), 0);
	ck_assert_int_eq(append("b", "t1", "r", 1), 0);
	ck_assert_int_eq(append("acc-2", "t2", "r", 1), 0);
	ck_assert_int_eq(append("acc-1", "", "r", 1), 0);
	ck_assert_int_eq(append("A", NULL, "r", 1), 0);
	ck_assert_int_eq(append("(", "t1", "r", 1), 0);

	run(&s, scan_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_uint_eq(s.count, 5);
	for (size_t i = 0; i < 5; i++)
		ck_assert_str_eq(s.ids[i], expect[i]);
	ck_assert_str_eq(s.tenants[0], "(0)");
	ck_assert_str_eq(s.tenants[1], "");
	ck_assert_str_eq(s.tenants[2], "t2");

	s.after = "acc-1";
	s.limit = 2;
	run(&s, scan_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_uint_eq(s.count, 2);
	ck_assert_str_eq(s.ids[0], "acc-2");
	ck_assert_str_eq(s.ids[1], "b");

	s.after = AGR_WOW_SCAN_LAST_ID;
	run(&s, scan_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_uint_eq(s.count, 0);

	s.after = NULL;
	s.limit = 0;
	run(&s, scan_step);
	ck_assert_int_eq(s.status, -EINVAL);
}
END_TEST

/* A snapshot document from agr_wow_snapshot_encode, stored and read back. */
START_TEST(test_snapshot_wow_document)
{
	static const char state[] = "{\"balance\":42}";
	const agr_wow_snapshot snap = {
		.context_name = "bank", .aggregate_name = "Account",
		.aggregate_id = "acc-7", .tenant_id = "t1", .version = 3,
		.event_id = "e3", .state = state, .state_len = sizeof(state) - 1,
		.snapshot_time = 1733000000000,
	};
	struct step s = { .id = "acc-7", .tenant = "t1" };
	agr_wow_snapshot *d;
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_snapshot_encode(&snap, &json, &len), 0);
	s.json = json;
	run(&s, save_step);
	ck_assert_int_eq(s.status, 0);
	run(&s, snapshot_load_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_str_eq(s.snapshot, json);
	ck_assert_int_eq(agr_wow_snapshot_decode(s.snapshot,
						 strlen(s.snapshot), &d), 0);
	ck_assert_int_eq(d->version, 3);
	ck_assert_str_eq(d->state, state);
	agr_wow_snapshot_free(d);
	free(json);
}
END_TEST

/* Frees the store with a read in flight; the read still completes. */
static void free_in_flight_step(struct step *s)
{
	agr_wow_event_store *es = E.es;
	int err;

	err = agr_wow_event_store_last_version(es, s->id, s->tenant, value_cb,
					       s);
	agr_wow_event_store_free(es);
	E.es = NULL;
	if (!err)
		err = agr_wow_event_store_new(E.redis, &bank, &E.es);
	if (err)
		finish(s, err);
}

START_TEST(test_free_in_flight_and_off_worker)
{
	struct step s = { .id = "acc-1", .tenant = "t1" };

	ck_assert_int_eq(append("acc-1", "t1", "r1", 1), 0);
	run(&s, free_in_flight_step);
	ck_assert_int_eq(s.status, 0);
	ck_assert_int_eq(s.value, 1);
	/* the test thread is no worker */
	ck_assert_int_eq(agr_wow_event_store_last_version(E.es, "acc-1", "t1",
							  value_cb, &s),
			 -EPERM);
}
END_TEST

static void quiet(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

static void add_tests(TCase *tc)
{
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_scripts_are_wows);
	tcase_add_test(tc, test_append_and_conflicts);
	tcase_add_test(tc, test_appended_streams_are_wows);
	tcase_add_test(tc, test_load_last_exists);
	tcase_add_test(tc, test_load_rejects_foreign_member);
	tcase_add_test(tc, test_snapshot_guard);
	tcase_add_test(tc, test_snapshot_wow_document);
	tcase_add_test(tc, test_scan_ids);
	tcase_add_test(tc, test_free_in_flight_and_off_worker);
}

int main(void)
{
	Suite *s = suite_create("wow_event_store");
	TCase *plain = tcase_create("redis");
	TCase *cluster = tcase_create("cluster");
	int ret;

	tu_require_io_uring();
	if (!server_start(&servers[0])) {
		server_stop(&servers[0]);
		printf("SKIP: no redis-server could be started "
		       "(apt-get install redis-server)\n");
		return TU_SKIP;
	}
	/* A server that runs but cannot be a cluster is a failure. */
	if (!server_start(&servers[1])) {
		fprintf(stderr, "FAIL: redis-server --cluster-enabled did not "
				"start or own the slots\n");
		server_stop(&servers[0]);
		server_stop(&servers[1]);
		return EXIT_FAILURE;
	}
	if (!getenv("WOW_TEST_VERBOSE"))
		agr_set_log_hook(quiet, NULL);
	/* unchecked fixtures pick the server before each test's fork */
	tcase_add_unchecked_fixture(plain, setup_plain, NULL);
	add_tests(plain);
	suite_add_tcase(s, plain);
	/* the same steps routed by slot: keys of one call share a slot,
	 * or Redis Cluster would answer CROSSSLOT */
	tcase_add_unchecked_fixture(cluster, setup_cluster, NULL);
	add_tests(cluster);
	suite_add_tcase(s, cluster);
	ret = tu_run(s);
	server_stop(&servers[0]);
	server_stop(&servers[1]);
	return ret;
}
