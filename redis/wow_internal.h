/* SPDX-License-Identifier: MIT */
/*
 * wow_internal.h - what the Wow files of libaggring-redis share; not
 * installed.
 */
#ifndef AGGRING_WOW_INTERNAL_H
#define AGGRING_WOW_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/wow_codec.h>

struct json_object;

/*
 * Whether the `len` bytes at `s` are UTF-8 as Java's strict decoder
 * wants it: no overlong forms, nothing above U+10FFFF and no encoded
 * surrogate (Java: an unpaired surrogate). Embedded NULs are allowed.
 */
bool agr__wow_utf8_valid(const char *s, size_t len);

/*
 * Calls fn(unit, arg) for each UTF-16 code unit of valid UTF-8 `s`
 * (checked with agr__wow_utf8_valid() first).
 */
void agr__wow_utf16_units(const char *s, size_t len,
			  void (*fn)(uint16_t unit, void *arg), void *arg);

/* SHA-256 of `len` bytes, as 64 lowercase hex digits and a NUL. */
void agr__wow_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- a growing output buffer ---- */
struct agr__wow_buf {
	char *data;
	size_t len;
	size_t cap;
	int err; /* the first failure (-ENOMEM, -EILSEQ, ...), sticky */
};

/* Sizes an empty buffer for about `n` bytes: one allocation, not a few. */
void agr__wow_buf_hint(struct agr__wow_buf *b, size_t n);
void agr__wow_buf_bytes(struct agr__wow_buf *b, const void *p, size_t n);
void agr__wow_buf_str(struct agr__wow_buf *b, const char *s);
void agr__wow_buf_b64(struct agr__wow_buf *b, const char *s, size_t n);
void agr__wow_buf_hex16(struct agr__wow_buf *b, const char *s, size_t n);
/* Hands the NUL-terminated text over to *out, or returns b->err. */
int agr__wow_buf_finish(struct agr__wow_buf *b, char **out, size_t *len);

/* ---- JSON writing, Jackson's way ---- */
void agr__wow_json_string(struct agr__wow_buf *b, const char *s);
/* ,"key": before a value; `first` omits the comma */
void agr__wow_json_key(struct agr__wow_buf *b, const char *key, bool first);
void agr__wow_json_field_str(struct agr__wow_buf *b, const char *key,
			     const char *s);
void agr__wow_json_field_int(struct agr__wow_buf *b, const char *key,
			     int64_t v);
void agr__wow_json_field_bool(struct agr__wow_buf *b, const char *key,
			      bool v);
void agr__wow_json_header(struct agr__wow_buf *b, const agr_wow_header *h,
			  size_t n);
/*
 * Appends `n` bytes of JSON text as a value, after checking that it is
 * one JSON value (an object when `object`), else b->err = -EBADMSG.
 */
void agr__wow_json_raw(struct agr__wow_buf *b, const char *what,
		       const char *json, size_t n, bool object);

/* ---- JSON reading (json-c) ---- */
/* Parses one strict JSON document; NULL (and a log line) if it is not. */
struct json_object *agr__wow_json_parse(const char *what, const char *json,
					size_t len);
/*
 * Field readers of decoded messages: 0, or -EBADMSG with a log line
 * "<what>: field <key> ..." when required and missing, or mistyped.
 * A missing optional field leaves *out as it was (the default).
 */
int agr__wow_json_get_str(struct json_object *o, const char *what,
			  const char *key, bool required, const char **out);
int agr__wow_json_get_int64(struct json_object *o, const char *what,
			    const char *key, bool required, int64_t *out);
int agr__wow_json_get_int32(struct json_object *o, const char *what,
			    const char *key, bool required, bool *present,
			    int32_t *out);
int agr__wow_json_get_bool(struct json_object *o, const char *what,
			   const char *key, bool required, bool *out);
/* header: an object of strings; *out is calloc()ed (NULL when empty) */
int agr__wow_json_get_header(struct json_object *o, const char *what,
			     const char *key, agr_wow_header **out,
			     size_t *count);
/* a value as compact JSON text, owned by `v` */
int agr__wow_json_get_raw(struct json_object *o, const char *what,
			  const char *key, int type, const char **out,
			  size_t *len, struct json_object **value);

/* Parses a document that must be one JSON object; NULL (logged) if not. */
struct json_object *agr__wow_json_parse_object(const char *what,
					       const char *json, size_t len);
/* "tags": an object, as text owned by `o`; "{}" when the field is absent */
int agr__wow_json_get_tags(struct json_object *o, const char *what,
			   const char **tags, size_t *len);
/* ,"tags": the caller's object (checked, logged under `what`), or {} */
void agr__wow_json_field_tags(struct agr__wow_buf *b, const char *what,
			      const char *tags, size_t len);

/* ---- decoded documents: one allocation, one json-c tree ---- */
/*
 * One kind of decoded document: a struct of `size` bytes that begins
 * with its public struct (what the caller gets and later frees) and
 * holds, `root_at` bytes in, the json-c tree its strings point into.
 */
struct agr__wow_doc_kind {
	const char *what; /* names the document in log lines */
	size_t size;
	size_t root_at;
	/* fills the document from its tree: 0 or -EBADMSG (logged) */
	int (*read)(struct json_object *root, void *doc);
	/* frees what read() allocated besides the tree; may be NULL */
	void (*free_parts)(void *doc);
};

/*
 * Decodes `len` bytes of `json`, which must be one JSON object, as a
 * document of `kind`: the document, or NULL with *err -ENOMEM or
 * -EBADMSG (logged); *err is 0 on success.
 */
void *agr__wow_doc_decode(const struct agr__wow_doc_kind *kind,
			  const char *json, size_t len, int *err);
/* Frees a document of `kind` (NULL is fine) and its tree. */
void agr__wow_doc_free(const struct agr__wow_doc_kind *kind, void *doc);

/* ---- a domain event stream's own fields (wow_event_stream.c) ---- */
/* what a decoded stream allocated besides the json-c tree */
struct agr__wow_stream_parts {
	agr_wow_header *header;
	agr_wow_event *events;
};

bool agr__wow_stream_ok(const agr_wow_event_stream *s);
size_t agr__wow_stream_size_hint(const agr_wow_event_stream *s);
/* "{" through "version"; then the caller's fields; then the tail */
void agr__wow_stream_write_head(struct agr__wow_buf *b,
				const agr_wow_event_stream *s);
/* "body" [...], "createTime" and "}" */
void agr__wow_stream_write_tail(struct agr__wow_buf *b,
				const agr_wow_event_stream *s);
/* fills `s` from object `o`; -EBADMSG (logged under `what`) */
int agr__wow_stream_read(struct json_object *o, const char *what,
			 agr_wow_event_stream *s,
			 struct agr__wow_stream_parts *p);
void agr__wow_stream_parts_free(struct agr__wow_stream_parts *p);

/* ---- Wow's Lua scripts (wow_scripts.c) ---- */
extern const char agr__wow_append_lua[];
extern const char agr__wow_append_sha1[];
extern const char agr__wow_snapshot_lua[];
extern const char agr__wow_snapshot_sha1[];

/* ---- the event store's shared machinery (wow_event_store.c) ---- */
struct agr_wow_event_store;
struct agr_redis;
struct redisReply;

/* 0 on the store's worker, else -EPERM (and a log line naming `call`) */
int agr__wow_es_enter(struct agr_wow_event_store *es, const char *call);
/* the keys of one aggregate of the store's named aggregate */
int agr__wow_es_keys(struct agr_wow_event_store *es, const char *id,
		     const char *tenant, agr_wow_es_keys *k);
/* a call in flight holds the store's memory */
void agr__wow_es_hold(struct agr_wow_event_store *es);
void agr__wow_es_release(struct agr_wow_event_store *es);

/*
 * Runs a script with EVALSHA, and once more with EVAL on NOSCRIPT.
 * `args` (KEYS then ARGV, `nkeys` + `nargv` <= 12 strings) must live
 * until done() runs; `key` routes it. done(es, reply, err, op) runs
 * once, on the worker, unless the call fails (a negative return).
 */
typedef void (*agr__wow_script_fn)(struct agr_wow_event_store *es,
				   const struct redisReply *reply, int err,
				   void *op);
int agr__wow_es_script(struct agr_wow_event_store *es, const char *script,
		       const char *sha1, int nkeys, int nargv,
		       const char *const *args, const size_t *lens,
		       agr__wow_script_fn done, void *op);
/* the store's named aggregate and worker */
const agr_wow_named *agr__wow_es_named(struct agr_wow_event_store *es);
/* a short string reply's text, or NULL (and a log line) */
const char *agr__wow_reply_text(const struct redisReply *reply,
				const char *what, int *err);

#endif /* AGGRING_WOW_INTERNAL_H */
