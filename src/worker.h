/* SPDX-License-Identifier: MIT */
/*
 * worker.h - one thread, one io_uring ring (internal).
 *
 * A worker runs work items pushed to its inbox and completions of the
 * ring operations it submitted. Other threads never touch its ring: they
 * push an item to the inbox and, when the worker may be asleep, ring its
 * doorbell with an IORING_OP_MSG_RING completion. The doorbell carries
 * no payload, so a lost or late doorbell can delay but never lose work,
 * and one doorbell covers every item pushed while it is unread.
 */
#ifndef AGR_WORKER_H
#define AGR_WORKER_H

#include "internal.h"
#include "mpsc.h"

#include <pthread.h>
#include <liburing.h>

#include <aggring/io.h>
#include <aggring/worker.h>

struct agr_scheduler;
struct agr__work;

/*
 * Runs a work item on its worker (status 0), or reports that it was
 * dropped by an immediate dispose (status -ECANCELED, on the disposing
 * worker or, for items that never reached one, the thread that frees
 * the scheduler).
 */
typedef void (*agr__work_fn)(struct agr__work *work, struct agr_worker *w,
			     int status);

struct agr__work {
	struct agr__mpsc_node node;
	agr__work_fn fn;
};

/* user_data values that are not an in-flight operation. */
enum {
	AGR__UD_BELL = 1,   /* a doorbell: look at the inbox */
	AGR__UD_IGNORE = 2, /* internal op whose result is not needed */
	AGR__UD_MSG_TAG = 3 /* failed doorbell; the rest is the target */
};

/* An operation on the ring; its address is the SQE's user_data. */
struct agr__op {
	agr_io_cb cb;
	void *arg;
	void *owner; /* what was running when it was submitted */
	struct agr__op *prev, *next; /* the worker's in-flight list */
	struct __kernel_timespec ts; /* owned by the kernel for timeouts */
};

enum { AGR__BELL_ARMED = 0, AGR__BELL_RUNG = 1 };

/* Loop figures: written by the worker only, read anywhere. */
struct agr__worker_stats {
	atomic_uint_fast64_t iterations, doorbells, items, io_completions;
	atomic_uint_fast64_t blocked_ns, sq_full, cq_overflow, early_submits;
	atomic_uint_fast64_t blocking_detected; /* written by the watchdog */
};

/*
 * What the worker runs now, for the watchdog: a sequence lock over
 * plain words so that a reader never sees a torn label. since_ns is 0
 * while nothing runs.
 */
#define AGR__LABEL_WORDS 8
struct agr__running {
	atomic_uint seq;
	atomic_uint_fast64_t since_ns;
	atomic_uint_fast64_t label[AGR__LABEL_WORDS];
	uint64_t reported_since; /* watchdog's own */
};

struct agr_worker {
	/* Written by producers. */
	AGR__ALIGNED_CACHELINE struct agr__mpsc inbox;
	/* Written when the worker goes to sleep and when it is rung. */
	AGR__ALIGNED_CACHELINE atomic_int bell;
	/*
	 * Read on every post and every loop turn, written once or twice:
	 * a line of their own, so that reading them never misses.
	 */
	AGR__ALIGNED_CACHELINE atomic_bool stop_requested; /* graceful: drain,
								* then leave */
	atomic_bool force;	    /* immediate: drop, cancel, leave */
	atomic_bool interrupted;    /* polled by a running task */
	/*
	 * Set when the thread has left its loop. From then on the inbox has
	 * no consumer, so whoever pushes adopts what is queued, under
	 * orphan_lock (see agr__worker_post).
	 */
	atomic_bool exited;
	pthread_mutex_t orphan_lock;

	/* Owned by the worker thread once it runs. */
	AGR__ALIGNED_CACHELINE struct io_uring ring;
	int ring_fd; /* read by senders inside the scheduler's gate */
	bool ring_ready;
	bool closing; /* no new operations may be submitted */
	uint64_t idle_spin_ns; /* AGR_IDLE_SPIN_US, read at start */
	unsigned submit_batch; /* AGR_SUBMIT_BATCH, read at start */
	bool raw_sqe_open;     /* agr_io_sqe() this turn: submit no early */
	unsigned inflight;
	atomic_uint inflight_now; /* a copy of inflight for readers */
	struct agr__op *inflight_list;
	struct agr__op *free_ops;
	struct agr__worker_stats stats;
	struct agr__running running;
	atomic_uint_fast64_t started_ns, exited_ns;
	/*
	 * What runs now (a dispatcher exchange, say); operations submitted
	 * meanwhile, and from their callbacks, belong to it, so that a
	 * force stop can cancel exactly its I/O.
	 */
	void *current_owner;

	struct agr_scheduler *sched;
	unsigned index;
	pthread_t thread;
	bool thread_started;
	char thread_name[16];
};

/* The worker the calling thread runs, or NULL. */
extern _Thread_local struct agr_worker *agr__current_worker;

/* True while agr_watchdog_start() is in force. */
extern atomic_bool agr__watchdog_on;

/*
 * Labels what the current item runs from now on, for the watchdog's
 * report, and restarts its clock: `owner` (a dispatcher name), a group
 * (or -1) and a message type. Only call while agr__watchdog_on.
 */
void agr__worker_label(struct agr_worker *w, const char *owner, int group,
		       const char *type);

/* Reads the label into `buf` ("owner group type"); false if torn. */
bool agr__worker_read_running(struct agr_worker *w, uint64_t *since_ns,
			      char *buf, size_t len);

/* Thread body; `arg` is the worker. */
void *agr__worker_main(void *arg);

/*
 * Pushes `work` to `w` and rings its doorbell if it may be asleep.
 * Caller is inside the owning scheduler's gate, or is `w` itself, or
 * pushes work that may also run after the thread has exited: then the
 * caller runs it (and anything else queued) itself with -ECANCELED.
 */
void agr__worker_post(struct agr_worker *w, struct agr__work *work);

/* Rings the doorbell of `w` unless it is already rung. */
void agr__worker_wake(struct agr_worker *w);

/*
 * An SQE on the current worker's ring whose completion runs cb(res, arg)
 * on this worker. Returns -EINVAL off that worker, -ESHUTDOWN while it
 * tears down, -ENOMEM when no operation slot can be allocated.
 */
int agr__worker_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
		    struct io_uring_sqe **sqe_out, struct agr__op **op_out);

/* Flushes prepared SQEs now (SQ full or a cross-scheduler doorbell). */
void agr__worker_flush(struct agr_worker *w);

/* An SQE for an internal request whose CQE is ignored; NULL if none. */
struct io_uring_sqe *agr__worker_cancel_sqe(struct agr_worker *w);

enum agr__op_match { AGR__MATCH_OWNER, AGR__MATCH_ARG };

/*
 * Asks the kernel to cancel every in-flight operation whose owner (or
 * callback argument) is `key`. Returns how many, or -EBUSY.
 */
int agr__worker_cancel_ops(struct agr_worker *w, const void *key,
			   enum agr__op_match match);

/*
 * Once `w` has exited: runs every queued item with -ECANCELED on the
 * calling thread, one caller at a time.
 */
void agr__worker_adopt_orphans(struct agr_worker *w);

#endif /* AGR_WORKER_H */
