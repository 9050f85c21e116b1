/* SPDX-License-Identifier: MIT */
/*
 * wow_json.c - JSON as Wow's Jackson writes and reads it.
 *
 * Writing is done here, not by json-c, so that the bytes are Jackson's:
 * fields in Wow's order, strings escaped as Jackson escapes them (only
 * '"', '\\' and C0 controls; \b \t \n \f \r short, the rest \u00XX with
 * upper-case hex; '/' and non-ASCII raw), and message bodies copied as
 * the caller wrote them. Reading uses json-c, strictly, with the field
 * rules of Wow's JsonMessageRecord: missing required fields and wrong
 * types are errors, unknown fields are ignored.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json.h>

/* Deep enough for any message body, bounded so hostile input is cheap. */
#define PARSE_DEPTH 256

void agr__wow_json_string(struct agr__wow_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s), i, run = 0;
	char esc[6];

	if (b->err)
		return;
	if (!agr__wow_utf8_valid(s, len)) {
		b->err = -EILSEQ;
		return;
	}
	agr__wow_buf_bytes(b, "\"", 1);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *e = NULL;
		size_t elen = 2;

		switch (c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\b': e = "\\b"; break;
		case '\t': e = "\\t"; break;
		case '\n': e = "\\n"; break;
		case '\f': e = "\\f"; break;
		case '\r': e = "\\r"; break;
		default:
			if (c < 0x20) {
				memcpy(esc, "\\u00", 4);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				e = esc;
				elen = 6;
			}
		}
		if (!e)
			continue;
		agr__wow_buf_bytes(b, s + run, i - run);
		agr__wow_buf_bytes(b, e, elen);
		run = i + 1;
	}
	agr__wow_buf_bytes(b, s + run, len - run);
	agr__wow_buf_bytes(b, "\"", 1);
}

void agr__wow_json_key(struct agr__wow_buf *b, const char *key, bool first)
{
	if (!first)
		agr__wow_buf_bytes(b, ",", 1);
	agr__wow_json_string(b, key);
	agr__wow_buf_bytes(b, ":", 1);
}

void agr__wow_json_field_str(struct agr__wow_buf *b, const char *key,
			     const char *s)
{
	agr__wow_json_key(b, key, false);
	agr__wow_json_string(b, s);
}

void agr__wow_json_field_int(struct agr__wow_buf *b, const char *key,
			     int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	agr__wow_json_key(b, key, false);
	agr__wow_buf_str(b, num);
}

void agr__wow_json_field_bool(struct agr__wow_buf *b, const char *key,
			      bool v)
{
	agr__wow_json_key(b, key, false);
	agr__wow_buf_str(b, v ? "true" : "false");
}

void agr__wow_json_header(struct agr__wow_buf *b, const agr_wow_header *h,
			  size_t n)
{
	size_t i;

	agr__wow_json_key(b, "header", false);
	agr__wow_buf_bytes(b, "{", 1);
	for (i = 0; i < n; i++) {
		if (!h[i].key || !h[i].value) {
			b->err = b->err ? b->err : -EINVAL;
			return;
		}
		agr__wow_json_key(b, h[i].key, i == 0);
		agr__wow_json_string(b, h[i].value);
	}
	agr__wow_buf_bytes(b, "}", 1);
}

void agr__wow_json_raw(struct agr__wow_buf *b, const char *what,
		       const char *json, size_t n, bool object)
{
	struct json_object *v;

	if (b->err)
		return;
	v = agr__wow_json_parse(what, json, n);
	if (!v || (object && !json_object_is_type(v, json_type_object))) {
		if (v)
			agr_log(AGR_LOG_WARN, "%s: not a JSON object", what);
		json_object_put(v);
		b->err = -EBADMSG;
		return;
	}
	json_object_put(v);
	agr__wow_buf_bytes(b, json, n);
}

/* JSON's whitespace only, in `n` bytes that need not end in a NUL */
static bool only_space(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

/*
 * One tokener per thread, reset between documents. A new one callocs its
 * PARSE_DEPTH levels (about 10 KiB), which cost a Wow processor's worker
 * a tenth of its CPU per command (bench/RESULTS.md); the thread's exit
 * frees it.
 */
static pthread_key_t tokener_key;
static pthread_once_t tokener_once = PTHREAD_ONCE_INIT;
static bool tokener_key_made;

static void tokener_destroy(void *tok)
{
	json_tokener_free(tok);
}

static void tokener_key_make(void)
{
	tokener_key_made = pthread_key_create(&tokener_key,
					      tokener_destroy) == 0;
}

/* The thread's tokener; *kept says whether the thread keeps it. */
static struct json_tokener *tokener_take(bool *kept)
{
	struct json_tokener *tok = NULL;

	pthread_once(&tokener_once, tokener_key_make);
	if (tokener_key_made)
		tok = pthread_getspecific(tokener_key);
	*kept = tok != NULL;
	if (tok)
		return tok; /* reset when it was given back */
	tok = json_tokener_new_ex(PARSE_DEPTH);
	if (tok && tokener_key_made)
		*kept = pthread_setspecific(tokener_key, tok) == 0;
	return tok;
}

/* Back to the thread, holding nothing of the last document. */
static void tokener_give_back(struct json_tokener *tok, bool kept)
{
	if (kept)
		json_tokener_reset(tok);
	else
		json_tokener_free(tok);
}

struct json_object *agr__wow_json_parse(const char *what, const char *json,
					size_t len)
{
	struct json_tokener *tok;
	struct json_object *v;
	enum json_tokener_error jerr;
	size_t end;
	bool kept;

	if (!json || !len || len > INT32_MAX) {
		agr_log(AGR_LOG_WARN, "%s: empty or oversized JSON", what);
		return NULL;
	}
	tok = tokener_take(&kept);
	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
				    JSON_TOKENER_VALIDATE_UTF8);
	v = json_tokener_parse_ex(tok, json, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (jerr == json_tokener_continue) {
		/* a bare number or literal may go on: a NUL says it ended */
		v = json_tokener_parse_ex(tok, "", 1);
		jerr = json_tokener_get_error(tok);
		end = len;
	}
	if (jerr != json_tokener_success) {
		agr_log(AGR_LOG_WARN, "%s: bad JSON at byte %zu: %s", what,
			end, json_tokener_error_desc(jerr));
		json_object_put(v);
		v = NULL;
	} else if (!only_space(json + end, len - end)) {
		agr_log(AGR_LOG_WARN, "%s: bytes after the JSON at %zu", what,
			end);
		json_object_put(v);
		v = NULL;
	}
	tokener_give_back(tok, kept);
	return v;
}

/* Looks `key` up; -EBADMSG if required and missing (or null). */
static int lookup(struct json_object *o, const char *what, const char *key,
		  bool required, struct json_object **v)
{
	*v = NULL;
	if (json_object_object_get_ex(o, key, v) && *v)
		return 1;
	if (!required)
		return 0;
	agr_log(AGR_LOG_WARN, "%s: missing field \"%s\"", what, key);
	return -EBADMSG;
}

static int mistyped(const char *what, const char *key, const char *want)
{
	agr_log(AGR_LOG_WARN, "%s: field \"%s\" is not %s", what, key, want);
	return -EBADMSG;
}

int agr__wow_json_get_str(struct json_object *o, const char *what,
			  const char *key, bool required, const char **out)
{
	struct json_object *v;
	int found = lookup(o, what, key, required, &v);
	const char *s;

	if (found <= 0)
		return found;
	if (!json_object_is_type(v, json_type_string))
		return mistyped(what, key, "a string");
	s = json_object_get_string(v);
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return mistyped(what, key, "a string without NUL");
	/* json-c lets encoded surrogates through; Wow's keys refuse them */
	if (!agr__wow_utf8_valid(s, strlen(s)))
		return mistyped(what, key, "UTF-8 without surrogates");
	*out = s;
	return 0;
}

int agr__wow_json_get_int64(struct json_object *o, const char *what,
			    const char *key, bool required, int64_t *out)
{
	struct json_object *v;
	int found = lookup(o, what, key, required, &v);

	if (found <= 0)
		return found;
	/* json-c keeps integers above INT64_MAX as uint64: not an int64 */
	if (!json_object_is_type(v, json_type_int) ||
	    (json_object_get_int64(v) == INT64_MAX &&
	     json_object_get_uint64(v) > (uint64_t)INT64_MAX))
		return mistyped(what, key, "an int64");
	*out = json_object_get_int64(v);
	return 0;
}

int agr__wow_json_get_int32(struct json_object *o, const char *what,
			    const char *key, bool required, bool *present,
			    int32_t *out)
{
	int64_t v = 0;
	int found, err;

	if (present)
		*present = false;
	found = json_object_object_get_ex(o, key, NULL) &&
		json_object_object_get(o, key);
	if (!found && !required)
		return 0; /* absent or null: Wow's get()?.asInt() */
	err = agr__wow_json_get_int64(o, what, key, true, &v);
	if (err)
		return err;
	if (v < INT32_MIN || v > INT32_MAX)
		return mistyped(what, key, "an int32");
	*out = (int32_t)v;
	if (present)
		*present = true;
	return 0;
}

int agr__wow_json_get_bool(struct json_object *o, const char *what,
			   const char *key, bool required, bool *out)
{
	struct json_object *v;
	int found = lookup(o, what, key, required, &v);

	if (found <= 0)
		return found;
	if (!json_object_is_type(v, json_type_boolean))
		return mistyped(what, key, "a boolean");
	*out = json_object_get_boolean(v);
	return 0;
}

int agr__wow_json_get_header(struct json_object *o, const char *what,
			     const char *key, agr_wow_header **out,
			     size_t *count)
{
	struct json_object_iterator it, end;
	struct json_object *v;
	agr_wow_header *h;
	size_t n, i = 0;
	int found = lookup(o, what, key, true, &v);

	*out = NULL;
	*count = 0;
	if (found <= 0)
		return found;
	if (!json_object_is_type(v, json_type_object))
		return mistyped(what, key, "an object");
	n = (size_t)json_object_object_length(v);
	if (!n)
		return 0;
	h = calloc(n, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (it = json_object_iter_begin(v), end = json_object_iter_end(v);
	     !json_object_iter_equal(&it, &end) && i < n;
	     json_object_iter_next(&it), i++) {
		const char *k = json_object_iter_peek_name(&it);
		struct json_object *val = json_object_iter_peek_value(&it);

		if (!val || !json_object_is_type(val, json_type_string) ||
		    !agr__wow_utf8_valid(k, strlen(k)) ||
		    (size_t)json_object_get_string_len(val) !=
			    strlen(json_object_get_string(val)) ||
		    !agr__wow_utf8_valid(json_object_get_string(val),
					 strlen(json_object_get_string(val)))) {
			agr_log(AGR_LOG_WARN, "%s: header \"%s\" is not a "
					      "UTF-8 string", what, k);
			free(h);
			return -EBADMSG;
		}
		h[i].key = k;
		h[i].value = json_object_get_string(val);
	}
	*out = h;
	*count = i;
	return 0;
}

int agr__wow_json_get_raw(struct json_object *o, const char *what,
			  const char *key, int type, const char **out,
			  size_t *len, struct json_object **value)
{
	struct json_object *v;
	int found = lookup(o, what, key, true, &v);

	if (found <= 0)
		return found;
	if (type >= 0 && !json_object_is_type(v, (enum json_type)type))
		return mistyped(what, key, type == json_type_object ?
						   "an object" : "an array");
	*out = json_object_to_json_string_length(
		v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
		len);
	if (!*out)
		return -ENOMEM;
	if (value)
		*value = v;
	return 0;
}

struct json_object *agr__wow_json_parse_object(const char *what,
					       const char *json, size_t len)
{
	struct json_object *o = agr__wow_json_parse(what, json, len);

	if (o && !json_object_is_type(o, json_type_object)) {
		agr_log(AGR_LOG_WARN, "%s: not a JSON object", what);
		json_object_put(o);
		o = NULL;
	}
	return o;
}

int agr__wow_json_get_tags(struct json_object *o, const char *what,
			   const char **tags, size_t *len)
{
	if (!json_object_object_get(o, "tags")) {
		*tags = "{}";
		*len = 2;
		return 0;
	}
	return agr__wow_json_get_raw(o, what, "tags", json_type_object, tags,
				     len, NULL);
}

void agr__wow_json_field_tags(struct agr__wow_buf *b, const char *what,
			      const char *tags, size_t len)
{
	agr__wow_json_key(b, "tags", false);
	if (tags)
		agr__wow_json_raw(b, what, tags, len, true);
	else
		agr__wow_buf_bytes(b, "{}", 2);
}

/* the tree a document keeps at kind->root_at (memcpy: no aligned cast) */
static struct json_object *doc_root(const struct agr__wow_doc_kind *kind,
				    const void *doc)
{
	struct json_object *root;

	memcpy(&root, (const char *)doc + kind->root_at, sizeof(root));
	return root;
}

void *agr__wow_doc_decode(const struct agr__wow_doc_kind *kind,
			  const char *json, size_t len, int *err)
{
	struct json_object *root;
	void *doc = calloc(1, kind->size);

	if (!doc) {
		*err = -ENOMEM;
		return NULL;
	}
	root = agr__wow_json_parse_object(kind->what, json, len);
	memcpy((char *)doc + kind->root_at, &root, sizeof(root));
	*err = root ? kind->read(root, doc) : -EBADMSG;
	if (*err) {
		agr__wow_doc_free(kind, doc);
		return NULL;
	}
	return doc;
}

void agr__wow_doc_free(const struct agr__wow_doc_kind *kind, void *doc)
{
	if (!doc)
		return;
	if (kind->free_parts)
		kind->free_parts(doc);
	json_object_put(doc_root(kind, doc));
	free(doc);
}
