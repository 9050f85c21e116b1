/* SPDX-License-Identifier: MIT */
/*
 * aggring/watchdog.h - the blocking detector: a thread that names the
 * handlers and tasks that hold their worker too long.
 */
#ifndef AGGRING_WATCHDOG_H
#define AGGRING_WATCHDOG_H

#include <stdint.h>

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Blocking detector: a watchdog thread that reports, through the log
 * hook and the workers' blocking_detected counters (see
 * agr_scheduler_worker_metrics), every handler or task that has held
 * its worker longer than `threshold_ns` (0: the default, 100 ms),
 * naming the dispatcher, group and message type. Each run is reported
 * once. Applies to every worker of the process. Called while the
 * watchdog runs, it only sets the new threshold.
 * Returns 0, or -EAGAIN when no thread could be made.
 */
AGR_API int agr_watchdog_start(uint64_t threshold_ns);
/* Stops the watchdog and joins its thread; no-op if not running. */
AGR_API void agr_watchdog_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WATCHDOG_H */
