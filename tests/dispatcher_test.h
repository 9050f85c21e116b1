/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_test.h - what the files of check_dispatcher share: the
 * journal of what happened, test messages, dispatchers and their stops,
 * held messages, and the log book (dispatcher_logbook.c).
 */
#ifndef TESTS_DISPATCHER_TEST_H
#define TESTS_DISPATCHER_TEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_EVENTS 512

enum {
	EV_START = 1000, /* + seq: a function began */
	EV_DONE = 2000,	 /* + seq: the completion callback ran */
	EV_TIMER = 3000, /* + seq: its timer fired */
	EV_FN = 4000,	 /* + 100 * function + seq (seq < 100) */
};

struct journal {
	pthread_mutex_t lock;
	int events[MAX_EVENTS];
	int nevents;
	struct tu_tally completed;
};

#define ASSERT_ORDER(j, ...)                                   \
	do {                                                   \
		const int evs_[] = { __VA_ARGS__ };            \
		assert_in_order((j), evs_, ARRAY_SIZE(evs_));  \
	} while (0)

#define ASSERT_EVENTS(j, ...)                                  \
	do {                                                   \
		const int evs_[] = { __VA_ARGS__ };            \
		assert_exactly((j), evs_, ARRAY_SIZE(evs_));   \
	} while (0)

struct tmsg {
	agr_message m; /* m.user points back here */
	int seq;
	int status;
	atomic_int completions;
	/* Seen by the function that handled it. */
	int group, worker, current;
	agr_dispatcher *disp;
	agr_scheduler *sched;
};

struct stopper {
	pthread_t thread;
	agr_dispatcher *d;
	struct journal *j;
	struct tu_latch calling;
	int result;
	long completed_at_return;
};

/* The message with seq 1 stays pending until the test finishes it. */
struct held {
	struct journal j;
	struct tu_latch started;
	agr_exchange *ex;
};

#define ASSERT_LOGGED(a, b, c) \
	TU_ASSERT_LOGGED(&logbook, TU_LOG_ANY, (a), (b), (c))

extern const agr_named_aggregate order;
extern const agr_named_aggregate payment;
void journal_init(struct journal *j);
void journal_destroy(struct journal *j);
void journal_add(struct journal *j, int ev);
/* Index of the first `ev`, or -1. */
int journal_pos(struct journal *j, int ev);
bool journal_wait(struct journal *j, long completions);
/* Every event of `evs` happened, in this order (others may interleave). */
void assert_in_order(struct journal *j, const int *evs, size_t n);
/* The journal holds exactly `evs`. */
void assert_exactly(struct journal *j, const int *evs, size_t n);
void tmsg_init(struct tmsg *t, const char *id, int seq);
struct tmsg *current_tmsg(agr_exchange *ex);
/* The completion callback of most tests; `arg` is a journal. */
void record_completion(agr_message *msg, int status, void *arg);
/* Notes where it ran and that it started; done at once. Arg: journal. */
int handle(agr_exchange *ex, void *arg);
agr_supplier *new_supplier(int workers);
agr_dispatcher_options options(agr_supplier *sup, bool owns,
			       int groups, void *complete_arg);
/* An Order dispatcher owning a supplier of `workers` workers. */
agr_dispatcher_options owned_options(int workers, int groups,
				     void *complete_arg);
agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o);
void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
	    void *arg);
void start(agr_dispatcher *d);
/*
 * An owned dispatcher (owned_options()) with one function, `fn` for
 * `type`, started.
 */
agr_dispatcher *started_dispatcher(int workers, int groups,
				   void *complete_arg, const char *type,
				   agr_handler_fn fn, void *arg);
void send_ok(agr_dispatcher *d, struct tmsg *t);
agr_dispatcher_stats stats_of(const agr_dispatcher *d);
void stop(agr_dispatcher *d);
void stop_and_free(agr_dispatcher *d);
/* The counters are exact once stopped. */
agr_dispatcher_stats stop_and_get_stats(agr_dispatcher *d);
/*
 * Writes "<prefix><n>" for the first n whose group (of `groups`) runs on
 * worker `worker` of `workers` and is not `not_group`; returns the group.
 */
int pick_id(char *buf, size_t len, const char *prefix, int groups,
	    int workers, int worker, int not_group);
/* Polls `v` (1 ms apart, not a synchronisation) until it reaches `n`. */
bool wait_at_least(atomic_long *v, long n, uint64_t timeout_ns);
/* Polls (1 ms apart) until every worker of `s` has ended. */
bool wait_until_terminated(agr_scheduler *s, uint64_t timeout_ns);
/* Counts what the library logs, by level. */
extern atomic_int logged[AGR_LOG_DEBUG + 1];
void count_log(agr_log_level level, const char *msg, void *arg);
void stopper_start(struct stopper *s, agr_dispatcher *d,
		   struct journal *j);
int stopper_join(struct stopper *s);
void held_init(struct held *h);
void held_destroy(struct held *h);
int hold_first(agr_exchange *ex, void *arg);
int work_a_little(agr_exchange *ex, void *arg);
/* What the library logged while a test held the book open. */
extern struct tu_logbook logbook;
/* Clears the book and makes it the log hook. */
void logbook_open(void);
void logbook_close(void);
void recv_lost(int res, void *arg);

/* dispatcher_force.c */
void dispatcher_force_tests(TCase *ref, TCase *stress);

/* dispatcher_load.c */
void dispatcher_load_tests(TCase *core, TCase *stress);

/* dispatcher_functions.c */
void dispatcher_function_tests(TCase *core);

/* dispatcher_input.c */
void dispatcher_input_tests(TCase *core);

/* dispatcher_forward.c */
void dispatcher_forward_tests(TCase *core);

/* dispatcher_pending.c */
void dispatcher_pending_tests(TCase *core);

/* dispatcher_done.c */
void dispatcher_done_tests(TCase *core);

#endif /* TESTS_DISPATCHER_TEST_H */
