/* SPDX-License-Identifier: MIT */
/*
 * wow_scan.c - Wow's aggregate id scan (RedisEventStore.scanAggregateId):
 * the id index of every bucket read after a bound, merged in Java
 * String order and cut to the limit.
 *
 * An index member is hex16(id) "." b64(tenant); hex16 has four digits
 * per UTF-16 code unit, so comparing members byte by byte compares ids
 * the way Java's String.compareTo does.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <aggring/io.h>
#include <aggring/wow_event_store.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

struct scan {
	agr_wow_event_store *es;
	agr_wow_ids_fn cb;
	void *arg;
	int limit;
	int pending; /* bucket replies still to come */
	int status;  /* the first error */
	char **members;
	size_t count, cap;
};

static void scan_free(struct scan *sc)
{
	for (size_t i = 0; i < sc->count; i++)
		free(sc->members[i]);
	free(sc->members);
	free(sc);
}

static int keep_member(struct scan *sc, const char *m, size_t len)
{
	char **grown, *copy;

	if (sc->count == sc->cap) {
		size_t cap = sc->cap ? 2 * sc->cap : 64;

		grown = realloc(sc->members, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		sc->members = grown;
		sc->cap = cap;
	}
	copy = strndup(m, len);
	if (!copy)
		return -ENOMEM;
	sc->members[sc->count++] = copy;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static void put_utf8(struct agr__wow_buf *b, uint32_t cp)
{
	uint8_t u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (uint8_t)(0xc0 | (cp >> 6));
		u[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (uint8_t)(0xe0 | (cp >> 12));
		u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (uint8_t)(0xf0 | (cp >> 18));
		u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	agr__wow_buf_bytes(b, u, n);
}

/* hex16 back to UTF-8; unpaired surrogates are not Wow's */
static int hex16_decode(const char *h, size_t n, char **out)
{
	struct agr__wow_buf b = { 0 };
	uint32_t unit, high = 0;

	if (!n || n % 4)
		return -EBADMSG;
	for (size_t i = 0; i < n && !b.err; i += 4) {
		unit = 0;
		for (size_t j = 0; j < 4; j++) {
			int d = hex_digit(h[i + j]);

			if (d < 0) {
				free(b.data);
				return -EBADMSG;
			}
			unit = unit << 4 | (uint32_t)d;
		}
		if (high && (unit < 0xdc00 || unit > 0xdfff))
			b.err = -EBADMSG;
		else if (high) {
			put_utf8(&b, 0x10000 + ((high - 0xd800) << 10) +
					     (unit - 0xdc00));
			high = 0;
		} else if (unit >= 0xd800 && unit <= 0xdbff)
			high = unit;
		else if (unit >= 0xdc00 && unit <= 0xdfff)
			b.err = -EBADMSG;
		else
			put_utf8(&b, unit);
	}
	if (!b.err && high)
		b.err = -EBADMSG;
	return agr__wow_buf_finish(&b, out, NULL);
}

static int member_split(const char *m, char **id, char **tenant)
{
	const char *dot = strchr(m, '.');
	int err;

	if (!dot || dot == m || strchr(dot + 1, '.'))
		return -EBADMSG;
	err = hex16_decode(m, (size_t)(dot - m), id);
	if (err)
		return err;
	err = agr_wow_b64_decode(dot + 1, strlen(dot + 1), tenant, NULL);
	if (err) {
		free(*id);
		return -EBADMSG;
	}
	return 0;
}

static int by_member(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_deliver(struct scan *sc)
{
	size_t n = sc->count < (size_t)sc->limit ? sc->count : (size_t)sc->limit;
	char **ids = calloc(n ? n : 1, sizeof(*ids));
	char **tenants = calloc(n ? n : 1, sizeof(*tenants));
	int err = sc->status;
	size_t i, got = 0;

	if (!err && (!ids || !tenants))
		err = -ENOMEM;
	if (!err && sc->count) /* qsort wants an array, even for none */
		qsort(sc->members, sc->count, sizeof(*sc->members), by_member);
	for (i = 0; !err && i < n; i++, got++) {
		err = member_split(sc->members[i], &ids[i], &tenants[i]);
		if (err)
			agr_log(AGR_LOG_WARN, "wow event store: id index "
					      "member \"%s\" is not Wow's",
				sc->members[i]);
	}
	if (err)
		sc->cb(sc->es, err, NULL, NULL, 0, sc->arg);
	else
		sc->cb(sc->es, 0, (const char *const *)ids,
		       (const char *const *)tenants, n, sc->arg);
	for (i = 0; i < got; i++) {
		free(ids[i]);
		free(tenants[i]);
	}
	free(ids);
	free(tenants);
}

static void scan_finish(struct scan *sc)
{
	agr_wow_event_store *es = sc->es;

	scan_deliver(sc);
	scan_free(sc);
	agr__wow_es_release(es);
}

static void bucket_reply(agr_redis *r, const redisReply *reply, int err,
			 void *arg)
{
	struct scan *sc = arg;

	(void)r;
	if (!err && reply->type != REDIS_REPLY_ARRAY) {
		if (reply->type == REDIS_REPLY_ERROR)
			agr_log(AGR_LOG_WARN, "wow event store: scan: %.*s",
				(int)reply->len, reply->str);
		err = -EPROTO;
	}
	for (size_t i = 0; !err && i < reply->elements; i++) {
		const redisReply *e = reply->element[i];

		err = e->type == REDIS_REPLY_STRING ?
			      keep_member(sc, e->str, e->len) : -EPROTO;
	}
	if (err && !sc->status)
		sc->status = err;
	if (--sc->pending == 0)
		scan_finish(sc);
}

static void nothing_after_last(int res, void *arg)
{
	(void)res;
	scan_finish(arg);
}

static int bucket_send(struct scan *sc, int bucket, const char *min)
{
	char *key, limit[16];
	size_t keylen;
	const char *argv[7];
	size_t lens[7];
	int err;

	err = agr_wow_es_ids_key(agr__wow_es_named(sc->es), bucket, &key,
				 &keylen);
	if (err)
		return err;
	snprintf(limit, sizeof(limit), "%d", sc->limit);
	argv[0] = "ZRANGEBYLEX";
	argv[1] = key;
	argv[2] = min;
	argv[3] = "+";
	argv[4] = "LIMIT";
	argv[5] = "0";
	argv[6] = limit;
	for (int i = 0; i < 7; i++)
		lens[i] = strlen(argv[i]);
	err = agr_redis_command_argv(agr_wow_event_store_redis(sc->es), key,
				     keylen, 7, argv, lens, bucket_reply, sc);
	free(key);
	return err;
}

/* "(" hex16(after) "/": every member of an id above `after` */
static int lower_bound(const char *after, char **out)
{
	struct agr__wow_buf b = { 0 };

	agr__wow_buf_str(&b, "(");
	agr__wow_buf_hex16(&b, after, strlen(after));
	agr__wow_buf_str(&b, "/");
	return agr__wow_buf_finish(&b, out, NULL);
}

static int scan_send(struct scan *sc, const char *after)
{
	char *min;
	int err, bucket;

	if (!strcmp(after, AGR_WOW_SCAN_LAST_ID)) {
		sc->pending = 1;
		err = agr_io_timeout(agr_redis_worker(
					     agr_wow_event_store_redis(sc->es)),
				     1, nothing_after_last, sc);
		return err;
	}
	err = lower_bound(after, &min);
	if (err)
		return err;
	/* counted up front: a reply may come before the next send */
	sc->pending = AGR_WOW_EVENT_STORE_BUCKETS + 1;
	for (bucket = 0; bucket < AGR_WOW_EVENT_STORE_BUCKETS; bucket++) {
		err = bucket_send(sc, bucket, min);
		if (err) {
			if (!sc->status)
				sc->status = err;
			sc->pending -= AGR_WOW_EVENT_STORE_BUCKETS - bucket;
			break;
		}
	}
	free(min);
	/* bucket 0 failed at once: nothing is in flight, fail the call */
	if (bucket == 0)
		return err;
	if (--sc->pending == 0)
		scan_finish(sc);
	return 0;
}

AGR_API int agr_wow_event_store_scan_ids(agr_wow_event_store *es,
					 const char *after_id, int limit,
					 agr_wow_ids_fn cb, void *arg)
{
	struct scan *sc;
	int err;

	if (!es || !cb || limit < 1 || (after_id && !*after_id))
		return -EINVAL;
	err = agr__wow_es_enter(es, "scan_ids");
	if (err)
		return err;
	if (!after_id)
		after_id = AGR_WOW_SCAN_FIRST_ID;
	if (!agr__wow_utf8_valid(after_id, strlen(after_id)))
		return -EILSEQ;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	sc->es = es;
	sc->cb = cb;
	sc->arg = arg;
	sc->limit = limit;
	agr__wow_es_hold(es);
	err = scan_send(sc, after_id);
	if (err) {
		scan_free(sc);
		agr__wow_es_release(es);
	}
	return err;
}
