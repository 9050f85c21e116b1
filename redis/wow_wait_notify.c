/* SPDX-License-Identifier: MIT */
/*
 * wow_wait_notify.c - Wow's remote wait notification, from the ring:
 * wow-webflux's WebClientCommandWaitNotifier POSTs the WaitSignal as
 * JSON to the command's `command_wait_endpoint` (the JVM gateway's
 * ServerCommandWaitEndpoint, http://<ip>:<port>/wow/command/wait) and
 * RemoteWaitNotifyPolicy retries it (Retry.backoff(3, 2 s)); the
 * processor forgets it (CommandWaitNotifier.notifyAndForget). One
 * connection per signal, closed after the status line.
 */
#include "wow_processor_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring/io.h>

#define NOTIFY_RETRIES 3
#define NOTIFY_BACKOFF_NS 2000000000ull /* 2 s, doubling */

struct agr__wow_notify {
	struct agr__wow_notify *prev, *next;
	struct agr__wow_notify_list *list;
	agr_worker *w;
	int fd;
	unsigned attempt;
	struct sockaddr_storage addr;
	unsigned addrlen;
	char *req; /* the whole request */
	size_t req_len, sent;
	char resp[128];
	size_t got;
};

int agr__wow_http_url(const char *url, void *ss, unsigned *addrlen,
		      char *hostport, size_t hplen, const char **path)
{
	struct sockaddr_in *in4 = ss;
	struct sockaddr_in6 *in6 = ss;
	char host[64];
	const char *p, *end, *colon;
	long port = 80;
	size_t n;

	if (strncmp(url, "http://", 7))
		return -EINVAL;
	p = url + 7;
	end = p + strcspn(p, "/");
	*path = *end ? end : "/";
	if ((size_t)(end - p) >= hplen || (size_t)(end - p) >= sizeof(host))
		return -EINVAL;
	memcpy(hostport, p, (size_t)(end - p));
	hostport[end - p] = '\0';
	if (*p == '[') { /* [v6]:port */
		colon = strchr(p, ']');
		if (!colon || colon > end)
			return -EINVAL;
		n = (size_t)(colon - p - 1);
		memcpy(host, p + 1, n);
		colon = colon[1] == ':' ? colon + 1 : NULL;
	} else {
		colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon ? colon : end) - p);
		memcpy(host, p, n);
	}
	host[n] = '\0';
	if (colon && colon < end)
		port = strtol(colon + 1, NULL, 10);
	if (port < 1 || port > 65535)
		return -EINVAL;
	memset(ss, 0, sizeof(struct sockaddr_storage));
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*addrlen = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*addrlen = sizeof(*in6);
		return 0;
	}
	return -EAFNOSUPPORT; /* a name: not resolved on the ring */
}

static void notify_free(struct agr__wow_notify *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		n->list->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	if (n->fd >= 0)
		close(n->fd);
	free(n->req);
	free(n);
}

static void notify_start(struct agr__wow_notify *n);

static void notify_on_backoff(int res, void *arg)
{
	struct agr__wow_notify *n = arg;

	if (res == -ECANCELED || n->list->closing) {
		atomic_fetch_add(n->list->failed, 1);
		notify_free(n);
		return;
	}
	notify_start(n);
}

/* A failed attempt: again after a backoff, or give up. */
static void notify_retry(struct agr__wow_notify *n, int err, const char *what)
{
	if (n->fd >= 0) {
		close(n->fd);
		n->fd = -1;
	}
	if (!n->list->closing && n->attempt < NOTIFY_RETRIES &&
	    agr_io_timeout(n->w, NOTIFY_BACKOFF_NS << n->attempt++,
			   notify_on_backoff, n) == 0)
		return;
	agr_log(AGR_LOG_WARN, "wow wait notify: %s: %s; given up", what,
		strerror(err < 0 ? -err : EPROTO));
	atomic_fetch_add(n->list->failed, 1);
	notify_free(n);
}

static int timed(struct agr__wow_notify *n)
{
	agr_io_params p = AGR_IO_PARAMS_INIT;

	p.timeout_ns = n->list->timeout_ns;
	return agr_io_next(n->w, &p);
}

static void notify_on_recv(int res, void *arg)
{
	struct agr__wow_notify *n = arg;
	char *eol;
	int status;

	if (res <= 0) {
		notify_retry(n, res < 0 ? res : -ECONNRESET, "receive");
		return;
	}
	n->got += (size_t)res;
	n->resp[n->got] = '\0';
	eol = strstr(n->resp, "\r\n");
	if (!eol && n->got + 1 < sizeof(n->resp)) {
		if (timed(n) < 0 ||
		    agr_io_recv(n->w, n->fd, n->resp + n->got,
				sizeof(n->resp) - 1 - n->got, 0, notify_on_recv,
				n) < 0)
			notify_retry(n, -EIO, "receive");
		return;
	}
	if (sscanf(n->resp, "HTTP/%*d.%*d %d", &status) != 1 ||
	    status < 200 || status > 299) {
		notify_retry(n, -EPROTO, "status");
		return;
	}
	atomic_fetch_add(n->list->ok, 1);
	notify_free(n);
}

static void on_sent(int res, void *arg)
{
	struct agr__wow_notify *n = arg;
	int ret;

	if (res < 0) {
		notify_retry(n, res, "send");
		return;
	}
	n->sent += (size_t)res;
	ret = timed(n);
	if (ret == 0 && n->sent < n->req_len)
		ret = agr_io_send(n->w, n->fd, n->req + n->sent,
				  n->req_len - n->sent, MSG_NOSIGNAL, on_sent,
				  n);
	else if (ret == 0)
		ret = agr_io_recv(n->w, n->fd, n->resp, sizeof(n->resp) - 1,
				  0, notify_on_recv, n);
	if (ret < 0)
		notify_retry(n, ret, "send");
}

static void notify_on_connect(int res, void *arg)
{
	struct agr__wow_notify *n = arg;

	if (res < 0) {
		notify_retry(n, res, "connect");
		return;
	}
	n->sent = 0;
	n->got = 0;
	on_sent(0, n);
}

static void notify_start(struct agr__wow_notify *n)
{
	int ret;

	n->fd = socket(n->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		notify_retry(n, -errno, "socket");
		return;
	}
	ret = timed(n);
	if (ret == 0)
		ret = agr_io_connect(n->w, n->fd, (struct sockaddr *)&n->addr,
				     n->addrlen, notify_on_connect, n);
	if (ret < 0)
		notify_retry(n, ret, "connect");
}

static int build_request(struct agr__wow_notify *n, const char *hostport,
			 const char *path, const char *json, size_t len)
{
	static const char fmt[] = "POST %s HTTP/1.1\r\nHost: %s\r\n"
				  "Content-Type: application/json\r\n"
				  "Content-Length: %zu\r\n"
				  "Connection: close\r\n\r\n";
	int head = snprintf(NULL, 0, fmt, path, hostport, len);

	if (head < 0)
		return -EINVAL;
	n->req = malloc((size_t)head + len + 1);
	if (!n->req)
		return -ENOMEM;
	snprintf(n->req, (size_t)head + 1, fmt, path, hostport, len);
	memcpy(n->req + head, json, len);
	n->req_len = (size_t)head + len;
	return 0;
}

int agr__wow_notify_post(agr_worker *w, struct agr__wow_notify_list *l,
			 const char *endpoint, char *json, size_t len)
{
	struct agr__wow_notify *n = calloc(1, sizeof(*n));
	char hostport[128];
	const char *path;
	int ret = n ? 0 : -ENOMEM;

	if (ret == 0)
		ret = agr__wow_http_url(endpoint, &n->addr, &n->addrlen,
					hostport, sizeof(hostport), &path);
	if (ret == 0)
		ret = build_request(n, hostport, path, json, len);
	free(json);
	if (ret < 0) {
		agr_log(AGR_LOG_WARN, "wow wait notify: endpoint %s: %s",
			endpoint, strerror(-ret));
		atomic_fetch_add(l->failed, 1);
		if (n)
			free(n->req);
		free(n);
		return ret;
	}
	n->fd = -1;
	n->w = w;
	n->list = l;
	n->next = l->head;
	if (l->head)
		l->head->prev = n;
	l->head = n;
	notify_start(n);
	return 0;
}

void agr__wow_notify_cancel_all(agr_worker *w, struct agr__wow_notify_list *l)
{
	l->closing = true;
	for (struct agr__wow_notify *n = l->head; n; n = n->next)
		agr_io_cancel(w, n);
}

void agr__wow_notify_free_all(struct agr__wow_notify_list *l)
{
	l->closing = true;
	while (l->head) {
		atomic_fetch_add(l->failed, 1);
		notify_free(l->head);
	}
}
