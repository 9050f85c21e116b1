/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - dispatcher and worker metrics in the Prometheus text
 * exposition format (0.0.4). Built on the public snapshot API only.
 */
#include "internal.h"

#include <aggring/dispatcher.h> /* agr_dispatcher_scheduler */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aggring/metrics.h>

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

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

/* `ns` as seconds, exactly: every digit of the nanoseconds is kept. */
static void emit_seconds(struct out *o, uint64_t ns)
{
	char frac[10];
	int len;

	len = snprintf(frac, sizeof(frac), "%09llu",
		       (unsigned long long)(ns % 1000000000u));
	while (len > 1 && frac[len - 1] == '0')
		frac[--len] = '\0';
	emit(o, "%llu.%s", (unsigned long long)(ns / 1000000000u), frac);
}

/* One counter family of a dispatcher's stats, by one label. */
struct stat_family {
	const char *name, *help, *label;
	const char *values[5];
	size_t offsets[5];
};

#define STAT(field) offsetof(agr_dispatcher_stats, field)

/* Intake and outcome apart, so that a sum() of either counts once. */
static const struct stat_family stat_families[] = {
	{ "aggring_sends_total",
	  "Messages given to a send, by whether it admitted them.",
	  "result",
	  { "admitted", "refused" },
	  { STAT(admitted), STAT(refused) } },
	{ "aggring_messages_total",
	  "Admitted messages completed, by outcome.",
	  "outcome",
	  { "handled", "failed", "skipped", "discarded", "interrupted" },
	  { STAT(handled), STAT(failed), STAT(skipped), STAT(discarded),
	    STAT(interrupted) } },
	{ "aggring_stuck_messages_total",
	  "Messages found pending longer than the watchdog's threshold.",
	  NULL, /* one series per dispatcher, no further label */
	  { "" },
	  { STAT(stuck) } },
};

static void emit_stat_family(struct out *o, const struct stat_family *f,
			     const agr_dispatcher_metrics *ms, size_t n)
{
	size_t i, k;
	uint64_t v;

	emit_header(o, f->name, "counter", f->help);
	for (i = 0; i < n; i++) {
		for (k = 0; k < COUNT_OF(f->values) && f->values[k]; k++) {
			memcpy(&v, (const char *)&ms[i].messages +
				       f->offsets[k], sizeof(v));
			emit(o, "%s{", f->name);
			emit_labels(o, &ms[i]);
			if (f->label)
				emit(o, ",%s=\"%s\"", f->label,
				     f->values[k]);
			emit(o, "} %llu\n", (unsigned long long)v);
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
 * Bounds: the ends of the fine buckets at powers of two, 2^k - 1 ns
 * for k = 7 .. 36 (127 ns to 68.7 s). Each is a real bucket end, so
 * le="B" counts exactly the observations <= B; a short page is enough
 * for histogram_quantile.
 */
#define LE_FIRST_SHIFT 7
#define LE_LAST_SHIFT 36

static void emit_histogram(struct out *o, const char *name,
			   const agr_dispatcher_metrics *m,
			   const agr_histogram *h)
{
	uint64_t cumulative = 0, le_ns;
	int b = 0, k;

	for (k = LE_FIRST_SHIFT; k <= LE_LAST_SHIFT; k++) {
		le_ns = (1ull << k) - 1;
		for (; b < AGR_HISTOGRAM_BUCKETS &&
		       agr_histogram_bucket_upper(b) <= le_ns; b++)
			cumulative += h->buckets[b];
		emit(o, "%s_bucket{", name);
		emit_labels(o, m);
		emit(o, ",le=\"");
		emit_seconds(o, le_ns);
		emit(o, "\"} %llu\n", (unsigned long long)cumulative);
	}
	emit(o, "%s_bucket{", name);
	emit_labels(o, m);
	emit(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
	emit(o, "%s_sum{", name);
	emit_labels(o, m);
	emit(o, "} ");
	emit_seconds(o, h->sum_ns);
	emit(o, "\n%s_count{", name);
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

/* ---- the workers of each scheduler met, each scheduler once ---- */

struct sched_figures {
	agr_scheduler *sched;
	const agr_dispatcher_metrics *named; /* its first dispatcher */
	int nworkers;
	agr_worker_metrics *workers;
};

enum worker_unit { W_COUNT, W_SECONDS, W_GAUGE };

struct worker_family {
	const char *name, *help;
	enum worker_unit unit;
	size_t offset; /* of a uint64_t, or of the int for W_GAUGE */
};

#define WM(field) offsetof(agr_worker_metrics, field)

static const struct worker_family worker_families[] = {
	{ "aggring_worker_iterations_total", "Turns of the event loop.",
	  W_COUNT, WM(iterations) },
	{ "aggring_worker_doorbells_total",
	  "MSG_RING wake-up completions.", W_COUNT, WM(doorbells) },
	{ "aggring_worker_items_total", "Tasks and group activations run.",
	  W_COUNT, WM(items) },
	{ "aggring_worker_io_completions_total",
	  "Completions of agr_io_* operations.", W_COUNT,
	  WM(io_completions) },
	{ "aggring_worker_sleep_seconds_total",
	  "Time asleep in io_uring_submit_and_wait.", W_SECONDS,
	  WM(blocked_ns) },
	{ "aggring_worker_running_seconds_total",
	  "Time in the loop and not asleep.", W_SECONDS, WM(running_ns) },
	{ "aggring_worker_sq_full_total",
	  "Times the SQ was full and was flushed.", W_COUNT, WM(sq_full) },
	{ "aggring_worker_cq_overflows_total",
	  "CQ overflows seen (the kernel kept the CQEs).", W_COUNT,
	  WM(cq_overflow) },
	{ "aggring_worker_early_submits_total",
	  "Submits before the end of a turn, of a batch of prepared SQEs.",
	  W_COUNT, WM(early_submits) },
	{ "aggring_worker_blocking_detected_total",
	  "Handlers and tasks the watchdog saw over its threshold.", W_COUNT,
	  WM(blocking_detected) },
	{ "aggring_worker_inflight_operations",
	  "Operations in the kernel now.", W_GAUGE, WM(inflight) },
};

static void emit_worker_labels(struct out *o, const struct sched_figures *f,
			       int index)
{
	emit(o, "context=\"");
	emit_escaped(o, f->named->context);
	emit(o, "\",aggregate=\"");
	emit_escaped(o, f->named->aggregate);
	emit(o, "\",scheduler=\"");
	emit_escaped(o, agr_scheduler_name(f->sched));
	emit(o, "\",worker=\"%d\"", index);
}

static void emit_worker_value(struct out *o, const struct worker_family *wf,
			      const agr_worker_metrics *w)
{
	const char *field = (const char *)w + wf->offset;
	uint64_t v;
	int gauge;

	if (wf->unit == W_GAUGE) {
		memcpy(&gauge, field, sizeof(gauge));
		emit(o, "%d", gauge);
		return;
	}
	memcpy(&v, field, sizeof(v));
	if (wf->unit == W_SECONDS)
		emit_seconds(o, v);
	else
		emit(o, "%llu", (unsigned long long)v);
}

static void emit_workers(struct out *o, const struct sched_figures *fs,
			 size_t nfs)
{
	const struct worker_family *wf;
	size_t k, i;
	int w;

	for (k = 0; k < COUNT_OF(worker_families); k++) {
		wf = &worker_families[k];
		emit_header(o, wf->name, wf->unit == W_GAUGE ? "gauge" :
			    "counter", wf->help);
		for (i = 0; i < nfs; i++) {
			for (w = 0; w < fs[i].nworkers; w++) {
				emit(o, "%s{", wf->name);
				emit_worker_labels(o, &fs[i], w);
				emit(o, "} ");
				emit_worker_value(o, wf, &fs[i].workers[w]);
				emit(o, "\n");
			}
		}
	}
}

/* Snapshots the workers of `s` into a new entry of fs, unless known. */
static int add_scheduler(struct sched_figures *fs, size_t *nfs,
			 agr_scheduler *s, const agr_dispatcher_metrics *m)
{
	struct sched_figures *f;
	int w, n, ret = 0;
	size_t i;

	for (i = 0; i < *nfs; i++)
		if (fs[i].sched == s)
			return 0;
	n = agr_scheduler_parallelism(s);
	if (n < 0)
		return n;
	f = &fs[*nfs];
	f->workers = calloc(n ? (size_t)n : 1, sizeof(*f->workers));
	if (!f->workers)
		return -ENOMEM;
	f->sched = s;
	f->named = m;
	f->nworkers = n;
	(*nfs)++;
	for (w = 0; w < n && !ret; w++)
		ret = agr_scheduler_worker_metrics(s, w, &f->workers[w]);
	return ret;
}

/* Every figure, taken before the first line is written. */
static int snapshot(agr_dispatcher *const *ds, size_t n,
		    agr_dispatcher_metrics *ms, struct sched_figures *fs,
		    size_t *nfs)
{
	agr_scheduler *s;
	size_t i;
	int ret = 0;

	for (i = 0; i < n && !ret; i++) {
		if (!ds[i]) {
			agr__log(AGR_LOG_ERROR, "agr_metrics_write_prometheus: "
				 "ds[%zu] is NULL", i);
			return -EINVAL;
		}
		ret = agr_dispatcher_metrics_get(ds[i], &ms[i]);
		s = ret ? NULL : agr_dispatcher_scheduler(ds[i]);
		if (s)
			ret = add_scheduler(fs, nfs, s, &ms[i]);
	}
	return ret;
}

static int render(agr_dispatcher *const *ds, size_t n, struct out *o)
{
	agr_dispatcher_metrics *ms;
	struct sched_figures *fs;
	size_t i, nfs = 0;
	int ret;

	if (n && !ds) {
		agr__log(AGR_LOG_ERROR, "agr_metrics_write_prometheus: ds is "
			 "NULL and n is %zu", n);
		return -EINVAL;
	}
	ms = calloc(n ? n : 1, sizeof(*ms));
	fs = calloc(n ? n : 1, sizeof(*fs));
	ret = ms && fs ? snapshot(ds, n, ms, fs, &nfs) : -ENOMEM;
	if (!ret) {
		for (i = 0; i < COUNT_OF(stat_families); i++)
			emit_stat_family(o, &stat_families[i], ms, n);
		emit_gauge(o, ms, n, "aggring_queue_depth",
			   "Messages admitted and not yet completed.",
			   offsetof(agr_dispatcher_metrics, queue_depth));
		emit_gauge(o, ms, n, "aggring_deepest_group_depth",
			   "Depth of the deepest group.",
			   offsetof(agr_dispatcher_metrics,
				    deepest_group_depth));
		emit_latencies(o, ms, n);
		emit_workers(o, fs, nfs);
	}
	for (i = 0; i < nfs; i++)
		free(fs[i].workers);
	free(fs);
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
