/* SPDX-License-Identifier: MIT */
/*
 * wait.h - how a worker sleeps until its ring has completions
 * (internal).
 *
 * Normally in io_uring_enter() with min_complete = 1. Valgrind (3.19 and
 * older at least) does not know that io_uring_enter() may block: the
 * sleeping thread keeps Valgrind's big lock, no other thread runs, and
 * the completion that would wake it never comes. Under Valgrind, or with
 * AGR_WAIT_MODE=eventfd, a worker instead registers an eventfd with its
 * ring, sleeps in poll(2) on it (a call Valgrind knows blocks) and then
 * reaps with a non-blocking enter.
 */
#ifndef AGR_WAIT_H
#define AGR_WAIT_H

#include "internal.h"

#include <liburing.h>

#include <aggring/wait.h>

/*
 * Submits what is prepared and sleeps until at least one completion is
 * ready, or a spurious wake-up (callers loop). Returns as
 * io_uring_submit_and_wait(): >= 0, or a negative errno. Call only on
 * the thread that owns `ring`.
 */
int agr__ring_wait(struct io_uring *ring);

/*
 * How the calling worker waits from now on: AGR_WAIT_DEFAULT follows
 * AGR_WAIT_MODE (and Valgrind), the others force enter or eventfd.
 */
void agr__ring_wait_set_mode(agr_wait_mode mode);

/* Releases the calling thread's wait state; call before it exits. */
void agr__ring_wait_exit(void);

#endif /* AGR_WAIT_H */
