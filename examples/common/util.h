/* SPDX-License-Identifier: MIT */
/*
 * util.h - what every example program needs: its name in messages,
 * giving up with a message, allocation that cannot fail, and the
 * monotonic clock with deadlines on it.
 *
 * The examples are programs, not libraries: where the library returns
 * a negative errno, they say what went wrong and exit.
 */
#ifndef EXAMPLES_UTIL_H
#define EXAMPLES_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* The struct of type `type` whose `member` is at ptr. */
#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Names the program in every message below ("ledger_server: ..."). */
void util_set_program(const char *name);
const char *util_program(void);

/* "PROGRAM: message" on stderr, then exit(1). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
					      noreturn));
/* "PROGRAM: what: strerror(err)", err positive or negative, exit(1). */
void die_errno(const char *what, int err) __attribute__((noreturn));
/* "PROGRAM: message" on stderr; goes on. */
void warnf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Memory runs out: like redis, give up rather than limp on. */
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);

/* CLOCK_MONOTONIC in ns, and deadlines on it. */
uint64_t now_ns(void);
uint64_t deadline_after(double seconds);
uint64_t left_until(uint64_t deadline); /* 0 once it has passed */

/*
 * A server's signals: SIGPIPE ignored (a peer that left shows as a
 * send's EPIPE), and SIGINT and SIGTERM blocked in the calling thread,
 * so in every thread it creates afterwards: main() takes them with
 * sigwait(set).
 */
void block_stop_signals(sigset_t *set);

#endif /* EXAMPLES_UTIL_H */
