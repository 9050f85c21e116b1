/* SPDX-License-Identifier: MIT */
/*
 * redis_client_cluster.c - check_redis_client's tests against the
 * three-master Redis Cluster: keys spread over the masters, MOVED and
 * ASK followed during slot migrations (made from the test thread with
 * hiredis's blocking API), too many redirections, and a master killed
 * and restarted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redis_client_test.h"

#define SPREAD_KEYS 3000

/* A blocking connection to a master, for rearranging the cluster. */
static redisContext *node_ctx(int port)
{
	redisContext *x = redisConnect("127.0.0.1", port);

	ck_assert_msg(x && !x->err, "connect to %d: %s", port,
		      x ? x->errstr : "no memory");
	return x;
}

static redisReply *node_cmd(int port, const char *fmt, ...)
{
	redisContext *x = node_ctx(port);
	redisReply *reply;
	va_list ap;

	va_start(ap, fmt);
	reply = redisvCommand(x, fmt, ap);
	va_end(ap);
	ck_assert_ptr_nonnull(reply);
	redisFree(x);
	return reply;
}

static void node_ok(int port, const char *fmt, ...)
{
	redisContext *x = node_ctx(port);
	redisReply *reply;
	va_list ap;

	va_start(ap, fmt);
	reply = redisvCommand(x, fmt, ap);
	va_end(ap);
	ck_assert_ptr_nonnull(reply);
	ck_assert_msg(reply->type != REDIS_REPLY_ERROR, "port %d: %s: %s",
		      port, fmt, reply->str);
	freeReplyObject(reply);
	redisFree(x);
}

static void node_id(int port, char *id, size_t size)
{
	redisReply *reply = node_cmd(port, "CLUSTER MYID");

	ck_assert_int_eq(reply->type, REDIS_REPLY_STRING);
	snprintf(id, size, "%s", reply->str);
	freeReplyObject(reply);
}

/* The master's index (0..2) serving `slot`, asked of the first master. */
static int owner_of(unsigned slot)
{
	redisReply *reply = node_cmd(cluster_port, "CLUSTER SLOTS");
	int owner = -1;

	ck_assert_int_eq(reply->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < reply->elements; i++) {
		redisReply *r = reply->element[i];

		if ((unsigned long long)r->element[0]->integer <= slot &&
		    slot <= (unsigned long long)r->element[1]->integer)
			owner = (int)r->element[2]->element[1]->integer -
				cluster_port;
	}
	freeReplyObject(reply);
	ck_assert_int_ge(owner, 0);
	return owner;
}

static long long node_dbsize(int idx)
{
	redisReply *reply = node_cmd(cluster_port + idx, "DBSIZE");
	long long n = reply->integer;

	freeReplyObject(reply);
	return n;
}

static int run_script(const char *what, int idx)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "sh '%s' %s '%s' %d", cluster_sh, what,
		 cluster_dir, idx);
	return system(cmd);
}


static void phase_spread_set(struct ctx *c)
{
	char key[64];

	for (int i = 0; i < SPREAD_KEYS; i++) {
		snprintf(key, sizeof(key), "t:%d:spread:%d", run_id, i);
		TU_EXPECT(agr_redis_command(c->r, key, on_any, c,
					    "SET %s v%d", key, i) == 0);
	}
}

/* A command's own index: replies of different masters interleave. */
struct keyref {
	struct ctx *c;
	int i;
};

static struct keyref refs[SPREAD_KEYS];

static void on_spread_get(agr_redis *r, const redisReply *reply, int err,
			  void *arg)
{
	struct keyref *k = arg;
	struct ctx *c = k->c;
	char want[32];

	TU_EXPECT(r == c->r);
	tally(c, reply, err);
	snprintf(want, sizeof(want), "v%d", k->i);
	if (err == 0 && reply->type == REDIS_REPLY_STRING &&
	    strcmp(reply->str, want) == 0)
		c->matched++;
	one_done(c);
}

static void phase_spread_get(struct ctx *c)
{
	char key[64];

	for (int i = 0; i < SPREAD_KEYS; i++) {
		snprintf(key, sizeof(key), "t:%d:spread:%d", run_id, i);
		refs[i] = (struct keyref){ .c = c, .i = i };
		TU_EXPECT(agr_redis_command(c->r, key, on_spread_get, &refs[i],
					    "GET %s", key) == 0);
	}
}

START_TEST(cluster_keys_spread_over_all_masters)
{
	long long before[3];
	struct ctx c;

	for (int i = 0; i < 3; i++)
		before[i] = node_dbsize(i);
	ctx_init(&c, cluster_port, true);
	rig_up();
	run_phase(&c, phase_spread_set, SPREAD_KEYS);
	ck_assert_int_eq(c.ok, SPREAD_KEYS);
	run_phase(&c, phase_spread_get, SPREAD_KEYS);
	ck_assert_int_eq(c.matched, SPREAD_KEYS);
	close_client(&c);
	for (int i = 0; i < 3; i++)
		ck_assert_int_gt(node_dbsize(i) - before[i], SPREAD_KEYS / 5);
	ck_assert_uint_eq(c.stats.connects, 3);
	ck_assert_uint_eq(c.stats.moved, 0);
	ck_assert_uint_ge(c.stats.slot_refreshes, 1);
	rig_down();
}
END_TEST

static char mkey[64];

static void phase_set_mkey(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, mkey, on_any, c, "SET %s moving",
				    mkey) == 0);
}

static void phase_get_mkey(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, mkey, on_get_value, c, "GET %s",
				    mkey) == 0);
}

/*
 * Moves `slot` from master `from` to master `to` the way
 * redis-cli --cluster reshard does; `finish` false stops after the keys
 * moved, with the slot still MIGRATING/IMPORTING (an ASK window).
 */
static void migrate_slot(unsigned slot, int from, int to, bool finish)
{
	char from_id[64], to_id[64];
	redisReply *keys;

	node_id(cluster_port + from, from_id, sizeof(from_id));
	node_id(cluster_port + to, to_id, sizeof(to_id));
	node_ok(cluster_port + to, "CLUSTER SETSLOT %u IMPORTING %s", slot,
		from_id);
	node_ok(cluster_port + from, "CLUSTER SETSLOT %u MIGRATING %s", slot,
		to_id);
	keys = node_cmd(cluster_port + from, "CLUSTER GETKEYSINSLOT %u 1000",
			slot);
	for (size_t i = 0; i < keys->elements; i++)
		node_ok(cluster_port + from, "MIGRATE 127.0.0.1 %d %b 0 5000",
			cluster_port + to, keys->element[i]->str,
			keys->element[i]->len);
	freeReplyObject(keys);
	if (!finish)
		return;
	for (int i = 0; i < 3; i++)
		node_ok(cluster_port + i, "CLUSTER SETSLOT %u NODE %s", slot,
			to_id);
}

static void finish_migration(unsigned slot, int to)
{
	char to_id[64];

	node_id(cluster_port + to, to_id, sizeof(to_id));
	for (int i = 0; i < 3; i++)
		node_ok(cluster_port + i, "CLUSTER SETSLOT %u NODE %s", slot,
			to_id);
}

START_TEST(cluster_follows_moved)
{
	unsigned slot;
	int from;
	struct ctx c;

	snprintf(mkey, sizeof(mkey), "t:%d:moved", run_id);
	slot = agr_redis_key_slot(mkey, strlen(mkey));
	from = owner_of(slot);
	ctx_init(&c, cluster_port, true);
	c.want = "moving";
	c.want_len = 6;
	rig_up();
	run_phase(&c, phase_set_mkey, 1);
	ck_assert_int_eq(c.ok, 1);
	/* the client's map is now stale */
	migrate_slot(slot, from, (from + 1) % 3, true);
	run_phase(&c, phase_get_mkey, 1);
	ck_assert_int_eq(c.matched, 1);
	/* and once more: the map learnt the move */
	run_phase(&c, phase_get_mkey, 1);
	ck_assert_int_eq(c.matched, 2);
	close_client(&c);
	ck_assert_uint_eq(c.stats.moved, 1);
	ck_assert_uint_ge(c.stats.slot_refreshes, 2);
	ck_assert_int_eq(owner_of(slot), (from + 1) % 3);
	rig_down();
}
END_TEST

START_TEST(cluster_follows_ask_during_migration)
{
	unsigned slot;
	int from;
	struct ctx c;

	snprintf(mkey, sizeof(mkey), "t:%d:ask", run_id);
	slot = agr_redis_key_slot(mkey, strlen(mkey));
	from = owner_of(slot);
	ctx_init(&c, cluster_port, true);
	c.want = "moving";
	c.want_len = 6;
	rig_up();
	run_phase(&c, phase_set_mkey, 1);
	/* the key has moved; the slot is still the old master's */
	migrate_slot(slot, from, (from + 2) % 3, false);
	run_phase(&c, phase_get_mkey, 1);
	ck_assert_int_eq(c.matched, 1);
	finish_migration(slot, (from + 2) % 3);
	close_client(&c);
	ck_assert_uint_eq(c.stats.ask, 1);
	ck_assert_uint_eq(c.stats.moved, 0);
	rig_down();
}
END_TEST

/*
 * A fake cluster node on a thread: its slot map gives it every slot,
 * and every other command is answered with a MOVED to itself.
 */
struct fake {
	int lfd;
	int port;
	pthread_t thread;
};

static void fake_reply(int fd, const char *text, size_t len)
{
	while (len) {
		ssize_t n = send(fd, text, len, MSG_NOSIGNAL);

		if (n <= 0)
			return;
		text += n;
		len -= (size_t)n;
	}
}

static void fake_answer(int fd, int port, const redisReply *req)
{
	char buf[512];
	int n;

	if (req->type != REDIS_REPLY_ARRAY || req->elements == 0)
		return;
	if (strcasecmp(req->element[0]->str, "CLIENT") == 0) {
		fake_reply(fd, "+OK\r\n", 5);
		return;
	}
	if (strcasecmp(req->element[0]->str, "CLUSTER") == 0) {
		n = snprintf(buf, sizeof(buf),
			     "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n"
			     "$5\r\nnodes\r\n*1\r\n*6\r\n$4\r\nport\r\n:%d\r\n"
			     "$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n"
			     "$6\r\nmaster\r\n",
			     port);
		fake_reply(fd, buf, (size_t)n);
		return;
	}
	n = snprintf(buf, sizeof(buf), "-MOVED 42 127.0.0.1:%d\r\n", port);
	fake_reply(fd, buf, (size_t)n);
}

static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	int fd;

	/* one connection at a time, until the listener is shut down */
	while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
		redisReader *rd = redisReaderCreate();
		char buf[4096];
		ssize_t n;

		while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
			void *req;

			redisReaderFeed(rd, buf, (size_t)n);
			while (redisReaderGetReply(rd, &req) == REDIS_OK && req) {
				fake_answer(fd, f->port, req);
				freeReplyObject(req);
			}
		}
		redisReaderFree(rd);
		close(fd);
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);

	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	ck_assert_int_eq(listen(f->lfd, 4), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&addr, &len), 0);
	f->port = ntohs(addr.sin_port);
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_serve, f), 0);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	ck_assert_int_eq(pthread_join(f->thread, NULL), 0);
	close(f->lfd);
}

static void phase_loop(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, "k", on_any, c, "GET k") == 0);
}

START_TEST(cluster_max_redirects_is_eloop)
{
	struct fake f;
	struct ctx c;

	fake_start(&f);
	ctx_init(&c, f.port, true);
	c.o.max_redirects = 3;
	rig_up();
	run_phase(&c, phase_loop, 1);
	ck_assert_int_eq(c.calls, 1);
	ck_assert_int_eq(c.last_err, -ELOOP);
	close_client(&c);
	ck_assert_uint_eq(c.stats.moved, 3);
	ck_assert_uint_eq(c.stats.failures, 1);
	rig_down();
	fake_stop(&f);
}
END_TEST

#define RESTART_KEYS 300

static void phase_restart_set(struct ctx *c)
{
	char key[64];

	for (int i = 0; i < RESTART_KEYS; i++) {
		snprintf(key, sizeof(key), "t:%d:restart:%d", run_id, i);
		TU_EXPECT(agr_redis_command(c->r, key, on_any, c,
					    "SET %s v%d", key, i) == 0);
	}
}

static void phase_restart_get(struct ctx *c)
{
	char key[64];

	for (int i = 0; i < RESTART_KEYS; i++) {
		snprintf(key, sizeof(key), "t:%d:restart:%d", run_id, i);
		refs[i] = (struct keyref){ .c = c, .i = i };
		TU_EXPECT(agr_redis_command(c->r, key, on_spread_get, &refs[i],
					    "GET %s", key) == 0);
	}
}

static char down_key[64];

static void phase_while_down(struct ctx *c)
{
	TU_EXPECT(agr_redis_command(c->r, down_key, on_any, c, "SET %s later",
				    down_key) == 0);
}

/* The restart races the command issued while the master is down. */
static void *restart_later(void *arg)
{
	int idx = *(int *)arg;

	return (void *)(intptr_t)run_script("restart", idx);
}

START_TEST(cluster_master_killed_and_restarted)
{
	struct ctx c;
	int victim = 1;
	pthread_t t;
	void *status;
	uint64_t connects;

	/* a key the victim serves */
	for (int i = 0;; i++) {
		snprintf(down_key, sizeof(down_key), "t:%d:down:%d", run_id, i);
		if (owner_of(agr_redis_key_slot(down_key, strlen(down_key))) ==
		    victim)
			break;
	}
	ctx_init(&c, cluster_port, true);
	rig_up();
	run_phase(&c, phase_restart_set, RESTART_KEYS);
	ck_assert_int_eq(c.ok, RESTART_KEYS);
	ck_assert_int_eq(run_script("kill", victim), 0);
	/* issued while it is down: waits for the reconnect */
	c.ok = c.failures = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, restart_later, &victim), 0);
	run_phase(&c, phase_while_down, 1);
	ck_assert_int_eq(pthread_join(t, &status), 0);
	ck_assert_int_eq((int)(intptr_t)status, 0);
	/*
	 * Sent before the client saw the kill, it may have been lost; sent
	 * to the restarted master before it rejoined, CLUSTERDOWN.
	 */
	ck_assert_msg(c.ok == 1 || c.resets == 1 ||
			      (c.errors == 1 &&
			       strncmp(c.err_text, "CLUSTERDOWN", 11) == 0),
		      "the command issued while down: err %d %s", c.last_err,
		      c.err_text);
	/* after the restart: the AOF kept every key, and commands work */
	c.matched = 0;
	run_phase(&c, phase_restart_get, RESTART_KEYS);
	ck_assert_int_eq(c.matched, RESTART_KEYS);
	c.ok = 0;
	run_phase(&c, phase_restart_set, RESTART_KEYS);
	ck_assert_int_eq(c.ok, RESTART_KEYS);
	close_client(&c);
	connects = c.stats.connects;
	ck_assert_uint_ge(connects, 4); /* three, and the victim again */
	rig_down();
}
END_TEST

void redis_client_cluster_tests(TCase *cluster)
{
	tcase_add_test(cluster, cluster_keys_spread_over_all_masters);
	tcase_add_test(cluster, cluster_follows_moved);
	tcase_add_test(cluster, cluster_follows_ask_during_migration);
	tcase_add_test(cluster, cluster_max_redirects_is_eloop);
	tcase_add_test(cluster, cluster_master_killed_and_restarted);
}
