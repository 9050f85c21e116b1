/* SPDX-License-Identifier: MIT */
/*
 * bench/uv_echo - the libuv echo server that bench/network.sh compares
 * examples/basic/echo_server with: what a good engineer writes with libuv.
 *
 *   uv_echo [PORT]        (default 7008; 0 picks a free port)
 *
 * One loop on one thread, as libuv is meant to be used: uv_tcp_t,
 * uv_read_start, and a uv_write of the very buffer the read filled.
 * Buffers (16 KiB, as echo_server's) come from a free list, so that the
 * steady state allocates nothing. Prints "listening on 127.0.0.1:PORT"
 * once it accepts connections; SIGTERM or SIGINT closes every handle
 * and ends the loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#define BUF_SIZE 16384

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A buffer and the write that echoes it. */
struct chunk {
	uv_write_t req;
	struct chunk *next_free;
	char data[BUF_SIZE];
};

static struct chunk *free_chunks;
static uv_tcp_t server;
static uv_signal_t sigterm, sigint;
static unsigned long long connections, bytes;

static void fail(const char *what, int err)
{
	fprintf(stderr, "uv_echo: %s: %s\n", what, uv_strerror(err));
	exit(1);
}

static struct chunk *chunk_get(void)
{
	struct chunk *c = free_chunks;

	if (c) {
		free_chunks = c->next_free;
		return c;
	}
	c = malloc(sizeof(*c));
	if (!c)
		fail("malloc", UV_ENOMEM);
	return c;
}

static void chunk_put(struct chunk *c)
{
	c->next_free = free_chunks;
	free_chunks = c;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct chunk *c = chunk_get();

	(void)h;
	(void)suggested;
	*buf = uv_buf_init(c->data, BUF_SIZE);
}

static void on_closed(uv_handle_t *h)
{
	free(h);
}

static void on_written(uv_write_t *req, int status)
{
	struct chunk *c = container_of(req, struct chunk, req);

	if (status < 0 && !uv_is_closing((uv_handle_t *)req->handle))
		uv_close((uv_handle_t *)req->handle, on_closed);
	chunk_put(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct chunk *c = buf->base ? container_of(buf->base, struct chunk,
						   data) : NULL;
	uv_buf_t out;
	int ret;

	if (n <= 0) {
		if (c)
			chunk_put(c);
		if (n < 0 && !uv_is_closing((uv_handle_t *)s))
			uv_close((uv_handle_t *)s, on_closed);
		return; /* n == 0: EAGAIN, nothing read */
	}
	bytes += (unsigned long long)n;
	out = uv_buf_init(c->data, (unsigned)n);
	ret = uv_write(&c->req, s, &out, 1, on_written);
	if (ret < 0) {
		chunk_put(c);
		uv_close((uv_handle_t *)s, on_closed);
	}
}

static void on_connection(uv_stream_t *srv, int status)
{
	uv_tcp_t *client;

	if (status < 0) {
		fprintf(stderr, "uv_echo: accept: %s\n", uv_strerror(status));
		return;
	}
	client = malloc(sizeof(*client));
	if (!client)
		fail("malloc", UV_ENOMEM);
	uv_tcp_init(srv->loop, client);
	if (uv_accept(srv, (uv_stream_t *)client) < 0 ||
	    uv_read_start((uv_stream_t *)client, on_alloc, on_read) < 0) {
		uv_close((uv_handle_t *)client, on_closed);
		return;
	}
	connections++;
}

static void close_client(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (h->type == UV_TCP && h != (uv_handle_t *)&server &&
	    !uv_is_closing(h))
		uv_close(h, on_closed);
}

static void on_signal(uv_signal_t *sig, int signum)
{
	(void)signum;
	uv_close((uv_handle_t *)&server, NULL);
	uv_close((uv_handle_t *)&sigterm, NULL);
	uv_close((uv_handle_t *)&sigint, NULL);
	uv_walk(sig->loop, close_client, NULL);
}

static const char usage_text[] =
	"usage: uv_echo [PORT]\n"
	"  PORT        port on 127.0.0.1 (default 7008; 0 picks a free one)\n"
	"  -h, --help  print this help and exit\n";

/* The port the command line names; exits 0 on -h, 2 if it names none. */
static int parse_port(int argc, char **argv)
{
	const char *arg = argv[1];
	char *end;
	long port;

	if (argc == 1)
		return 7008;
	if (argc == 2 && (!strcmp(arg, "-h") || !strcmp(arg, "--help"))) {
		fputs(usage_text, stdout);
		exit(0);
	}
	if (argc > 2) {
		fprintf(stderr, "uv_echo: one argument at most\n%s",
			usage_text);
		exit(2);
	}
	errno = 0;
	port = strtol(arg, &end, 10);
	if (errno || end == arg || *end || port < 0 || port > 65535) {
		fprintf(stderr, "uv_echo: '%s' is no port (0 to 65535)\n%s",
			arg, usage_text);
		exit(2);
	}
	return (int)port;
}

int main(int argc, char **argv)
{
	uv_loop_t *loop = uv_default_loop();
	struct sockaddr_in addr;
	struct sockaddr_storage bound;
	int port = parse_port(argc, argv), len = sizeof(bound), ret;
	signal(SIGPIPE, SIG_IGN);
	uv_tcp_init(loop, &server);
	uv_ip4_addr("127.0.0.1", port, &addr);
	if ((ret = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0)))
		fail("bind", ret);
	if ((ret = uv_listen((uv_stream_t *)&server, 511, on_connection)))
		fail("listen", ret);
	uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
	uv_signal_init(loop, &sigterm);
	uv_signal_start(&sigterm, on_signal, SIGTERM);
	uv_signal_init(loop, &sigint);
	uv_signal_start(&sigint, on_signal, SIGINT);
	printf("listening on 127.0.0.1:%d\n",
	       ntohs(((struct sockaddr_in *)&bound)->sin_port));
	fflush(stdout);
	uv_run(loop, UV_RUN_DEFAULT);
	printf("uv_echo: stopped: %llu connections, %llu bytes echoed\n",
	       connections, bytes);
	while (free_chunks) {
		struct chunk *c = free_chunks;

		free_chunks = c->next_free;
		free(c);
	}
	return uv_loop_close(loop) == 0 ? 0 : 1;
}
