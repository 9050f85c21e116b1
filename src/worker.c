/* SPDX-License-Identifier: MIT */
/*
 * worker.c - the event loop of one worker thread and its ring.
 *
 * Loop: reap completions, run queued items, and when there is nothing
 * left arm the doorbell, look once more, and sleep in the kernel inside
 * io_uring_submit_and_wait(). While the worker is awake its doorbell
 * stays rung, so producers push without a syscall.
 */
#include "worker.h"

#include "affinity.h"
#include "doorbell.h"
#include "fault.h"
#include "ring.h"
#include "settings.h"
#include "util.h"
#include "wait.h"


#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CQE_BATCH 64
/*
 * Completions run between two looks at the inbox and the stop flags:
 * callbacks that resubmit I/O which completes at once (NOPs, cached
 * reads) would otherwise keep one reap going for ever.
 */
#define REAP_LIMIT (8 * CQE_BATCH)
#define INBOX_BATCH 256 /* items run between two looks at the ring */
#define SQ_FLUSH_TRIES 4 /* without SUBMIT_ALL a submit may stop early */
#define RAW_SLOTS 16	 /* room for raw SQEs at first; it grows */
/*
 * How long an idle worker watches its inbox before it arms the doorbell
 * and sleeps (AGR_IDLE_SPIN_US overrides, 0 disables): longer than the
 * gap between messages of a steady producer, so that such a producer
 * rarely pays a doorbell and its messages never wait for a wake-up, yet
 * short enough that an idle worker soon leaves the CPU to others.
 *
 * Unless told, the worker picks one of two at each spin: 20 us, since
 * the spin takes CPU time a producer needs, unless CPUs are to spare:
 * at least SPARE_CPUS more than the process's workers. Then 100 us,
 * since a worker that sleeps between two messages costs the producer a
 * doorbell (a system call) per message. On 16 cores bench/dispatch at
 * 16 workers ran at 0.6 M msg/s with no spin, 4.1 with 20 us and 10.1
 * with 100 us (bench/RESULTS.md, "Many cores"). One CPU beyond the
 * workers is not to spare: the producer, or a client and the kernel's
 * network work, need it. ledger_server's one worker on 2 vCPUs beside
 * redis-benchmark ran P16 INCRBY about 12% slower with 100 us than with
 * 20 (bench/RESULTS.md, "the ledger regression bisected").
 */
#define IDLE_SPIN_NS_DEFAULT 20000
#define IDLE_SPIN_NS_SPARE_CPUS 100000
#define SPARE_CPUS 2
/* The most pauses between two looks of an idle spin (about 1 us). */
#define SPIN_PAUSES_MAX 32
/*
 * How many prepared SQEs may wait for the end of the loop's turn
 * (AGR_SUBMIT_BATCH overrides, 0: all wait). A turn that reaps a batch
 * of completions, each starting the next read, would otherwise hold its
 * first read back until its last is prepared while the device idles;
 * small batches still share one system call between a few operations.
 */
#define SUBMIT_BATCH_DEFAULT 4

/* user_data values that are not an in-flight operation. */
enum {
	UD_BELL = AGR__DOORBELL_UD, /* a doorbell: look at the inbox */
	UD_IGNORE = 2, /* internal op whose result is not needed */
	UD_MSG_TAG = AGR__DOORBELL_FAILED_TAG /* failed doorbell; the rest
					       * is the target */
};

/* An operation on the ring; its address is the SQE's user_data. */
struct agr__op {
	agr_io_cb cb;
	void *arg;
	void *owner; /* what was running when it was submitted */
	struct agr__op *prev, *next; /* the worker's in-flight list */
	struct __kernel_timespec ts; /* owned by the kernel for timeouts */
	agr_io_cqe_cb cqe_cb; /* instead of cb: it wants the CQE's flags */
	agr_io_id id;
	/* Set by agr__worker_cancel_owner(): the owner's I/O must end. */
	bool cancelled;
	bool zero_copy;	  /* agr_io_send_zc(): a notification follows */
	bool notif_only;  /* its send completed: only the notification is due */
	agr__drained_fn drained;
	void *drained_arg;
};

/* Loop figures: written by the worker only, read anywhere. */
struct worker_stats {
	atomic_uint_fast64_t iterations, doorbells, items, io_completions;
	atomic_uint_fast64_t blocked_ns, sq_full, cq_overflow, early_submits;
	atomic_uint_fast64_t blocking_detected; /* written by the watcher */
	atomic_uint_fast64_t started_ns, exited_ns;
};

/*
 * What the worker runs now, for the watchdog: a sequence lock over
 * plain words so that a reader never sees a torn label. since_ns is 0
 * while nothing runs.
 */
#define LABEL_WORDS 8
struct running {
	atomic_uint seq;
	atomic_uint_fast64_t since_ns;
	atomic_uint_fast64_t label[LABEL_WORDS];
	uint64_t reported_since; /* the watcher's own */
};

struct agr_worker {
	/* Written by producers. */
	AGR__ALIGNED_CACHELINE struct agr__mpsc inbox;
	/* Written when the worker goes to sleep and when it is rung. */
	AGR__ALIGNED_CACHELINE struct agr__bell bell;
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
	/* Set when it begins to tear down: what holds a free is the kernel. */
	atomic_bool tearing_down;
	pthread_mutex_t orphan_lock;

	/* Owned by the worker thread once it runs. */
	AGR__ALIGNED_CACHELINE struct io_uring ring;
	int ring_fd; /* read by senders inside the scheduler's gate */
	atomic_bool ring_ready;
	bool closing; /* no new operations may be submitted */
	uint64_t idle_spin_ns; /* AGR_IDLE_SPIN_US, read at start */
	bool idle_spin_chosen; /* by the options or the environment */
	int online_cpus; /* read at start, for cpus_to_spare() */
	struct agr__poller *pollers; /* what else it looks at while awake */
	unsigned submit_batch; /* AGR_SUBMIT_BATCH, read at start */
	/*
	 * SQEs of agr_io_sqe() that the caller may still be preparing:
	 * our own copies, moved into the ring once committed, so that no
	 * flush can hand the kernel one unprepared.
	 */
	struct raw_slot {
		struct io_uring_sqe sqe; /* its address is the caller's */
		struct agr__op *op;
		bool fixed_file;
	} **raw; /* each slot on its own: the pointers stay valid */
	unsigned nraw, raw_cap;
	struct agr__io_next next; /* agr_io_next(): for the next operation */
	agr_io_id last_id;
	/* agr_io_chain(): SQEs still to take, and the last one taken. */
	unsigned chain_left;
	struct io_uring_sqe *chain_last;
	unsigned inflight;
	atomic_uint inflight_now; /* a copy of inflight for readers */
	struct agr__op *inflight_list;
	struct agr__op *free_ops;
	struct worker_stats stats;
	struct running running;
	/*
	 * What runs now (a dispatcher exchange, say); operations submitted
	 * meanwhile, and from their callbacks, belong to it, so that a
	 * force stop can cancel exactly its I/O.
	 */
	void *current_owner;
	/* A cancelled operation's callback runs: it may submit nothing. */
	bool owner_cancelled;
	struct agr__op *completing; /* whose callback runs now */

	struct agr_scheduler *sched;
	struct agr__worker_hooks hooks;
	struct agr__worker_settings settings; /* cpus: the scheduler's */
	unsigned index;
	pthread_t thread;
	bool thread_started;
	char thread_name[16];
};

_Thread_local struct agr_worker *agr__current_worker;
/* Worker threads of every scheduler in their loop, for cpus_to_spare(). */
static atomic_int live_workers;
atomic_bool agr__watchdog_on;

AGR_API agr_worker *agr_worker_current(void)
{
	return agr__current_worker;
}

AGR_API struct io_uring *agr_worker_ring(agr_worker *w)
{
	return w ? &w->ring : NULL;
}

AGR_API int agr_worker_index(const agr_worker *w)
{
	return w ? (int)w->index : -EINVAL;
}

AGR_API agr_scheduler *agr_worker_scheduler(const agr_worker *w)
{
	return w ? w->sched : NULL;
}

AGR_API bool agr_worker_interrupted(void)
{
	struct agr_worker *w = agr__current_worker;

	return w && atomic_load_explicit(&w->interrupted,
					 memory_order_acquire);
}

static struct io_uring_sqe *get_sqe(struct agr_worker *w);

/* ---- doorbell (doorbell.h) ---- */

static void send_doorbell(struct agr_worker *target)
{
	struct agr_worker *self = agr__current_worker;
	struct io_uring_sqe *sqe = NULL;

	/*
	 * A peer of the same scheduler is joined with us, so its doorbell
	 * can be an SQE that rides our next submit, and a failure CQE can
	 * still reach the peer. Another scheduler may free its workers once
	 * its gate drains, so its doorbell is sent, and retried, now.
	 */
	if (self && !self->closing && !self->chain_left &&
	    target->sched == self->sched)
		sqe = get_sqe(self);
	if (!sqe) {
		agr__doorbell_send_now(&target->bell, target->ring_fd);
		return;
	}
	agr__doorbell_prep(sqe, target->ring_fd,
			   (uint64_t)(uintptr_t)target | UD_MSG_TAG);
}

void agr__worker_wake(struct agr_worker *w)
{
	if (agr__bell_ring(&w->bell))
		send_doorbell(w);
}

void agr__worker_post(struct agr_worker *w, struct agr__work *work)
{
	agr__mpsc_push(&w->inbox, &work->node);
	/* Pairs with the worker's store of `exited` before its last look. */
	if (atomic_load(&w->exited))
		agr__worker_adopt_orphans(w);
	else
		agr__worker_wake(w);
}

/* ---- operations ---- */

static struct agr__op *op_alloc(struct agr_worker *w)
{
	struct agr__op *op = w->free_ops;

	if (op)
		w->free_ops = op->next;
	else
		op = malloc(sizeof(*op));
	return op;
}

static void op_track(struct agr_worker *w, struct agr__op *op)
{
	op->prev = NULL;
	op->next = w->inflight_list;
	if (op->next)
		op->next->prev = op;
	w->inflight_list = op;
	w->inflight++;
	atomic_store_explicit(&w->inflight_now, w->inflight,
			      memory_order_relaxed);
}

static void op_untrack(struct agr_worker *w, struct agr__op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		w->inflight_list = op->next;
	if (op->next)
		op->next->prev = op->prev;
	w->inflight--;
	atomic_store_explicit(&w->inflight_now, w->inflight,
			      memory_order_relaxed);
}

void agr__op_set_zero_copy(struct agr__op *op)
{
	op->zero_copy = true;
}

static void op_free(struct agr_worker *w, struct agr__op *op)
{
	op->next = w->free_ops;
	w->free_ops = op;
}

void agr__worker_flush(struct agr_worker *w)
{
	int ret;

	for (;;) {
		ret = io_uring_submit(&w->ring);
		if (ret != -EBUSY && ret != -EAGAIN && ret != -EINTR)
			break;
		/* The kernel wants us to reap first; completions wait. */
		io_uring_get_events(&w->ring);
		sched_yield();
	}
	if (ret < 0)
		agr__log(AGR_LOG_ERROR, "%s: io_uring_submit failed: %s",
			 w->thread_name, strerror(-ret));
}

/* An SQE of w's ring; a full SQ is handed to the kernel first. */
static struct io_uring_sqe *get_sqe(struct agr_worker *w)
{
	struct io_uring_sqe *sqe = agr__get_sqe(&w->ring);
	int tries;

	for (tries = 0; !sqe && tries < SQ_FLUSH_TRIES; tries++) {
		agr__bump(&w->stats.sq_full);
		agr__worker_flush(w);
		sqe = agr__get_sqe(&w->ring);
	}
	return sqe;
}

/*
 * Hands the SQEs prepared so far to the kernel once submit_batch of them
 * wait, unless a chain is being built (agr_io_chain, or a committed raw
 * SQE that links to the next operation). A failed submit leaves them to
 * the loop's own, which retries and reports.
 */
static void submit_early(struct agr_worker *w)
{
	if (w->submit_batch == 0 || w->chain_left ||
	    io_uring_sq_ready(&w->ring) < w->submit_batch)
		return;
	if (io_uring_submit(&w->ring) > 0)
		agr__bump(&w->stats.early_submits);
}

static struct io_uring_sqe *cancel_sqe(struct agr_worker *w);

/* Room for `n` SQEs, flushing first if the SQ lacks it. */
static bool reserve_sqes(struct agr_worker *w, unsigned n)
{
	if (io_uring_sq_space_left(&w->ring) >= n)
		return true;
	agr__bump(&w->stats.sq_full);
	agr__worker_flush(w);
	return io_uring_sq_space_left(&w->ring) >= n;
}

static void move_raw(struct agr_worker *w);
static void end_open_chain(struct agr_worker *w);

/*
 * A callback or work item returned: its raw SQEs are prepared, and a
 * chain it left unfinished ends at its last SQE.
 */
static void end_of_callback(struct agr_worker *w)
{
	if (agr__unlikely(w->nraw))
		move_raw(w);
	end_open_chain(w);
}

/* A chain its caller left unfinished ends at its last SQE. */
static void end_open_chain(struct agr_worker *w)
{
	if (agr__likely(!w->chain_left))
		return;
	agr__log(AGR_LOG_WARN, "%s: a chain (agr_io_chain(), or a raw SQE "
		 "with IOSQE_IO_LINK) waited for %u more operation(s) than "
		 "were submitted; it ends early", w->thread_name,
		 w->chain_left);
	agr__worker_abandon(w);
}

void agr__worker_abandon(struct agr_worker *w)
{
	memset(&w->next, 0, sizeof(w->next));
	if (w->chain_last)
		w->chain_last->flags &= (__u8)~IOSQE_IO_LINK;
	w->chain_left = 0;
	w->chain_last = NULL;
}

void agr__worker_set_next(struct agr_worker *w, const struct agr__io_next *n)
{
	w->next = *n;
}

const struct agr__io_next *agr__worker_next(const struct agr_worker *w)
{
	return &w->next;
}

int agr__worker_chain(struct agr_worker *w, unsigned n)
{
	if (w->chain_left)
		return -EALREADY;
	if (n > w->ring.sq.ring_entries || !reserve_sqes(w, n))
		return -EBUSY;
	w->chain_left = n;
	w->chain_last = NULL;
	return 0;
}

bool agr__worker_in_chain(const struct agr_worker *w)
{
	return w->chain_left > 0;
}

static void ignore_cqe(int res, void *arg)
{
	(void)res;
	(void)arg;
}

/* A linked timeout after `sqe`; its own op keeps the timespec. */
static void link_timeout(struct agr_worker *w, struct io_uring_sqe *sqe,
			 uint64_t timeout_ns)
{
	struct io_uring_sqe *t = agr__get_sqe(&w->ring); /* reserved */
	struct agr__op *op = t ? op_alloc(w) : NULL;

	if (!op) {
		if (t) {
			io_uring_prep_nop(t);
			io_uring_sqe_set_data64(t, UD_IGNORE);
		}
		agr__log(AGR_LOG_ERROR, "%s: no memory for a linked timeout; "
			 "the operation runs without it", w->thread_name);
		return;
	}
	memset(op, 0, sizeof(*op));
	op->cb = ignore_cqe;
	op->id = ++w->last_id;
	op->owner = w->current_owner;
	op->ts.tv_sec = (long long)(timeout_ns / 1000000000u);
	op->ts.tv_nsec = (long long)(timeout_ns % 1000000000u);
	op_track(w, op);
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_prep_link_timeout(t, &op->ts, 0);
	io_uring_sqe_set_data(t, op);
}

int agr__worker_finish(struct agr_worker *w, struct agr__op *op,
		       struct io_uring_sqe *sqe)
{
	const struct agr__io_next *n = &w->next;

	if (n->flags & AGR_IO_FIXED_FILE)
		sqe->flags |= IOSQE_FIXED_FILE;
	if (w->chain_left) {
		if (--w->chain_left)
			sqe->flags |= IOSQE_IO_LINK;
		w->chain_last = w->chain_left ? sqe : NULL;
	}
	if (n->timeout_ns)
		link_timeout(w, sqe, n->timeout_ns);
	if (n->id)
		*n->id = op->id;
	memset(&w->next, 0, sizeof(w->next));
	return 0;
}

int agr__worker_cancel_id(struct agr_worker *w, agr_io_id id)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;

	for (op = w->inflight_list; op; op = op->next)
		if (op->id == id)
			break;
	if (!op)
		return -ENOENT;
	sqe = cancel_sqe(w);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op, 0);
	io_uring_sqe_set_data64(sqe, UD_IGNORE);
	return 0;
}

static int take_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
		    struct io_uring_sqe **sqe_out, struct agr__op **op_out);

int agr__worker_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
		    struct io_uring_sqe **sqe_out, struct agr__op **op_out)
{
	int ret = take_sqe(w, cb, arg, sqe_out, op_out);

	if (agr__unlikely(ret) && w && w == agr__current_worker)
		agr__worker_abandon(w);
	return ret;
}

/* 0 if `w` may submit for cb now, else why not. */
static int may_submit(struct agr_worker *w, agr_io_cb cb)
{
	/* io.c has logged why, for a caller's mistake. */
	if (!w || w != agr__current_worker || (!cb && !w->next.cqe_cb))
		return -EINVAL;
	if (w->closing)
		return -ESHUTDOWN;
	if (agr__unlikely(w->owner_cancelled))
		return -ECANCELED; /* so that a chain of I/O ends */
	return 0;
}

/* A tracked operation for cb(arg), owned by what runs now. */
static struct agr__op *new_op(struct agr_worker *w, agr_io_cb cb, void *arg)
{
	struct agr__op *op = op_alloc(w);

	if (!op)
		return NULL;
	op->cb = cb;
	op->cqe_cb = w->next.cqe_cb;
	op->arg = arg;
	op->id = ++w->last_id;
	op->owner = w->current_owner;
	op->cancelled = false;
	op->zero_copy = false;
	op->notif_only = false;
	op->drained = NULL;
	op_track(w, op);
	return op;
}

static int take_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
		    struct io_uring_sqe **sqe_out, struct agr__op **op_out)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int ret = may_submit(w, cb);

	if (ret)
		return ret;
	if (!sqe_out)
		return -EINVAL;
	submit_early(w);
	if (agr__unlikely(w->next.timeout_ns)) {
		if (w->chain_left) {
			agr__log(AGR_LOG_ERROR, "%s: a linked timeout inside "
				 "agr_io_chain() would cut the chain; refused "
				 "with EINVAL", w->thread_name);
			return -EINVAL;
		}
		if (!reserve_sqes(w, 2))
			return -EBUSY;
	}
	sqe = get_sqe(w);
	if (!sqe)
		return -EBUSY;
	op = new_op(w, cb, arg);
	if (!op) {
		/* Turn the taken SQE into a harmless no-op. */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, UD_IGNORE);
		return -ENOMEM;
	}
	io_uring_sqe_set_data(sqe, op);
	*sqe_out = sqe;
	if (op_out)
		*op_out = op;
	return 0;
}

/* Room for twice as many raw SQEs: 0 or -ENOMEM. */
static int grow_raw(struct agr_worker *w)
{
	unsigned cap = w->raw_cap ? 2 * w->raw_cap : RAW_SLOTS;
	struct raw_slot **raw = realloc(w->raw, cap * sizeof(*raw));

	if (!raw)
		return -ENOMEM;
	w->raw = raw;
	w->raw_cap = cap;
	return 0;
}

int agr__worker_raw_sqe(struct agr_worker *w, agr_io_cb cb, void *arg,
			struct io_uring_sqe **sqe_out)
{
	struct raw_slot *slot;
	int ret = may_submit(w, cb);

	if (ret)
		return ret;
	submit_early(w);
	if (w->nraw == w->raw_cap && grow_raw(w))
		return -ENOMEM;
	slot = calloc(1, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	slot->op = new_op(w, cb, arg);
	if (!slot->op) {
		free(slot);
		return -ENOMEM;
	}
	if (w->next.id)
		*w->next.id = slot->op->id;
	slot->fixed_file = w->next.flags & AGR_IO_FIXED_FILE;
	memset(&w->next, 0, sizeof(w->next));
	w->raw[w->nraw++] = slot;
	*sqe_out = &slot->sqe;
	return 0;
}

/*
 * Moves committed raw SQEs into the ring, as far as it has room. One
 * that links to what follows (IOSQE_IO_LINK) is kept with the next
 * operation: room for both first, and no early submit between them.
 */
static void move_raw(struct agr_worker *w)
{
	struct raw_slot *slot;
	struct io_uring_sqe *sqe;
	bool links;
	unsigned i;

	for (i = 0; i < w->nraw; i++) {
		slot = w->raw[i];
		links = slot->sqe.flags & IOSQE_IO_LINK;
		if (links && !w->chain_left && !reserve_sqes(w, 2))
			break;
		sqe = get_sqe(w);
		if (!sqe)
			break; /* the rest on the next try */
		memcpy(sqe, &slot->sqe, sizeof(*sqe));
		if (slot->fixed_file)
			sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data(sqe, slot->op);
		free(slot);
		if (links && !w->chain_left) {
			w->chain_left = 1; /* the next operation ends it */
			w->chain_last = sqe;
		}
	}
	memmove(w->raw, w->raw + i, (w->nraw - i) * sizeof(w->raw[0]));
	w->nraw -= i;
}

int agr__worker_commit_raw(struct agr_worker *w)
{
	if (!w->nraw)
		return -EALREADY;
	move_raw(w);
	return 0;
}

/* Teardown: raw SQEs never submitted end with -ECANCELED. */
static void drop_raw(struct agr_worker *w)
{
	struct agr__op *op;

	while (w->nraw) {
		op = w->raw[--w->nraw]->op;
		free(w->raw[w->nraw]);
		op_untrack(w, op);
		if (op->cqe_cb)
			op->cqe_cb(-ECANCELED, 0, op->arg);
		else
			op->cb(-ECANCELED, op->arg);
		op_free(w, op);
	}
}

struct __kernel_timespec *agr__op_timespec(struct agr__op *op)
{
	return &op->ts;
}

void agr__worker_set_owner(struct agr_worker *w, void *owner)
{
	w->current_owner = owner;
}

/* ---- what runs now, for the watchdog ---- */

static void running_begin(struct agr_worker *w)
{
	if (!atomic_load_explicit(&agr__watchdog_on, memory_order_relaxed))
		return;
	atomic_store_explicit(&w->running.label[0], 0, memory_order_relaxed);
	atomic_store_explicit(&w->running.since_ns, agr__now_ns(),
			      memory_order_release);
}

static void running_end(struct agr_worker *w)
{
	if (atomic_load_explicit(&w->running.since_ns, memory_order_relaxed))
		atomic_store_explicit(&w->running.since_ns, 0,
				      memory_order_release);
}

void agr__worker_label(struct agr_worker *w, const char *owner, int group,
		       const char *type)
{
	char text[LABEL_WORDS * sizeof(uint64_t)];
	uint64_t word;
	unsigned seq, i;

	snprintf(text, sizeof(text), "%.24s group %d type %.16s", owner,
		 group, type ? type : "-");
	/* Each handler is timed on its own, not the whole activation. */
	atomic_store_explicit(&w->running.since_ns, agr__now_ns(),
			      memory_order_release);
	seq = atomic_load_explicit(&w->running.seq, memory_order_relaxed);
	atomic_store_explicit(&w->running.seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (i = 0; i < LABEL_WORDS; i++) {
		memcpy(&word, text + i * sizeof(word), sizeof(word));
		atomic_store_explicit(&w->running.label[i], word,
				      memory_order_relaxed);
	}
	atomic_store_explicit(&w->running.seq, seq + 2, memory_order_release);
}

/* Reads the label into `buf` ("owner group type"); false if torn. */
static bool read_running(struct agr_worker *w, uint64_t *since_ns, char *buf,
			 size_t len)
{
	char text[LABEL_WORDS * sizeof(uint64_t)];
	unsigned before, after, i;
	uint64_t word;

	before = atomic_load_explicit(&w->running.seq, memory_order_acquire);
	*since_ns = atomic_load_explicit(&w->running.since_ns,
					 memory_order_acquire);
	/* Acquire loads keep the second look at seq after them. */
	for (i = 0; i < LABEL_WORDS; i++) {
		word = atomic_load_explicit(&w->running.label[i],
					    memory_order_acquire);
		memcpy(text + i * sizeof(word), &word, sizeof(word));
	}
	after = atomic_load_explicit(&w->running.seq, memory_order_relaxed);
	if ((before & 1) || before != after)
		return false;
	text[sizeof(text) - 1] = '\0';
	snprintf(buf, len, "%s", text[0] ? text : "a task");
	return true;
}

uint64_t agr__worker_take_blocked(struct agr_worker *w, uint64_t now,
				  uint64_t threshold_ns, char *buf, size_t len)
{
	uint64_t since;

	/* A run that began after `now` was read is young, not ancient. */
	if (!read_running(w, &since, buf, len) || since == 0 || since > now ||
	    now - since < threshold_ns || w->running.reported_since == since)
		return 0;
	w->running.reported_since = since; /* once per run */
	agr__bump(&w->stats.blocking_detected);
	return now - since;
}

static bool owner_has_ops(const struct agr_worker *w, const void *owner)
{
	const struct agr__op *op;

	for (op = w->inflight_list; op; op = op->next)
		if (op->owner == owner)
			return true;
	return false;
}

/* The last operation of a cancelled owner has run its callback. */
static void note_drained(struct agr_worker *w, struct agr__op *op)
{
	if (!owner_has_ops(w, op->owner))
		op->drained(op->owner, op->drained_arg);
}

static void complete_cqe(struct agr_worker *w, uint64_t ud, int res,
			 unsigned flags)
{
	struct agr__op *op;

	if (ud == UD_BELL) {
		agr__bump(&w->stats.doorbells);
		return;
	}
	if (ud == UD_IGNORE)
		return;
	if ((ud & 3) == UD_MSG_TAG) {
		struct agr_worker *target =
			(struct agr_worker *)(uintptr_t)(ud & ~(uint64_t)3);

		agr__log(AGR_LOG_WARN, "%s: doorbell to %s failed: %s",
			 w->thread_name, target->thread_name, strerror(-res));
		/* A peer (see send_doorbell): its ring is open until ours is. */
		if (target->sched == w->sched && !atomic_load(&target->exited))
			agr__doorbell_send_now(&target->bell, target->ring_fd);
		return;
	}
	op = (struct agr__op *)(uintptr_t)ud;
	agr__fault_io(&res);
	/* Its last CQE: no longer in flight, not even for its callback. */
	if (!(flags & IORING_CQE_F_MORE))
		op_untrack(w, op);
	agr__bump(&w->stats.io_completions);
	w->current_owner = op->owner; /* follow-up I/O has the same owner */
	w->owner_cancelled = op->cancelled;
	w->completing = op;
	running_begin(w);
	if (op->cqe_cb)
		op->cqe_cb(res, flags, op->arg);
	else
		op->cb(res, op->arg);
	end_of_callback(w);
	running_end(w);
	w->completing = NULL;
	w->owner_cancelled = false;
	w->current_owner = NULL;
	if (flags & IORING_CQE_F_MORE) {
		op->notif_only = op->zero_copy;
		return;
	}
	if (agr__unlikely(op->drained != NULL))
		note_drained(w, op);
	op_free(w, op);
}

/* Runs the callbacks of every completion that is ready. */
static unsigned reap(struct agr_worker *w)
{
	struct io_uring_cqe *cqes[CQE_BATCH];
	uint64_t ud[CQE_BATCH];
	unsigned flags[CQE_BATCH];
	int res[CQE_BATCH];
	unsigned n, i, total = 0;

	do {
		n = io_uring_peek_batch_cqe(&w->ring, cqes, CQE_BATCH);
		/* Copy first: callbacks may submit and re-enter the ring. */
		for (i = 0; i < n; i++) {
			ud[i] = cqes[i]->user_data;
			res[i] = cqes[i]->res;
			flags[i] = cqes[i]->flags;
		}
		io_uring_cq_advance(&w->ring, n);
		for (i = 0; i < n; i++)
			complete_cqe(w, ud[i], res[i], flags[i]);
		total += n;
	} while (n == CQE_BATCH && total < REAP_LIMIT);
	return total;
}

/* ---- inbox ---- */

static struct agr__work *inbox_pop(struct agr_worker *w)
{
	struct agr__mpsc_node *n = agr__mpsc_pop_wait(&w->inbox);

	return n ? agr__container_of(n, struct agr__work, node) : NULL;
}

/* Runs up to INBOX_BATCH items; true if more may be waiting. */
static bool run_inbox(struct agr_worker *w)
{
	struct agr__work *work;
	unsigned n;

	for (n = 0; n < INBOX_BATCH; n++) {
		if (atomic_load_explicit(&w->force, memory_order_relaxed))
			return true;
		work = inbox_pop(w);
		if (!work)
			return false;
		agr__bump(&w->stats.items);
		running_begin(w);
		work->fn(work, w, 0);
		end_of_callback(w);
		running_end(w);
	}
	return true;
}

static void drop_inbox(struct agr_worker *w)
{
	struct agr__work *work;

	while ((work = inbox_pop(w)) != NULL)
		work->fn(work, w, -ECANCELED);
}

/* The worker whose orphans this thread is running, if any. */
static _Thread_local struct agr_worker *adopting;

void agr__worker_adopt_orphans(struct agr_worker *w)
{
	if (adopting == w)
		return; /* a dropped item posted more: the loop below runs it */
	pthread_mutex_lock(&w->orphan_lock);
	adopting = w;
	drop_inbox(w);
	adopting = NULL;
	pthread_mutex_unlock(&w->orphan_lock);
}

/* ---- pollers ---- */

void agr__worker_add_poller(struct agr_worker *w, struct agr__poller *p)
{
	p->next = w->pollers;
	w->pollers = p;
	p->added = true;
}

void agr__worker_remove_poller(struct agr_worker *w, struct agr__poller *p)
{
	struct agr__poller **pp;

	if (!p->added)
		return;
	for (pp = &w->pollers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->added = false;
	p->next = NULL;
}

/*
 * Asks every poller to look (see enum agr__poll_mode); true if one ran
 * something. A poller may remove itself and add itself again meanwhile,
 * hence the next one is read first.
 */
static bool poll_all(struct agr_worker *w, enum agr__poll_mode mode)
{
	struct agr__poller *p, *next;
	bool ran = false;

	for (p = w->pollers; p; p = next) {
		next = p->next;
		if (p->poll(p, w, mode)) {
			ran = true;
			end_of_callback(w);
		}
	}
	return ran;
}

/* ---- loop ---- */

/*
 * A graceful stop wakes the loop only once nothing is in flight: until
 * then the worker must sleep in the kernel, where completions arrive.
 */
static bool must_wake(struct agr_worker *w)
{
	return agr__mpsc_maybe_nonempty(&w->inbox) || atomic_load(&w->force) ||
	       (atomic_load(&w->stop_requested) && w->inflight == 0);
}

/*
 * Arms the doorbell and sleeps until a completion arrives, unless work
 * showed up meanwhile. The re-check after arming pairs with the
 * producer's push-then-exchange, so a wake-up cannot be lost.
 */
static void sleep_in_kernel(struct agr_worker *w)
{
	uint64_t slept_at;
	int ret;

	agr__bell_arm(&w->bell);
	if (must_wake(w)) {
		agr__bell_unarm(&w->bell);
		return;
	}
	slept_at = agr__now_ns();
	ret = agr__ring_wait(&w->ring);
	agr__bump_by(&w->stats.blocked_ns, agr__now_ns() - slept_at);
	if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -EBUSY &&
	    ret != -EAGAIN)
		agr__log(AGR_LOG_ERROR, "%s: io_uring_submit_and_wait: %s",
			 w->thread_name, strerror(-ret));
	agr__bell_awake(&w->bell);
}

const struct agr__worker_settings agr__worker_defaults = {
	.sqpoll_cpu = -1,
	.idle_spin_us = -1,
	.submit_batch = -1,
};

static unsigned sq_entries_of(const struct agr__worker_settings *st)
{
	return st->sq_entries ? st->sq_entries : AGR__RING_SQ_ENTRIES;
}

static unsigned cq_entries_of(const struct agr__worker_settings *st)
{
	unsigned sq = sq_entries_of(st);

	if (st->cq_entries)
		return st->cq_entries;
	return 2 * sq > AGR__RING_CQ_ENTRIES ? 2 * sq : AGR__RING_CQ_ENTRIES;
}

/*
 * The loop's settings, read as the worker starts: the options, else
 * the environment, else the defaults.
 */
static void read_settings(struct agr_worker *w)
{
	const struct agr__worker_settings *st = &w->settings;
	long spin_us = 0;

	/* Unset or bad (logged): the worker picks (IDLE_SPIN_NS_*). */
	w->idle_spin_chosen = agr__setting_idle_spin_us(st->idle_spin_us,
							&spin_us);
	w->idle_spin_ns = w->idle_spin_chosen ? (uint64_t)spin_us * 1000u :
						IDLE_SPIN_NS_DEFAULT;
	w->online_cpus = agr__online_cpus();
	w->submit_batch = agr__setting_submit_batch(st->submit_batch,
						    sq_entries_of(st),
						    SUBMIT_BATCH_DEFAULT);
}

/* The ring, pinned where asked; 0 or the setup's error (logged). */
static int setup_ring(struct agr_worker *w)
{
	const struct agr__worker_settings *st = &w->settings;
	struct agr__ring_setup setup = {
		.sq_entries = sq_entries_of(st),
		.cq_entries = cq_entries_of(st),
		.ring_flags = st->ring_flags,
		.sqpoll_idle_ms = st->sqpoll_idle_ms,
		.sqpoll_cpu = st->sqpoll_cpu,
	};
	/* Before the ring exists, so that its memory is local too. */
	int cpu = agr__pin_worker(w->thread_name, w->index, st->cpus,
				  st->ncpus);
	int ret = agr__ring_init(&w->ring, &setup, w->thread_name, NULL);

	if (ret)
		return ret;
	w->ring_fd = w->ring.ring_fd;
	atomic_store(&w->ring_ready, true);
	agr__pin_io_workers(&w->ring, w->thread_name, cpu);
	return 0;
}

static void tear_down(struct agr_worker *w);

/* The user's init hook; on failure its I/O, if any, is ended. */
static int run_init_hook(struct agr_worker *w)
{
	const struct agr__worker_settings *st = &w->settings;
	int ret;

	if (!st->init)
		return 0;
	ret = st->init(w, st->hook_arg);
	if (ret > 0) {
		agr__log(AGR_LOG_ERROR, "%s: the worker init hook returned "
			 "%d, neither 0 nor a negative errno", w->thread_name,
			 ret);
		ret = -EINVAL;
	} else if (ret < 0) {
		agr__log(AGR_LOG_ERROR, "%s: the worker init hook failed: %s",
			 w->thread_name, strerror(-ret));
	}
	end_of_callback(w);
	if (ret < 0)
		tear_down(w);
	return ret;
}

static void poll_kernel(struct agr_worker *w);

/* Completions are ready, or wait in the kernel for a trip to it. */
static bool io_done(struct agr_worker *w)
{
	if (io_uring_cq_ready(&w->ring))
		return true;
	if (!(IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_TASKRUN))
		return false;
	poll_kernel(w);
	return true;
}

/*
 * Whether CPUs are to spare: SPARE_CPUS or more beyond the workers of
 * the process, of all its schedulers. Unless they are, an idle spin
 * gives the CPU away now and then, so that a producer (or a client, or
 * the kernel's network work) sharing a CPU with a spinner gets to run;
 * with CPUs to spare a yield is a system call that helps nobody.
 */
static bool cpus_to_spare(const struct agr_worker *w)
{
	return atomic_load_explicit(&live_workers, memory_order_relaxed) +
		       SPARE_CPUS <=
	       w->online_cpus;
}

/*
 * Watches for work for up to w->idle_spin_ns before sleeping; true if work
 * (or a stop) showed up. The bell stays rung meanwhile, so producers
 * push without ringing. Completions of I/O need a trip to the kernel to
 * show (DEFER_TASKRUN); the kernel flags them (TASKRUN_FLAG) and the
 * spin makes the trip at once.
 */
static bool spin_for_work(struct agr_worker *w)
{
	uint64_t deadline;
	unsigned i, pauses = 1, k;
	bool yields;

	if (w->idle_spin_ns == 0)
		return must_wake(w) || io_done(w);
	yields = !cpus_to_spare(w);
	deadline = agr__now_ns() +
		   (w->idle_spin_chosen || yields ? w->idle_spin_ns :
						    IDLE_SPIN_NS_SPARE_CPUS);

	for (i = 1;; i++) {
		if (must_wake(w) || io_done(w) ||
		    (w->pollers && poll_all(w, AGR__POLL_LOOK)))
			return true;
		/* A pause takes tens of ns: look at the clock now and then. */
		if (!(i & 3) && agr__now_ns() >= deadline)
			return false;
		/*
		 * Where the workers fill the machine, give the CPU now and
		 * then to whoever else can run: often the producer we wait
		 * for, which a spinner that never yields starves.
		 */
		if (yields) {
			if (!(i & 15))
				sched_yield();
			else
				agr__cpu_relax();
			continue;
		}
		/*
		 * With CPUs to spare, look less often the longer nothing
		 * comes: each look takes the lines producers write into our
		 * cache, and taking them after every message makes each of
		 * their writes a miss.
		 */
		for (k = 0; k < pauses; k++)
			agr__cpu_relax();
		if (pauses < SPIN_PAUSES_MAX)
			pauses *= 2;
	}
}

/* Lets completions that arrived (DEFER_TASKRUN needs an enter) show. */
static void poll_kernel(struct agr_worker *w)
{
	int ret = io_uring_submit_and_get_events(&w->ring);

	if (ret == -EBUSY || ret == -EAGAIN)
		reap(w);
}

/* An SQE for an internal request whose CQE is ignored; NULL if none. */
static struct io_uring_sqe *cancel_sqe(struct agr_worker *w)
{
	struct io_uring_sqe *sqe = get_sqe(w);

	if (sqe)
		io_uring_sqe_set_data64(sqe, UD_IGNORE);
	return sqe;
}

int agr__worker_cancel_ops(struct agr_worker *w, const void *key,
			   enum agr__op_match match)
{
	struct io_uring_sqe *sqe;
	struct agr__op *op;
	int n = 0;

	for (op = w->inflight_list; op; op = op->next) {
		if ((match == AGR__MATCH_OWNER ? op->owner : op->arg) != key)
			continue;
		sqe = cancel_sqe(w);
		if (!sqe)
			return n > 0 ? n : -EBUSY;
		io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op, 0);
		io_uring_sqe_set_data64(sqe, UD_IGNORE);
		n++;
	}
	return n;
}

int agr__worker_cancel_owner(struct agr_worker *w, void *owner,
			     agr__drained_fn drained, void *arg)
{
	struct agr__op *op;
	int n = 0;

	/* Marked first: a cancel request that finds no SQE is retried. */
	for (op = w->inflight_list; op; op = op->next) {
		if (op->owner != owner)
			continue;
		op->cancelled = true;
		op->drained = drained;
		op->drained_arg = arg;
		n++;
	}
	if (n > 0)
		agr__worker_cancel_ops(w, owner, AGR__MATCH_OWNER);
	return n;
}

void agr__worker_disown(struct agr_worker *w, const void *owner)
{
	struct agr__op *op;

	for (op = w->inflight_list; op; op = op->next)
		if (op->owner == owner)
			op->drained = NULL;
	if (w->completing && w->completing->owner == owner)
		w->completing->drained = NULL;
}

static void cancel_inflight(struct agr_worker *w)
{
	struct io_uring_sqe *sqe = cancel_sqe(w);

	if (!sqe)
		return; /* retried on the next turn */
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, UD_IGNORE);
}

/*
 * A force stop names what it still waits for this often, and gives up
 * on zero-copy notifications after TEARDOWN_ZC_GIVE_UP_NS: only a peer
 * that reads, or closes its socket, makes the kernel release the
 * pages of bytes queued to it, and a stop must not wait for a peer.
 */
#define TEARDOWN_REPORT_NS (5ull * 1000000000u)
#define TEARDOWN_ZC_GIVE_UP_NS (10ull * 1000000000u)
#define TEARDOWN_TICK_NS 250000000ll /* a look at the clock */

/* In-flight operations that wait only for their notification. */
static unsigned count_notif_only(struct agr_worker *w)
{
	struct agr__op *op;
	unsigned n = 0;

	for (op = w->inflight_list; op; op = op->next)
		n += op->notif_only;
	return n;
}

static void report_teardown(struct agr_worker *w, uint64_t waited_ns)
{
	unsigned zc = count_notif_only(w);

	agr__log(AGR_LOG_WARN,
		 "%s: force stop has waited %.1f s for %u ring operation(s): "
		 "%u zero-copy send notification(s) (the kernel holds those "
		 "buffers until the peer reads or closes its socket; given up "
		 "%llu s into the stop) and %u other(s) the kernel has not "
		 "cancelled (they end on their own)",
		 w->thread_name, (double)waited_ns / 1e9, w->inflight, zc,
		 (unsigned long long)(TEARDOWN_ZC_GIVE_UP_NS / 1000000000u),
		 w->inflight - zc);
}

/*
 * Gives up on notifications that did not come: each callback runs a
 * last time with -ETIMEDOUT and IORING_CQE_F_NOTIF (agr_io_send_zc()
 * says what that means for the buffer). The kernel may post the real
 * one later, into a ring nobody reads any more.
 */
static void abandon_notifications(struct agr_worker *w)
{
	struct agr__op *op, *next;

	agr__log(AGR_LOG_WARN,
		 "%s: force stop gave up on %u zero-copy send notification(s) "
		 "after %llu s: their buffers may still be read by the kernel "
		 "until the peer reads or closes its socket",
		 w->thread_name, w->inflight,
		 (unsigned long long)(TEARDOWN_ZC_GIVE_UP_NS / 1000000000u));
	for (op = w->inflight_list; op; op = next) {
		next = op->next;
		op_untrack(w, op);
		w->completing = op;
		running_begin(w);
		op->cqe_cb(-ETIMEDOUT, IORING_CQE_F_NOTIF, op->arg);
		end_of_callback(w);
		running_end(w);
		w->completing = NULL;
		op_free(w, op);
	}
}

/*
 * Submits and waits for a completion, or TEARDOWN_TICK_NS at most: a
 * look at the clock however long the kernel takes. (Valgrind does not
 * know that this call blocks and keeps its lock through it, so there
 * the other threads may wait until this worker has left its teardown,
 * up to TEARDOWN_ZC_GIVE_UP_NS.)
 */
static void wait_a_tick(struct agr_worker *w)
{
	struct __kernel_timespec ts = { 0, TEARDOWN_TICK_NS };
	struct io_uring_cqe *cqe;

	io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
}

/*
 * Immediate dispose on this worker: queued items are dropped (each is
 * told), in-flight operations are cancelled and reaped, so their
 * callbacks have all run (most with -ECANCELED) when the loop ends.
 * What the kernel does not end at once is named every 5 s; zero-copy
 * notifications are given up on after TEARDOWN_ZC_GIVE_UP_NS.
 */
static void tear_down(struct agr_worker *w)
{
	uint64_t start = agr__now_ns(), report = start + TEARDOWN_REPORT_NS;
	uint64_t now, cancel_at = 0;

	w->closing = true;
	atomic_store_explicit(&w->tearing_down, true, memory_order_relaxed);
	drop_raw(w);
	drop_inbox(w);
	while (w->inflight > 0) {
		/* Once a tick: each cancel's own CQE ends the next wait. */
		if (agr__now_ns() >= cancel_at) {
			cancel_inflight(w);
			cancel_at = agr__now_ns() + (uint64_t)TEARDOWN_TICK_NS;
		}
		wait_a_tick(w);
		reap(w);
		now = agr__now_ns();
		if (w->inflight > 0 && now >= report) {
			report_teardown(w, now - start);
			report = now + TEARDOWN_REPORT_NS;
		}
		if (w->inflight > 0 && now - start >= TEARDOWN_ZC_GIVE_UP_NS &&
		    count_notif_only(w) == w->inflight)
			abandon_notifications(w);
	}
	drop_inbox(w);
}

static bool graceful_done(struct agr_worker *w)
{
	if (!atomic_load(&w->stop_requested))
		return false;
	/* Held groups go back first: their next sends must reach us. */
	if (w->pollers && poll_all(w, AGR__POLL_RELEASE))
		return false;
	return !w->pollers && !agr__mpsc_maybe_nonempty(&w->inbox) &&
	       w->inflight == 0;
}

/* The kernel kept CQEs aside (FEAT_NODROP); reaping drains them. */
static void note_cq_overflow(struct agr_worker *w)
{
	if (IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW)
		agr__bump(&w->stats.cq_overflow);
}

static void worker_loop(struct agr_worker *w)
{
	bool more, polled;

	for (;;) {
		agr__bump(&w->stats.iterations);
		/* Raw SQEs the ring had no room for last time. */
		if (agr__unlikely(w->nraw))
			move_raw(w);
		note_cq_overflow(w);
		reap(w);
		more = run_inbox(w);
		polled = w->pollers && poll_all(w, AGR__POLL_LOOK);
		if (atomic_load(&w->force)) {
			poll_all(w, AGR__POLL_DROP);
			tear_down(w);
			break;
		}
		if (graceful_done(w))
			break;
		if (more)
			poll_kernel(w);
		else if (polled && io_uring_sq_ready(&w->ring))
			poll_kernel(w); /* what the groups run submitted */
		else if (polled)
			io_done(w); /* enters the kernel only if it has work */
		else if (!spin_for_work(w) &&
			 !(w->pollers && poll_all(w, AGR__POLL_RELEASE)))
			sleep_in_kernel(w);
	}
	w->closing = true;
	agr__worker_flush(w); /* doorbells to peers still queued */
	reap(w); /* a doorbell that failed at once is sent again */
}

static void set_thread_name(struct agr_worker *w)
{
	pthread_setname_np(pthread_self(), w->thread_name);
}

static void free_op_pool(struct agr_worker *w)
{
	struct agr__op *op;

	while ((op = w->free_ops) != NULL) {
		w->free_ops = op->next;
		free(op);
	}
}

/* Thread body; `arg` is the worker. */
static void *worker_main(void *arg)
{
	struct agr_worker *w = arg;
	int ret;

	set_thread_name(w);
	agr__log_set_thread_hook(w->settings.log_fn, w->settings.log_arg);
	agr__ring_wait_set_mode(w->settings.wait_mode);
	read_settings(w);
	agr__current_worker = w;
	ret = setup_ring(w);
	if (ret == 0)
		ret = run_init_hook(w);
	w->hooks.ready(w->hooks.arg, ret);
	atomic_store_explicit(&w->stats.started_ns, agr__now_ns(),
			      memory_order_relaxed);
	if (ret == 0) {
		atomic_fetch_add(&live_workers, 1);
		worker_loop(w);
		atomic_fetch_sub(&live_workers, 1);
		if (w->settings.exit)
			w->settings.exit(w, w->settings.hook_arg);
	}
	atomic_store_explicit(&w->stats.exited_ns, agr__now_ns(),
			      memory_order_relaxed);
	free_op_pool(w);
	agr__ring_wait_exit();
	agr__current_worker = NULL;
	/* What was pushed after our last look is adopted, by us or them. */
	atomic_store(&w->exited, true);
	agr__worker_adopt_orphans(w);
	agr__log_set_thread_hook(NULL, NULL);
	w->hooks.exited(w->hooks.arg);
	return NULL;
}

/* ---- life cycle, driven by the scheduler ---- */

int agr__worker_new(const struct agr__worker_config *cfg,
		    struct agr_worker **out)
{
	struct agr_worker *w;
	size_t n;

	if (posix_memalign((void **)&w, AGR__CACHELINE, sizeof(*w)) != 0)
		return -ENOMEM;
	memset(w, 0, sizeof(*w));
	agr__mpsc_init(&w->inbox);
	agr__bell_init(&w->bell);
	atomic_init(&w->stop_requested, false);
	atomic_init(&w->force, false);
	atomic_init(&w->interrupted, false);
	atomic_init(&w->exited, false);
	atomic_init(&w->tearing_down, false);
	atomic_init(&w->ring_ready, false);
	pthread_mutex_init(&w->orphan_lock, NULL);
	w->ring_fd = -1;
	w->sched = cfg->sched;
	w->index = cfg->index;
	w->hooks = cfg->hooks;
	w->settings = cfg->settings ? *cfg->settings : agr__worker_defaults;
	n = strnlen(cfg->thread_name, sizeof(w->thread_name) - 1);
	memcpy(w->thread_name, cfg->thread_name, n);
	w->thread_name[n] = '\0';
	*out = w;
	return 0;
}

int agr__worker_start(struct agr_worker *w)
{
	int ret = AGR__FAULT_OR(AGR_FAULT_THREAD_CREATE,
				-pthread_create(&w->thread, NULL, worker_main,
						w));

	if (ret == 0)
		w->thread_started = true;
	return ret;
}

void agr__worker_request_stop(struct agr_worker *w, bool immediate)
{
	if (immediate) {
		/* Both before anything is joined: a task may poll either. */
		atomic_store(&w->interrupted, true);
		atomic_store(&w->force, true);
	} else {
		atomic_store(&w->stop_requested, true);
	}
	if (atomic_load(&w->ring_ready))
		agr__worker_wake(w);
}

void agr__worker_join(struct agr_worker *w)
{
	if (w->thread_started)
		pthread_join(w->thread, NULL);
	w->thread_started = false;
}

void agr__worker_free(struct agr_worker *w)
{
	if (!w)
		return;
	free(w->raw);
	if (atomic_load(&w->ring_ready))
		io_uring_queue_exit(&w->ring);
	pthread_mutex_destroy(&w->orphan_lock);
	free(w);
}

const char *agr__worker_name(const struct agr_worker *w)
{
	return w->thread_name;
}

bool agr__worker_exited(const struct agr_worker *w)
{
	return atomic_load(&w->exited);
}

bool agr__worker_tearing_down(const struct agr_worker *w)
{
	return atomic_load_explicit(&w->tearing_down, memory_order_relaxed);
}

bool agr__worker_closing(const struct agr_worker *w)
{
	return w->closing;
}

int agr__worker_inflight(const struct agr_worker *w)
{
	return (int)atomic_load_explicit(&w->inflight_now,
					 memory_order_relaxed);
}

static uint64_t read_stat(const atomic_uint_fast64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* Loop lifetime so far, less the time asleep. */
static uint64_t running_ns(const struct worker_stats *st, uint64_t blocked)
{
	uint64_t start = read_stat(&st->started_ns);
	uint64_t end = read_stat(&st->exited_ns);
	uint64_t life;

	if (!start)
		return 0;
	life = (end ? end : agr__now_ns()) - start;
	return life > blocked ? life - blocked : 0;
}

void agr__worker_stats_copy(const struct agr_worker *w,
			    struct agr_worker_metrics *out)
{
	const struct worker_stats *st = &w->stats;

	memset(out, 0, sizeof(*out));
	out->iterations = read_stat(&st->iterations);
	out->doorbells = read_stat(&st->doorbells);
	out->items = read_stat(&st->items);
	out->io_completions = read_stat(&st->io_completions);
	out->blocked_ns = read_stat(&st->blocked_ns);
	out->running_ns = running_ns(st, out->blocked_ns);
	out->sq_full = read_stat(&st->sq_full);
	out->cq_overflow = read_stat(&st->cq_overflow);
	out->early_submits = read_stat(&st->early_submits);
	out->blocking_detected = read_stat(&st->blocking_detected);
	out->inflight = agr__worker_inflight(w);
}
