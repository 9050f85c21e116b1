/* SPDX-License-Identifier: MIT */
/*
 * client.c - agr_redis: commands in, callbacks out; which connection a
 * command goes to, redirections, and the client's lifecycle.
 *
 * One command is one struct command from admission to its callback. In
 * cluster mode it keeps its RESP bytes, to be sent again to the node a
 * MOVED or ASK names; commands admitted before the slot map is known
 * wait on the client's list until it is.
 */
#include "redis_internal.h"

#include "cluster.h"
#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 6379
#define DEFAULT_REDIRECTS 5u
#define DEFAULT_CONNECT_TIMEOUT_NS 5000000000ull
#define DEFAULT_RECONNECT_DELAY_NS 100000000ull
#define DEFAULT_NAME "aggring"

static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";

struct command {
	struct agr_redis *r;
	struct command *next; /* on the list waiting for the slot map */
	char *buf;	      /* RESP bytes (cluster mode only) */
	size_t len;
	int slot;	      /* -1: any node */
	unsigned hops;	      /* redirections followed */
	agr_redis_reply_fn cb;
	void *arg;
};

struct agr_redis {
	agr_worker *w;
	char *host;
	int port;
	bool cluster;
	unsigned max_redirects;
	uint64_t connect_timeout_ns;
	uint64_t reconnect_delay_ns;
	char *name;
	char *username;
	char *password;
	agr_redis_stats stats;

	struct agr__redis_conn *single; /* not cluster mode */
	struct agr__redis_map *map;	/* cluster mode */
	struct agr__redis_node *seed;
	struct command *waiting, **waiting_tail;
	bool map_ready;
	bool refreshing;
	bool refresh_again;
	bool use_slots; /* CLUSTER SHARDS is unknown: before Redis 7 */
	size_t refresh_next;

	unsigned conns; /* connections not yet closed */
	unsigned busy;	/* calls into the client on the stack */
	bool closing;
	void (*done)(void *arg);
	void *done_arg;
};

static void client_route(struct agr_redis *r, struct command *cmd);
static void client_refresh(struct agr_redis *r);

static bool on_worker(const agr_redis *r, const char *what)
{
	if (agr_worker_current() == r->w)
		return true;
	agr_log(AGR_LOG_ERROR, "redis %s: called off the client's worker",
		what);
	return false;
}

static void client_free_strings(struct agr_redis *r)
{
	free(r->host);
	free(r->name);
	free(r->username);
	if (r->password) /* do not leave it in freed memory */
		explicit_bzero(r->password, strlen(r->password));
	free(r->password);
}

static void client_destroy(struct agr_redis *r)
{
	void (*done)(void *) = r->done;
	void *arg = r->done_arg;

	agr__redis_map_free(r->map, NULL);
	client_free_strings(r);
	free(r);
	if (done)
		done(arg);
}

static void client_maybe_done(struct agr_redis *r)
{
	if (r->closing && r->conns == 0 && r->busy == 0)
		client_destroy(r);
}

/* The command's one callback, then it is gone. */
static void command_finish(struct command *cmd, const redisReply *reply,
			   int err)
{
	struct agr_redis *r = cmd->r;

	if (err < 0)
		r->stats.failures++;
	else
		r->stats.replies++;
	if (reply && reply->type == REDIS_REPLY_ERROR)
		r->stats.server_errors++;
	r->busy++;
	cmd->cb(r, reply, err, cmd->arg);
	r->busy--;
	redisFreeCommand(cmd->buf);
	free(cmd);
	client_maybe_done(r);
}

/* ---- connections ---- */

static void conn_down(struct agr__redis_conn *c, int err, void *arg)
{
	struct agr_redis *r = arg;

	(void)c;
	(void)err;
	/*
	 * The node may have gone for good (a replica took over): ask the
	 * others who serves what, after each failed attempt too, so that
	 * new commands reach the new master once the map says so.
	 */
	if (r->cluster && !r->closing)
		client_refresh(r);
}

static void conn_closed(struct agr__redis_conn *c, void *arg)
{
	struct agr_redis *r = arg;

	(void)c;
	r->conns--;
	client_maybe_done(r);
}

static const struct agr__redis_conn_hooks conn_hooks = {
	.up = NULL,
	.down = conn_down,
	.closed = conn_closed,
};

static int client_conn_new(struct agr_redis *r, const char *host, int port,
			   struct agr__redis_conn **out)
{
	struct agr__redis_conn_config cfg = {
		.w = r->w,
		.host = host,
		.port = port,
		.name = r->name,
		.username = r->username,
		.password = r->password,
		.connect_timeout_ns = r->connect_timeout_ns,
		.reconnect_delay_ns = r->reconnect_delay_ns,
		.stats = &r->stats,
	};
	int ret = agr__redis_conn_new(&cfg, &conn_hooks, r, out);

	if (ret == 0)
		r->conns++;
	return ret;
}

/* The node's connection, made on first use. */
static struct agr__redis_conn *node_conn(struct agr_redis *r,
					 struct agr__redis_node *n)
{
	struct agr__redis_conn *c = agr__redis_node_user(n);

	if (!c && client_conn_new(r, agr__redis_node_host(n),
				  agr__redis_node_port(n), &c) == 0)
		agr__redis_node_set_user(n, c);
	return c;
}

/* ---- the slot map ---- */

static void waiting_push(struct agr_redis *r, struct command *cmd)
{
	cmd->next = NULL;
	*r->waiting_tail = cmd;
	r->waiting_tail = &cmd->next;
}

static struct command *waiting_take(struct agr_redis *r)
{
	struct command *list = r->waiting;

	r->waiting = NULL;
	r->waiting_tail = &r->waiting;
	return list;
}

/* Ends the commands that waited for a map that could not be read. */
static void waiting_fail(struct agr_redis *r, const redisReply *reply,
			 int err)
{
	struct command *cmd = waiting_take(r), *next;

	for (; cmd; cmd = next) {
		next = cmd->next;
		command_finish(cmd, reply, err);
	}
}

static void waiting_route(struct agr_redis *r)
{
	struct command *cmd = waiting_take(r), *next;

	for (; cmd; cmd = next) {
		next = cmd->next;
		client_route(r, cmd);
	}
}

/* A connected node to ask, in turn; else the first that will be. */
static struct agr__redis_node *refresh_source(struct agr_redis *r)
{
	size_t n = agr__redis_map_count(r->map);

	for (size_t i = 0; i < n; i++) {
		struct agr__redis_node *node =
			agr__redis_map_at(r->map, (r->refresh_next + i) % n);
		struct agr__redis_conn *c = agr__redis_node_user(node);

		if (c && agr__redis_conn_ready(c)) {
			r->refresh_next = (r->refresh_next + i + 1) % n;
			return node;
		}
	}
	return r->seed;
}

struct refresh {
	struct agr_redis *r;
	struct agr__redis_node *node;
};

static void map_reply(struct agr_redis *r, const redisReply *reply, int err,
		      const char *asked);

static void on_map(void *arg, redisReply *reply, int err)
{
	struct refresh *rf = arg;
	struct agr_redis *r = rf->r;
	const char *asked = agr__redis_node_host(rf->node);

	free(rf);
	r->refreshing = false;
	if (r->closing)
		return;
	r->busy++;
	map_reply(r, reply, err, asked);
	r->busy--;
	client_maybe_done(r);
}

/* What the slot map's read brought: the map, or why there is none. */
static void map_reply(struct agr_redis *r, const redisReply *reply, int err,
		      const char *asked)
{
	int ret;

	if (err == -ECONNRESET) {
		client_refresh(r); /* the node failed: ask another */
		return;
	}
	if (err < 0) {
		waiting_fail(r, NULL, err);
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR && !r->use_slots &&
	    strstr(reply->str, "nknown subcommand")) {
		r->use_slots = true; /* a server before 7.0 */
		client_refresh(r);
		return;
	}
	if (reply->type == REDIS_REPLY_ERROR) {
		agr_log(AGR_LOG_WARN, "redis: the slot map: %s", reply->str);
		waiting_fail(r, reply, 0);
		return;
	}
	ret = agr__redis_map_load(r->map, reply, !r->use_slots, asked);
	if (ret < 0) {
		waiting_fail(r, NULL, ret);
		return;
	}
	r->map_ready = true;
	waiting_route(r);
	if (r->refresh_again && !r->closing) {
		r->refresh_again = false;
		client_refresh(r);
	}
}

/* Reads the slot map again; one read at a time, one more if asked meanwhile. */
static void client_refresh(struct agr_redis *r)
{
	static const char shards[] = "*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n";
	static const char slots[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
	struct agr__redis_node *node;
	struct agr__redis_conn *c;
	struct refresh *rf;
	int ret = -ENOMEM;

	if (r->refreshing) {
		r->refresh_again = true;
		return;
	}
	node = refresh_source(r);
	c = node_conn(r, node);
	rf = malloc(sizeof(*rf));
	if (c && rf) {
		*rf = (struct refresh){ .r = r, .node = node };
		ret = r->use_slots
			      ? agr__redis_conn_append(c, slots,
						       sizeof(slots) - 1,
						       on_map, rf)
			      : agr__redis_conn_append(c, shards,
						       sizeof(shards) - 1,
						       on_map, rf);
	}
	if (ret < 0) {
		free(rf);
		agr_log(AGR_LOG_WARN, "redis: cannot ask for the slot map: %s",
			agr_strerror(ret));
		waiting_fail(r, NULL, ret == -ESHUTDOWN ? -ECANCELED : ret);
		return;
	}
	r->refreshing = true;
	r->stats.slot_refreshes++;
}

/* ---- routing and redirections ---- */

static void on_reply(void *arg, redisReply *reply, int err);

static void ignore_reply(void *arg, redisReply *reply, int err)
{
	(void)arg;
	(void)reply;
	(void)err;
}

static void send_to(struct agr__redis_conn *c, struct command *cmd, bool ask)
{
	int ret = -ENOMEM;

	if (c) {
		ret = 0;
		if (ask)
			ret = agr__redis_conn_append(c, asking_cmd,
						     sizeof(asking_cmd) - 1,
						     ignore_reply, NULL);
		if (ret == 0)
			ret = agr__redis_conn_append(c, cmd->buf, cmd->len,
						     on_reply, cmd);
		/* only a redirection sends the bytes again */
		if (ret == 0 && !cmd->r->cluster) {
			redisFreeCommand(cmd->buf);
			cmd->buf = NULL;
		}
	}
	if (ret < 0)
		command_finish(cmd, NULL, ret == -ESHUTDOWN ? -ECANCELED : ret);
}

static struct agr__redis_node *any_node(struct agr_redis *r)
{
	size_t n = agr__redis_map_count(r->map);

	for (size_t i = 0; i < n; i++) {
		struct agr__redis_node *node = agr__redis_map_at(r->map, i);
		struct agr__redis_conn *c = agr__redis_node_user(node);

		if (c && agr__redis_conn_ready(c))
			return node;
	}
	return r->seed;
}

static void client_route(struct agr_redis *r, struct command *cmd)
{
	struct agr__redis_node *node;

	if (!r->cluster) {
		send_to(r->single, cmd, false);
		return;
	}
	if (!r->map_ready) {
		waiting_push(r, cmd);
		client_refresh(r);
		return;
	}
	node = cmd->slot < 0 ? any_node(r)
			     : agr__redis_map_slot(r->map, (unsigned)cmd->slot);
	if (!node) {
		agr_log(AGR_LOG_WARN, "redis: no master serves slot %d",
			cmd->slot);
		command_finish(cmd, NULL, -ENXIO);
		return;
	}
	send_to(node_conn(r, node), cmd, false);
}

/* MOVED: the slot has a new master. ASK: this once, ASKING first. */
static bool follow_redirect(struct agr_redis *r, struct command *cmd,
			    const redisReply *reply)
{
	struct agr__redis_node *node;
	char host[256];
	unsigned slot;
	int port, kind;

	kind = agr__redis_parse_redirect(reply->str, reply->len, &slot, host,
					 sizeof(host), &port);
	if (kind == 0)
		return false;
	if (++cmd->hops > r->max_redirects) {
		agr_log(AGR_LOG_WARN, "redis: more than %u redirections: %.*s",
			r->max_redirects, (int)reply->len, reply->str);
		command_finish(cmd, NULL, -ELOOP);
		return true;
	}
	node = agr__redis_map_node(r->map, host, port);
	if (!node) {
		command_finish(cmd, NULL, -ENOMEM);
		return true;
	}
	if (kind == 1) {
		r->stats.moved++;
		agr__redis_map_set_slot(r->map, slot, node);
		client_refresh(r);
	} else {
		r->stats.ask++;
	}
	send_to(node_conn(r, node), cmd, kind == 2);
	return true;
}

static void on_reply(void *arg, redisReply *reply, int err)
{
	struct command *cmd = arg;
	struct agr_redis *r = cmd->r;

	if (err == 0 && r->cluster && !r->closing &&
	    reply->type == REDIS_REPLY_ERROR &&
	    follow_redirect(r, cmd, reply))
		return;
	command_finish(cmd, reply, err);
}

/* ---- the API ---- */

AGR_API void agr_redis_options_init(agr_redis_options *o)
{
	if (o)
		*o = (agr_redis_options)AGR_REDIS_OPTIONS_INIT;
}

static int options_check(const agr_redis_options *o)
{
	if (o->size != sizeof(*o)) {
		agr_log(AGR_LOG_ERROR, "redis: options.size is %zu, not %zu",
			o->size, sizeof(*o));
		return -EINVAL;
	}
	if (o->port < 0 || o->port > 65535) {
		agr_log(AGR_LOG_ERROR, "redis: options.port %d out of range",
			o->port);
		return -EINVAL;
	}
	if (o->host && !*o->host) {
		agr_log(AGR_LOG_ERROR, "redis: options.host is empty");
		return -EINVAL;
	}
	if (o->username && !o->password) {
		agr_log(AGR_LOG_ERROR, "redis: options.username without a password");
		return -EINVAL;
	}
	if (o->name && (!*o->name || strpbrk(o->name, " \r\n"))) {
		agr_log(AGR_LOG_ERROR,
			"redis: options.name \"%s\" is empty or has blanks",
			o->name);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i]) {
			agr_log(AGR_LOG_ERROR, "redis: options.reserved[%zu] is set",
				i);
			return -EINVAL;
		}
	return 0;
}

static int client_start(struct agr_redis *r)
{
	int ret;

	if (!r->cluster) {
		ret = client_conn_new(r, r->host, r->port, &r->single);
		if (ret == 0)
			agr__redis_conn_start(r->single);
		return ret;
	}
	ret = agr__redis_map_new(&r->map);
	if (ret < 0)
		return ret;
	r->seed = agr__redis_map_node(r->map, r->host, r->port);
	if (!r->seed || !node_conn(r, r->seed))
		return -ENOMEM;
	client_refresh(r);
	return 0;
}

AGR_API int agr_redis_new(agr_worker *w, const agr_redis_options *o,
			  agr_redis **out)
{
	agr_redis_options defaults = AGR_REDIS_OPTIONS_INIT;
	struct agr_redis *r;
	int ret;

	if (!w || !out) {
		agr_log(AGR_LOG_ERROR, "redis: agr_redis_new without %s",
			w ? "out" : "a worker");
		return -EINVAL;
	}
	if (agr_worker_current() != w) {
		agr_log(AGR_LOG_ERROR, "redis: agr_redis_new off its worker");
		return -EPERM;
	}
	if (!o)
		o = &defaults;
	ret = options_check(o);
	if (ret < 0)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->w = w;
	r->host = strdup(o->host ? o->host : DEFAULT_HOST);
	r->name = strdup(o->name ? o->name : DEFAULT_NAME);
	r->username = o->username ? strdup(o->username) : NULL;
	r->password = o->password ? strdup(o->password) : NULL;
	r->port = o->port ? o->port : DEFAULT_PORT;
	r->cluster = o->cluster;
	r->max_redirects = o->max_redirects ? o->max_redirects
					    : DEFAULT_REDIRECTS;
	r->connect_timeout_ns = o->connect_timeout_ns
					? o->connect_timeout_ns
					: DEFAULT_CONNECT_TIMEOUT_NS;
	r->reconnect_delay_ns = o->reconnect_delay_ns
					? o->reconnect_delay_ns
					: DEFAULT_RECONNECT_DELAY_NS;
	r->waiting_tail = &r->waiting;
	ret = r->host && r->name && (!o->username || r->username) &&
			      (!o->password || r->password)
		      ? client_start(r)
		      : -ENOMEM;
	if (ret < 0) {
		agr_redis_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* Admits one formatted command: the bytes are the client's from here. */
static int client_submit(agr_redis *r, const char *key, size_t keylen,
			 char *buf, size_t len, agr_redis_reply_fn cb,
			 void *arg)
{
	struct command *cmd = malloc(sizeof(*cmd));

	if (!cmd) {
		redisFreeCommand(buf);
		return -ENOMEM;
	}
	*cmd = (struct command){
		.r = r,
		.buf = buf,
		.len = len,
		.slot = key ? (int)agr_redis_key_slot(key, keylen) : -1,
		.cb = cb,
		.arg = arg,
	};
	r->stats.commands++;
	r->busy++;
	client_route(r, cmd);
	r->busy--;
	/* a command's failure may have ended a close started in its callback */
	client_maybe_done(r);
	return 0;
}

static int submit_check(agr_redis *r, agr_redis_reply_fn cb)
{
	if (!r || !cb) {
		agr_log(AGR_LOG_ERROR, "redis: a command without %s",
			r ? "a callback" : "a client");
		return -EINVAL;
	}
	if (!on_worker(r, "command"))
		return -EPERM;
	if (r->closing)
		return -ESHUTDOWN;
	return 0;
}

AGR_API int agr_redis_command_argv(agr_redis *r, const char *key,
				   size_t keylen, int argc, const char **argv,
				   const size_t *argvlen, agr_redis_reply_fn cb,
				   void *arg)
{
	char *buf;
	int len, ret = submit_check(r, cb);

	if (ret < 0)
		return ret;
	if (argc <= 0 || !argv) {
		agr_log(AGR_LOG_ERROR, "redis: a command of %d arguments", argc);
		return -EINVAL;
	}
	for (int i = 0; i < argc; i++)
		if (!argv[i]) {
			agr_log(AGR_LOG_ERROR, "redis: argv[%d] is NULL", i);
			return -EINVAL;
		}
	len = redisFormatCommandArgv(&buf, argc, argv, argvlen);
	if (len < 0)
		return -ENOMEM;
	return client_submit(r, key, keylen, buf, (size_t)len, cb, arg);
}

AGR_API int agr_redis_command(agr_redis *r, const char *key,
			      agr_redis_reply_fn cb, void *arg,
			      const char *fmt, ...)
{
	va_list ap;
	char *buf;
	int len, ret = submit_check(r, cb);

	if (ret < 0)
		return ret;
	if (!fmt || !*fmt) {
		agr_log(AGR_LOG_ERROR, "redis: a command without a format");
		return -EINVAL;
	}
	va_start(ap, fmt);
	len = redisvFormatCommand(&buf, fmt, ap);
	va_end(ap);
	if (len == -2) {
		agr_log(AGR_LOG_ERROR, "redis: bad command format \"%s\"", fmt);
		return -EINVAL;
	}
	if (len < 0)
		return -ENOMEM;
	return client_submit(r, key, key ? strlen(key) : 0, buf, (size_t)len,
			     cb, arg);
}

AGR_API void agr_redis_close(agr_redis *r, void (*done)(void *arg), void *arg)
{
	if (!r || r->closing || !on_worker(r, "close"))
		return;
	r->closing = true;
	r->done = done;
	r->done_arg = arg;
	r->busy++;
	waiting_fail(r, NULL, -ECANCELED);
	if (r->single)
		agr__redis_conn_close(r->single);
	for (size_t i = 0; r->map && i < agr__redis_map_count(r->map); i++) {
		struct agr__redis_node *n = agr__redis_map_at(r->map, i);

		if (agr__redis_node_user(n))
			agr__redis_conn_close(agr__redis_node_user(n));
	}
	r->busy--;
	client_maybe_done(r);
}

AGR_API void agr_redis_free(agr_redis *r)
{
	if (!r)
		return;
	r->closing = true;
	r->done = NULL;
	r->busy++;
	waiting_fail(r, NULL, -ECANCELED);
	if (r->single)
		agr__redis_conn_free(r->single);
	for (size_t i = 0; r->map && i < agr__redis_map_count(r->map); i++) {
		struct agr__redis_node *n = agr__redis_map_at(r->map, i);

		if (agr__redis_node_user(n))
			agr__redis_conn_free(agr__redis_node_user(n));
		agr__redis_node_set_user(n, NULL);
	}
	agr__redis_map_free(r->map, NULL);
	r->map = NULL;
	client_free_strings(r);
	free(r);
}

AGR_API int agr_redis_stats_get(const agr_redis *r, agr_redis_stats *out)
{
	if (!r || !out)
		return -EINVAL;
	if (!on_worker(r, "stats"))
		return -EPERM;
	*out = r->stats;
	return 0;
}

AGR_API agr_worker *agr_redis_worker(const agr_redis *r)
{
	return r ? r->w : NULL;
}
