/* SPDX-License-Identifier: MIT */
/*
 * drain.h - what a server's stop waits for: a count of the things that
 * may still have a socket operation in flight on a ring (a listening
 * acceptor, an open connection). A worker told to stop while such an
 * operation is in flight does not wait for it in the kernel (aggring
 * 0.1), so a stop first lets the count reach zero.
 *
 * Fields are drain.c's; embed the struct and use the functions.
 */
#ifndef EXAMPLES_DRAIN_H
#define EXAMPLES_DRAIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct drain {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* live reached 0 */
	long live;
};

void drain_init(struct drain *d);
void drain_destroy(struct drain *d);

/* One more, one fewer; any thread. */
void drain_add(struct drain *d);
void drain_done(struct drain *d);

/* Waits at most timeout_ns for the count to reach 0; true if it did. */
bool drain_wait(struct drain *d, uint64_t timeout_ns);

#endif /* EXAMPLES_DRAIN_H */
