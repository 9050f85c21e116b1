/* SPDX-License-Identifier: MIT */
/*
 * check_redis_client.c - libaggring-redis's client against real
 * servers: one standalone redis-server and a three-master Redis
 * Cluster, both started by tests/redis_client.sh, which passes their
 * ports in REDIS_SINGLE_PORT, REDIS_CLUSTER_PORT (the first master) and
 * the cluster's directory and script in REDIS_CLUSTER_DIR and
 * REDIS_CLUSTER_SH (to kill and restart a master). Without them the
 * suite exits 77 (SKIP).
 *
 * The client lives on a worker: each phase of a test is a task there
 * that issues commands, and its callbacks, recorded on the worker,
 * count a latch down; the test thread waits for it and asserts. The
 * cluster is rearranged (slot migrations) from the test thread with
 * hiredis's blocking API. The cluster's tests are in
 * redis_client_cluster.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redis_client_test.h"

#define MAX_REPLY 200000

int run_id;
int single_port, cluster_port;
const char *cluster_dir, *cluster_sh;

/* ---- one worker ---- */

static agr_supplier *sup;
agr_scheduler *sched;

void rig_up(void)
{
	agr_named_aggregate named = { "redis", "client" };

	tu_reset_worker_failures();
	ck_assert_int_eq(agr_supplier_new("rc", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &named, &sched), 0);
}

void rig_down(void)
{
	tu_assert_no_worker_failure();
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
}

void ctx_init(struct ctx *c, int port, bool cluster)
{
	memset(c, 0, sizeof(*c));
	agr_redis_options_init(&c->o);
	c->o.port = port;
	c->o.cluster = cluster;
	c->o.connect_timeout_ns = 30000 * MS;
	c->o.reconnect_delay_ns = 50 * MS;
}

static void phase_task(void *arg)
{
	struct ctx *c = arg;

	if (!c->r) {
		int ret = agr_redis_new(agr_worker_current(), &c->o, &c->r);

		TU_EXPECT(ret == 0);
		if (ret < 0) {
			tu_latch_count_down(&c->latch);
			return;
		}
	}
	c->phase(c);
}

/* Runs `phase` on the worker and waits for `n` callbacks. */
void run_phase(struct ctx *c, void (*phase)(struct ctx *c), long n)
{
	tu_latch_init(&c->latch, 1);
	c->left = n;
	c->phase = phase;
	ck_assert_int_eq(agr_scheduler_schedule(sched, 0, phase_task, c), 0);
	ck_assert_msg(tu_latch_wait(&c->latch, 2 * TU_LONG_NS),
		      "phase timed out with %ld callbacks to come", c->left);
	tu_latch_destroy(&c->latch);
	tu_assert_no_worker_failure();
}

void one_done(struct ctx *c)
{
	if (--c->left == 0)
		tu_latch_count_down(&c->latch);
}

/* Counts what a callback got, by kind. */
void tally(struct ctx *c, const redisReply *reply, int err)
{
	c->calls++;
	c->last_err = err;
	if (err == -ECANCELED)
		c->canceled++;
	else if (err == -ETIMEDOUT)
		c->timeouts++;
	else if (err == -ECONNRESET)
		c->resets++;
	else if (err < 0)
		c->other++;
	if (err < 0) {
		c->failures++;
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		c->errors++;
		snprintf(c->err_text, sizeof(c->err_text), "%s", reply->str);
	} else {
		c->ok++;
	}
}

void on_any(agr_redis *r, const redisReply *reply, int err, void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	TU_EXPECT(agr_worker_current() == agr_redis_worker(r));
	tally(c, reply, err);
	one_done(c);
}

static void on_closed(void *arg)
{
	struct ctx *c = arg;

	c->closed++;
	one_done(c);
}

static void phase_close(struct ctx *c)
{
	TU_EXPECT(agr_redis_stats_get(c->r, &c->stats) == 0);
	agr_redis_close(c->r, on_closed, c);
}

void close_client(struct ctx *c)
{
	run_phase(c, phase_close, 1);
	ck_assert_int_eq(c->closed, 1);
	c->r = NULL;
}

void on_get_value(agr_redis *r, const redisReply *reply, int err, void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	if (err == 0 && reply->type == REDIS_REPLY_STRING &&
	    reply->len == c->want_len &&
	    memcmp(reply->str, c->want, c->want_len) == 0)
		c->matched++;
	one_done(c);
}

/* ---- single node ---- */

static void on_incr(agr_redis *r, const redisReply *reply, int err, void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	if (err == 0 && reply->type == REDIS_REPLY_INTEGER) {
		if (reply->integer != c->next)
			c->bad_order++;
		c->next++;
	}
	one_done(c);
}

static char incr_key[64];

static void phase_incr(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "DEL %s",
				    incr_key) == 0);
	c->next = 1;
	for (int i = 0; i < 10000; i++)
		TU_EXPECT(agr_redis_command(c->r, NULL, on_incr, c, "INCR %s",
					    incr_key) == 0);
}

START_TEST(single_pipelined_incrs_in_order)
{
	struct ctx c;

	ctx_init(&c, single_port, false);
	snprintf(incr_key, sizeof(incr_key), "t:incr:%d", (int)getpid());
	rig_up();
	run_phase(&c, phase_incr, 10001);
	ck_assert_int_eq(c.ok, 10001);
	ck_assert_int_eq(c.bad_order, 0);
	ck_assert_int_eq(c.next, 10001);
	close_client(&c);
	ck_assert_uint_eq(c.stats.commands, 10001);
	ck_assert_uint_eq(c.stats.replies, 10001);
	ck_assert_uint_eq(c.stats.failures, 0);
	ck_assert_uint_eq(c.stats.connects, 1);
	/* pipelined: one task's commands went out in a few sends */
	ck_assert_msg(c.stats.sends < 100, "%llu sends for 10001 commands",
		      (unsigned long long)c.stats.sends);
	rig_down();
}
END_TEST

static const char bin_key[] = "t:bin\0key\r\n";

static void phase_binary(struct ctx *c)
{
	const char *set[] = { "SET", bin_key, c->want };
	size_t setlen[] = { 3, sizeof(bin_key) - 1, c->want_len };
	const char *get[] = { "GET", bin_key };
	size_t getlen[] = { 3, sizeof(bin_key) - 1 };

	TU_EXPECT(agr_redis_command_argv(c->r, bin_key, sizeof(bin_key) - 1, 3,
					 set, setlen, on_any, c) == 0);
	TU_EXPECT(agr_redis_command_argv(c->r, bin_key, sizeof(bin_key) - 1, 2,
					 get, getlen, on_get_value, c) == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_get_value, c, "GET %b",
				    bin_key, sizeof(bin_key) - 1) == 0);
}

START_TEST(single_binary_safe_values)
{
	struct ctx c;

	ctx_init(&c, single_port, false);
	/* larger than a receive buffer, with every byte value */
	c.want_len = MAX_REPLY;
	c.want = malloc(c.want_len);
	ck_assert_ptr_nonnull(c.want);
	for (size_t i = 0; i < c.want_len; i++)
		c.want[i] = (char)(i * 131 + (i >> 8));
	rig_up();
	run_phase(&c, phase_binary, 3);
	ck_assert_int_eq(c.ok, 3);
	ck_assert_int_eq(c.matched, 2);
	close_client(&c);
	free(c.want);
	rig_down();
}
END_TEST

static void phase_errors(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "SET t:err notanumber") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "INCR t:err") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "NOSUCHCOMMAND x") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
}

START_TEST(single_server_errors_are_replies)
{
	struct ctx c;

	ctx_init(&c, single_port, false);
	rig_up();
	run_phase(&c, phase_errors, 4);
	ck_assert_int_eq(c.errors, 2);
	ck_assert_int_eq(c.ok, 2);
	ck_assert_int_eq(c.failures, 0);
	close_client(&c);
	ck_assert_uint_eq(c.stats.server_errors, 2);
	rig_down();
}
END_TEST

/* Issues one more command from the failed one's callback: it must stay. */
static void on_refused_again(agr_redis *r, const redisReply *reply, int err,
			     void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	TU_EXPECT(agr_redis_command(r, NULL, on_any, c, "PING") == 0);
	one_done(c);
}

static void phase_refused(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
}

static void phase_refused_again(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_refused_again, c,
				    "PING") == 0);
}

START_TEST(single_connection_refused_times_out)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint64_t t0;
	struct ctx c;

	/* a port bound but not listening: every connect is refused */
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	ctx_init(&c, ntohs(addr.sin_port), false);
	c.o.connect_timeout_ns = 300 * MS;
	c.o.reconnect_delay_ns = 20 * MS;
	rig_up();
	t0 = tu_now_ns();
	run_phase(&c, phase_refused, 2);
	ck_assert_uint_ge(tu_now_ns() - t0, 250 * MS);
	ck_assert_int_eq(c.calls, 2);
	ck_assert_int_eq(c.timeouts, 2);
	/* a later command tries again, and fails the same way */
	run_phase(&c, phase_refused, 2);
	ck_assert_int_eq(c.timeouts, 4);
	/* one issued from a failure's callback gets its own attempts */
	run_phase(&c, phase_refused_again, 2);
	ck_assert_int_eq(c.timeouts, 6);
	close_client(&c);
	ck_assert_uint_eq(c.stats.connects, 0);
	ck_assert_uint_eq(c.stats.failures, 6);
	close(fd);
	rig_down();
}
END_TEST

static void on_timer_close(int res, void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(res == -ETIME);
	agr_redis_close(c->r, on_closed, c);
	/* closing: nothing more is admitted */
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") ==
		  -ESHUTDOWN);
}

static void on_blpop_sent(agr_redis *r, const redisReply *reply, int err,
			  void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	one_done(c);
}

/* A BLPOP holds every reply behind it: close while they wait. */
static void phase_close_pending(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_blpop_sent, c,
				    "BLPOP t:nolist:%d 20", (int)getpid()) == 0);
	for (int i = 0; i < 1000; i++)
		TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
	TU_EXPECT(agr_io_timeout(agr_redis_worker(c->r), 300 * MS,
				 on_timer_close, c) == 0);
}

START_TEST(single_close_cancels_pending_once)
{
	struct ctx c;

	ctx_init(&c, single_port, false);
	rig_up();
	/* 1002 commands, then done */
	run_phase(&c, phase_close_pending, 1003);
	ck_assert_int_eq(c.closed, 1);
	ck_assert_int_eq(c.calls, 1002);
	ck_assert_int_eq(c.ok, 1);
	ck_assert_int_eq(c.canceled, 1001);
	rig_down();
}
END_TEST

static void phase_cancel_queued(struct ctx *c)
{
	for (int i = 0; i < 100; i++)
		TU_EXPECT(agr_redis_command(c->r, NULL, on_any, c, "PING") == 0);
	agr_redis_close(c->r, on_closed, c);
}

START_TEST(single_close_before_connected)
{
	struct ctx c;

	ctx_init(&c, single_port, false);
	rig_up();
	run_phase(&c, phase_cancel_queued, 101);
	ck_assert_int_eq(c.closed, 1);
	ck_assert_int_eq(c.canceled, 100);
	ck_assert_int_eq(c.calls, 100);
	rig_down();
}
END_TEST

/* An ACL user of this test's own: AUTH with its password, then a wrong one. */
static char acl_user[64];

static void on_whoami(agr_redis *r, const redisReply *reply, int err,
		      void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	if (err == 0 && reply->type == REDIS_REPLY_STRING &&
	    strcmp(reply->str, acl_user) == 0)
		c->matched++;
	one_done(c);
}

static void phase_whoami(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, NULL, on_whoami, c, "ACL WHOAMI") == 0);
}

START_TEST(single_auth_with_an_acl_user)
{
	redisContext *x = redisConnect("127.0.0.1", single_port);
	redisReply *reply;
	struct ctx c;

	ck_assert(x && !x->err);
	snprintf(acl_user, sizeof(acl_user), "rc%d", (int)getpid());
	reply = redisCommand(x, "ACL SETUSER %s on >s3cret ~* &* +@all",
			     acl_user);
	ck_assert(reply && reply->type == REDIS_REPLY_STATUS);
	freeReplyObject(reply);

	ctx_init(&c, single_port, false);
	c.o.username = acl_user;
	c.o.password = "s3cret";
	rig_up();
	run_phase(&c, phase_whoami, 1);
	ck_assert_int_eq(c.matched, 1);
	close_client(&c);

	/*
	 * A wrong password: AUTH is refused (logged), and the command runs
	 * as the connection's user before AUTH, here the default one.
	 */
	ctx_init(&c, single_port, false);
	c.o.username = acl_user;
	c.o.password = "wrong";
	run_phase(&c, phase_whoami, 1);
	ck_assert_int_eq(c.ok, 1);
	ck_assert_int_eq(c.matched, 0);
	close_client(&c);
	rig_down();

	reply = redisCommand(x, "ACL DELUSER %s", acl_user);
	freeReplyObject(reply);
	redisFree(x);
}
END_TEST

struct misuse {
	struct tu_latch latch;
	agr_worker *w;
	int bad_size, bad_name, bad_port, user_only, reserved, no_out, ok;
	agr_redis *r;
};

static void misuse_task(void *arg)
{
	struct misuse *m = arg;
	agr_redis_options o = AGR_REDIS_OPTIONS_INIT;
	agr_redis *r;

	m->w = agr_worker_current();
	o.size = 8;
	m->bad_size = agr_redis_new(m->w, &o, &r);
	o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
	o.name = "two words";
	m->bad_name = agr_redis_new(m->w, &o, &r);
	o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
	o.port = 70000;
	m->bad_port = agr_redis_new(m->w, &o, &r);
	o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
	o.username = "user";
	m->user_only = agr_redis_new(m->w, &o, &r);
	o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
	o.reserved[3] = 1;
	m->reserved = agr_redis_new(m->w, &o, &r);
	m->no_out = agr_redis_new(m->w, NULL, NULL);
	o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
	o.port = single_port;
	m->ok = agr_redis_new(m->w, &o, &m->r);
	tu_latch_count_down(&m->latch);
}

static void misuse_close(void *arg)
{
	struct misuse *m = arg;

	agr_redis_close(m->r, NULL, NULL);
	tu_latch_count_down(&m->latch);
}

START_TEST(misuse_is_refused)
{
	struct misuse m = { 0 };
	agr_redis_stats st;

	rig_up();
	tu_latch_init(&m.latch, 1);
	ck_assert_int_eq(agr_scheduler_schedule(sched, 0, misuse_task, &m), 0);
	ck_assert(tu_latch_wait(&m.latch, TU_LONG_NS));
	ck_assert_int_eq(m.bad_size, -EINVAL);
	ck_assert_int_eq(m.bad_name, -EINVAL);
	ck_assert_int_eq(m.bad_port, -EINVAL);
	ck_assert_int_eq(m.user_only, -EINVAL);
	ck_assert_int_eq(m.reserved, -EINVAL);
	ck_assert_int_eq(m.no_out, -EINVAL);
	ck_assert_int_eq(m.ok, 0);
	/* off the worker */
	ck_assert_int_eq(agr_redis_new(m.w, NULL, &m.r), -EPERM);
	ck_assert_int_eq(agr_redis_command(m.r, NULL, NULL, NULL, "PING"),
			 -EINVAL);
	ck_assert_int_eq(agr_redis_stats_get(m.r, &st), -EPERM);
	ck_assert_ptr_eq(agr_redis_worker(m.r), m.w);
	tu_latch_destroy(&m.latch);
	tu_latch_init(&m.latch, 1);
	ck_assert_int_eq(agr_scheduler_schedule(sched, 0, misuse_close, &m), 0);
	ck_assert(tu_latch_wait(&m.latch, TU_LONG_NS));
	tu_latch_destroy(&m.latch);
	rig_down();
}
END_TEST

/*
 * A force stop with commands in flight and queued behind a BLPOP: each
 * completes once with -ECANCELED, and the exit hook frees the client.
 */
static long exit_hook_runs;

static int init_client(agr_worker *w, void *arg)
{
	struct ctx *c = arg;

	return agr_redis_new(w, &c->o, &c->r);
}

static void exit_free_client(agr_worker *w, void *arg)
{
	struct ctx *c = arg;

	(void)w;
	exit_hook_runs++;
	agr_redis_free(c->r);
	c->r = NULL;
}

static void on_ping_then_block(agr_redis *r, const redisReply *reply,
			       int err, void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	/* connected and answered: what follows is on the wire or queued */
	tu_latch_count_down(&c->latch);
}

static void on_after_stop(agr_redis *r, const redisReply *reply, int err,
			  void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
}

static void phase_block(void *arg)
{
	struct ctx *c = arg;

	TU_EXPECT(agr_redis_command(c->r, NULL, on_ping_then_block, c,
				    "PING") == 0);
	TU_EXPECT(agr_redis_command(c->r, NULL, on_after_stop, c,
				    "BLPOP t:nolist:%d 30", (int)getpid()) == 0);
	for (int i = 0; i < 100; i++)
		TU_EXPECT(agr_redis_command(c->r, NULL, on_after_stop, c,
					    "PING") == 0);
}

START_TEST(force_stop_cancels_and_exit_hook_frees)
{
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_named_aggregate named = { "redis", "stop" };
	agr_supplier *s;
	agr_scheduler *sc;
	struct ctx c;

	ctx_init(&c, single_port, false);
	exit_hook_runs = 0;
	so.parallelism = 1;
	so.worker_init = init_client;
	so.worker_exit = exit_free_client;
	so.hook_arg = &c;
	tu_reset_worker_failures();
	ck_assert_int_eq(agr_supplier_new_opts("rcstop", &so, &s), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(s, &named, &sc), 0);
	tu_latch_init(&c.latch, 1);
	ck_assert_int_eq(agr_scheduler_schedule(sc, 0, phase_block, &c), 0);
	ck_assert(tu_latch_wait(&c.latch, TU_LONG_NS));
	ck_assert_int_eq(c.ok, 1);
	ck_assert_int_eq(agr_supplier_force_stop(s), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(s, TU_LONG_NS), 0);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(exit_hook_runs, 1);
	ck_assert_int_eq(c.calls, 102);
	ck_assert_int_eq(c.canceled, 101);
	ck_assert_ptr_null(c.r);
	tu_latch_destroy(&c.latch);
	agr_supplier_free(s);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("redis_client");
	TCase *single = tcase_create("single");
	TCase *cluster = tcase_create("cluster");

	tcase_add_test(single, single_pipelined_incrs_in_order);
	tcase_add_test(single, single_binary_safe_values);
	tcase_add_test(single, single_server_errors_are_replies);
	tcase_add_test(single, single_connection_refused_times_out);
	tcase_add_test(single, single_close_cancels_pending_once);
	tcase_add_test(single, single_close_before_connected);
	tcase_add_test(single, misuse_is_refused);
	tcase_add_test(single, single_auth_with_an_acl_user);
	tcase_add_test(single, force_stop_cancels_and_exit_hook_frees);
	suite_add_tcase(s, single);

	redis_client_cluster_tests(cluster);
	tcase_set_timeout(cluster, 240);
	suite_add_tcase(s, cluster);
	return s;
}

static int env_port(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : 0;
}

int main(void)
{
	single_port = env_port("REDIS_SINGLE_PORT");
	cluster_port = env_port("REDIS_CLUSTER_PORT");
	cluster_dir = getenv("REDIS_CLUSTER_DIR");
	cluster_sh = getenv("REDIS_CLUSTER_SH");
	if (!single_port || !cluster_port || !cluster_dir || !cluster_sh) {
		printf("SKIP: no servers: run through tests/redis_client.sh\n");
		return TU_SKIP;
	}
	run_id = (int)getpid();
	tu_require_io_uring();
	return tu_run(client_suite());
}
