/* SPDX-License-Identifier: MIT */
/*
 * aggring/metrics.h - what to observe before tuning: queueing and
 * processing latency per named aggregate, outcome counters, queue
 * depth, per-worker loop figures, and a detector of handlers that block
 * their worker.
 *
 * Recording is lock-free and allocation-free on the workers. Dispatcher
 * latency histograms are off unless agr_dispatcher_options.metrics is
 * set (two clock reads per message); counters and worker figures are
 * always kept. Aggregate ids and group keys are never labels.
 */
#ifndef AGGRING_METRICS_H
#define AGGRING_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/dispatcher.h>
#include <aggring/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Log-bucketed latency histogram in nanoseconds (HDR-style: 8 linear
 * sub-buckets per power of two, so a bucket's width is at most 1/8 of
 * its value). Values of about 2.3 hours and more share the last bucket.
 */
#define AGR_HISTOGRAM_BUCKETS 328

typedef struct agr_histogram {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t buckets[AGR_HISTOGRAM_BUCKETS];
} agr_histogram;

/* Index of the bucket that counts `ns`. */
AGR_API int agr_histogram_bucket_of(uint64_t ns);
/* Largest value counted by bucket `i`; 0 if `i` is out of range. */
AGR_API uint64_t agr_histogram_bucket_upper(int i);
/*
 * The value at percentile `p` (0 < p <= 100): the upper bound of the
 * bucket holding it, never more than max_ns. 0 for an empty histogram.
 */
AGR_API uint64_t agr_histogram_percentile(const agr_histogram *h, double p);
/* Adds `from` into `into`. */
AGR_API void agr_histogram_merge(agr_histogram *into,
				 const agr_histogram *from);

/* One dispatcher's figures. Strings stay valid while the dispatcher. */
typedef struct agr_dispatcher_metrics {
	const char *dispatcher;
	const char *context;
	const char *aggregate;
	agr_dispatcher_stats messages;
	bool depth_enabled;	  /* metrics or a queue limit: else 0 */
	uint64_t queue_depth;	  /* admitted, not yet completed */
	uint64_t deepest_group_depth;
	int deepest_group;	  /* -1 when every group is empty */
	bool latency_enabled;
	agr_histogram queue_latency;	  /* send -> first function starts */
	agr_histogram processing_latency; /* start -> completion */
} agr_dispatcher_metrics;

/*
 * Snapshot of `d`. Queue depth is counted only when latency metrics or
 * a queue limit are on (otherwise 0). Returns 0 or -EINVAL. From any
 * thread while `d` exists, without a lock, as the workers record: each
 * figure is read atomically, not all at one instant.
 */
AGR_API int agr_dispatcher_metrics_get(const agr_dispatcher *d,
				       agr_dispatcher_metrics *out);

/* One worker's loop. */
typedef struct agr_worker_metrics {
	uint64_t iterations;	  /* turns of the event loop */
	uint64_t doorbells;	  /* MSG_RING wake-up completions */
	uint64_t items;		  /* tasks and group activations run */
	uint64_t io_completions;  /* CQEs of agr_io_* operations */
	uint64_t blocked_ns;	  /* asleep in io_uring_submit_and_wait */
	uint64_t running_ns;	  /* the rest of the loop's life */
	uint64_t sq_full;	  /* SQ found full, flushed and retried */
	uint64_t cq_overflow;	  /* CQ overflow seen (kernel kept CQEs) */
	uint64_t early_submits;	  /* submits before the turn ended, each
				   * of AGR_SUBMIT_BATCH prepared SQEs */
	uint64_t blocking_detected; /* handlers over the threshold */
	int inflight;		  /* operations in the kernel now */
} agr_worker_metrics;

/*
 * Snapshot of worker `index` of `s`. Returns 0 or -EINVAL. From any
 * thread until the supplier is freed, without a lock.
 */
AGR_API int agr_scheduler_worker_metrics(agr_scheduler *s, int index,
					 agr_worker_metrics *out);

/*
 * Blocking detector: a watchdog thread that reports, through the log
 * hook and the workers' blocking_detected counters, every handler or
 * task that has held its worker longer than `threshold_ns` (0: the
 * default, 100 ms), naming the dispatcher, group and message type.
 * Each run is reported once. Applies to every worker of the process.
 * Returns 0 or the error of creating the thread (-EAGAIN); while it
 * runs, a call only sets the threshold.
 */
AGR_API int agr_watchdog_start(uint64_t threshold_ns);
/* Stops the watchdog and joins its thread; no-op if not running. */
AGR_API void agr_watchdog_stop(void);

/*
 * Writes the metrics of dispatchers ds[0..n) in the Prometheus text
 * exposition format (version 0.0.4) with labels context, aggregate,
 * dispatcher and, for counters, outcome. Queue depth and latency series
 * appear only for dispatchers that measure them. Like snprintf: writes at most
 * `cap` bytes (NUL-terminated when cap > 0) and returns the length the
 * whole text needs, or -EINVAL, -ENOMEM, -EOVERFLOW (over INT32_MAX).
 */
AGR_API int agr_metrics_write_prometheus(agr_dispatcher *const *ds, size_t n,
					 char *buf, size_t cap);

/*
 * The same text, rendered in memory and then written to `fd` with
 * write(2) until all of it is: it blocks as long as a blocking `fd`
 * does, so not on a worker (render and agr_io_send() there). Returns 0
 * or a negative errno (those above, or write(2)'s: -EAGAIN for a full
 * non-blocking fd, after part of the text).
 */
AGR_API int agr_metrics_write_prometheus_fd(agr_dispatcher *const *ds,
					    size_t n, int fd);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_METRICS_H */
