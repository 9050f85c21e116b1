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
 *
 * The worker is opaque: its struct lives in worker.c, and the layer
 * above (the scheduler) drives it through the functions below and
 * learns about its thread through the hooks it installs.
 */
#ifndef AGR_WORKER_H
#define AGR_WORKER_H

#include "internal.h"
#include "mpsc.h"

#include <liburing.h>

#include <aggring/io.h>
#include <aggring/worker.h>

struct agr_scheduler;
struct agr_worker_metrics;
struct agr__work;
struct agr__op;

/*
 * Runs a work item on its worker (status 0), or reports that it was
 * dropped by an immediate stop (status -ECANCELED, on the stopping
 * worker or, for items that never reached one, the thread that adopts
 * its orphans).
 */
typedef void (*agr__work_fn)(struct agr__work *work, struct agr_worker *w,
			     int status);

struct agr__work {
	struct agr__mpsc_node node;
	agr__work_fn fn;
};

/*
 * What the worker tells the layer that created it, from its own thread:
 * ready(arg, err) once its ring is set up (err 0) or failed to be, and
 * exited(arg) as the very last thing the thread does with the worker.
 */
struct agr__worker_hooks {
	void (*ready)(void *arg, int err);
	void (*exited)(void *arg);
	void *arg;
};

/*
 * How a worker shapes its ring and loop (agr_supplier_options, checked
 * already). -1 in idle_spin_us or submit_batch, NULL cpus, 0 entries:
 * the environment's setting or the built-in default.
 */
struct agr__worker_settings {
	unsigned sq_entries, cq_entries;
	unsigned ring_flags; /* AGR_RING_* */
	unsigned sqpoll_idle_ms;
	int sqpoll_cpu;
	const int *cpus;
	int ncpus;
	int idle_spin_us;
	int submit_batch;
	agr_wait_mode wait_mode;
	agr_worker_init_fn init;
	agr_worker_exit_fn exit;
	void *hook_arg;
	agr_log_fn log_fn;
	void *log_arg;
	uint64_t watchdog_ns; /* the supplier's own watchdog; 0: none */
};

/* The built-in defaults: as if every option was left alone. */
extern const struct agr__worker_settings agr__worker_defaults;

/* How to make a worker. */
struct agr__worker_config {
	struct agr_scheduler *sched; /* agr_worker_scheduler(); opaque here */
	unsigned index;		     /* agr_worker_index() */
	const char *thread_name;     /* cut to the 15 bytes Linux keeps */
	struct agr__worker_hooks hooks;
	/* Read by the worker's thread as it starts: keep it until then. */
	const struct agr__worker_settings *settings;
};

/* Allocates a worker (no thread yet): 0 or -ENOMEM. */
int agr__worker_new(const struct agr__worker_config *cfg,
		    struct agr_worker **out);

/*
 * Starts the worker's thread, which sets up the ring and calls the
 * ready hook. Returns 0 or the negative error of pthread_create (then
 * neither hook runs).
 */
int agr__worker_start(struct agr_worker *w);

/*
 * Asks the loop to end: graceful (drain the inbox and in-flight I/O,
 * then leave) or immediate (drop queued items, cancel I/O, leave). An
 * immediate request also raises agr_worker_interrupted() for the task
 * that runs now. Callable from any thread, any number of times; an
 * immediate request overrides a graceful one.
 */
void agr__worker_request_stop(struct agr_worker *w, bool immediate);

/* Joins the thread if it was started; blocks while a task blocks. */
void agr__worker_join(struct agr_worker *w);

/*
 * Closes the ring and frees the worker. Only after it was joined (or
 * never started) and nobody can post to it or ring its doorbell: peers
 * of one scheduler send each other doorbells, so free them only once
 * all are joined.
 */
void agr__worker_free(struct agr_worker *w);

/* The thread name ("<scheduler>-<index>", cut to 15 bytes). */
const char *agr__worker_name(const struct agr_worker *w);

/* True once the thread has left its loop (any thread may ask). */
bool agr__worker_exited(const struct agr_worker *w);

/*
 * True once a force stop began to tear it down (any thread may ask):
 * what keeps it from exiting then is the kernel's I/O, not a task.
 */
bool agr__worker_tearing_down(const struct agr_worker *w);

/* True while it tears down: it submits nothing more (its own thread). */
bool agr__worker_closing(const struct agr_worker *w);

/* Operations in flight on the ring; any thread may ask. */
int agr__worker_inflight(const struct agr_worker *w);

/* Copies the loop figures (any thread; each figure read atomically). */
void agr__worker_stats_copy(const struct agr_worker *w,
			    struct agr_worker_metrics *out);

/* The worker the calling thread runs, or NULL. */
extern _Thread_local struct agr_worker *agr__current_worker;

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
 * Once `w` has exited: runs every queued item with -ECANCELED on the
 * calling thread, one caller at a time.
 */
void agr__worker_adopt_orphans(struct agr_worker *w);

/* ---- on the worker's own thread ---- */

/*
 * What runs now (a dispatcher exchange, say): operations submitted
 * meanwhile, and from their callbacks, belong to it, so that a stop can
 * cancel exactly its I/O. NULL when the item ends.
 */
void agr__worker_set_owner(struct agr_worker *w, void *owner);

/*
 * An SQE on the current worker's ring whose completion runs cb(res, arg)
 * on this worker. Returns -EINVAL off that worker, -ESHUTDOWN while it
 * tears down, -ENOMEM when no operation slot can be allocated.
 */
int agr__worker_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
		    struct io_uring_sqe **sqe_out, struct agr__op **op_out);

/* agr_io_next(): what the next operation submitted on a worker gets. */
struct agr__io_next {
	unsigned flags;	     /* AGR_IO_FIXED_FILE, AGR_IO_FIXED_BUF */
	unsigned buf_index;
	uint64_t timeout_ns; /* a linked timeout */
	agr_io_cqe_cb cqe_cb;
	agr_io_id *id;
};

/* Sets what the next operation gets (agr_io_next, checked already). */
void agr__worker_set_next(struct agr_worker *w, const struct agr__io_next *n);

/* What the next operation gets; the agr_io_* call being made reads it. */
const struct agr__io_next *agr__worker_next(const struct agr_worker *w);

/*
 * Ends an agr__worker_sqe() whose SQE the caller has prepared: applies
 * what agr_io_next() and agr_io_chain() asked (flags, a linked timeout,
 * the id) and forgets agr_io_next(). Returns 0.
 */
int agr__worker_finish(struct agr_worker *w, struct agr__op *op,
		       struct io_uring_sqe *sqe);

/*
 * Marks `op` a zero-copy send: a force stop that tears the worker down
 * waits for its notification only so long (agr_io_send_zc()).
 */
void agr__op_set_zero_copy(struct agr__op *op);

/*
 * After a failed agr_io_* call: forgets agr_io_next() and ends an open
 * chain (its last SQE no longer links to what comes next).
 */
void agr__worker_abandon(struct agr_worker *w);

/*
 * agr_io_chain(): makes room for `n` SQEs now and links the next `n`
 * operations. 0, -EBUSY (no room: SQ full with a raw SQE open, or n
 * more than the SQ holds), -EALREADY (a chain is open).
 */
int agr__worker_chain(struct agr_worker *w, unsigned n);

/* True between agr_io_chain() and its last operation. */
bool agr__worker_in_chain(const struct agr_worker *w);

/*
 * Asks the kernel to cancel the in-flight operation with `id`: 0,
 * -ENOENT (none such in flight), -EBUSY (no SQE for the request).
 */
int agr__worker_cancel_id(struct agr_worker *w, agr_io_id id);

/*
 * agr_io_sqe(): an SQE the caller prepares after this returns. It is
 * the worker's own copy, not yet in the ring: it moves there (with
 * user_data set) at agr__worker_commit_raw() or when the callback or
 * work item that took it returns, so no flush can submit it unprepared.
 * What agr_io_next() asked is taken now (the id, the CQE callback,
 * AGR_IO_FIXED_FILE at the move). Errors as agr__worker_sqe().
 */
int agr__worker_raw_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
			struct io_uring_sqe **sqe_out);

/* Raw SQEs taken so far are prepared: 0, or -EALREADY when none. */
int agr__worker_commit_raw(struct agr_worker *w);

/* The timespec an operation owns for the kernel (timeouts). */
struct __kernel_timespec *agr__op_timespec(struct agr__op *op);

/* Flushes prepared SQEs now (SQ full or a cross-scheduler doorbell). */
void agr__worker_flush(struct agr_worker *w);

enum agr__op_match { AGR__MATCH_OWNER, AGR__MATCH_ARG };

/*
 * Asks the kernel to cancel every in-flight operation whose owner (or
 * callback argument) is `key`. Returns how many, or -EBUSY.
 */
int agr__worker_cancel_ops(struct agr_worker *w, const void *key,
			   enum agr__op_match match);

/* Told that the last operation of a cancelled owner has ended. */
typedef void (*agr__drained_fn)(void *owner, void *arg);

/*
 * Cancels every in-flight operation of `owner` (see
 * agr__worker_set_owner) and makes their callbacks unable to submit:
 * while one of them runs, agr__worker_sqe() returns -ECANCELED, so a
 * chain of operations that resubmits from its callbacks ends. Returns
 * how many operations were in flight; when the last of them has run its
 * callback, drained(owner, arg) runs on this worker, unless
 * agr__worker_disown() was called for `owner` first. 0: nothing is in
 * flight and drained will not run. A cancel request that finds the SQ
 * full is not retried: the marked operations still end on their own.
 */
int agr__worker_cancel_owner(struct agr_worker *w, void *owner,
			     agr__drained_fn drained, void *arg);

/*
 * Forgets `owner` (its memory may go): no drained call for it. Costs a
 * walk of the in-flight list; call it only for a cancelled owner.
 */
void agr__worker_disown(struct agr_worker *w, const void *owner);

/* ---- what the worker polls besides its inbox ---- */

/*
 * How a poller is asked to look: LOOK (run what showed up), RELEASE
 * (the worker is about to sleep or to leave: let go of everything, so
 * that what arrives later reaches the inbox) or DROP (an immediate stop:
 * let go of everything and drop what is queued).
 */
enum agr__poll_mode { AGR__POLL_LOOK, AGR__POLL_RELEASE, AGR__POLL_DROP };

/*
 * Work that lives outside the inbox while the worker is awake: a
 * dispatcher's groups that stay scheduled after their last message, so
 * that a steady producer's next message to them needs no activation.
 * poll() returns true if it ran something. On RELEASE and DROP it
 * removes itself (agr__worker_remove_poller) before its last touch of
 * what it polls, since that touch may let another thread free it; it
 * may add itself again if work showed up. All on the worker's thread.
 */
struct agr__poller {
	bool (*poll)(struct agr__poller *p, struct agr_worker *w,
		     enum agr__poll_mode mode);
	struct agr__poller *next;
	bool added;
};

/* Adds `p` (not added yet) to what `w` polls; `w`'s own thread. */
void agr__worker_add_poller(struct agr_worker *w, struct agr__poller *p);

/* Removes `p` if added; `w`'s own thread. */
void agr__worker_remove_poller(struct agr_worker *w, struct agr__poller *p);

/* ---- what runs now, for the watchdog ---- */

/* True while somebody watches (agr_watchdog_start()). */
extern atomic_bool agr__watchdog_on;

/*
 * Labels what the current item runs from now on, for the watchdog's
 * report, and restarts its clock: `owner` (a dispatcher name), a group
 * (or -1) and a message type. Only call while agr__watchdog_on.
 */
void agr__worker_label(struct agr_worker *w, const char *owner, int group,
		       const char *type);

/*
 * For a watcher: if what runs on `w` has run for `threshold_ns` or more
 * at `now` and was not reported yet, marks it reported, counts it in the
 * worker's figures, puts its label in `buf`, and returns how long it has
 * run; else 0. One watcher at a time.
 */
uint64_t agr__worker_take_blocked(struct agr_worker *w, uint64_t now,
				  uint64_t threshold_ns, char *buf,
				  size_t len);

#endif /* AGR_WORKER_H */
