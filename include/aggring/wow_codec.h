/* SPDX-License-Identifier: MIT */
/*
 * aggring/wow_codec.h - Wow's Redis names and JSON messages, byte for
 * byte (libaggring-redis).
 *
 * Wow (github.com/Ahoo-Wang/Wow, wow-redis) keeps its command and event
 * buses in Redis Streams and its event store in Redis under names and
 * JSON documents that a C service must reproduce exactly to share one
 * Redis with a JVM service. This header builds those names and encodes
 * and decodes those documents; it does no I/O. The rules are the ones
 * of Wow's source at c6a3ab8 (v8.10.10): wow-redis's
 * RedisKeyComponentCodec, CanonicalRedisKeyCodec, EventStreamKeyLayout,
 * SnapshotKeyLayout, AggregateTopicConverter and
 * RedisConsumerLeaseRegistry, and wow-core's Command and EventStream
 * JSON serializers and records.
 *
 * Strings are UTF-8 and NUL-terminated. Where Wow works on a Java
 * String (hash, hex16), the UTF-8 is read as UTF-16 code units: a code
 * point above U+FFFF is a surrogate pair. Functions that build a name
 * return it in a buffer from malloc() that the caller frees with
 * free(); `len` (may be NULL) receives its length without the NUL.
 *
 * Errors common to the functions here: -EINVAL (a NULL or empty
 * required argument), -ENOMEM, -EILSEQ (a string that is not UTF-8, or
 * encodes a surrogate: Java's "unpaired surrogate"), -EBADMSG (a JSON
 * document that is not Wow's; a log line names what was wrong; also a
 * string field holding U+0000, which Wow reads but a C string cannot
 * carry: such a bus entry stays pending, logged and counted). All
 * are thread-safe and take no lock.
 */
#ifndef AGGRING_WOW_CODEC_H
#define AGGRING_WOW_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- names ---- */

/*
 * A named aggregate. Keys and topics use the context's alias (Wow: the
 * non-blank `alias` in META-INF/wow-metadata.json); JSON carries the
 * real context name. `alias` NULL or blank (only spaces, tabs, CR, LF)
 * means the context name.
 */
typedef struct agr_wow_named {
	const char *context_name;
	const char *alias;
	const char *aggregate_name;
} agr_wow_named;

/* The alias a name uses: n->alias if it is not blank, else the context. */
AGR_API const char *agr_wow_alias(const agr_wow_named *n);

/* Number of buckets of the event store's id index. */
#define AGR_WOW_EVENT_STORE_BUCKETS 128

/*
 * The event store bucket of aggregate id `id`: floorMod(Java
 * id.hashCode(), 128), in 0..127 ("id" -> 27, "order-1" -> 114).
 * Returns -EINVAL for a NULL id.
 */
AGR_API int agr_wow_bucket(const char *id);

/*
 * Base64URL (RFC 4648 section 5, no padding) of the `len` bytes at `s`,
 * which must be UTF-8 with no encoded surrogate (-EILSEQ otherwise).
 * "" gives "".
 */
AGR_API int agr_wow_b64_encode(const char *s, size_t len, char **out,
			       size_t *out_len);

/*
 * The inverse, canonical only: only A-Z a-z 0-9 - _, no padding, a
 * length that is not 1 mod 4, zero unused bits, and UTF-8 without
 * surrogates in the result (each of those is -EILSEQ), as Wow's
 * RedisKeyComponentCodec.decode requires.
 */
AGR_API int agr_wow_b64_decode(const char *s, size_t len, char **out,
			       size_t *out_len);

/*
 * Four lowercase hex digits per UTF-16 code unit of the non-empty id
 * (U+1F600 -> "d83dde00"), so that byte order is Java String order.
 */
AGR_API int agr_wow_hex16(const char *id, char **out, size_t *len);

/* Wow's three bus topics of one aggregate. */
typedef enum agr_wow_topic_kind {
	AGR_WOW_TOPIC_COMMAND = 0, /* "<alias>.<agg>:command" */
	AGR_WOW_TOPIC_EVENT = 1,   /* "<alias>.<agg>:event", domain events */
	AGR_WOW_TOPIC_STATE = 2,   /* "<alias>.<agg>:state", state events */
} agr_wow_topic_kind;

/* The stream name of topic `kind` of `n`; -EINVAL for a bad kind. */
AGR_API int agr_wow_topic(const agr_wow_named *n, agr_wow_topic_kind kind,
			  char **out, size_t *len);

/* The consumer groups Wow's Spring starter uses. */
typedef enum agr_wow_dispatcher_kind {
	AGR_WOW_DISPATCHER_COMMAND = 0,	       /* ".CommandDispatcher" */
	AGR_WOW_DISPATCHER_DOMAIN_EVENT = 1,   /* ".DomainEventDispatcher" */
	AGR_WOW_DISPATCHER_PROJECTION = 2,     /* ".ProjectionDispatcher" */
	AGR_WOW_DISPATCHER_STATELESS_SAGA = 3, /* ".StatelessSagaDispatcher" */
	AGR_WOW_DISPATCHER_SNAPSHOT = 4,       /* ".SnapshotDispatcher" */
} agr_wow_dispatcher_kind;

/* "<context_name>.<Kind>Dispatcher": the group a JVM service reads in. */
AGR_API int agr_wow_dispatcher_group(const char *context_name,
				     agr_wow_dispatcher_kind kind, char **out,
				     size_t *len);

/* Lease time to live, 3 x the recovery interval of 30 s. */
#define AGR_WOW_LEASE_TTL_MS 90000

/*
 * The consumer lease key: "wow:redis:message-bus:consumer-lease:" and
 * the lowercase hex SHA-256 of UTF-8(topic "\0" group "\0" consumer).
 */
AGR_API int agr_wow_lease_key(const char *topic, const char *group,
			      const char *consumer, char **out, size_t *len);

/*
 * Every event store name of one aggregate (canonical v2), built once
 * by agr_wow_es_keys_build() and released by agr_wow_es_keys_free().
 * All keys carry the hash tag "{v2:es:<scope>:<bucket>}", so in a
 * cluster they share one slot. scope = b64(alias) "." b64(aggregate
 * name); identity = b64(id) "." b64(tenant).
 */
typedef struct agr_wow_es_keys {
	int bucket;	     /* agr_wow_bucket(id) */
	char *stream;	     /* ZSET "{tag}:<identity>" */
	size_t stream_len;
	char *req_idx;	     /* SET "{tag}:<identity>:req_idx" */
	size_t req_idx_len;
	char *ids;	     /* ZSET "{tag}:ids" */
	size_t ids_len;
	char *member;	     /* ids member: hex16(id) "." b64(tenant) */
	size_t member_len;
	char *member_prefix; /* hex16(id) ".", any tenant's lower bound */
	size_t member_prefix_len;
	char *member_after;  /* hex16(id) "/", the upper bound */
	size_t member_after_len;
	char *snapshot;	     /* STRING "v2:snapshot:{<scope>.<identity>}" */
	size_t snapshot_len;
	uint64_t reserved[4]; /* later keys take these; 0 now */
} agr_wow_es_keys;

/*
 * Fills `k` for aggregate `id` (non-empty) of tenant `tenant` (NULL:
 * Wow's default "(0)"; "" is allowed and gives an empty b64). On error
 * `k` holds nothing to free.
 */
AGR_API int agr_wow_es_keys_build(const agr_wow_named *n, const char *id,
				  const char *tenant, agr_wow_es_keys *k);

/* Frees the strings of `k` and zeroes it; `k` may be zeroed already. */
AGR_API void agr_wow_es_keys_free(agr_wow_es_keys *k);

/* The id index key "{v2:es:<scope>:<bucket>}:ids" of one bucket 0..127. */
AGR_API int agr_wow_es_ids_key(const agr_wow_named *n, int bucket,
			       char **out, size_t *len);

/* ---- JSON messages (the stream entry field "msg") ---- */

/* Wow's default tenant id. */
#define AGR_WOW_DEFAULT_TENANT "(0)"
/* Wow's default event revision. */
#define AGR_WOW_DEFAULT_REVISION "0.0.1"

/* One header entry; Wow's headers map strings to strings. */
typedef struct agr_wow_header {
	const char *key;
	const char *value;
} agr_wow_header;

/*
 * A command message (Wow CommandRecord). When encoding, NULL optional
 * strings take Wow's defaults: tenant_id "(0)", owner_id and space_id
 * "", request_id = id. `body` is `body_len` bytes of JSON text that
 * must be one object; it is written as given (not reformatted).
 * aggregate_version is written only when has_aggregate_version.
 * Decoding fills every field (defaults included) and points the
 * strings into the decoded block; `body` is then the object
 * re-serialised compactly and NUL-terminated.
 */
typedef struct agr_wow_command {
	const char *id;		  /* required: the command id */
	const char *context_name; /* required, the real context name */
	const char *aggregate_name; /* required */
	const char *name;	  /* required: the command's name */
	const agr_wow_header *header;
	size_t header_count;
	const char *tenant_id;
	const char *aggregate_id; /* required */
	const char *owner_id;
	const char *space_id;
	const char *request_id;
	bool has_aggregate_version;
	int32_t aggregate_version;
	bool is_create;
	bool is_void;
	bool allow_create;
	const char *body_type;	  /* required: the JVM class name */
	const char *body;	  /* required: a JSON object */
	size_t body_len;
	int64_t create_time;	  /* epoch ms */
} agr_wow_command;

/*
 * Writes `c` as Wow does (field order id, contextName, aggregateName,
 * name, header, tenantId, aggregateId, ownerId, spaceId, requestId,
 * [aggregateVersion], isCreate, isVoid, allowCreate, bodyType, body,
 * createTime; strings escaped as Jackson escapes them: '"', '\\' and
 * control characters, \b \t \n \f \r short, others \u00XX; non-ASCII
 * raw). Returns 0 and a malloc()ed NUL-terminated document in `*json`,
 * -EINVAL (a required field is NULL), -EBADMSG (`body` is not a JSON
 * object), -EILSEQ (a string is not UTF-8) or -ENOMEM.
 */
AGR_API int agr_wow_command_encode(const agr_wow_command *c, char **json,
				   size_t *len);

/*
 * Parses a command's `msg`. Unknown fields are ignored, and so is
 * order. The fields Wow's CommandRecord reads without a default are
 * required: id, contextName, aggregateName, name, header (an object of
 * strings), tenantId, aggregateId, requestId, isCreate, bodyType, body
 * (an object) and createTime (an integer); a missing or mistyped one is
 * -EBADMSG with a log line naming it. ownerId and spaceId default to
 * "", isVoid and allowCreate to false, aggregateVersion (an int32) to
 * absent. A string that is not UTF-8, or encodes a surrogate, is
 * -EBADMSG too (json-c would let the latter through; Wow's keys refuse
 * it). Returns 0 and `*out`, which owns every string it points to,
 * until agr_wow_command_free(); on error `*out` is NULL.
 */
AGR_API int agr_wow_command_decode(const char *json, size_t len,
				   agr_wow_command **out);

AGR_API void agr_wow_command_free(agr_wow_command *c);

/* One domain event of a stream (Wow DomainEventRecord, body item). */
typedef struct agr_wow_event {
	const char *id;		/* required */
	const char *name;	/* required */
	const char *revision;	/* NULL: "0.0.1" */
	const char *body_type;	/* required */
	const char *body;	/* required: JSON text, written as given */
	size_t body_len;
} agr_wow_event;

/*
 * A domain event stream (Wow EventStreamRecord): the events one command
 * produced, taking the aggregate to `version`.
 */
typedef struct agr_wow_event_stream {
	const char *id;		    /* required: the stream id */
	const char *context_name;   /* required */
	const char *aggregate_name; /* required */
	const agr_wow_header *header;
	size_t header_count;
	const char *aggregate_id;   /* required */
	const char *tenant_id;	    /* NULL: "(0)" */
	const char *owner_id;	    /* NULL: "" */
	const char *space_id;	    /* NULL: "" */
	const char *command_id;	    /* required */
	const char *request_id;	    /* NULL: command_id */
	int32_t version;	    /* >= 1 */
	const agr_wow_event *events; /* at least one */
	size_t event_count;
	int64_t create_time;	    /* epoch ms */
} agr_wow_event_stream;

/*
 * Writes `s` as Wow does (id, contextName, aggregateName, header,
 * aggregateId, tenantId, ownerId, spaceId, commandId, requestId,
 * version, body [{id, name, revision, bodyType, body}...], createTime).
 * Errors as agr_wow_command_encode(); -EINVAL also for version < 1 or
 * no events.
 */
AGR_API int agr_wow_event_stream_encode(const agr_wow_event_stream *s,
					char **json, size_t *len);

/*
 * Parses a domain event stream (a `msg` of an ":event" topic, or a
 * member of the event store's stream ZSET). Required, as Wow's
 * EventStreamRecord reads them: id, contextName, aggregateName, header,
 * aggregateId, tenantId, commandId, requestId, version (an int32 >= 1),
 * body (a non-empty array whose items have id, name, revision,
 * bodyType and body) and createTime; else -EBADMSG. ownerId and spaceId
 * default to "". Strings as for agr_wow_command_decode(). `*out` owns
 * what it points to until agr_wow_event_stream_free().
 */
AGR_API int agr_wow_event_stream_decode(const char *json, size_t len,
					agr_wow_event_stream **out);

AGR_API void agr_wow_event_stream_free(agr_wow_event_stream *s);

/*
 * A state event (Wow StateEvent, the `msg` of a ":state" stream entry):
 * a domain event stream and the aggregate's state after it.
 */
typedef struct agr_wow_state_event {
	agr_wow_event_stream stream;
	const char *first_operator; /* NULL: "" */
	int64_t first_event_time;   /* epoch ms */
	const char *state;	    /* required: a JSON object, as given */
	size_t state_len;
	const char *tags;	    /* a JSON object of string arrays;
				     * NULL: {} */
	size_t tags_len;
	bool deleted;
} agr_wow_state_event;

/*
 * Writes `e` as Wow does: the stream's fields through version, then
 * firstOperator, firstEventTime, state, tags, deleted, then body and
 * createTime. Errors as agr_wow_event_stream_encode(); -EBADMSG also
 * when state or tags is not a JSON object.
 */
AGR_API int agr_wow_state_event_encode(const agr_wow_state_event *e,
				       char **json, size_t *len);

/*
 * Parses a state event: the stream's required fields, and state (an
 * object) and deleted (a boolean); firstOperator defaults to "",
 * firstEventTime to 0, tags to {} (as Wow's StateEventJsonDeserializer
 * reads them). Freed with agr_wow_state_event_free().
 */
AGR_API int agr_wow_state_event_decode(const char *json, size_t len,
				       agr_wow_state_event **out);

AGR_API void agr_wow_state_event_free(agr_wow_state_event *e);

/*
 * An aggregate snapshot (Wow Snapshot, SnapshotSerializer.kt): the
 * document the event store keeps at the snapshot key.
 */
typedef struct agr_wow_snapshot {
	const char *context_name;   /* required */
	const char *aggregate_name; /* required */
	const char *aggregate_id;   /* required */
	const char *tenant_id;	    /* NULL: "(0)" */
	const char *owner_id;	    /* NULL: "" */
	const char *space_id;	    /* NULL: "" */
	int32_t version;	    /* >= 1 */
	const char *event_id;	    /* NULL: "" */
	const char *first_operator; /* NULL: "" */
	const char *operator_;	    /* NULL: "" ("operator") */
	int64_t first_event_time;   /* epoch ms */
	int64_t event_time;	    /* epoch ms */
	const char *state;	    /* required: a JSON object, as given */
	size_t state_len;
	int64_t snapshot_time;	    /* epoch ms */
	const char *tags;	    /* a JSON object; NULL: {} */
	size_t tags_len;
	bool deleted;
} agr_wow_snapshot;

/*
 * Writes `s` as Wow does: contextName, aggregateName, aggregateId,
 * tenantId, ownerId, spaceId, version, eventId, firstOperator, operator,
 * firstEventTime, eventTime, state, snapshotTime, tags, deleted. Errors
 * as agr_wow_command_encode(); -EINVAL also for version < 1.
 */
AGR_API int agr_wow_snapshot_encode(const agr_wow_snapshot *s, char **json,
				    size_t *len);

/*
 * Parses a snapshot. Required, as Wow's deserializer reads them:
 * contextName, aggregateName, aggregateId, tenantId, version,
 * state (an object), snapshotTime, deleted; the rest default as in
 * agr_wow_snapshot. Freed with agr_wow_snapshot_free().
 */
AGR_API int agr_wow_snapshot_decode(const char *json, size_t len,
				    agr_wow_snapshot **out);

AGR_API void agr_wow_snapshot_free(agr_wow_snapshot *s);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_WOW_CODEC_H */
