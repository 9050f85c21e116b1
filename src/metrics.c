/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - dispatcher metrics in the Prometheus text exposition
 * format (0.0.4). Built on the public snapshot API only.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring/metrics.h>

/* A growing text; `len` counts what would have been written. */
struct out {
	char *buf;
	size_t cap;
	size_t len;
};

static void emit(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void emit(struct out *o, const char *fmt, ...)
{
	size_t room = o->len < o->cap ? o->cap - o->len : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

/* Label values escape backslash, double quote and newline. */
static void emit_escaped(struct out *o, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			emit(o, "\\%c", *s);
		else if (*s == '\n')
			emit(o, "\\n");
		else
			emit(o, "%c", *s);
	}
}

static void emit_labels(struct out *o, const agr_dispatcher_metrics *m)
{
	emit(o, "context=\"");
	emit_escaped(o, m->context);
	emit(o, "\",aggregate=\"");
	emit_escaped(o, m->aggregate);
	emit(o, "\",dispatcher=\"");
	emit_escaped(o, m->dispatcher);
	emit(o, "\"");
}

static void emit_header(struct out *o, const char *name, const char *type,
			const char *help)
{
	emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void emit_outcomes(struct out *o, const agr_dispatcher_metrics *ms,
			  size_t n)
{
	static const char *const names[] = { "admitted", "refused", "handled",
					     "failed",	 "skipped", "discarded" };
	uint64_t values[6];
	size_t i, k;

	emit_header(o, "aggring_messages_total", "counter",
		    "Messages by outcome.");
	for (i = 0; i < n; i++) {
		const agr_dispatcher_stats *s = &ms[i].messages;

		values[0] = s->admitted;
		values[1] = s->refused;
		values[2] = s->handled;
		values[3] = s->failed;
		values[4] = s->skipped;
		values[5] = s->discarded;
		for (k = 0; k < 6; k++) {
			emit(o, "aggring_messages_total{");
			emit_labels(o, &ms[i]);
			emit(o, ",outcome=\"%s\"} %llu\n", names[k],
			     (unsigned long long)values[k]);
		}
	}
}

static void emit_gauge(struct out *o, const agr_dispatcher_metrics *ms,
		       size_t n, const char *name, const char *help,
		       size_t offset)
{
	size_t i;

	emit_header(o, name, "gauge", help);
	for (i = 0; i < n; i++) {
		uint64_t v;

		if (!ms[i].depth_enabled)
			continue; /* not measured is not zero */
		memcpy(&v, (const char *)&ms[i] + offset, sizeof(v));
		emit(o, "%s{", name);
		emit_labels(o, &ms[i]);
		emit(o, "} %llu\n", (unsigned long long)v);
	}
}

/*
 * The fine buckets fold into powers of two from 1 us to about 69 s:
 * enough for Prometheus's histogram_quantile, and a short page.
 */
static void emit_histogram(struct out *o, const char *name,
			   const agr_dispatcher_metrics *m,
			   const agr_histogram *h)
{
	uint64_t cumulative = 0, le_ns = 1000;
	int b = 0;

	while (le_ns <= 70000000000ull) {
		for (; b < AGR_HISTOGRAM_BUCKETS &&
		       agr_histogram_bucket_upper(b) < le_ns; b++)
			cumulative += h->buckets[b];
		emit(o, "%s_bucket{", name);
		emit_labels(o, m);
		emit(o, ",le=\"%.9g\"} %llu\n", (double)le_ns / 1e9,
		     (unsigned long long)cumulative);
		le_ns *= 2;
	}
	emit(o, "%s_bucket{", name);
	emit_labels(o, m);
	emit(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
	emit(o, "%s_sum{", name);
	emit_labels(o, m);
	emit(o, "} %.9f\n", (double)h->sum_ns / 1e9);
	emit(o, "%s_count{", name);
	emit_labels(o, m);
	emit(o, "} %llu\n", (unsigned long long)h->count);
}

static void emit_latencies(struct out *o, const agr_dispatcher_metrics *ms,
			   size_t n)
{
	size_t i;

	emit_header(o, "aggring_queue_latency_seconds", "histogram",
		    "From send to the first function starting.");
	for (i = 0; i < n; i++)
		if (ms[i].latency_enabled)
			emit_histogram(o, "aggring_queue_latency_seconds",
				       &ms[i], &ms[i].queue_latency);
	emit_header(o, "aggring_processing_latency_seconds", "histogram",
		    "From the first function starting to completion.");
	for (i = 0; i < n; i++)
		if (ms[i].latency_enabled)
			emit_histogram(o, "aggring_processing_latency_seconds",
				       &ms[i], &ms[i].processing_latency);
}

static int render(agr_dispatcher *const *ds, size_t n, struct out *o)
{
	agr_dispatcher_metrics *ms;
	size_t i;
	int ret = 0;

	if (n && !ds)
		return -EINVAL;
	ms = calloc(n ? n : 1, sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++)
		ret = agr_dispatcher_metrics_get(ds[i], &ms[i]);
	if (!ret) {
		emit_outcomes(o, ms, n);
		emit_gauge(o, ms, n, "aggring_queue_depth",
			   "Messages admitted and not yet completed.",
			   offsetof(agr_dispatcher_metrics, queue_depth));
		emit_gauge(o, ms, n, "aggring_deepest_group_depth",
			   "Depth of the deepest group.",
			   offsetof(agr_dispatcher_metrics,
				    deepest_group_depth));
		emit_latencies(o, ms, n);
	}
	free(ms);
	return ret;
}

AGR_API int agr_metrics_write_prometheus(agr_dispatcher *const *ds, size_t n,
					 char *buf, size_t cap)
{
	struct out o = { .buf = buf, .cap = buf ? cap : 0 };
	int ret = render(ds, n, &o);

	if (ret)
		return ret;
	if (o.len > (size_t)INT32_MAX)
		return -EOVERFLOW;
	return (int)o.len;
}

static int write_all(int fd, const char *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

AGR_API int agr_metrics_write_prometheus_fd(agr_dispatcher *const *ds,
					    size_t n, int fd)
{
	int len = agr_metrics_write_prometheus(ds, n, NULL, 0);
	char *buf = NULL;
	int ret = len;

	/* Counters may grow a digit between sizing and rendering. */
	while (ret >= 0) {
		free(buf);
		buf = malloc((size_t)len + 1);
		if (!buf)
			return -ENOMEM;
		ret = agr_metrics_write_prometheus(ds, n, buf, (size_t)len + 1);
		if (ret <= len)
			break;
		len = ret;
	}
	if (ret >= 0)
		ret = write_all(fd, buf, (size_t)ret);
	free(buf);
	return ret;
}
