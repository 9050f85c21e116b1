/* SPDX-License-Identifier: MIT */
/*
 * aggring/wow_event_store.h - Wow's Redis event store (canonical v2) on
 * an agr_redis client (libaggring-redis).
 *
 * The same keys, scripts and result codes as Wow's RedisEventStore and
 * RedisSnapshotStore, so a C service and a JVM service can append to
 * and read the same aggregates. Keys are those of aggring/wow_codec.h's
 * agr_wow_es_keys; every key of one call shares one hash tag, so in
 * cluster mode a call goes to one node.
 *
 * An event store is bound to one client and one named aggregate, and
 * like its client belongs to the client's worker: every call and every
 * callback happens on that worker's thread (-EPERM elsewhere). Calls are
 * asynchronous: a call that returns 0 calls its callback exactly once,
 * on the worker (usually later, from its loop; before the call returns
 * only when the client fails the command at once, e.g. -ENXIO for a
 * slot no master serves); a call that fails never calls it. Strings passed in are copied as the call needs
 * them; they need not outlive it.
 *
 * Scripts run with EVALSHA and, on a NOSCRIPT reply, once with EVAL,
 * which caches them again (a restarted or new node).
 *
 * Errors a callback may see, besides each call's own: the agr_redis
 * reply errors (-ECONNRESET, -ETIMEDOUT, -ELOOP, -ECANCELED, see
 * aggring/redis_client.h), -EPROTO (the server replied with an error,
 * logged, or with a reply of the wrong type) and -EBADMSG (a stored
 * document that is not Wow's, logged).
 */
#ifndef AGGRING_WOW_EVENT_STORE_H
#define AGGRING_WOW_EVENT_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/redis_client.h>
#include <aggring/wow_codec.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Append results: the Lua script's codes as negative errnos.
 *  "Ok"                   0
 *  "EventVersionConflict" AGR_WOW_EVERSION_CONFLICT: the stream does not
 *                         hold exactly version - 1 entries. Reload the
 *                         aggregate and retry. (At version 1 Wow itself
 *                         reports this as DuplicateAggregateIdException.)
 *  "DuplicateAggregateId" AGR_WOW_EDUPLICATE_AGGREGATE: version 1, and
 *                         the id exists already under some tenant.
 *  "DuplicateRequestId"   AGR_WOW_EDUPLICATE_REQUEST: this request id was
 *                         appended already: the command was applied.
 * A rejected append wrote nothing.
 */
#define AGR_WOW_EVERSION_CONFLICT (-ESTALE)
#define AGR_WOW_EDUPLICATE_AGGREGATE (-EEXIST)
#define AGR_WOW_EDUPLICATE_REQUEST (-EALREADY)

/* Snapshot save result: a newer snapshot is stored; nothing changed. */
#define AGR_WOW_SNAPSHOT_IGNORED 1

/* Wow's default load range: every version. */
#define AGR_WOW_VERSION_MIN 1
#define AGR_WOW_VERSION_MAX 2147483646

typedef struct agr_wow_event_store agr_wow_event_store;

/*
 * Makes an event store for named aggregate `n` on client `r` (the
 * strings of `n` are copied). On r's worker only. Returns 0, -EINVAL
 * (NULL or empty names; a log line), -EILSEQ (a name that is not
 * UTF-8), -ENOMEM or -EPERM.
 */
AGR_API int agr_wow_event_store_new(agr_redis *r, const agr_wow_named *n,
				    agr_wow_event_store **out);

/*
 * Releases the store. Calls still in flight complete normally (their
 * callbacks run and may not use the store any more); the memory goes
 * with the last of them. The client is not closed.
 */
AGR_API void agr_wow_event_store_free(agr_wow_event_store *es);

/* The client and named aggregate the store was made with. */
AGR_API agr_redis *agr_wow_event_store_redis(const agr_wow_event_store *es);
AGR_API const agr_wow_named *
agr_wow_event_store_named(const agr_wow_event_store *es);

/* Result of an append or a snapshot save (see the codes above). */
typedef void (*agr_wow_status_fn)(agr_wow_event_store *es, int status,
				  void *arg);

/*
 * Appends stream `s` (encoded with agr_wow_event_stream_encode(); its
 * context and aggregate names must be the store's) atomically with
 * Wow's script: version check, on version 1 the id check across
 * tenants, request id check, then the ZADDs. Returns 0 (cb gets 0 or an
 * append result), -EINVAL, -EILSEQ, -EBADMSG (a body is not JSON),
 * -ENOMEM, -EPERM or -ESHUTDOWN (the client is closing).
 */
AGR_API int agr_wow_event_store_append(agr_wow_event_store *es,
				       const agr_wow_event_stream *s,
				       agr_wow_status_fn cb, void *arg);

/*
 * The same with the stream already encoded: `json` (`len` bytes) is
 * stored as given, and must be a stream of aggregate_id, tenant_id
 * (NULL: "(0)"), request_id and version. It is not checked: a document
 * that is not a Wow stream (agr_wow_event_stream_encode() writes one)
 * is stored all the same, and a JVM reading the aggregate then fails
 * its load (Jackson) for good; this store's own loads fail with
 * -EBADMSG.
 */
AGR_API int agr_wow_event_store_append_json(agr_wow_event_store *es,
					    const char *aggregate_id,
					    const char *tenant_id,
					    const char *request_id,
					    int32_t version, const char *json,
					    size_t len, agr_wow_status_fn cb,
					    void *arg);

/*
 * Streams of a load, in version order, decoded; `json[i]` is the stored
 * text of streams[i] (`json_len[i]` bytes). Everything is valid only
 * during the call. On error `count` is 0.
 */
typedef void (*agr_wow_load_fn)(agr_wow_event_store *es, int status,
				agr_wow_event_stream *const *streams,
				const char *const *json,
				const size_t *json_len, size_t count,
				void *arg);

/*
 * Loads the streams of versions head..tail inclusive (ZRANGEBYSCORE;
 * AGR_WOW_VERSION_MIN..AGR_WOW_VERSION_MAX for all). A stored member
 * that does not decode fails the whole load with -EBADMSG. Returns 0,
 * -EINVAL (head > tail, head < 0, NULL id), -EILSEQ, -ENOMEM, -EPERM or
 * -ESHUTDOWN.
 */
AGR_API int agr_wow_event_store_load(agr_wow_event_store *es,
				     const char *aggregate_id,
				     const char *tenant_id, int32_t head,
				     int32_t tail, agr_wow_load_fn cb,
				     void *arg);

/* A version (>= 0), a 0/1 answer, or a negative error. */
typedef void (*agr_wow_value_fn)(agr_wow_event_store *es, int value,
				 void *arg);

/*
 * The aggregate's last version: the score of the ZSET's highest
 * member, 0 for an aggregate with no events. Errors as _load().
 */
AGR_API int agr_wow_event_store_last_version(agr_wow_event_store *es,
					     const char *aggregate_id,
					     const char *tenant_id,
					     agr_wow_value_fn cb, void *arg);

/* 1 if `request_id` was appended for the aggregate, else 0 (SISMEMBER). */
AGR_API int agr_wow_event_store_request_exists(agr_wow_event_store *es,
					       const char *aggregate_id,
					       const char *tenant_id,
					       const char *request_id,
					       agr_wow_value_fn cb, void *arg);

/* Wow's AggregateIdScanner bounds: the default start, and "no more". */
#define AGR_WOW_SCAN_FIRST_ID "(0)"
#define AGR_WOW_SCAN_LAST_ID "~"

/*
 * Ids of a scan, in Java String order (UTF-16 code units), each with its
 * tenant. Valid only during the call.
 */
typedef void (*agr_wow_ids_fn)(agr_wow_event_store *es, int status,
			       const char *const *ids,
			       const char *const *tenants, size_t count,
			       void *arg);

/*
 * Wow's scanAggregateId: up to `limit` aggregate ids of the store's
 * named aggregate that sort after `after_id` (NULL:
 * AGR_WOW_SCAN_FIRST_ID, which, as in Wow, skips ids below "(0)"),
 * read from the id index of all 128 buckets (ZRANGEBYLEX ... LIMIT 0
 * limit each, pipelined), merged and cut to `limit`. After
 * AGR_WOW_SCAN_LAST_ID nothing is read and cb gets no ids. A member
 * that is not Wow's fails the scan with -EBADMSG. Returns 0, -EINVAL
 * (limit < 1, an empty after_id), -EILSEQ, -ENOMEM, -EPERM or
 * -ESHUTDOWN.
 */
AGR_API int agr_wow_event_store_scan_ids(agr_wow_event_store *es,
					 const char *after_id, int limit,
					 agr_wow_ids_fn cb, void *arg);

/*
 * Saves snapshot `json` (a Wow state aggregate document: contextName,
 * aggregateName, aggregateId, tenantId, ..., version, ..., state, ...)
 * with Wow's script: stored unless the stored snapshot's version is
 * higher (a tie overwrites). The version is read from `json`'s integer
 * "version" (-EBADMSG if there is none). cb gets 0 (saved),
 * AGR_WOW_SNAPSHOT_IGNORED, or an error (-EPROTO: the stored snapshot
 * has no numeric version, the script's error). Only `version` is read:
 * the rest is stored as given, so a document that is not Wow's snapshot
 * (agr_wow_snapshot_encode() writes one) is unreadable for a JVM, whose
 * snapshot repository then fails that aggregate's loads.
 */
AGR_API int agr_wow_snapshot_save(agr_wow_event_store *es,
				  const char *aggregate_id,
				  const char *tenant_id, const char *json,
				  size_t len, agr_wow_status_fn cb, void *arg);

/*
 * The stored snapshot (status 0, `json` of `len` bytes valid only
 * during the call), or status -ENOENT when there is none.
 */
typedef void (*agr_wow_snapshot_fn)(agr_wow_event_store *es, int status,
				    const char *json, size_t len, void *arg);

AGR_API int agr_wow_snapshot_load(agr_wow_event_store *es,
				  const char *aggregate_id,
				  const char *tenant_id,
				  agr_wow_snapshot_fn cb, void *arg);

/* The Lua sources, as Wow ships them (for tests and tools). */
AGR_API const char *agr_wow_append_script(void);
AGR_API const char *agr_wow_snapshot_script(void);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WOW_EVENT_STORE_H */
