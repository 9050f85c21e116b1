/* SPDX-License-Identifier: MIT */
/*
 * testutil_redis.c - the private redis-server of check_wow_bus and
 * check_wow_processor (testutil_redis.h).
 */
#include "testutil_redis.h"

#include "testutil.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t server_pid;
static int server_port;
static char server_dir[96];
static const char *server_name = "testutil_redis";

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

int tu_redis_port(void)
{
	return server_port;
}

redisContext *tu_redis_connect(void)
{
	struct timeval tv = { 5, 0 };

	return redisConnectWithTimeout("127.0.0.1", server_port, tv);
}

static _Noreturn void exec_server(void)
{
	char port[16];

	snprintf(port, sizeof(port), "%d", server_port);
	if (!freopen("/dev/null", "w", stdout))
		_exit(127);
	execlp("redis-server", "redis-server", "--port", port, "--bind",
	       "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
	       server_dir, "--loglevel", "warning", (char *)NULL);
	_exit(127);
}

/* True once the server answers PING. */
static bool answers(void)
{
	redisContext *c = tu_redis_connect();
	redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
	bool up = r && r->type == REDIS_REPLY_STATUS;

	if (r)
		freeReplyObject(r);
	if (c)
		redisFree(c);
	return up;
}

void tu_redis_start(const char *name)
{
	uint64_t deadline;
	int status;

	server_name = name;
	snprintf(server_dir, sizeof(server_dir), "/tmp/%s.XXXXXX", name);
	if (!mkdtemp(server_dir) || (server_port = free_port()) < 0) {
		perror(name);
		exit(1);
	}
	server_pid = fork();
	if (server_pid == 0)
		exec_server();
	deadline = tu_now_ns() + TU_LONG_NS;
	while (tu_now_ns() < deadline) {
		if (answers())
			return;
		if (waitpid(server_pid, &status, WNOHANG) == server_pid) {
			fprintf(stderr, "SKIP: redis-server did not start\n");
			exit(TU_SKIP);
		}
		usleep(20000); /* polling the server's start, not a sync */
	}
	fprintf(stderr, "%s: redis-server did not answer\n", name);
	exit(1);
}

void tu_redis_stop(void)
{
	char cmd[128];

	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", server_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "%s: could not remove %s\n", server_name,
			server_dir);
}

int tu_redis_run(const char *name, Suite *(*make_suite)(void))
{
	int rc;

	tu_require_io_uring();
	if (system("command -v redis-server >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP: redis-server is not installed\n");
		return TU_SKIP;
	}
	tu_redis_start(name);
	rc = tu_run(make_suite());
	tu_redis_stop();
	return rc;
}

static redisReply *command(redisContext *c, const char *fmt, va_list ap)
{
	redisReply *r;

	ck_assert_ptr_nonnull(c);
	r = redisvCommand(c, fmt, ap);
	ck_assert_ptr_nonnull(r);
	return r;
}

void tu_redis_ok(const char *fmt, ...)
{
	redisContext *c = tu_redis_connect();
	redisReply *r;
	va_list ap;

	va_start(ap, fmt);
	r = command(c, fmt, ap);
	va_end(ap);
	ck_assert_msg(r->type != REDIS_REPLY_ERROR, "redis: %s", r->str);
	freeReplyObject(r);
	redisFree(c);
}

long long tu_redis_integer(const char *fmt, ...)
{
	redisContext *c = tu_redis_connect();
	redisReply *r;
	long long v = -1;
	va_list ap;

	va_start(ap, fmt);
	r = command(c, fmt, ap);
	va_end(ap);
	if (r->type == REDIS_REPLY_INTEGER)
		v = r->integer;
	else if (r->type == REDIS_REPLY_ARRAY && r->elements &&
		 r->element[0]->type == REDIS_REPLY_INTEGER)
		v = r->element[0]->integer; /* XPENDING's summary count */
	freeReplyObject(r);
	redisFree(c);
	return v;
}

long long tu_redis_pending(const char *topic, const char *group)
{
	return tu_redis_integer("XPENDING %s %s", topic, group);
}
