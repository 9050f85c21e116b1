/* SPDX-License-Identifier: MIT */
/*
 * aggring/wait.h - how an idle worker sleeps: agr_wait_mode, of
 * agr_supplier_options.wait_mode. Apart from aggring/worker.h, which
 * includes it, so that the code that puts a worker to sleep needs
 * nothing above it.
 */
#ifndef AGGRING_WAIT_H
#define AGGRING_WAIT_H

#ifdef __cplusplus
extern "C" {
#endif

/* How an idle worker sleeps (agr_supplier_options.wait_mode). */
typedef enum agr_wait_mode {
	AGR_WAIT_DEFAULT = 0, /* AGR_WAIT_MODE, else enter (eventfd under
			       * Valgrind) */
	AGR_WAIT_ENTER = 1,   /* in io_uring_enter() */
	AGR_WAIT_EVENTFD = 2, /* in poll(2) on an eventfd of the ring */
} agr_wait_mode;

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WAIT_H */
