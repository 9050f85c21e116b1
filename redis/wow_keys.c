/* SPDX-License-Identifier: MIT */
/*
 * wow_keys.c - the Redis names Wow uses: bus topics, consumer groups,
 * consumer leases and the canonical v2 event store keys.
 *
 * Wow builds them in R/bus/AggregateTopicConverter.kt,
 * RedisConsumerLeaseRegistry.kt and R/eventsourcing/
 * {CanonicalRedisKeyCodec,EventStreamKeyLayout,SnapshotKeyLayout}.kt.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wow_internal.h"

#include <aggring/group_key.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool blank(const char *s)
{
	for (; *s; s++)
		if (!strchr(" \t\r\n\v\f", *s))
			return false;
	return true;
}

AGR_API const char *agr_wow_alias(const agr_wow_named *n)
{
	if (!n)
		return NULL;
	if (n->alias && !blank(n->alias))
		return n->alias;
	return n->context_name;
}

static bool named_ok(const agr_wow_named *n)
{
	return n && n->context_name && *n->context_name &&
	       n->aggregate_name && *n->aggregate_name;
}

AGR_API int agr_wow_bucket(const char *id)
{
	if (!id)
		return -EINVAL;
	return agr_group_key_n(id, strlen(id), AGR_WOW_EVENT_STORE_BUCKETS);
}

AGR_API int agr_wow_hex16(const char *id, char **out, size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!id || !*id || !out)
		return -EINVAL;
	agr__wow_buf_hex16(&b, id, strlen(id));
	return agr__wow_buf_finish(&b, out, len);
}

static const char *const topic_suffix[] = {
	[AGR_WOW_TOPIC_COMMAND] = ":command",
	[AGR_WOW_TOPIC_EVENT] = ":event",
	[AGR_WOW_TOPIC_STATE] = ":state",
};

AGR_API int agr_wow_topic(const agr_wow_named *n, agr_wow_topic_kind kind,
			  char **out, size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!named_ok(n) || !out || (unsigned)kind > AGR_WOW_TOPIC_STATE)
		return -EINVAL;
	agr__wow_buf_str(&b, agr_wow_alias(n));
	agr__wow_buf_str(&b, ".");
	agr__wow_buf_str(&b, n->aggregate_name);
	agr__wow_buf_str(&b, topic_suffix[kind]);
	return agr__wow_buf_finish(&b, out, len);
}

static const char *const dispatcher_suffix[] = {
	[AGR_WOW_DISPATCHER_COMMAND] = ".CommandDispatcher",
	[AGR_WOW_DISPATCHER_DOMAIN_EVENT] = ".DomainEventDispatcher",
	[AGR_WOW_DISPATCHER_PROJECTION] = ".ProjectionDispatcher",
	[AGR_WOW_DISPATCHER_STATELESS_SAGA] = ".StatelessSagaDispatcher",
	[AGR_WOW_DISPATCHER_SNAPSHOT] = ".SnapshotDispatcher",
};

AGR_API int agr_wow_dispatcher_group(const char *context_name,
				     agr_wow_dispatcher_kind kind, char **out,
				     size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!context_name || !*context_name || !out ||
	    (unsigned)kind > AGR_WOW_DISPATCHER_SNAPSHOT)
		return -EINVAL;
	agr__wow_buf_str(&b, context_name);
	agr__wow_buf_str(&b, dispatcher_suffix[kind]);
	return agr__wow_buf_finish(&b, out, len);
}

AGR_API int agr_wow_lease_key(const char *topic, const char *group,
			      const char *consumer, char **out, size_t *len)
{
	struct agr__wow_buf id = { 0 }, b = { 0 };
	char hex[65];

	if (!topic || !group || !consumer || !out)
		return -EINVAL;
	agr__wow_buf_str(&id, topic);
	agr__wow_buf_bytes(&id, "", 1);
	agr__wow_buf_str(&id, group);
	agr__wow_buf_bytes(&id, "", 1);
	agr__wow_buf_str(&id, consumer);
	if (id.err) {
		free(id.data);
		return id.err;
	}
	agr__wow_sha256_hex(id.data, id.len, hex);
	free(id.data);
	agr__wow_buf_str(&b, "wow:redis:message-bus:consumer-lease:");
	agr__wow_buf_str(&b, hex);
	return agr__wow_buf_finish(&b, out, len);
}

/* b64(alias) "." b64(aggregate name) */
static void scope(struct agr__wow_buf *b, const agr_wow_named *n)
{
	const char *alias = agr_wow_alias(n);

	agr__wow_buf_b64(b, alias, strlen(alias));
	agr__wow_buf_str(b, ".");
	agr__wow_buf_b64(b, n->aggregate_name, strlen(n->aggregate_name));
}

/* "{v2:es:<scope>:<bucket>}" */
static void hash_tag(struct agr__wow_buf *b, const agr_wow_named *n,
		     int bucket)
{
	char num[16];

	snprintf(num, sizeof(num), ":%d}", bucket);
	agr__wow_buf_str(b, "{v2:es:");
	scope(b, n);
	agr__wow_buf_str(b, num);
}

/* b64(id) "." b64(tenant) */
static void identity(struct agr__wow_buf *b, const char *id,
		     const char *tenant)
{
	agr__wow_buf_b64(b, id, strlen(id));
	agr__wow_buf_str(b, ".");
	agr__wow_buf_b64(b, tenant, strlen(tenant));
}

AGR_API int agr_wow_es_ids_key(const agr_wow_named *n, int bucket,
			       char **out, size_t *len)
{
	struct agr__wow_buf b = { 0 };

	if (!named_ok(n) || !out || bucket < 0 ||
	    bucket >= AGR_WOW_EVENT_STORE_BUCKETS)
		return -EINVAL;
	hash_tag(&b, n, bucket);
	agr__wow_buf_str(&b, ":ids");
	return agr__wow_buf_finish(&b, out, len);
}

AGR_API void agr_wow_es_keys_free(agr_wow_es_keys *k)
{
	if (!k)
		return;
	free(k->stream);
	free(k->req_idx);
	free(k->ids);
	free(k->member);
	free(k->member_prefix);
	free(k->member_after);
	free(k->snapshot);
	*k = (agr_wow_es_keys){ 0 };
}

static int build_keys(const agr_wow_named *n, const char *id,
		      const char *tenant, agr_wow_es_keys *k)
{
	struct agr__wow_buf b = { 0 };
	int err;

	hash_tag(&b, n, k->bucket);
	agr__wow_buf_str(&b, ":");
	identity(&b, id, tenant);
	err = agr__wow_buf_finish(&b, &k->stream, &k->stream_len);
	if (err)
		return err;

	agr__wow_buf_bytes(&b, k->stream, k->stream_len);
	agr__wow_buf_str(&b, ":req_idx");
	err = agr__wow_buf_finish(&b, &k->req_idx, &k->req_idx_len);
	if (err)
		return err;

	err = agr_wow_es_ids_key(n, k->bucket, &k->ids, &k->ids_len);
	if (err)
		return err;

	agr__wow_buf_hex16(&b, id, strlen(id));
	agr__wow_buf_str(&b, ".");
	err = agr__wow_buf_finish(&b, &k->member_prefix,
				  &k->member_prefix_len);
	if (err)
		return err;

	agr__wow_buf_bytes(&b, k->member_prefix, k->member_prefix_len);
	agr__wow_buf_b64(&b, tenant, strlen(tenant));
	err = agr__wow_buf_finish(&b, &k->member, &k->member_len);
	if (err)
		return err;

	agr__wow_buf_bytes(&b, k->member_prefix, k->member_prefix_len - 1);
	agr__wow_buf_str(&b, "/");
	err = agr__wow_buf_finish(&b, &k->member_after, &k->member_after_len);
	if (err)
		return err;

	agr__wow_buf_str(&b, "v2:snapshot:{");
	scope(&b, n);
	agr__wow_buf_str(&b, ".");
	identity(&b, id, tenant);
	agr__wow_buf_str(&b, "}");
	return agr__wow_buf_finish(&b, &k->snapshot, &k->snapshot_len);
}

AGR_API int agr_wow_es_keys_build(const agr_wow_named *n, const char *id,
				  const char *tenant, agr_wow_es_keys *k)
{
	int err;

	if (!k)
		return -EINVAL;
	*k = (agr_wow_es_keys){ 0 };
	if (!named_ok(n) || !id || !*id)
		return -EINVAL;
	if (!tenant)
		tenant = AGR_WOW_DEFAULT_TENANT;
	k->bucket = agr_wow_bucket(id);
	err = build_keys(n, id, tenant, k);
	if (err)
		agr_wow_es_keys_free(k);
	return err;
}
