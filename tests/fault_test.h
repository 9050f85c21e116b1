/* SPDX-License-Identifier: MIT */
/*
 * fault_test.h - what the files of check_fault share (built only with
 * --enable-fault-injection): the log book, resources, the flows of
 * messages checked exactly once and in order, and the fixture.
 */
#ifndef TESTS_FAULT_TEST_H
#define TESTS_FAULT_TEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>
#include <aggring/fault.h>

#include "testutil.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define SQ_FLUSH_TRIES 4 /* worker.c: flushes before an SQE is given up */

#define MAX_ROUNDS 5000	 /* sends until an armed doorbell fault fires */

#define ASSERT_LOGGED(level, a, b) \
	TU_ASSERT_LOGGED(&logbook, (level), (a), (b), NULL)

#define NIDS 16

#define MAX_MSGS 6000

struct tmsg {
	agr_message m; /* m.user points back here */
	int id, seq, group;
	atomic_int completions;
	int status;
	struct tmsg *leaf; /* for a forwarder: what it sends */
	struct tmsg *then; /* for a leaf: the forwarder it sends, if any */
	struct tu_latch *go; /* for a forwarder: wait for it first */
};

struct flow {
	agr_dispatcher *d;
	agr_dispatcher *next; /* where forwarders send; may be d */
	struct tu_tally completed, leaves;
	atomic_int next_seq[NIDS]; /* per id, checked by the handler */
	atomic_int seqs[2][NIDS];  /* given out: [forwarder?][id] */
	struct tmsg *msgs;
	int nmsgs;
	char ids[NIDS][16];
};

#define IO_LEN 4096

/* One file transfer done by callbacks that carry on after a short count. */
struct xfer {
	int fd;
	bool write;
	char *buf;
	unsigned done;
	int results[8];
	atomic_int calls;
	int submit_ret;
	struct tu_latch finished;
};

extern const agr_named_aggregate order;
extern const agr_named_aggregate payment;
/* What the library logged in this test, but its debug lines. */
extern struct tu_logbook logbook;
extern struct tu_tally log_errors;
struct flow *flow_new(void);
void flow_free(struct flow *f);
/* A new message of `id`, next in that id's order; group for routing. */
struct tmsg *flow_msg(struct flow *f, int id, int group,
		      const char *type);
void on_complete(agr_message *msg, int status, void *arg);
/* A started dispatcher for `f` with a supplier of its own. */
agr_dispatcher *flow_dispatcher(struct flow *f, const char *name,
				const agr_named_aggregate *named,
				int workers, int groups);
/* Every message completed exactly once, with status 0. */
void assert_exactly_once(struct flow *f);
void stop_and_free(agr_dispatcher *d);
/*
 * Sends one leaf at a time from this thread, each after the last one
 * completed (so the worker is likely asleep and needs its doorbell),
 * until `point` fired `fired` times, then a few more.
 */
void send_one_by_one(struct flow *f, agr_fault_point point,
		     unsigned fired);
/* As send_one_by_one, through forwarders: the leaf's doorbell is rung
 * by the forwarder's worker. */
void forward_one_by_one(struct flow *f, agr_fault_point point,
			unsigned fired);
/*
 * A chain of `n` forwarders and leaves that workers send each other:
 * after the first send from this thread, every doorbell is rung by a
 * worker. `arm` runs after that first send (whose doorbell it must not
 * hit) and before the chain goes on: the first forwarder waits for it.
 * Without that wait a test thread preempted between the two (a loaded
 * machine) armed its faults after the whole chain had run, and none
 * fired.
 */
void chain(struct flow *f, int n, void (*arm)(void));
int tmp_file(void);
void xfer_init(struct xfer *x, int fd, bool write, char *buf);
void xfer_run(agr_scheduler *s, struct xfer *x);
char *pattern(void);

/* fault_doorbells.c */
void fault_doorbell_tests(TCase *doorbell, TCase *sq_full);

/* fault_io.c */
void fault_io_tests(TCase *io);

#endif /* TESTS_FAULT_TEST_H */
