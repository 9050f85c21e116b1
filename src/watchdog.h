/* SPDX-License-Identifier: MIT */
/*
 * watchdog.h - suppliers with a watchdog of their own (internal; the
 * process-wide switch is agr_watchdog_start/stop in aggring/watchdog.h).
 *
 * The one watchdog thread runs while the process-wide switch is on or
 * some supplier retains it, and watches each scheduler with its
 * supplier's threshold, else the process-wide one, else not at all.
 */
#ifndef AGR_WATCHDOG_H
#define AGR_WATCHDOG_H

#include <stdint.h>

/*
 * A supplier whose workers are watched with `threshold_ns` (> 0):
 * starts the thread if needed. 0, or the error of pthread_create.
 */
int agr__watchdog_retain(uint64_t threshold_ns);

/* That supplier is gone; the thread stops when nobody needs it. */
void agr__watchdog_release(void);

#endif /* AGR_WATCHDOG_H */
