/* SPDX-License-Identifier: MIT */
/*
 * aggring/wow_bus.h - Wow's Redis Streams message bus on aggring
 * (libaggring-redis): a consumer that feeds a dispatcher from
 * `<alias>.<agg>:command` (`:event`, `:state`) in one consumer group,
 * with Wow's consumer leases and pending recovery, and a publisher that
 * XADDs Wow's `msg` JSON. Log lines go through agr_log().
 *
 * The consumer follows Wow's RedisMessageBus (spec/wow-redis.md,
 * sections 1-2) so that C and JVM consumers can share a group:
 *  - setup: `XGROUP CREATE <topic> <group> $ MKSTREAM` per topic, in
 *    order; a BUSYGROUP error is success;
 *  - reading: `XREADGROUP GROUP <group> <consumer> BLOCK <ms> STREAMS
 *    <topic> >`, one client per topic (a blocking read holds its
 *    connection), reissued at once;
 *  - each entry's `msg` is decoded (aggregate id, and the command name
 *    as the message type) and sent to the dispatcher, routed by
 *    aggregate id;
 *  - `XACK` once the message's completion callback has run, whatever
 *    its status (Wow acks failures too);
 *  - an entry that is not admitted (-ESHUTDOWN, -EAGAIN) is not acked:
 *    it stays pending in this consumer's PEL, and this consumer's
 *    sweep claims it again; an entry without `msg`, or whose `msg`
 *    does not decode, stays pending too, is logged and counted, and
 *    is recovered only after this consumer is gone;
 *  - a lease per topic under agr_wow_lease_key() (SET EX 3 x interval,
 *    a heartbeat each interval, taken again if it was lost, released
 *    on stop);
 *  - a pending sweep per topic each interval: XPENDING pages, and
 *    XCLAIM <min-idle> of entries owned by other consumers that hold
 *    no lease and were idle in XINFO CONSUMERS for min-idle or more;
 *    and, unlike Wow, of its own entries idle for min-idle that it does
 *    not hold (delivered in a reply lost with a connection or a node);
 *    claimed entries take the normal path.
 *
 * Threads: the consumer lives on one worker of a scheduler of the
 * caller's choosing (its Redis clients and timers run there); messages
 * run on the dispatcher's workers, and completions are handed back to
 * the consumer's worker in batches, where they are acked.
 *
 * Lifecycle: new -> start -> (entries flow) -> stop (reading ends, the
 * messages in flight are waited for and acked, leases released) ->
 * free. The dispatcher must be running while the consumer stops (the
 * messages in flight complete there) and outlive the consumer.
 */
#ifndef AGGRING_WOW_BUS_H
#define AGGRING_WOW_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/dispatcher.h>
#include <aggring/redis_client.h>
#include <aggring/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What the decoder makes of an entry's `msg`. `aggregate_id` routes the
 * message and `type` selects its functions (NULL matches only those
 * registered for every type); both must point into `value` or live as
 * long. `value` is the decoded message, given to handlers by
 * agr_wow_message_value() and freed by free_value(value) (may be NULL)
 * after the completion callback.
 */
typedef struct agr_wow_decoded {
	const char *aggregate_id;
	const char *type;
	void *value;
	void (*free_value)(void *value);
} agr_wow_decoded;

/*
 * Decodes the `msg` of an entry of `topic` (len bytes of JSON,
 * NUL-terminated). Returns 0, or a negative errno: the entry is then
 * left pending and counted as undecodable; nothing is to be freed.
 */
typedef int (*agr_wow_decode_fn)(const char *topic, const char *msg,
				 size_t len, agr_wow_decoded *out, void *arg);

/*
 * The built-in decoder, by the topic's suffix (aggring/wow_codec.h):
 * ":command" -> agr_wow_command_decode(), type = the command's name,
 * value an agr_wow_command; ":event" -> agr_wow_event_stream_decode(),
 * type NULL, value an agr_wow_event_stream; ":state" ->
 * agr_wow_state_event_decode(), type NULL, value an
 * agr_wow_state_event. The codec's errors (-EBADMSG ...); -EINVAL for
 * another suffix.
 */
AGR_API int agr_wow_decode_default(const char *topic, const char *msg,
				   size_t len, agr_wow_decoded *out,
				   void *arg);

typedef struct agr_wow_bus agr_wow_bus;

typedef struct agr_wow_bus_options {
	size_t size; /* sizeof(agr_wow_bus_options) */
	/*
	 * Where Redis is; the consumer makes its clients from these, at
	 * start (host, username and password are copied by new; name is
	 * the consumer's). A zero redis.size means AGR_REDIS_OPTIONS_INIT
	 * with host, port, cluster, username and password as set here.
	 */
	agr_redis_options redis;
	/* The consumer runs on worker worker_hint % parallelism of this. */
	agr_scheduler *scheduler;
	unsigned worker_hint;
	/*
	 * Where messages go. Its on_complete must be agr_wow_bus_complete
	 * (or call it): that is what acks an entry.
	 */
	agr_dispatcher *dispatcher;
	const char *const *topics; /* 1..8 topics, set up in this order */
	unsigned ntopics;
	const char *group;	   /* Wow's receiverGroup; not NULL */
	const char *consumer;	   /* NULL: a fresh unique name */
	unsigned block_ms;	   /* XREADGROUP BLOCK; 0: 2000 */
	/*
	 * XREADGROUP COUNT at most; 0: no cap of its own. Every read asks
	 * for at most what max_in_flight leaves room for, shared by the
	 * topics: unlike Wow, which reads without COUNT and so takes a
	 * whole backlog into memory in one reply.
	 */
	unsigned count;
	/*
	 * Entries admitted and not yet acked, over all topics, beyond
	 * which reading pauses until acks free room; 0: 4096.
	 */
	unsigned max_in_flight;
	bool no_recovery;	   /* no leases, no pending sweep */
	uint64_t min_idle_ms;	   /* 0: 300000 (Wow: 5 min) */
	uint64_t recovery_interval_ms; /* 0: 30000; the lease TTL is 3 x */
	unsigned recovery_batch;   /* XPENDING page size; 0: 100 */
	agr_wow_decode_fn decode;  /* NULL: agr_wow_decode_default */
	void *decode_arg;
	uint64_t reserved[8];
} agr_wow_bus_options;

#define AGR_WOW_BUS_OPTIONS_INIT                                         \
	{                                                                \
		.size = sizeof(agr_wow_bus_options),                     \
		.redis = AGR_REDIS_OPTIONS_INIT,                          \
	}

AGR_API void agr_wow_bus_options_init(agr_wow_bus_options *o);

/*
 * Makes a consumer (not yet reading). Strings are copied. Returns 0,
 * -EINVAL (a missing or bad option; logged, naming it) or -ENOMEM.
 */
AGR_API int agr_wow_bus_new(const agr_wow_bus_options *o, agr_wow_bus **out);

/*
 * Starts it on its worker: groups are created, leases taken, reading
 * and recovery begin. Returns 0, -EINVAL, -EALREADY (started before)
 * or the scheduler's error (-ESHUTDOWN).
 */
AGR_API int agr_wow_bus_start(agr_wow_bus *b);

/*
 * Waits, up to timeout_ns, until every topic's group exists and the
 * first read is out: from then on, entries added to the topics reach
 * this consumer or its group. Returns 0, -ETIMEDOUT, or the error that
 * kept setup from finishing (a server error is -EPROTO; logged). Not
 * from the consumer's worker.
 */
AGR_API int agr_wow_bus_wait_ready(agr_wow_bus *b, uint64_t timeout_ns);

/*
 * Stops reading and the sweep, waits up to timeout_ns until the
 * messages in flight have completed and their acks were answered,
 * releases the leases and closes the clients. Returns 0, -ETIMEDOUT
 * (the stop goes on: call again, or free) or -EINVAL. Idempotent; not
 * from the consumer's worker.
 */
AGR_API int agr_wow_bus_stop(agr_wow_bus *b, uint64_t timeout_ns);

/*
 * A stop that ends within about 3 x timeout_ns whatever the handlers
 * do: agr_wow_bus_stop(); if messages are still in flight at its
 * deadline (a handler that never finishes, or retries without end),
 * force-stops the dispatcher (agr_dispatcher_force_stop(): their ring
 * operations are cancelled and they complete with AGR_DISCARDED, so
 * their entries stay pending, not acked, for a later claim), waits up
 * to timeout_ns for it (agr_dispatcher_stop_gracefully()) and then for
 * the consumer's own stop. Returns 0 (stopped gracefully), -ECANCELED
 * (stopped after a force), -ETIMEDOUT (a handler blocked inside a
 * call holds a worker: nothing can end it) or -EINVAL. The dispatcher
 * is stopped after a force. Run the consumer on workers that outlive
 * that (a dispatcher that does not own its supplier): with
 * owns_supplier they are torn down by the force before the consumer
 * closes its clients, whose memory then goes only with the process.
 * Not from a worker.
 */
AGR_API int agr_wow_bus_shutdown(agr_wow_bus *b, uint64_t timeout_ns);

/*
 * Stops if needed (waiting without a limit for the messages in flight)
 * and frees. NULL is a no-op. Not from the consumer's worker.
 */
AGR_API void agr_wow_bus_free(agr_wow_bus *b);

/*
 * The dispatcher completion callback that acks: put it in the
 * dispatcher's options as on_complete (complete_arg is not used), or
 * call it from yours with the same arguments. For messages that came
 * from a consumer only; the message must not be touched afterwards.
 */
AGR_API void agr_wow_bus_complete(agr_message *msg, int status, void *arg);

/* The consumer's name (valid until free). */
AGR_API const char *agr_wow_bus_consumer_name(const agr_wow_bus *b);

/*
 * For a handler: the stream entry behind a message the consumer sent.
 * msg->body is the entry's `msg` JSON (body_len bytes, NUL-terminated),
 * msg->aggregate_id and msg->type come from the decoder, and value is
 * the decoder's (with the built-in one, an agr_wow_command * or an
 * agr_wow_event_stream * or an agr_wow_state_event *). Valid until
 * the completion callback; NULL
 * for NULL.
 */
AGR_API const char *agr_wow_message_entry_id(const agr_message *msg);
AGR_API const char *agr_wow_message_topic(const agr_message *msg);
AGR_API void *agr_wow_message_value(const agr_message *msg);

typedef struct agr_wow_bus_stats {
	uint64_t read;		/* entries read (live and claimed) */
	uint64_t dispatched;	/* admitted by the dispatcher */
	uint64_t acked;		/* XACKs answered */
	uint64_t undecodable;	/* no msg, or the decoder failed */
	uint64_t not_admitted;	/* -ESHUTDOWN or -EAGAIN: left pending */
	uint64_t claimed;	/* XCLAIMed: dead owners', our lost ones */
	uint64_t sweeps;	/* pending sweeps finished */
	uint64_t redis_errors;	/* failed or error replies */
	uint64_t in_flight;	/* admitted, not yet acked */
	uint64_t reserved[7];
} agr_wow_bus_stats;

/* Copies the counters (any thread; each counter is read atomically). */
AGR_API int agr_wow_bus_stats_get(const agr_wow_bus *b,
				  agr_wow_bus_stats *out);

/*
 * Publisher: `XADD <topic> * msg <json>` on client r (on its worker),
 * no MAXLEN (Wow never trims). json is Wow's message JSON (aggring/
 * wow_codec.h encodes commands and domain event streams). done(err,
 * entry id, arg) runs once on r's worker: err 0 and the new entry's id,
 * or err < 0 (the client's error, -EPROTO for a server error) and NULL.
 * Returns 0 (done will run), or the client's error (done will not).
 */
typedef void (*agr_wow_publish_fn)(int err, const char *entry_id, void *arg);

AGR_API int agr_wow_publish(agr_redis *r, const char *topic,
			    const char *json, size_t len,
			    agr_wow_publish_fn done, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WOW_BUS_H */
