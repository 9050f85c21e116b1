/* SPDX-License-Identifier: MIT */
/*
 * aggring/dispatcher.h - per-aggregate message dispatch: groups that run
 * serially on one ring each, concurrently with each other.
 *
 * A dispatcher serves one named aggregate. Each message goes to group
 * floorMod(hash(aggregate id), parallelism) (aggring/group_key.h), and
 * group g always runs on worker g % (scheduler parallelism) of the named
 * aggregate's scheduler. Within a group, messages are handled strictly
 * one at a time, in the order they were admitted, and a message that
 * completes asynchronously (AGR_PENDING) holds its group until
 * agr_exchange_done(). Different groups run concurrently, on the same
 * worker as well as on different ones.
 *
 * Accounting: agr_dispatcher_send() returns 0 when it admits a message,
 * and then the completion callback runs exactly once for it, with 0
 * (handled), the first error of its functions, AGR_INTERRUPTED (a
 * function handled it but its I/O was cancelled, or a force stop ended
 * it pending), or AGR_DISCARDED (dropped unhandled by a force stop). A
 * message that is not admitted never sees the callback: the caller
 * still owns it and may redeliver.
 *
 * Lifecycle: new -> (sends are admitted and wait) -> start -> quiesce
 * (intake closes) -> stop_gracefully (every admitted message completes)
 * or force_stop (queued messages are discarded, in-progress I/O is
 * cancelled) -> free.
 */
#ifndef AGGRING_DISPATCHER_H
#define AGGRING_DISPATCHER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/histogram.h>
#include <aggring/supplier.h>
#include <aggring/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A function's "I will call agr_exchange_done() later". */
#define AGR_PENDING 1

/*
 * Completion status of a message dropped unhandled: no function saw it
 * (it was queued, or parked before start, when a force stop came), so
 * it had no effect and redelivering it is safe.
 */
#define AGR_DISCARDED (-ECANCELED)

/*
 * Completion status of a message a function handled but could not
 * finish: its I/O was cancelled (the function finished with
 * -ECANCELED, or with -ESHUTDOWN during a force stop), or it was still
 * pending when a force stop ended it. Some of its effects may have
 * happened (a write landed, its fsync was cancelled): redeliver it only
 * if handling it twice is harmless (an idempotent function, a request
 * id). A function's -ECANCELED always becomes AGR_INTERRUPTED, so that
 * AGR_DISCARDED only ever means "no function saw it". A function's own
 * -EINTR has the value of AGR_INTERRUPTED, so it reads (and is
 * counted) as interrupted too: return another errno for a failure of
 * its own.
 */
#define AGR_INTERRUPTED (-EINTR)

/*
 * A message. Sending does not copy it: it stays the caller's, must stay
 * alive and unchanged from agr_dispatcher_send() until its completion
 * callback. Nor are the strings copied: `aggregate_id` and `type` must
 * live as long as the message (the worker reads `type` to match
 * functions, and logs may name both). It is in flight from the send
 * that admits it until its completion callback is called (from then on
 * it is the caller's again: the callback may send it anew); a send of a
 * message in flight is refused with -EBUSY and changes nothing.
 * `internal_` belongs to aggring while the message is in flight and
 * tells it so: initialise it to zero once (a message whose internal_
 * holds garbage looks in flight), and leave it alone afterwards.
 */
typedef struct agr_message {
	const char *aggregate_id; /* routes the message; not NULL */
	const char *type;	  /* selects functions; may be NULL */
	const void *body;
	size_t body_len;
	void *user; /* free for the caller */
	struct {
		uint64_t opaque_[6];
	} internal_;
} agr_message;

/* A dispatcher. */
typedef struct agr_dispatcher agr_dispatcher;


/*
 * The handling of one message by the functions that match it. It lives
 * inside the message (`internal_`): valid from the first function's
 * call until the completion callback is called, not after it (the
 * message is the caller's again, and a new send reuses the memory).
 */
typedef struct agr_exchange agr_exchange;

/*
 * A function registered for a message type. Runs on the group's worker.
 * Returns 0 when done, AGR_PENDING when it will call agr_exchange_done()
 * later (typically from an I/O callback), or a negative errno, which
 * becomes the message's status (-ECANCELED becomes AGR_INTERRUPTED).
 * Any other value is reported as -EINVAL.
 */
typedef int (*agr_handler_fn)(agr_exchange *ex, void *arg);

/*
 * Runs once per admitted message, on the group's worker (or, for a
 * message discarded after its worker stopped or before it reached one,
 * on the thread that stops or frees the dispatcher). The message is the
 * caller's again when this is called.
 */
typedef void (*agr_complete_fn)(agr_message *msg, int status, void *arg);

/* Custom routing: returns a group in [0, parallelism). */
typedef int (*agr_group_key_fn)(const agr_message *msg, int parallelism,
				void *arg);

/*
 * Initialise with AGR_DISPATCHER_OPTIONS_INIT, then set what you need;
 * a field left as initialised means its default. `size` lets later
 * versions add fields without breaking callers built against this one:
 * new fields take the reserved words, which must stay zero, so that the
 * struct's size (and agr_composite_options, which holds two) does not
 * change. A size of 0 (a struct zero-initialised, or built with
 * designated initialisers that leave size out, as before size existed)
 * reads the fields of this first version: it keeps working, but fields
 * added later are read only when size says the caller knows them.
 * Refused with -EINVAL and a log line: a size smaller than this first
 * version's, or larger than this one's with non-zero bytes beyond,
 * and non-zero reserved words.
 */
typedef struct agr_dispatcher_options {
	size_t size;			/* sizeof(agr_dispatcher_options) */
	const char *name;		/* for logs and threads; not NULL */
	agr_named_aggregate named_aggregate;
	/*
	 * Number of groups; 0 means 64 x online CPUs, or the environment
	 * variable AGR_PARALLELISM when set.
	 */
	int parallelism;
	/*
	 * Where the dispatcher gets its scheduler (get_or_init of the named
	 * aggregate). With owns_supplier the dispatcher stops the supplier
	 * after its own stop and frees it in agr_dispatcher_free();
	 * otherwise the supplier (or the owner of a borrowed view) must
	 * outlive the dispatcher.
	 */
	agr_supplier *supplier;
	bool owns_supplier;
	agr_complete_fn on_complete; /* not NULL */
	void *complete_arg;
	agr_group_key_fn group_key; /* NULL: agr_group_key(aggregate_id) */
	void *group_key_arg;
	/* Messages one group may hold before sends get -EAGAIN; 0: none. */
	unsigned queue_limit;
	/*
	 * Record queue and processing latency histograms and queue depth
	 * (aggring/metrics.h): two clock reads per message. Off by default.
	 */
	bool metrics;
	uint64_t reserved[8];
} agr_dispatcher_options;

#define AGR_DISPATCHER_OPTIONS_INIT { .size = sizeof(agr_dispatcher_options) }

/*
 * Creates a dispatcher and gets (or creates) its scheduler. Returns 0,
 * -EINVAL (a size or reserved words it cannot read, NULL or empty name,
 * invalid named aggregate, no supplier or callback, negative
 * parallelism, invalid AGR_PARALLELISM; the log hook
 * is told which option and why), -ENOMEM,
 * -ESHUTDOWN (the supplier is stopping), or the error that kept the
 * scheduler's rings from starting (see agr_supplier_get_or_init()).
 * On failure the supplier stays the caller's, even with owns_supplier:
 * it is neither stopped nor freed (a scheduler the call created for the
 * named aggregate stays in its cache).
 */
AGR_API int agr_dispatcher_new(const agr_dispatcher_options *options,
			       agr_dispatcher **out);

/*
 * Registers fn for messages whose type equals `type`; NULL matches every
 * message. All functions that match one message start together on its
 * group's worker, in no promised order; the message is done when all
 * are. Only before agr_dispatcher_start() and agr_dispatcher_quiesce():
 * -EBUSY after. Returns 0, -EINVAL, -ENOMEM, -EBUSY.
 */
AGR_API int agr_dispatcher_register(agr_dispatcher *d, const char *type,
				    agr_handler_fn fn, void *arg);

/*
 * Starts handling. Messages admitted before start are handled now, in
 * order. Returns 0 (also when already running), -ESHUTDOWN once quiesced
 * or stopped, -EINVAL.
 */
AGR_API int agr_dispatcher_start(agr_dispatcher *d);

/*
 * Admits `msg` into its group. Returns 0 (admitted: the completion
 * callback will run exactly once), -EINVAL (NULL message or aggregate
 * id, or a custom group key out of range; logged), -EBUSY (the message
 * is in flight, see agr_message: nothing changes, nothing is counted;
 * logged), -ESHUTDOWN (quiesced or stopped, or the scheduler is
 * disposed: not admitted, the callback will never run), -EAGAIN (the
 * group holds queue_limit messages). Only 0 makes the message in
 * flight: after an error it is the caller's as before. Lock-free
 * (it waits only while the kernel refuses a worker's doorbell, retried
 * with backoff); callable from any thread, including handlers of other
 * dispatchers.
 */
AGR_API int agr_dispatcher_send(agr_dispatcher *d, agr_message *msg);

/*
 * Admits msgs[0..n) in order and wakes each worker at most once.
 * Stops at the first message it cannot admit: *admitted (if not NULL)
 * is the number admitted, msgs[0..*admitted) are in flight, and the
 * return value is 0 when all were, or that message's error, as
 * agr_dispatcher_send() would return it (-EINVAL, -EBUSY, -ESHUTDOWN,
 * -EAGAIN). The messages from that one on are untouched and not
 * offered, so the stats agree with the return value: one refusal
 * (stats.refused) for that message when its error is -ESHUTDOWN or
 * -EAGAIN, whether intake was closed before the first message or the
 * group of a later one was full; none for the others.
 */
AGR_API int agr_dispatcher_send_batch(agr_dispatcher *d, agr_message **msgs,
				      size_t n, size_t *admitted);

/*
 * Closes intake at once: later sends get -ESHUTDOWN. Admitted messages
 * still complete. Before start, the dispatcher stops for good and
 * messages admitted before start are discarded. Idempotent.
 */
AGR_API int agr_dispatcher_quiesce(agr_dispatcher *d);

/*
 * Quiesces if needed, then waits up to `timeout_ns` until every admitted
 * message has completed, the active ones and those queued behind them,
 * in order. With owns_supplier, then stops the supplier within the same
 * deadline. Returns 0, -ETIMEDOUT (this wait ran out; the stop goes on,
 * and a later call or agr_dispatcher_force_stop() can finish it; the
 * log hook is told which groups hold it, with the type and age of the
 * message each holds), -EINVAL. Must not be called from one of the
 * dispatcher's workers.
 */
AGR_API int agr_dispatcher_stop_gracefully(agr_dispatcher *d,
					   uint64_t timeout_ns);

/*
 * Stops now and returns without waiting: intake closes, queued messages
 * complete with AGR_DISCARDED on their workers, and the ring operations
 * of messages in progress are cancelled (their callbacks get
 * -ECANCELED, or their real result if they had finished). From then on,
 * an agr_io_* call made from the callback of such an operation, on
 * behalf of its message, is refused with -ECANCELED (or -ESHUTDOWN
 * once the workers tear down), so a handler that resubmits from its
 * own callbacks ends its chain within a hop or two. A message in
 * progress completes when its functions call agr_exchange_done() (a
 * status of -ECANCELED, or -ESHUTDOWN, then completes it with
 * AGR_INTERRUPTED) or, once it has no ring operation left, with
 * AGR_INTERRUPTED: a function that returned AGR_PENDING and never
 * finishes cannot hold the stop. A
 * later agr_exchange_done() for it is logged and ignored (while the
 * message and the dispatcher exist and the message was not sent
 * again). When the force also tears the workers down (owns_supplier,
 * or the supplier is force-stopped) while such a message's I/O is
 * being cancelled, the message is ended (AGR_INTERRUPTED) by the next
 * agr_dispatcher_stop_gracefully() or agr_dispatcher_free(). Only a
 * function blocked inside a call can hold a force stop. With
 * owns_supplier, force-stops the supplier too. Idempotent. Returns 0
 * or -EINVAL.
 */
AGR_API int agr_dispatcher_force_stop(agr_dispatcher *d);

/*
 * Force-stops if still running, waits until every admitted message has
 * completed (see agr_dispatcher_force_stop(): only a function blocked
 * in a call, or I/O the kernel does not cancel, can keep it waiting,
 * and then it logs what it waits for, by dispatcher, group, message
 * type and age, every 5 s), frees the dispatcher and, with
 * owns_supplier, the supplier, which waits for its workers as
 * agr_supplier_free() does: a zero-copy send's notification that a
 * peer holds is named every 5 s and given up on 10 s into the force
 * stop (agr_io_send_zc()). Not from one of its workers. NULL is a
 * no-op.
 */
AGR_API void agr_dispatcher_free(agr_dispatcher *d);

/* The name from the options (a copy, valid until free); NULL if NULL. */
AGR_API const char *agr_dispatcher_name(const agr_dispatcher *d);
/* Number of groups. */
AGR_API int agr_dispatcher_parallelism(const agr_dispatcher *d);
/* The named aggregate's scheduler. */
AGR_API agr_scheduler *agr_dispatcher_scheduler(const agr_dispatcher *d);
/* The group `msg` would go to, or -EINVAL. */
AGR_API int agr_dispatcher_group_of(const agr_dispatcher *d,
				    const agr_message *msg);

/*
 * Counters since creation. Exact once the dispatcher has stopped; while
 * it runs they may lag: admitted counts a message when its group's
 * worker takes it from the queue, so that sending stays cheap. The
 * library fills the whole struct; counters added later take the
 * reserved words, so its size does not change (nor does
 * agr_dispatcher_metrics', which holds it).
 */
typedef struct agr_dispatcher_stats {
	uint64_t admitted;  /* send returned 0 */
	uint64_t refused;   /* a send returned -ESHUTDOWN or -EAGAIN for it */
	uint64_t handled;   /* completed with status 0 by a function */
	uint64_t failed;    /* completed with a function's error */
	uint64_t skipped;   /* no function matched; completed with 0 */
	uint64_t discarded; /* completed with AGR_DISCARDED */
	/*
	 * Messages the watchdog (agr_watchdog_start) found pending longer
	 * than its threshold (a function returned AGR_PENDING and has not
	 * called agr_exchange_done()); each is also logged, once, with
	 * the dispatcher, group, worker, type and age. Not an outcome:
	 * the message still completes once.
	 */
	uint64_t stuck;
	/*
	 * Completed with AGR_INTERRUPTED: a function handled the message
	 * but its work was cut short (its I/O cancelled, or still pending
	 * when a force stop ended it). Apart from failed and discarded.
	 */
	uint64_t interrupted;
	uint64_t reserved[8]; /* later figures take these; 0 now */
} agr_dispatcher_stats;

/*
 * Fills *out with the counters, summed over the groups. From any thread
 * while the dispatcher exists, without a lock: each counter is read
 * atomically, not all at one instant. Returns 0, or -EINVAL (NULL `d`
 * or `out`).
 */
AGR_API int agr_dispatcher_stats_get(const agr_dispatcher *d,
				     agr_dispatcher_stats *out);

/*
 * One dispatcher's figures. Strings stay valid while the dispatcher.
 * Filled whole by the library; figures added later take the reserved
 * words, so its size does not change.
 */
typedef struct agr_dispatcher_metrics {
	const char *dispatcher;
	const char *context;
	const char *aggregate;
	agr_dispatcher_stats messages;
	bool depth_enabled;	  /* metrics or a queue limit: else 0 */
	uint64_t queue_depth;	  /* admitted, not yet completed */
	uint64_t deepest_group_depth;
	int deepest_group;	  /* -1 when every group is empty */
	bool latency_enabled;
	agr_histogram queue_latency;	  /* send -> first function starts */
	agr_histogram processing_latency; /* start -> completion */
	uint64_t reserved[8]; /* later figures take these; 0 now */
} agr_dispatcher_metrics;

/*
 * Snapshot of `d`. Queue depth is counted only when latency metrics or
 * a queue limit are on (otherwise 0). Returns 0 or -EINVAL. From any
 * thread while `d` exists, without a lock, as the workers record: each
 * figure is read atomically, not all at one instant.
 */
AGR_API int agr_dispatcher_metrics_get(const agr_dispatcher *d,
				       agr_dispatcher_metrics *out);

/* ---- inside a function ---- */

/* The message being handled. */
AGR_API agr_message *agr_exchange_message(agr_exchange *ex);
/* Its group, in [0, parallelism). */
AGR_API int agr_exchange_group(agr_exchange *ex);
/* The worker the group runs on: pass it to aggring/io.h. */
AGR_API agr_worker *agr_exchange_worker(agr_exchange *ex);
AGR_API agr_dispatcher *agr_exchange_dispatcher(agr_exchange *ex);

/*
 * Finishes one function that returned AGR_PENDING; `status` is 0 or a
 * negative errno (another value below -4095 counts as -EINVAL). When
 * every function of the message has finished, the message completes
 * and its group moves on. Call it once per pending function, best on
 * the group's worker; from another thread it is forwarded to the
 * worker by an item inside the message's internal_: it never allocates
 * and cannot fail. A call made by the function itself before it
 * returns counts if it then returns AGR_PENDING (it finishes at once);
 * if it returns anything else, nothing was pending: the call and its
 * status are ignored and reported. A call with nothing pending, or
 * after the message completed (a force stop ended it), is ignored and
 * reported
 * through the log hook, as long as the message is alive and was not
 * sent again; after that (freed, or in flight again) a late call is
 * undefined, as the message is the caller's again.
 */
AGR_API void agr_exchange_done(agr_exchange *ex, int status);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_DISPATCHER_H */
