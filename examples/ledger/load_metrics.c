/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "load_metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "net.h"
#include "util.h"

#define METRICS_MAX (4 << 20) /* the largest page accepted */
#define LE_MAX 64	      /* histogram buckets kept */
#define METRICS_TIMEOUT_S 10

/* Only the ledger's dispatcher counts; other series are skipped. */
#define METRICS_LABELS "dispatcher=\"ledger\""

/* A Prometheus histogram: cumulative counts by upper bound (le). */
struct histo {
	double le[LE_MAX]; /* seconds, ascending; the last one +Inf */
	uint64_t cum[LE_MAX];
	int n;
};

struct server_metrics {
	struct histo queue, processing;
	uint64_t handled, failed;
	bool counters; /* the outcome counters were found */
};

/*
 * GET http://127.0.0.1:port/path with a plain blocking socket, bounded
 * by timeouts. Returns the whole response, NUL-terminated, or NULL
 * with errno set.
 */
static char *http_get(int port, const char *path)
{
	struct buf b = { 0 };
	char req[160];
	int fd = net_connect(port, METRICS_TIMEOUT_S), n, err;
	ssize_t got;

	if (fd < 0) {
		errno = fd == -EAGAIN ? ETIMEDOUT : -fd;
		return NULL;
	}
	n = snprintf(req, sizeof(req),
		     "GET %.100s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		goto fail;
	for (;;) {
		buf_reserve(&b, 16384, 4096);
		got = read(fd, b.p + b.len, b.cap - b.len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			goto fail;
		if (got == 0)
			break;
		b.len += (size_t)got;
		if (b.len > METRICS_MAX) {
			errno = EFBIG;
			goto fail;
		}
	}
	close(fd);
	b.p[b.len] = '\0';
	return b.p;
fail:
	err = errno == EAGAIN ? ETIMEDOUT : errno; /* SO_RCVTIMEO's mark */
	close(fd);
	free(b.p);
	errno = err;
	return NULL;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void histo_add(struct histo *h, const char *line, uint64_t v)
{
	const char *le = strstr(line, "le=\"");

	if (!le || h->n == LE_MAX)
		return;
	le += 4;
	h->le[h->n] = starts_with(le, "+Inf") ? HUGE_VAL : strtod(le, NULL);
	h->cum[h->n++] = v;
}

/* One line of the page; anything it does not need is ignored. */
static void parse_metric(struct server_metrics *m, const char *line)
{
	const char *sp = strrchr(line, ' ');
	uint64_t v;

	if (line[0] == '#' || !sp || !strstr(line, METRICS_LABELS))
		return;
	v = strtoull(sp + 1, NULL, 10);
	if (starts_with(line, "aggring_queue_latency_seconds_bucket{")) {
		histo_add(&m->queue, line, v);
	} else if (starts_with(line,
			       "aggring_processing_latency_seconds_bucket{")) {
		histo_add(&m->processing, line, v);
	} else if (starts_with(line, "aggring_messages_total{")) {
		if (strstr(line, "outcome=\"handled\"")) {
			m->handled = v;
			m->counters = true;
		} else if (strstr(line, "outcome=\"failed\"")) {
			m->failed = v;
		}
	}
}

/*
 * The q quantile (0 < q <= 1), in ms: the upper bound of the first
 * bucket whose cumulative count reaches q of all. The buckets double,
 * so this overstates by up to 2x; NAN without samples.
 */
static double histo_quantile_ms(const struct histo *h, double q)
{
	double count = h->n ? (double)h->cum[h->n - 1] : 0.0;
	int i;

	for (i = 0; count > 0 && i < h->n; i++)
		if ((double)h->cum[i] >= q * count)
			return h->le[i] * 1e3;
	return (double)NAN;
}

/* Fetches and prints the server's queue vs processing latency. */
int report_server(int port)
{
	struct server_metrics m = { 0 };
	char *page = http_get(port, "/metrics"), *body, *line, *save;

	if (!page) {
		warnf("GET /metrics on port %d: %s", port, strerror(errno));
		return 1;
	}
	body = strstr(page, "\r\n\r\n");
	if (!starts_with(page, "HTTP/1.1 200 ") || !body) {
		warnf("GET /metrics: %.*s", (int)strcspn(page, "\r\n"), page);
		free(page);
		return 1;
	}
	for (line = strtok_r(body, "\r\n", &save); line;
	     line = strtok_r(NULL, "\r\n", &save))
		parse_metric(&m, line);
	free(page);
	if (!m.counters) {
		warnf("/metrics has no %s series", METRICS_LABELS);
		return 1;
	}
	printf("ledger_load: server: %" PRIu64 " messages handled, %" PRIu64
	       " failed (since it started)\n", m.handled, m.failed);
	printf("ledger_load: server queue latency p50 %.3f ms, p99 %.3f ms; "
	       "processing latency p50 %.3f ms, p99 %.3f ms (bucket upper "
	       "bounds)\n", histo_quantile_ms(&m.queue, 0.50),
	       histo_quantile_ms(&m.queue, 0.99),
	       histo_quantile_ms(&m.processing, 0.50),
	       histo_quantile_ms(&m.processing, 0.99));
	return 0;
}
