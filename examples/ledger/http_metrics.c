/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "http_metrics.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acceptor.h"
#include "net.h"
#include "util.h"

#define HTTP_REQ_MAX 4096 /* request line and headers */
#define HTTP_HEAD_MAX 256 /* our status line and headers */
#define HTTP_WORKER 0

struct http_conn;

struct http_metrics {
	agr_dispatcher *disp;
	agr_scheduler *sched;
	struct acceptor *acceptor;
	struct drain *drain;
	struct http_conn *scrapes; /* open ones; HTTP_WORKER's only */
	http_metrics_extra_fn extra; /* more of the page, or NULL */
	void *extra_arg;
	atomic_bool stopping;
};

/* One scrape: read the request head, answer once, close. */
struct http_conn {
	struct http_metrics *m;
	struct http_conn *prev, *next;
	int fd;
	size_t len;	 /* of req */
	char *resp;	 /* HTTP_HEAD_MAX bytes of room, then the body */
	const char *out; /* the response: its head ends where body starts */
	size_t out_len, sent;
	char req[HTTP_REQ_MAX + 1];
};

static void http_free(struct http_conn *h)
{
	struct http_metrics *m = h->m;

	close(h->fd);
	if (h->prev)
		h->prev->next = h->next;
	else
		m->scrapes = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h->resp);
	free(h);
	drain_done(m->drain);
}

/* Is the request head [p, p + n) complete (its empty line arrived)? */
static bool http_head_done(const char *p, size_t n)
{
	return memmem(p, n, "\r\n\r\n", 4) || memmem(p, n, "\n\n", 2);
}

/*
 * The status to answer, or 0 while the head is incomplete and still
 * plausible. A broken request line is refused as soon as it has ended,
 * so a client sending garbage is not kept waiting for an empty line.
 */
static int http_status(const char *req, size_t len)
{
	const char *eol = memchr(req, '\n', len), *sp, *path, *end;

	if (!eol)
		return len < HTTP_REQ_MAX ? 0 : 400;
	/* "METHOD SP TARGET SP HTTP/x.y" */
	sp = memchr(req, ' ', (size_t)(eol - req));
	if (!sp || sp == req)
		return 400;
	path = sp + 1;
	end = memmem(path, (size_t)(eol - path), " HTTP/", 6);
	if (!end || end == path)
		return 400;
	if (!http_head_done(req, len))
		return len < HTTP_REQ_MAX ? 0 : 400;
	if (sp - req != 3 || memcmp(req, "GET", 3) != 0)
		return 405;
	if (end - path < 8 || memcmp(path, "/metrics", 8) != 0 ||
	    (end - path > 8 && path[8] != '?'))
		return 404;
	return 200;
}

/*
 * Renders the page after HTTP_HEAD_MAX bytes of room in h->resp. The
 * first call only sizes it; counters may gain digits before the second
 * one, hence the slack and the loop.
 */
static int http_render_into(struct http_conn *h, char *buf, size_t cap)
{
	agr_dispatcher *const ds[] = { h->m->disp };
	int n = agr_metrics_write_prometheus(ds, 1, buf, cap), e;

	if (n < 0 || !h->m->extra)
		return n;
	e = h->m->extra(h->m->extra_arg, (size_t)n < cap ? buf + n : NULL,
			(size_t)n < cap ? cap - (size_t)n : 0);
	return e < 0 ? e : n + e;
}

static int http_render(struct http_conn *h, size_t *len)
{
	int n = http_render_into(h, NULL, 0);
	size_t cap = 0;

	while (n >= 0 && (size_t)n >= cap) {
		cap = (size_t)n + 1024;
		h->resp = xrealloc(h->resp, HTTP_HEAD_MAX + cap);
		n = http_render_into(h, h->resp + HTTP_HEAD_MAX, cap);
	}
	*len = (size_t)n;
	return n < 0 ? n : 0;
}

/* A short text body for an error status. */
static size_t http_error_body(struct http_conn *h, const char *reason)
{
	size_t n = strlen(reason);

	h->resp = xrealloc(h->resp, HTTP_HEAD_MAX + n + 1);
	memcpy(h->resp + HTTP_HEAD_MAX, reason, n);
	h->resp[HTTP_HEAD_MAX + n] = '\n';
	return n + 1;
}

static const char *http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	default: return "Internal Server Error";
	}
}

static void http_sent(int res, void *arg);

static void http_send_more(struct http_conn *h)
{
	if (agr_io_send(agr_worker_current(), h->fd, h->out + h->sent,
			h->out_len - h->sent, MSG_NOSIGNAL, http_sent, h) < 0)
		http_free(h);
}

static void http_sent(int res, void *arg)
{
	struct http_conn *h = arg;

	if (res <= 0 || atomic_load(&h->m->stopping)) {
		http_free(h);
		return;
	}
	h->sent += (size_t)res;
	if (h->sent < h->out_len)
		http_send_more(h); /* a short send */
	else
		http_free(h); /* Connection: close */
}

/* The whole response in one buffer: the head just before the body. */
static void http_respond(struct http_conn *h, int status)
{
	char head[HTTP_HEAD_MAX];
	size_t body = 0;
	int n;

	if (status == 200 && http_render(h, &body) < 0)
		status = 500;
	if (status != 200)
		body = http_error_body(h, http_reason(status));
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain%s\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		     status, http_reason(status),
		     status == 200 ? "; version=0.0.4" : "", body);
	h->out = h->resp + HTTP_HEAD_MAX - n;
	memcpy(h->resp + HTTP_HEAD_MAX - n, head, (size_t)n);
	h->out_len = (size_t)n + body;
	http_send_more(h);
}

static void http_received(int res, void *arg);

static void http_arm_recv(struct http_conn *h)
{
	if (agr_io_recv(agr_worker_current(), h->fd, h->req + h->len,
			HTTP_REQ_MAX - h->len, 0, http_received, h) < 0)
		http_free(h);
}

static void http_received(int res, void *arg)
{
	struct http_conn *h = arg;
	int status;

	/* Gone before asking, or the server stops: nothing to answer. */
	if (res <= 0 || atomic_load(&h->m->stopping)) {
		http_free(h);
		return;
	}
	h->len += (size_t)res;
	h->req[h->len] = '\0';
	status = http_status(h->req, h->len);
	if (status)
		http_respond(h, status);
	else
		http_arm_recv(h);
}

/* Takes a scrape's connection; on HTTP_WORKER, like every accept. */
static void http_take(void *arg, int fd)
{
	struct http_metrics *m = arg;
	struct http_conn *h = xcalloc(1, sizeof(*h));

	h->m = m;
	h->fd = fd;
	h->next = m->scrapes;
	if (h->next)
		h->next->prev = h;
	m->scrapes = h;
	drain_add(m->drain);
	http_arm_recv(h);
}

struct http_metrics *http_metrics_start(agr_dispatcher *disp, int port,
					struct drain *drain, int *bound)
{
	return http_metrics_start_extra(disp, port, drain, bound, NULL, NULL);
}

struct http_metrics *http_metrics_start_extra(agr_dispatcher *disp, int port,
					      struct drain *drain, int *bound,
					      http_metrics_extra_fn extra,
					      void *extra_arg)
{
	struct http_metrics *m = xcalloc(1, sizeof(*m));
	int fd, ret;

	m->extra = extra;
	m->extra_arg = extra_arg;
	m->disp = disp;
	m->sched = agr_dispatcher_scheduler(disp);
	m->drain = drain;
	fd = net_listen(port, bound);
	ret = acceptor_start(m->sched, HTTP_WORKER, fd, http_take, m, drain,
			     &m->acceptor);
	if (ret)
		die("agr_scheduler_schedule: %s", agr_strerror(ret));
	return m;
}

/*
 * Cancels every scrape's operation: its callback sees the stop (or
 * -ECANCELED) and closes.
 */
static void cancel_scrapes(void *arg)
{
	struct http_metrics *m = arg;
	agr_worker *w = agr_worker_current();
	struct http_conn *h;

	for (h = m->scrapes; h; h = h->next)
		agr_io_cancel(w, h);
}

void http_metrics_stop(struct http_metrics *m)
{
	atomic_store(&m->stopping, true);
	acceptor_stop(m->acceptor);
	agr_scheduler_schedule(m->sched, HTTP_WORKER, cancel_scrapes, m);
}

void http_metrics_free(struct http_metrics *m)
{
	acceptor_free(m->acceptor);
	free(m);
}
