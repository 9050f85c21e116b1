/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - latches, clocks and the io_uring availability probe
 * shared by the test programs.
 */
#ifndef AGR_TESTUTIL_H
#define AGR_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* Automake's exit status for a skipped test. */
#define TU_SKIP 77

/* Generous: these run on loaded 2-core machines and under sanitizers. */
#define TU_LONG_NS (30ull * 1000000000ull)

/*
 * Exits with 77 (SKIP) and says why when this process cannot create an
 * io_uring ring (seccomp, kernel.io_uring_disabled, old kernel).
 */
void tu_require_io_uring(void);

/* Runs `s` and returns the process exit status (0 when all passed). */
int tu_run(Suite *s);

uint64_t tu_now_ns(void);

/*
 * Polls the integer expression `what` until it is `want`, for up to
 * TU_LONG_NS, then asserts that it is: for a state only another
 * process (a server) can be asked about, with nothing to wait on.
 */
#define TU_WAIT_EQ(what, want)                                            \
	do {                                                              \
		uint64_t dl_ = tu_now_ns() + TU_LONG_NS;                  \
		long long v_;                                             \
		while ((v_ = (what)) != (want) && tu_now_ns() < dl_)      \
			usleep(10000);                                    \
		ck_assert_int_eq(v_, (want));                             \
	} while (0)

/*
 * Checks made on worker threads: a failed ck_assert there would end the
 * test child abruptly, so workers record with TU_EXPECT and the test
 * thread asserts with tu_assert_no_worker_failure().
 */
#define TU_EXPECT(cond) tu_expect_at((cond), __LINE__)
void tu_expect_at(bool ok, int line);
void tu_assert_no_worker_failure(void);
/* For a checked fixture: with CK_FORK=no each test starts clean too. */
void tu_reset_worker_failures(void);

/* Initialises `cond` on CLOCK_MONOTONIC, the clock of tu_now_ns(). */
void tu_cond_init_monotonic(pthread_cond_t *cond);
/* The tu_now_ns() time `timeout_ns` from now, for such a condition. */
struct timespec tu_deadline_after(uint64_t timeout_ns);

/* A count-down latch. */
struct tu_latch {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int count;
};

void tu_latch_init(struct tu_latch *l, int count);
void tu_latch_destroy(struct tu_latch *l);
void tu_latch_count_down(struct tu_latch *l);
/* True when the count reached zero before `timeout_ns` passed. */
bool tu_latch_wait(struct tu_latch *l, uint64_t timeout_ns);
int tu_latch_count(struct tu_latch *l);

/* A count that goes up and can be waited on (completions, say). */
struct tu_tally {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	long n;
};

void tu_tally_init(struct tu_tally *t);
void tu_tally_destroy(struct tu_tally *t);
void tu_tally_add(struct tu_tally *t);
long tu_tally_value(struct tu_tally *t);
/* True when the count reached `n` before `timeout_ns` passed. */
bool tu_tally_wait(struct tu_tally *t, long n, uint64_t timeout_ns);

#endif /* AGR_TESTUTIL_H */
