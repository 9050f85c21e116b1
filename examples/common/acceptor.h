/* SPDX-License-Identifier: MIT */
/*
 * acceptor.h - accepting connections on a worker's ring, shared by the
 * example servers: a multishot accept (a single accept re-armed after
 * each connection on kernels before 5.19), a short back-off when the
 * process is out of descriptors, and a stop that cancels it.
 *
 * The acceptor lives on one worker: every accept and every call of its
 * take function run there. From start until it has closed its socket it
 * counts one in the server's drain (drain.h), so a stop can wait until
 * no accept is in flight.
 */
#ifndef EXAMPLES_ACCEPTOR_H
#define EXAMPLES_ACCEPTOR_H

#include <aggring.h>

#include "drain.h"

struct acceptor;

/* A new connection, on the acceptor's worker; fd is take's to close. */
typedef void acceptor_take_fn(void *arg, int fd);

/*
 * Starts accepting on the listening socket `fd` on `worker` of `sched`,
 * and takes the socket (closed once the acceptor stops). Returns 0 and
 * the acceptor in *out, or a negative errno from agr_scheduler_schedule
 * (then fd is still the caller's and nothing was counted in `drain`).
 */
int acceptor_start(agr_scheduler *sched, unsigned worker, int fd,
		   acceptor_take_fn *take, void *arg, struct drain *drain,
		   struct acceptor **out);

/*
 * Any thread: take no more connections (one accepted meanwhile is
 * closed), cancel the accept, close the socket, leave the drain.
 */
void acceptor_stop(struct acceptor *a);

/* Once it has left the drain, or once the workers have ended. */
void acceptor_free(struct acceptor *a);

#endif /* EXAMPLES_ACCEPTOR_H */
