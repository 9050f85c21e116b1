/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - a Redis Cluster's slot map.
 */
#include "cluster.h"

#include "redis_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

struct agr__redis_node {
	char *host;
	int port;
	void *user;
};

struct agr__redis_map {
	struct agr__redis_node **nodes;
	size_t n, cap;
	struct agr__redis_node *slot[AGR_REDIS_SLOTS];
};

int agr__redis_map_new(struct agr__redis_map **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void agr__redis_map_free(struct agr__redis_map *m, void (*drop)(void *user))
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		if (m->nodes[i]->user && drop)
			drop(m->nodes[i]->user);
		free(m->nodes[i]->host);
		free(m->nodes[i]);
	}
	free(m->nodes);
	free(m);
}

struct agr__redis_node *agr__redis_map_node(struct agr__redis_map *m,
					    const char *host, int port)
{
	struct agr__redis_node *n;

	for (size_t i = 0; i < m->n; i++)
		if (m->nodes[i]->port == port &&
		    strcmp(m->nodes[i]->host, host) == 0)
			return m->nodes[i];
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 8;
		void *p = realloc(m->nodes, cap * sizeof(*m->nodes));

		if (!p)
			return NULL;
		m->nodes = p;
		m->cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->host = strdup(host);
	if (!n->host) {
		free(n);
		return NULL;
	}
	n->port = port;
	m->nodes[m->n++] = n;
	return n;
}

struct agr__redis_node *agr__redis_map_slot(const struct agr__redis_map *m,
					    unsigned slot)
{
	return slot < AGR_REDIS_SLOTS ? m->slot[slot] : NULL;
}

void agr__redis_map_set_slot(struct agr__redis_map *m, unsigned slot,
			     struct agr__redis_node *n)
{
	if (slot < AGR_REDIS_SLOTS)
		m->slot[slot] = n;
}

size_t agr__redis_map_count(const struct agr__redis_map *m)
{
	return m->n;
}

struct agr__redis_node *agr__redis_map_at(const struct agr__redis_map *m,
					  size_t i)
{
	return i < m->n ? m->nodes[i] : NULL;
}

unsigned agr__redis_map_covered(const struct agr__redis_map *m)
{
	unsigned covered = 0;

	for (unsigned i = 0; i < AGR_REDIS_SLOTS; i++)
		covered += m->slot[i] != NULL;
	return covered;
}

const char *agr__redis_node_host(const struct agr__redis_node *n)
{
	return n->host;
}

int agr__redis_node_port(const struct agr__redis_node *n)
{
	return n->port;
}

void *agr__redis_node_user(const struct agr__redis_node *n)
{
	return n->user;
}

void agr__redis_node_set_user(struct agr__redis_node *n, void *user)
{
	n->user = user;
}

/* ---- reading the replies ---- */

static bool reply_is_str(const redisReply *r)
{
	return r && (r->type == REDIS_REPLY_STRING ||
		     r->type == REDIS_REPLY_STATUS);
}

static bool reply_str_is(const redisReply *r, const char *s)
{
	return reply_is_str(r) && r->len == strlen(s) &&
	       memcmp(r->str, s, r->len) == 0;
}

/* An integer, or a string holding one (as some versions send). */
static bool reply_int(const redisReply *r, long long *out)
{
	char buf[32], *end;

	if (r && r->type == REDIS_REPLY_INTEGER) {
		*out = r->integer;
		return true;
	}
	if (!reply_is_str(r) || r->len == 0 || r->len >= sizeof(buf))
		return false;
	memcpy(buf, r->str, r->len);
	buf[r->len] = '\0';
	*out = strtoll(buf, &end, 10);
	return *end == '\0';
}

/* The value of `key` in a flat key-value array (a RESP2 map). */
static const redisReply *map_get(const redisReply *r, const char *key)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (reply_str_is(r->element[i], key))
			return r->element[i + 1];
	return NULL;
}

/* One announced address into `host` (NUL-terminated). */
static bool copy_host(const redisReply *r, char *host, size_t size)
{
	if (!reply_is_str(r) || r->len == 0 || r->len >= size ||
	    (r->len == 1 && r->str[0] == '?'))
		return false;
	memcpy(host, r->str, r->len);
	host[r->len] = '\0';
	return true;
}

/* A range of slots, in a scratch table first: a bad reply changes nothing. */
static int set_range(struct agr__redis_node **slots, long long lo,
		     long long hi, struct agr__redis_node *n)
{
	if (lo < 0 || hi >= AGR_REDIS_SLOTS || lo > hi)
		return -EPROTO;
	for (long long s = lo; s <= hi; s++)
		slots[s] = n;
	return 0;
}

/* The shard's master: "role" "master", with an address. */
static struct agr__redis_node *shard_master(struct agr__redis_map *m,
					    const redisReply *nodes, int *err)
{
	char host[256];
	long long port;

	if (!nodes || nodes->type != REDIS_REPLY_ARRAY) {
		*err = -EPROTO;
		return NULL;
	}
	for (size_t i = 0; i < nodes->elements; i++) {
		const redisReply *node = nodes->element[i];
		struct agr__redis_node *n;

		if (!reply_str_is(map_get(node, "role"), "master"))
			continue;
		if (!copy_host(map_get(node, "endpoint"), host, sizeof(host)) &&
		    !copy_host(map_get(node, "ip"), host, sizeof(host)))
			continue;
		if (!reply_int(map_get(node, "port"), &port) || port <= 0 ||
		    port > 65535)
			continue;
		n = agr__redis_map_node(m, host, (int)port);
		if (!n)
			*err = -ENOMEM;
		return n;
	}
	return NULL; /* a shard without a master serves nothing */
}

static int load_shards(struct agr__redis_map *m, const redisReply *reply,
		       struct agr__redis_node **slots)
{
	for (size_t i = 0; i < reply->elements; i++) {
		const redisReply *shard = reply->element[i];
		const redisReply *ranges = map_get(shard, "slots");
		struct agr__redis_node *n;
		int err = 0;

		if (!ranges || ranges->type != REDIS_REPLY_ARRAY ||
		    ranges->elements % 2)
			return -EPROTO;
		n = shard_master(m, map_get(shard, "nodes"), &err);
		if (err < 0)
			return err;
		if (!n)
			continue;
		for (size_t j = 0; j < ranges->elements; j += 2) {
			long long lo, hi;

			if (!reply_int(ranges->element[j], &lo) ||
			    !reply_int(ranges->element[j + 1], &hi) ||
			    set_range(slots, lo, hi, n) < 0)
				return -EPROTO;
		}
	}
	return 0;
}

static int load_slots(struct agr__redis_map *m, const redisReply *reply,
		      struct agr__redis_node **slots, const char *asked)
{
	for (size_t i = 0; i < reply->elements; i++) {
		const redisReply *range = reply->element[i];
		const redisReply *master;
		struct agr__redis_node *n;
		char host[256];
		long long lo, hi, port;

		if (!range || range->type != REDIS_REPLY_ARRAY ||
		    range->elements < 3)
			return -EPROTO;
		master = range->element[2];
		if (!master || master->type != REDIS_REPLY_ARRAY ||
		    master->elements < 2 ||
		    !reply_int(range->element[0], &lo) ||
		    !reply_int(range->element[1], &hi) ||
		    !reply_int(master->element[1], &port) || port <= 0 ||
		    port > 65535)
			return -EPROTO;
		/* an empty address means the node that answered */
		if (!copy_host(master->element[0], host, sizeof(host))) {
			if (strlen(asked) >= sizeof(host))
				return -EPROTO;
			strcpy(host, asked);
		}
		n = agr__redis_map_node(m, host, (int)port);
		if (!n)
			return -ENOMEM;
		if (set_range(slots, lo, hi, n) < 0)
			return -EPROTO;
	}
	return 0;
}

int agr__redis_map_load(struct agr__redis_map *m, const redisReply *reply,
			bool shards, const char *asked_host)
{
	struct agr__redis_node **slots;
	int ret;

	if (!reply || reply->type != REDIS_REPLY_ARRAY) {
		agr_log(AGR_LOG_WARN, "redis: CLUSTER %s: not an array",
			shards ? "SHARDS" : "SLOTS");
		return -EPROTO;
	}
	slots = calloc(AGR_REDIS_SLOTS, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	ret = shards ? load_shards(m, reply, slots)
		     : load_slots(m, reply, slots, asked_host);
	if (ret == 0)
		memcpy(m->slot, slots, sizeof(m->slot));
	else if (ret == -EPROTO)
		agr_log(AGR_LOG_WARN, "redis: CLUSTER %s: a reply of an unknown shape",
			shards ? "SHARDS" : "SLOTS");
	free(slots);
	return ret;
}

int agr__redis_parse_redirect(const char *err, size_t len, unsigned *slot,
			      char *host, size_t hostlen, int *port)
{
	const char *p, *end = err + len, *colon = NULL;
	int kind;
	unsigned long s = 0;
	long pt = 0;

	if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
		kind = 1;
		p = err + 6;
	} else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
		kind = 2;
		p = err + 4;
	} else {
		return 0;
	}
	if (p >= end || *p < '0' || *p > '9')
		return 0;
	while (p < end && *p >= '0' && *p <= '9')
		s = s * 10 + (unsigned long)(*p++ - '0');
	if (p >= end || *p != ' ' || s >= AGR_REDIS_SLOTS)
		return 0;
	p++;
	/* host:port, the host perhaps an IPv6 address: the last colon */
	for (const char *q = p; q < end; q++)
		if (*q == ':')
			colon = q;
	if (!colon || colon == p || (size_t)(colon - p) >= hostlen ||
	    colon + 1 >= end)
		return 0;
	for (const char *q = colon + 1; q < end; q++) {
		if (*q < '0' || *q > '9' || pt > 65535)
			return 0;
		pt = pt * 10 + (*q - '0');
	}
	if (pt <= 0 || pt > 65535)
		return 0;
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = '\0';
	*slot = (unsigned)s;
	*port = (int)pt;
	return kind;
}
