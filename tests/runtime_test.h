/* SPDX-License-Identifier: MIT */
/*
 * runtime_test.h - what the files of check_runtime share: the log,
 * the journal of calls, the probes (components of our own) and the
 * messages and dispatchers they run.
 */
#ifndef TESTS_RUNTIME_TEST_H
#define TESTS_RUNTIME_TEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

/* How long past the deadline a stop may take: the reference's bound. */
#define FORCE_BOUND_NS (1000 * MS)

enum stop_mode {
	STOP_RETURNS,		/* returns stop_ret at once */
	STOP_BLOCKS_UNTIL_FORCED, /* a well-behaved slow stop */
	STOP_BLOCKS_UNTIL_RELEASED, /* ignores its deadline and the force */
};

struct probe {
	const char *name;
	int quiesce_ret, stop_ret, force_ret;
	int prepare_ret, start_ret;
	enum stop_mode mode;	     /* of stop_gracefully */
	enum stop_mode quiesce_mode, prepare_mode, start_mode;
	int report_in_prepare, report_in_start; /* 0: none */
	agr_runtime *rt;	     /* given to prepare */
	int lease_at_quiesce;	     /* agr_runtime_lease_acquire() then */
	uint64_t deadline_seen;
	atomic_int quiesces, stops, forces, prepares, starts;
	struct tu_latch stop_entered, step_entered;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool forced, released;
};

struct tmsg {
	agr_message m; /* first: the completion casts back */
	int status;
	atomic_int completions;
};

/* agr_runtime_stop() on another thread. */
struct stopper {
	pthread_t thread;
	agr_runtime *rt;
	pthread_barrier_t *start;
	int result;
	uint64_t called_at, returned_at;
};

extern const agr_named_aggregate order;
extern const agr_named_aggregate payment;
bool warned(const char *text);
int errors_logged(void);
/* The journal of calls: "<verb>:<name>", as the probes record them. */
extern struct tu_journal journal;
void probe_init(struct probe *p, const char *name);
void probe_destroy(struct probe *p);
void probe_release(struct probe *p);
extern const agr_component_ops probe_ops;
void add_probe(agr_runtime *rt, struct probe *p);
/*
 * Starts the journal afresh and adds probes "first" and "second", in
 * that order: the probes' fields are read only once `rt` starts or
 * stops, so a test may still set them.
 */
void add_two_probes(agr_runtime *rt, struct probe *first,
		    struct probe *second);
agr_runtime *new_runtime(uint64_t timeout_ns, uint64_t quiet_ns);
void get_report(agr_runtime *rt, agr_runtime_report *r,
		agr_component_report *c, size_t cap);
void tmsg_init(struct tmsg *t, const char *id);
void on_complete(agr_message *msg, int status, void *arg);
agr_supplier *new_supplier(int parallelism);
agr_dispatcher *new_dispatcher(agr_supplier *sup, const char *name,
			       const agr_named_aggregate *named,
			       struct tu_tally *done);
/*
 * The composite "orders" on `sup` (its own), completions counted in
 * `done`, its steps journalled as "composite:<step>".
 */
agr_composite *new_orders(agr_supplier *sup, struct tu_tally *done);
void send_ok(agr_dispatcher *d, struct tmsg *t);
/* Polls; the sleeps here are only the intervals of bounded waits. */
bool wait_state(agr_runtime *rt, agr_runtime_state s);
bool wait_no_lease(agr_runtime *rt);
void *run_stop(void *arg);
void stopper_start(struct stopper *s, agr_runtime *rt);
int stopper_join(struct stopper *s);

/* runtime_stops.c */
void runtime_stop_tests(TCase *ref, TCase *core);

/* runtime_quiet.c */
void runtime_quiet_tests(TCase *ref, TCase *core);

/* runtime_startup.c */
void runtime_startup_tests(TCase *ref);

#endif /* TESTS_RUNTIME_TEST_H */
