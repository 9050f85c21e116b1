/* SPDX-License-Identifier: MIT */
/*
 * aggring/metrics.h - what to observe before tuning: queueing and
 * processing latency per named aggregate, intake and outcome counters,
 * queue depth, and their Prometheus exposition. It includes the
 * headers that declare the figures: a dispatcher's
 * (agr_dispatcher_metrics_get, aggring/dispatcher.h), a worker's
 * (agr_scheduler_worker_metrics, aggring/scheduler.h), the histogram
 * (aggring/histogram.h) and the detector of handlers that block their
 * worker (aggring/watchdog.h).
 *
 * Recording is lock-free and allocation-free on the workers. Dispatcher
 * latency histograms are off unless agr_dispatcher_options.metrics is
 * set (two clock reads per message); counters and worker figures are
 * always kept. Aggregate ids and group keys are never labels.
 */
#ifndef AGGRING_METRICS_H
#define AGGRING_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/dispatcher.h>
#include <aggring/histogram.h>
#include <aggring/scheduler.h>
#include <aggring/watchdog.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Writes the metrics of dispatchers ds[0..n) and of their schedulers'
 * workers in the Prometheus text exposition format (version 0.0.4).
 * Any thread may call it while the dispatchers are not freed. Units are
 * seconds; counters end in _total. Families, and their labels beyond
 * context and aggregate (the named aggregate):
 *
 * per dispatcher (label dispatcher):
 *   aggring_sends_total{result}: counter of the messages given to a
 *     send, result "admitted" (it returned 0) or "refused" (-ESHUTDOWN,
 *     -EAGAIN);
 *   aggring_messages_total{outcome}: counter of the admitted messages
 *     completed, outcome "handled", "failed", "skipped", "discarded"
 *     or "interrupted" (see agr_dispatcher_stats); admitted minus their
 *     sum is in flight;
 *   aggring_queue_depth, aggring_deepest_group_depth: gauges, messages;
 *   aggring_queue_latency_seconds: histogram, send to first function;
 *   aggring_processing_latency_seconds: histogram, first function to
 *     completion.
 * per worker of each scheduler met, once however many dispatchers share
 * it (labels scheduler, its name, and worker, its index; the fields of
 * agr_worker_metrics):
 *   counters aggring_worker_iterations_total, _doorbells_total,
 *     _items_total, _io_completions_total, _sq_full_total,
 *     _cq_overflows_total, _early_submits_total, _blocking_detected_total,
 *     _sleep_seconds_total (blocked_ns), _running_seconds_total;
 *   gauge aggring_worker_inflight_operations.
 *
 * Queue depth and latency series appear only for dispatchers that
 * measure them. A histogram bucket le="B" counts exactly the
 * observations <= B: the bounds are bucket ends of agr_histogram,
 * 2^k - 1 ns for k = 7 .. 36 (127 ns to about 69 s), written exactly.
 *
 * Like snprintf: writes at most `cap` bytes (NUL-terminated when
 * cap > 0) and returns the length the whole text needs, or -EINVAL
 * (NULL `ds` with n > 0, a NULL dispatcher), -ENOMEM, -EOVERFLOW.
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
