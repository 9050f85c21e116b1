/* SPDX-License-Identifier: MIT */
/*
 * aggring/wow_processor.h - a Wow command processor (libaggring-redis):
 * the rules a JVM Wow service applies around its aggregate, so that a C
 * aggregate can share `<context>.CommandDispatcher` with JVM instances.
 *
 * The C aggregate is one function, state + command -> events and the
 * new state, or an error (agr_wow_command_fn), and one that folds a
 * stored event stream into the state (agr_wow_sourcing_fn), used when
 * the aggregate is read back from the event store. The processor is a
 * dispatcher function (agr_wow_processor_handle) fed by a Wow bus
 * consumer (aggring/wow_bus.h, the built-in decoder) and does, per
 * command, in Wow's order (wow-core paths under me/ahoo/wow/):
 *
 *  1. a LocalFirst copy (header `local_first` equal to "true", any
 *     case) completes at once with 0 and is acked: the sender handled
 *     it (messaging/LocalFirstMessageBus.kt, isLocalHandled);
 *  2. a void command (`isVoid`) likewise (modeling/command/dispatcher/
 *     CommandDispatcher.kt, filterThenAck { !isVoid });
 *  3. the aggregate's state: fresh (version 0) for `isCreate`, else
 *     read from Wow's event store under (tenant, id); the cache of a
 *     worker is keyed by both and only ever a floor, every command
 *     reads the versions after it (RetryableAggregateProcessor.kt);
 *  4. preconditions, in SimpleCommandAggregate.kt's order:
 *     aggregateVersion (when present) == version, else
 *     "CommandExpectVersionConflict" (-ESTALE); an uninitialised
 *     aggregate needs isCreate or allowCreate, else "NotFound"
 *     (-ENOENT); a non-blank ownerId / spaceId must be the state's,
 *     else "IllegalAccessOwnerAggregate" / "IllegalAccessSpaceAggregate"
 *     (-EACCES); a deleted aggregate refuses, with
 *     "IllegalAccessDeletedAggregate" (-EIDRM);
 *  5. the aggregate's function; an error it sets is the command's
 *     (-EPERM, or its own negative errno);
 *  6. the stream is appended with Wow's script at version + 1, its
 *     header the command's propagated headers (trace_id, or the command
 *     id when absent; upstream_id = the command id; upstream_name = its
 *     name; command_operator; the wait plan's command_wait_* keys:
 *     messaging/propagation/TraceMessagePropagator.kt,
 *     CommandOperatorMessagePropagator.kt, WaitPlanMessagePropagator.kt);
 *     an EventVersionConflict above version 1 is retried against a
 *     fresh read, at most max_retries times with backoff from
 *     min_backoff_ms doubling (Retry.backoff(3, 500 ms) in
 *     RetryableAggregateProcessor.kt); at version 1 it is
 *     "DuplicateAggregateId" (eventsourcing/AbstractEventStore.kt),
 *     as is the script's DuplicateAggregateId (the id under another
 *     tenant); a DuplicateRequestId fails the command with that code.
 *     None of these loops: a command ends after at most max_retries + 1
 *     appends;
 *  7. the stream is published on `<alias>.<agg>:event` and the state
 *     event (the stream, firstOperator, firstEventTime, state, tags {},
 *     deleted) on `:state` (eventsourcing/state/SendStateEventFilter.kt);
 *  8. when the command carries a wait plan whose stage is not SENT
 *     (command/wait/ExtractedWaitPlan.kt, CommandStage.kt), the
 *     PROCESSED wait signal (a SimpleWaitSignal, success or error) is
 *     POSTed as JSON to the plan's `command_wait_endpoint` (an http://
 *     IP literal URL: the JVM's ServerCommandWaitEndpoint,
 *     "http://<ip>:<port>/wow/command/wait"), from the worker's ring,
 *     fire and forget with up to 3 retries from 2 s
 *     (wow-webflux WebClientCommandWaitNotifier.kt,
 *     RemoteWaitNotifyPolicy.kt; command/wait/NotifierFilters.kt);
 *  9. the exchange completes (and the bus acks) after the publications:
 *     the effect is stored and sent (Wow acks after the append,
 *     before publishing; acking later only narrows the window in which
 *     a crash loses a publication).
 *
 * Threads: everything runs on the dispatcher's workers; each worker has
 * its own Redis client, event store and cache, made by the supplier's
 * worker hooks (agr_wow_processor_worker_init/_exit).
 */
#ifndef AGGRING_WOW_PROCESSOR_H
#define AGGRING_WOW_PROCESSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/dispatcher.h>
#include <aggring/redis_client.h>
#include <aggring/scheduler.h>
#include <aggring/wow_codec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The aggregate's state as the functions see it (valid during a call). */
typedef struct agr_wow_aggregate_state {
	const char *aggregate_id;
	const char *tenant_id;
	int32_t version;	/* 0: not initialised */
	const char *state;	/* a JSON object; "{}" when not initialised */
	size_t state_len;
	const char *owner_id;	/* "" when none */
	const char *space_id;
	bool deleted;
} agr_wow_aggregate_state;

/* What a function produces: events, the new state, or an error. */
typedef struct agr_wow_outcome agr_wow_outcome;

/*
 * Adds an event (copied): name and body_type required, body one JSON
 * value of body_len bytes, revision NULL for "0.0.1". At most 64 events.
 * Returns 0, -EINVAL, -E2BIG or -ENOMEM.
 */
AGR_API int agr_wow_outcome_event(agr_wow_outcome *o, const char *name,
				  const char *body_type, const char *body,
				  size_t body_len, const char *revision);

/*
 * Sets the state after the events (copied): a JSON object; `deleted`
 * marks the aggregate deleted (Wow's AggregateDeleted). Returns 0,
 * -EINVAL or -ENOMEM.
 */
AGR_API int agr_wow_outcome_state(agr_wow_outcome *o, const char *state,
				  size_t len, bool deleted);

/*
 * Refuses the command with Wow error code `code` ("IllegalArgument",
 * ...) and message `msg` (NULL: ""), both copied; they reach the
 * waiter's signal. Returns 0, -EINVAL or -ENOMEM.
 */
AGR_API int agr_wow_outcome_error(agr_wow_outcome *o, const char *code,
				  const char *msg);

/*
 * The aggregate: from `st` and `cmd`, either events and the new state
 * (at least one event, and agr_wow_outcome_state), or an error
 * (agr_wow_outcome_error). Returns 0, or a negative errno, which fails
 * the command as "IllegalState" unless an error was set. Runs on a
 * worker; must not block.
 */
typedef int (*agr_wow_command_fn)(const agr_wow_aggregate_state *st,
				  const agr_wow_command *cmd,
				  agr_wow_outcome *out, void *arg);

/*
 * Sourcing: folds stored stream `s` (possibly written by a JVM) into
 * `st`, setting the new state with agr_wow_outcome_state. Returns 0 or
 * a negative errno (the command then fails, -EBADMSG).
 */
typedef int (*agr_wow_sourcing_fn)(const agr_wow_aggregate_state *st,
				   const agr_wow_event_stream *s,
				   agr_wow_outcome *out, void *arg);

typedef struct agr_wow_processor agr_wow_processor;

typedef struct agr_wow_processor_options {
	size_t size; /* sizeof(agr_wow_processor_options) */
	agr_wow_named named;	    /* strings copied */
	agr_redis_options redis;    /* each worker's client (copied) */
	unsigned workers;	    /* the supplier's parallelism, >= 1 */
	agr_wow_command_fn on_command;
	agr_wow_sourcing_fn on_sourcing;
	void *arg;		    /* for both */
	/* The wait signal's function: {COMMAND, context, processor, name} */
	const char *processor_name; /* NULL: the aggregate name */
	const char *function_name;  /* NULL: "onCommand" */
	/*
	 * Retries of a version conflict, and of a transient failure of
	 * a read, append or publish (a timeout, a lost connection, a slot
	 * without a master): at most max_retries, the first after
	 * min_backoff_ms, doubling up to max_backoff_ms.
	 */
	unsigned max_retries;	    /* 0: 3 (Wow) */
	uint64_t min_backoff_ms;    /* 0: 500 (Wow) */
	uint64_t max_backoff_ms;    /* 0: no bound (Wow) */
	/*
	 * Unlike Wow: on DuplicateRequestId (a redelivered command that
	 * was stored), publish the stored stream again and complete with
	 * 0, so that a crash between the append and the publication loses
	 * no event (consumers see it twice; Wow's are idempotent).
	 */
	bool republish_duplicate;
	/*
	 * Unlike Wow: a version conflict at version 1 of a command that is
	 * not isCreate (allowCreate: another instance created the
	 * aggregate first) is retried like any conflict, against the
	 * state that instance wrote. Wow fails it with DuplicateAggregateId.
	 */
	bool retry_create_conflict;
	/*
	 * Unlike Wow: a command without aggregateVersion on an aggregate
	 * this worker has read or written runs on the cached state, without
	 * reading the store first (one round trip less). A state another
	 * instance moved on fails the append's version check, which reads
	 * the store and retries; but the owner, space and deleted checks see
	 * the cached state. Off: every command reads the store (Wow).
	 */
	bool trust_cache;
	bool no_state_events;	    /* do not publish on :state */
	bool no_wait_notify;	    /* do not POST wait signals */
	uint64_t notify_timeout_ms; /* per HTTP step; 0: 5000 */
	uint64_t reserved[8];
} agr_wow_processor_options;

#define AGR_WOW_PROCESSOR_OPTIONS_INIT                                   \
	{                                                                \
		.size = sizeof(agr_wow_processor_options),               \
		.redis = AGR_REDIS_OPTIONS_INIT,                          \
	}

/*
 * Makes a processor. Returns 0, -EINVAL (a missing or bad option;
 * logged, naming it) or -ENOMEM.
 */
AGR_API int agr_wow_processor_new(const agr_wow_processor_options *o,
				  agr_wow_processor **out);

/*
 * Supplier hooks (agr_supplier_options.worker_init / worker_exit, with
 * hook_arg the processor): make and free a worker's client, event
 * store and cache. init returns 0, -ENOMEM or the client's error.
 */
AGR_API int agr_wow_processor_worker_init(agr_worker *w, void *proc);
AGR_API void agr_wow_processor_worker_exit(agr_worker *w, void *proc);

/*
 * The dispatcher function (agr_handler_fn): register it for every type
 * (type NULL) with the processor as arg. A message without a decoded
 * command (agr_wow_message_value) fails with -EBADMSG.
 */
AGR_API int agr_wow_processor_handle(agr_exchange *ex, void *proc);

/*
 * Closes every worker's client and cancels its notifications, on its
 * worker, waiting up to timeout_ns (call after the bus consumer has
 * stopped, before stopping the dispatcher). Returns 0, -ETIMEDOUT or
 * -EINVAL. Not from a worker.
 */
AGR_API int agr_wow_processor_close(agr_wow_processor *p,
				    agr_scheduler *sched, uint64_t timeout_ns);

/* Frees (after the workers have exited). NULL is a no-op. */
AGR_API void agr_wow_processor_free(agr_wow_processor *p);

typedef struct agr_wow_processor_stats {
	uint64_t processed;	/* appended and published */
	uint64_t failed;	/* completed with an error */
	uint64_t local_first;	/* LocalFirst copies dropped */
	uint64_t void_dropped;	/* void commands dropped */
	uint64_t conflicts;	/* version conflicts retried */
	uint64_t notified;	/* wait signals answered 2xx */
	uint64_t notify_failed; /* given up after the retries */
	uint64_t republished;	/* duplicates published again */
	uint64_t reserved[8];
} agr_wow_processor_stats;

/* Copies the counters (any thread). Returns 0 or -EINVAL. */
AGR_API int agr_wow_processor_stats_get(const agr_wow_processor *p,
					agr_wow_processor_stats *out);

/*
 * The wait signal Wow's CommandWaitHandlerFunction reads (a
 * SimpleWaitSignal: id, waitCommandId, commandId, aggregateId {...},
 * stage, function {...}, aggregateVersion, isLastProjection,
 * errorCode, errorMsg, bindingErrors, result, commands, signalTime,
 * succeeded) for command `c` at stage "PROCESSED", its function
 * {COMMAND, function_context, processor_name, function_name}.
 * aggregate_version < 0 writes null; error_code NULL is "Ok". Returns 0 and a malloc()ed
 * document, or -EINVAL, -EILSEQ, -ENOMEM.
 */
AGR_API int agr_wow_wait_signal_encode(const agr_wow_command *c,
				       const char *function_context,
				       const char *processor_name,
				       const char *function_name,
				       int32_t aggregate_version,
				       const char *error_code,
				       const char *error_msg,
				       int64_t signal_time, char **json,
				       size_t *len);

/*
 * Whether Wow's processor notifies command `c`'s waiter at PROCESSED:
 * it carries command_wait_id and command_wait_endpoint, and a target
 * (stage, chain or tail) whose stage is not SENT. `endpoint` (may be
 * NULL) gets the endpoint (valid as long as `c`).
 */
AGR_API bool agr_wow_wait_wanted(const agr_wow_command *c,
				 const char **endpoint);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WOW_PROCESSOR_H */
