/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - latches, clocks, recorders (a journal of steps, a book of
 * log lines) and the io_uring availability probe shared by the test
 * programs.
 */
#ifndef AGR_TESTUTIL_H
#define AGR_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h> /* agr_log_level, agr_exchange */

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

/*
 * A call that may block (a free, a stop) made on a thread of its own,
 * so that the test can watch what it logs and whether it returned.
 */
struct tu_aside {
	pthread_t thread;
	void (*fn)(void *);
	void *arg;
	struct tu_latch returned;
};

void tu_aside_start(struct tu_aside *a, void (*fn)(void *), void *arg);
/* True once fn has returned, waiting up to `timeout_ns` (0: a look). */
bool tu_aside_wait(struct tu_aside *a, uint64_t timeout_ns);
/* Joins the thread: fn must return. */
void tu_aside_join(struct tu_aside *a);

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

/* A task (agr_task_fn) that counts down the struct tu_latch `latch`. */
void tu_count_down(void *latch);

/* A journal of steps ("start:domain", say), recorded from any thread. */
#define TU_JOURNAL_STEPS 64
#define TU_JOURNAL_STEP_LEN 48

struct tu_journal {
	pthread_mutex_t lock; /* or = { .lock = PTHREAD_MUTEX_INITIALIZER } */
	int n;
	char steps[TU_JOURNAL_STEPS][TU_JOURNAL_STEP_LEN];
};

void tu_journal_init(struct tu_journal *j);
void tu_journal_destroy(struct tu_journal *j);
void tu_journal_reset(struct tu_journal *j);
/* Records "<a>:<b>", or "<a>" when `b` is NULL (past the last, nothing). */
void tu_journal_add(struct tu_journal *j, const char *a, const char *b);
/* How many times `step` was recorded. */
int tu_journal_count(struct tu_journal *j, const char *step);
/* Asserts that the first `k` steps are `expected` and there are `n`. */
void tu_journal_assert(struct tu_journal *j, const char *const *expected,
		       int k, int n);

/*
 * What the library logged, line by line: install with
 * agr_set_log_hook(tu_logbook_keep, &book), and remove the hook before
 * the book goes. Lines past TU_LOG_LINES are dropped.
 */
#define TU_LOG_LINES 256
#define TU_LOG_ANY (-1) /* as a level to look for: any */

struct tu_logbook {
	pthread_mutex_t lock;
	pthread_cond_t grew; /* a line was added */
	int n;
	agr_log_level level[TU_LOG_LINES];
	char line[TU_LOG_LINES][400];
};

/* Once, before the book is used (its wait is on tu_now_ns()'s clock). */
void tu_logbook_init(struct tu_logbook *b);
void tu_logbook_clear(struct tu_logbook *b);
/* The log hook (an agr_log_fn); `book` is the struct tu_logbook. */
void tu_logbook_keep(agr_log_level level, const char *msg, void *book);
/*
 * Lines logged at `level` (or TU_LOG_ANY) that hold each of `p1`, `p2`
 * and `p3` (NULL: anything).
 */
int tu_logbook_count(struct tu_logbook *b, int level, const char *p1,
		     const char *p2, const char *p3);
/* As tu_logbook_count, once there is one or `timeout_ns` passed. */
int tu_logbook_wait(struct tu_logbook *b, int level, const char *p1,
		    const char *p2, const char *p3, uint64_t timeout_ns);
/* Prints every line to stderr, for a failure's message. */
void tu_logbook_dump(struct tu_logbook *b);
/* `s`, or "" for NULL: for a message that names what was looked for. */
const char *tu_or_empty(const char *s);

/*
 * Asserts that a line as tu_logbook_count counts it is logged within
 * TU_LONG_NS (a worker may log after the work it concerns completed);
 * if not, prints the book first.
 */
#define TU_ASSERT_LOGGED(book, level, p1, p2, p3)                         \
	do {                                                              \
		int logged_ = tu_logbook_wait((book), (level), (p1), (p2), \
					      (p3), TU_LONG_NS);          \
		if (logged_ < 1)                                          \
			tu_logbook_dump(book);                            \
		ck_assert_msg(logged_ >= 1,                               \
			      "nothing logged with \"%s\" \"%s\" \"%s\"",  \
			      (p1), tu_or_empty(p2), tu_or_empty(p3));    \
	} while (0)

/*
 * A function (agr_fn) stuck on I/O: the first message it handles waits
 * for bytes nobody sends on a socketpair, so it finishes only when its
 * receive is cancelled (a force stop); later messages return 0 at once.
 */
struct tu_stuck_recv {
	int fds[2];
	char buf[8];
	agr_exchange *ex;
	atomic_int submit_ret; /* agr_io_recv()'s; 1 until it is called */
	atomic_int recv_res;   /* the receive's result; 1 until then */
	atomic_int calls;
	struct tu_latch started; /* opens once the receive is submitted */
};

/* Makes the socketpair (asserted) and the latch. */
void tu_stuck_recv_init(struct tu_stuck_recv *r);
void tu_stuck_recv_destroy(struct tu_stuck_recv *r);
/* The function: register it with `arg` the struct tu_stuck_recv. */
int tu_stuck_recv_fn(agr_exchange *ex, void *arg);

#endif /* AGR_TESTUTIL_H */
