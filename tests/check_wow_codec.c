/* SPDX-License-Identifier: MIT */
/*
 * check_wow_codec.c - Wow's Redis names and JSON, byte for byte
 * (libaggring-redis, aggring/wow_codec.h).
 *
 * Expected values come from Wow's own tests at c6a3ab8
 * (wow-redis/src/test/.../EventStreamKeyLayoutTest.kt) and the spec's
 * examples (/work/shared/spec/wow-redis.md sections 3-4); the others
 * were computed apart, with Java's String.hashCode rules, floor mod,
 * Base64URL and SHA-256 from Python's standard library.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/redis.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const agr_wow_named tck = { "tck", NULL, "mock_aggregate" };

struct id_case {
	const char *id;
	int bucket;
	const char *b64;
	const char *hex16;
};

static const struct id_case ids[] = {
	{ "id", 27, "aWQ", "00690064" },
	/* Java hash -1207111310: C's % would give -14 */
	{ "order-1", 114, "b3JkZXItMQ", "006f0072006400650072002d0031" },
	{ "order@{42}:\xe9\x9b\xaa", 6, "b3JkZXJAezQyfTrpm6o",
	  "006f00720064006500720040007b00340032007d003a96ea" },
	/* Java hash == Integer.MIN_VALUE */
	{ "polygenelubricants", 0, "cG9seWdlbmVsdWJyaWNhbnRz",
	  "0070006f006c007900670065006e0065006c007500620072006900630061006e00740073" },
	/* U+1F600: a surrogate pair, two code units */
	{ "\xf0\x9f\x98\x80", 99, "8J-YgA", "d83dde00" },
	{ "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80" "a", 46, "w7zigqzwn5iAYQ",
	  "00fc20acd83dde000061" },
	{ "\xe8\xb4\xa6\xe6\x88\xb7-7", 59, "6LSm5oi3LTc",
	  "8d266237002d0037" },
	/* equal Java hashes, different keys */
	{ "Aa", 64, "QWE", "00410061" },
	{ "BB", 64, "QkI", "00420042" },
};

START_TEST(test_id_vectors)
{
	const struct id_case *c = &ids[_i];
	char *s;
	size_t len;

	ck_assert_int_eq(agr_wow_bucket(c->id), c->bucket);
	ck_assert_int_eq(agr_wow_b64_encode(c->id, strlen(c->id), &s, &len), 0);
	ck_assert_str_eq(s, c->b64);
	ck_assert_uint_eq(len, strlen(c->b64));
	free(s);
	ck_assert_int_eq(agr_wow_b64_decode(c->b64, strlen(c->b64), &s, &len),
			 0);
	ck_assert_str_eq(s, c->id);
	free(s);
	ck_assert_int_eq(agr_wow_hex16(c->id, &s, &len), 0);
	ck_assert_str_eq(s, c->hex16);
	free(s);
}
END_TEST

START_TEST(test_b64_rejects)
{
	static const char *const bad[] = {
		"aWQ=",	 /* padding */
		"a",	 /* 1 mod 4 */
		"aWR",	 /* unused bits not zero: not canonical */
		"a+Q",	 /* standard alphabet */
		"7aCA",	 /* ED A0 80: an encoded surrogate */
		"_w",	 /* FF: not UTF-8 */
	};
	char *s = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(agr_wow_b64_decode(bad[i], strlen(bad[i]), &s,
						 NULL) == -EILSEQ,
			      "%s decoded", bad[i]);
	ck_assert_int_eq(agr_wow_b64_encode("\xed\xa0\x80", 3, &s, NULL),
			 -EILSEQ);
	ck_assert_int_eq(agr_wow_b64_encode("\xc0\xaf", 2, &s, NULL), -EILSEQ);
	ck_assert_int_eq(agr_wow_b64_encode("", 0, &s, NULL), 0);
	ck_assert_str_eq(s, "");
	free(s);
	ck_assert_int_eq(agr_wow_hex16("", &s, NULL), -EINVAL);
	ck_assert_int_eq(agr_wow_bucket(NULL), -EINVAL);
}
END_TEST

START_TEST(test_es_keys_wow_examples)
{
	agr_wow_es_keys k;
	const agr_wow_named order = { "order-service", NULL, "order" };

	/* EventStreamKeyLayoutTest: aggregateId("id", "tenantId") */
	ck_assert_int_eq(agr_wow_es_keys_build(&tck, "id", "tenantId", &k), 0);
	ck_assert_int_eq(k.bucket, 27);
	ck_assert_str_eq(k.stream,
			 "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:27}:aWQ.dGVuYW50SWQ");
	ck_assert_uint_eq(k.stream_len, strlen(k.stream));
	ck_assert_str_eq(k.req_idx, "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:27}:"
				    "aWQ.dGVuYW50SWQ:req_idx");
	ck_assert_str_eq(k.ids, "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:27}:ids");
	ck_assert_str_eq(k.member, "00690064.dGVuYW50SWQ");
	ck_assert_str_eq(k.member_prefix, "00690064.");
	ck_assert_str_eq(k.member_after, "00690064/");
	ck_assert_str_eq(k.snapshot,
			 "v2:snapshot:{dGNr.bW9ja19hZ2dyZWdhdGU.aWQ.dGVuYW50SWQ}");
	ck_assert_uint_eq(agr_redis_key_slot(k.stream, k.stream_len),
			  agr_redis_key_slot(k.ids, k.ids_len));
	agr_wow_es_keys_free(&k);
	ck_assert_ptr_null(k.stream);

	/* the special identity: one slot for all three keys */
	ck_assert_int_eq(agr_wow_es_keys_build(&order,
					       "order@{42}:\xe9\x9b\xaa",
					       "tenant@east}", &k), 0);
	ck_assert_str_eq(k.stream, "{v2:es:b3JkZXItc2VydmljZQ.b3JkZXI:6}:"
				   "b3JkZXJAezQyfTrpm6o.dGVuYW50QGVhc3R9");
	ck_assert_str_eq(k.member, "006f00720064006500720040007b00340032007d"
				   "003a96ea.dGVuYW50QGVhc3R9");
	ck_assert_uint_eq(agr_redis_key_slot(k.stream, k.stream_len),
			  agr_redis_key_slot(k.req_idx, k.req_idx_len));
	ck_assert_uint_eq(agr_redis_key_slot(k.stream, k.stream_len),
			  agr_redis_key_slot(k.ids, k.ids_len));
	agr_wow_es_keys_free(&k);

	/* RedisEventStoreScanTest: the append script's keys and members */
	ck_assert_int_eq(agr_wow_es_keys_build(&order, "order-1", "tenant-1",
					       &k), 0);
	ck_assert_int_eq(k.bucket, 114);
	ck_assert_str_eq(k.stream, "{v2:es:b3JkZXItc2VydmljZQ.b3JkZXI:114}:"
				   "b3JkZXItMQ.dGVuYW50LTE");
	ck_assert_str_eq(k.ids, "{v2:es:b3JkZXItc2VydmljZQ.b3JkZXI:114}:ids");
	ck_assert_str_eq(k.req_idx, "{v2:es:b3JkZXItc2VydmljZQ.b3JkZXI:114}:"
				    "b3JkZXItMQ.dGVuYW50LTE:req_idx");
	ck_assert_str_eq(k.member, "006f0072006400650072002d0031.dGVuYW50LTE");
	ck_assert_str_eq(k.member_prefix, "006f0072006400650072002d0031.");
	ck_assert_str_eq(k.member_after, "006f0072006400650072002d0031/");
	agr_wow_es_keys_free(&k);

	/* the default tenant "(0)", and the empty tenant */
	ck_assert_int_eq(agr_wow_es_keys_build(&tck, "order-1", NULL, &k), 0);
	ck_assert_str_eq(k.stream, "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:114}:"
				   "b3JkZXItMQ.KDAp");
	agr_wow_es_keys_free(&k);
	ck_assert_int_eq(agr_wow_es_keys_build(&tck, "id", "", &k), 0);
	ck_assert_str_eq(k.stream, "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:27}:aWQ.");
	ck_assert_str_eq(k.member, "00690064.");
	agr_wow_es_keys_free(&k);

	ck_assert_int_eq(agr_wow_es_keys_build(&tck, "", NULL, &k), -EINVAL);
	ck_assert_int_eq(agr_wow_es_keys_build(&tck, "\xed\xb0\x80", NULL, &k),
			 -EILSEQ);
	ck_assert_ptr_null(k.stream);
}
END_TEST

START_TEST(test_alias_topics_groups_lease)
{
	const agr_wow_named aliased = { "bank-service", "bank", "Account" };
	const agr_wow_named blank = { "bank-service", " \t", "Account" };
	char *s;
	agr_wow_es_keys k;

	ck_assert_str_eq(agr_wow_alias(&aliased), "bank");
	ck_assert_str_eq(agr_wow_alias(&blank), "bank-service");
	ck_assert_int_eq(agr_wow_topic(&tck, AGR_WOW_TOPIC_COMMAND, &s, NULL),
			 0);
	ck_assert_str_eq(s, "tck.mock_aggregate:command");
	free(s);
	ck_assert_int_eq(agr_wow_topic(&aliased, AGR_WOW_TOPIC_EVENT, &s, NULL),
			 0);
	ck_assert_str_eq(s, "bank.Account:event");
	free(s);
	ck_assert_int_eq(agr_wow_topic(&blank, AGR_WOW_TOPIC_STATE, &s, NULL),
			 0);
	ck_assert_str_eq(s, "bank-service.Account:state");
	free(s);
	ck_assert_int_eq(agr_wow_topic(&tck, (agr_wow_topic_kind)(AGR_WOW_TOPIC_STATE + 1),
				       &s, NULL), -EINVAL);

	ck_assert_int_eq(agr_wow_dispatcher_group("bank-service",
						  AGR_WOW_DISPATCHER_COMMAND,
						  &s, NULL), 0);
	ck_assert_str_eq(s, "bank-service.CommandDispatcher");
	free(s);
	ck_assert_int_eq(agr_wow_dispatcher_group(
				 "tck", AGR_WOW_DISPATCHER_PROJECTION, &s, NULL),
			 0);
	ck_assert_str_eq(s, "tck.ProjectionDispatcher");
	free(s);

	/* keys use the alias: scope b64("bank") "." b64("Account") */
	ck_assert_int_eq(agr_wow_es_keys_build(&aliased, "id", "", &k), 0);
	ck_assert_str_eq(k.ids, "{v2:es:YmFuaw.QWNjb3VudA:27}:ids");
	agr_wow_es_keys_free(&k);
	ck_assert_int_eq(agr_wow_es_ids_key(&tck, 127, &s, NULL), 0);
	ck_assert_str_eq(s, "{v2:es:dGNr.bW9ja19hZ2dyZWdhdGU:127}:ids");
	free(s);
	ck_assert_int_eq(agr_wow_es_ids_key(&tck, 128, &s, NULL), -EINVAL);

	ck_assert_int_eq(agr_wow_lease_key("tck.mock_aggregate:command",
					   "tck.CommandDispatcher",
					   "consumer-1", &s, NULL), 0);
	ck_assert_str_eq(s, "wow:redis:message-bus:consumer-lease:"
			    "ebe4321d330dc7f13fb27a9b08a51c847ead8c5020f240c8"
			    "8124b17e0d240b6a");
	free(s);
	ck_assert_int_eq(agr_wow_lease_key("\xe9\x93\xb6\xe8\xa1\x8c."
					   "\xe8\xb4\xa6\xe6\x88\xb7:event",
					   "g", "c\xf0\x9f\x98\x80", &s, NULL),
			 0);
	ck_assert_str_eq(s, "wow:redis:message-bus:consumer-lease:"
			    "110e2c02b4cdd960829e3f48c36848914785cbfe7cb6321b"
			    "3f6bbf30ef02f41f");
	free(s);
}
END_TEST

/* The spec's section 3 command example, in Wow's serializer order. */
static const char spec_command[] =
	"{\"id\":\"command-id\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"name\":\"CreateOrder\",\"header\":{\"trace\":\"trace-1\"},"
	"\"tenantId\":\"tenant-1\",\"aggregateId\":\"order-1\",\"ownerId\":"
	"\"owner-1\",\"spaceId\":\"space-1\",\"requestId\":\"request-1\","
	"\"aggregateVersion\":3,\"isCreate\":true,\"isVoid\":false,"
	"\"allowCreate\":true,\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerCommandTest$CreateOrder\","
	"\"body\":{\"orderId\":\"order-1\",\"quantity\":2},\"createTime\":1000}";

static const agr_wow_header trace_header[] = { { "trace", "trace-1" } };

static agr_wow_command spec_command_struct(void)
{
	static const char body[] = "{\"orderId\":\"order-1\",\"quantity\":2}";

	return (agr_wow_command){
		.id = "command-id",
		.context_name = "sales",
		.aggregate_name = "Order",
		.name = "CreateOrder",
		.header = trace_header,
		.header_count = 1,
		.tenant_id = "tenant-1",
		.aggregate_id = "order-1",
		.owner_id = "owner-1",
		.space_id = "space-1",
		.request_id = "request-1",
		.has_aggregate_version = true,
		.aggregate_version = 3,
		.is_create = true,
		.is_void = false,
		.allow_create = true,
		.body_type = "me.ahoo.wow.serialization."
			     "JsonSerializerCommandTest$CreateOrder",
		.body = body,
		.body_len = sizeof(body) - 1,
		.create_time = 1000,
	};
}

START_TEST(test_command_encode_spec_example)
{
	agr_wow_command c = spec_command_struct();
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), 0);
	ck_assert_str_eq(json, spec_command);
	ck_assert_uint_eq(len, sizeof(spec_command) - 1);
	free(json);
}
END_TEST

START_TEST(test_command_decode_spec_example)
{
	agr_wow_command *c;

	ck_assert_int_eq(agr_wow_command_decode(spec_command,
						sizeof(spec_command) - 1, &c),
			 0);
	ck_assert_str_eq(c->id, "command-id");
	ck_assert_str_eq(c->context_name, "sales");
	ck_assert_str_eq(c->aggregate_name, "Order");
	ck_assert_str_eq(c->name, "CreateOrder");
	ck_assert_uint_eq(c->header_count, 1);
	ck_assert_str_eq(c->header[0].key, "trace");
	ck_assert_str_eq(c->header[0].value, "trace-1");
	ck_assert_str_eq(c->tenant_id, "tenant-1");
	ck_assert_str_eq(c->aggregate_id, "order-1");
	ck_assert_str_eq(c->owner_id, "owner-1");
	ck_assert_str_eq(c->space_id, "space-1");
	ck_assert_str_eq(c->request_id, "request-1");
	ck_assert(c->has_aggregate_version);
	ck_assert_int_eq(c->aggregate_version, 3);
	ck_assert(c->is_create);
	ck_assert(!c->is_void);
	ck_assert(c->allow_create);
	ck_assert_str_eq(c->body_type, "me.ahoo.wow.serialization."
				       "JsonSerializerCommandTest$CreateOrder");
	ck_assert_str_eq(c->body, "{\"orderId\":\"order-1\",\"quantity\":2}");
	ck_assert_uint_eq(c->body_len, strlen(c->body));
	ck_assert_int_eq(c->create_time, 1000);
	agr_wow_command_free(c);
}
END_TEST

START_TEST(test_command_decode_defaults_unknown_order)
{
	/* fields out of order, an unknown one, the optional ones absent */
	static const char json[] =
		" {\"createTime\":1733000000123,\"body\":{},\"extra\":[1,{}],"
		"\"bodyType\":\"x.Y\",\"isCreate\":false,\"requestId\":\"r\","
		"\"aggregateId\":\"a\",\"tenantId\":\"(0)\",\"header\":{},"
		"\"name\":\"N\",\"aggregateName\":\"A\",\"contextName\":\"c\","
		"\"id\":\"i\",\"aggregateVersion\":null}\n";
	agr_wow_command *c;

	ck_assert_int_eq(agr_wow_command_decode(json, sizeof(json) - 1, &c), 0);
	ck_assert_str_eq(c->owner_id, "");
	ck_assert_str_eq(c->space_id, "");
	ck_assert(!c->has_aggregate_version);
	ck_assert(!c->is_void && !c->allow_create && !c->is_create);
	ck_assert_uint_eq(c->header_count, 0);
	ck_assert_int_eq(c->create_time, 1733000000123LL);
	ck_assert_str_eq(c->body, "{}");
	agr_wow_command_free(c);
}
END_TEST

/* Removes field `key` (and its value, a string or an object without
 * nesting) from spec_command. */
static char *without(const char *key)
{
	char pat[64], *out = strdup(spec_command), *p, *end;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(out, pat);
	ck_assert_ptr_nonnull(p);
	end = p + strlen(pat);
	if (*end == '{')
		end = strchr(end, '}') + 1;
	else if (*end == '"')
		end = strchr(end + 1, '"') + 1;
	else
		end += strcspn(end, ",}");
	if (*end == ',')
		end++;
	else if (p[-1] == ',')
		p--;
	memmove(p, end, strlen(end) + 1);
	return out;
}

START_TEST(test_command_decode_missing_required)
{
	static const char *const required[] = {
		"id", "contextName", "aggregateName", "name", "header",
		"tenantId", "aggregateId", "requestId", "isCreate", "bodyType",
		"body", "createTime",
	};
	agr_wow_command *c = (agr_wow_command *)1;
	char *json = without(required[_i]);

	ck_assert_msg(agr_wow_command_decode(json, strlen(json), &c) ==
			      -EBADMSG,
		      "decoded without %s: %s", required[_i], json);
	ck_assert_ptr_null(c);
	free(json);
}
END_TEST

START_TEST(test_command_decode_optional_absent)
{
	static const char *const optional[] = {
		"ownerId", "spaceId", "aggregateVersion", "isVoid",
		"allowCreate",
	};
	agr_wow_command *c;
	char *json = without(optional[_i]);

	ck_assert_int_eq(agr_wow_command_decode(json, strlen(json), &c), 0);
	agr_wow_command_free(c);
	free(json);
}
END_TEST

START_TEST(test_command_decode_bad)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{\"id\":1}",
		"not json",
		"{\"id\":\"a\"} trailing",
		/* mistyped fields */
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{\"k\":1},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\",\"requestId\":\"r\",\"isCreate\":true,"
		"\"bodyType\":\"b\",\"body\":{},\"createTime\":1}",
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\",\"requestId\":\"r\",\"isCreate\":\"yes\","
		"\"bodyType\":\"b\",\"body\":{},\"createTime\":1}",
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\",\"requestId\":\"r\",\"isCreate\":true,"
		"\"bodyType\":\"b\",\"body\":[],\"createTime\":1}",
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\",\"requestId\":\"r\",\"isCreate\":true,"
		"\"bodyType\":\"b\",\"body\":{},\"createTime\":1.5}",
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\",\"requestId\":\"r\",\"isCreate\":true,"
		"\"aggregateVersion\":2147483648,"
		"\"bodyType\":\"b\",\"body\":{},\"createTime\":1}",
		/* invalid UTF-8 inside a string */
		"{\"id\":\"\xff\"}",
		/* an encoded lone surrogate (json-c lets it through) */
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{},\"tenantId\":\"t\","
		"\"aggregateId\":\"a\xed\xb2\xb0\",\"requestId\":\"r\","
		"\"isCreate\":true,\"bodyType\":\"b\",\"body\":{},"
		"\"createTime\":1}",
		/* the same in a header value */
		"{\"id\":\"i\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"name\":\"N\",\"header\":{\"k\":\"\xed\xa0\x80\"},"
		"\"tenantId\":\"t\",\"aggregateId\":\"a\",\"requestId\":\"r\","
		"\"isCreate\":true,\"bodyType\":\"b\",\"body\":{},"
		"\"createTime\":1}",
	};
	agr_wow_command *c;

	ck_assert_int_eq(agr_wow_command_decode(bad[_i], strlen(bad[_i]), &c),
			 -EBADMSG);
}
END_TEST

START_TEST(test_command_escapes_and_round_trip)
{
	static const agr_wow_header h[] = {
		{ "trace_id", "t\"1\\" },
		{ "local_first", "true" },
		{ "ctl", "\x01\b\t\n\f\r\x1f/\x7f" },
	};
	agr_wow_command c = spec_command_struct(), *d;
	char *json;
	size_t len;

	c.header = h;
	c.header_count = ARRAY_SIZE(h);
	c.aggregate_id = "\xe8\xb4\xa6\xe6\x88\xb7-\xf0\x9f\x98\x80";
	c.tenant_id = NULL;
	c.request_id = NULL;
	c.owner_id = NULL;
	c.space_id = NULL;
	c.has_aggregate_version = false;
	c.create_time = -1;
	c.body = " { \"a\" : [1, 2.50, \"\\u00e9\"] } ";
	c.body_len = strlen(c.body);
	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), 0);
	ck_assert_str_eq(json,
		"{\"id\":\"command-id\",\"contextName\":\"sales\","
		"\"aggregateName\":\"Order\",\"name\":\"CreateOrder\","
		"\"header\":{\"trace_id\":\"t\\\"1\\\\\",\"local_first\":\"true\","
		"\"ctl\":\"\\u0001\\b\\t\\n\\f\\r\\u001F/\x7f\"},"
		"\"tenantId\":\"(0)\",\"aggregateId\":"
		"\"\xe8\xb4\xa6\xe6\x88\xb7-\xf0\x9f\x98\x80\","
		"\"ownerId\":\"\",\"spaceId\":\"\",\"requestId\":\"command-id\","
		"\"isCreate\":true,\"isVoid\":false,\"allowCreate\":true,"
		"\"bodyType\":\"me.ahoo.wow.serialization."
		"JsonSerializerCommandTest$CreateOrder\",\"body\":"
		" { \"a\" : [1, 2.50, \"\\u00e9\"] } ,\"createTime\":-1}");

	ck_assert_int_eq(agr_wow_command_decode(json, len, &d), 0);
	ck_assert_uint_eq(d->header_count, 3);
	for (size_t i = 0; i < ARRAY_SIZE(h); i++) {
		ck_assert_str_eq(d->header[i].key, h[i].key);
		ck_assert_str_eq(d->header[i].value, h[i].value);
	}
	ck_assert_str_eq(d->aggregate_id, c.aggregate_id);
	ck_assert_str_eq(d->tenant_id, "(0)");
	ck_assert_str_eq(d->request_id, "command-id");
	ck_assert_int_eq(d->create_time, -1);
	ck_assert_str_eq(d->body, "{\"a\":[1,2.50,\"\xc3\xa9\"]}");
	agr_wow_command_free(d);
	free(json);

	/* bad input to the encoder */
	c.body = "[1]";
	c.body_len = 3;
	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), -EBADMSG);
	c.body = "{";
	c.body_len = 1;
	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), -EBADMSG);
	c = spec_command_struct();
	c.name = "\xed\xa0\x80";
	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), -EILSEQ);
	c.name = NULL;
	ck_assert_int_eq(agr_wow_command_encode(&c, &json, &len), -EINVAL);
}
END_TEST

/* The spec's section 3 domain event stream example. */
static const char spec_stream[] =
	"{\"id\":\"stream-1\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"header\":{},\"aggregateId\":\"order-1\",\"tenantId\":"
	"\"tenant-1\",\"ownerId\":\"owner-1\",\"spaceId\":\"space-1\","
	"\"commandId\":\"command-1\",\"requestId\":\"request-1\",\"version\":5,"
	"\"body\":[{\"id\":\"event-1\",\"name\":\"OrderCreated\",\"revision\":"
	"\"1\",\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated\","
	"\"body\":{\"orderId\":\"order-1\"}}],\"createTime\":2000}";

START_TEST(test_stream_spec_example)
{
	static const char body[] = "{\"orderId\":\"order-1\"}";
	const agr_wow_event ev = {
		.id = "event-1",
		.name = "OrderCreated",
		.revision = "1",
		.body_type = "me.ahoo.wow.serialization."
			     "JsonSerializerEventTest$OrderCreated",
		.body = body,
		.body_len = sizeof(body) - 1,
	};
	const agr_wow_event_stream s = {
		.id = "stream-1",
		.context_name = "sales",
		.aggregate_name = "Order",
		.aggregate_id = "order-1",
		.tenant_id = "tenant-1",
		.owner_id = "owner-1",
		.space_id = "space-1",
		.command_id = "command-1",
		.request_id = "request-1",
		.version = 5,
		.events = &ev,
		.event_count = 1,
		.create_time = 2000,
	};
	agr_wow_event_stream *d;
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len), 0);
	ck_assert_str_eq(json, spec_stream);
	free(json);

	ck_assert_int_eq(agr_wow_event_stream_decode(spec_stream,
						     sizeof(spec_stream) - 1,
						     &d), 0);
	ck_assert_str_eq(d->id, "stream-1");
	ck_assert_str_eq(d->context_name, "sales");
	ck_assert_str_eq(d->aggregate_name, "Order");
	ck_assert_uint_eq(d->header_count, 0);
	ck_assert_str_eq(d->aggregate_id, "order-1");
	ck_assert_str_eq(d->tenant_id, "tenant-1");
	ck_assert_str_eq(d->owner_id, "owner-1");
	ck_assert_str_eq(d->space_id, "space-1");
	ck_assert_str_eq(d->command_id, "command-1");
	ck_assert_str_eq(d->request_id, "request-1");
	ck_assert_int_eq(d->version, 5);
	ck_assert_int_eq(d->create_time, 2000);
	ck_assert_uint_eq(d->event_count, 1);
	ck_assert_str_eq(d->events[0].id, "event-1");
	ck_assert_str_eq(d->events[0].name, "OrderCreated");
	ck_assert_str_eq(d->events[0].revision, "1");
	ck_assert_str_eq(d->events[0].body_type, ev.body_type);
	ck_assert_str_eq(d->events[0].body, body);
	agr_wow_event_stream_free(d);
}
END_TEST

START_TEST(test_stream_defaults_and_errors)
{
	static const char *const bad[] = {
		/* empty body */
		"{\"id\":\"s\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"header\":{},\"aggregateId\":\"a\",\"tenantId\":\"t\","
		"\"commandId\":\"c\",\"requestId\":\"r\",\"version\":1,"
		"\"body\":[],\"createTime\":1}",
		/* an item without revision */
		"{\"id\":\"s\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"header\":{},\"aggregateId\":\"a\",\"tenantId\":\"t\","
		"\"commandId\":\"c\",\"requestId\":\"r\",\"version\":1,"
		"\"body\":[{\"id\":\"e\",\"name\":\"n\",\"bodyType\":\"b\","
		"\"body\":{}}],\"createTime\":1}",
		/* version 0 */
		"{\"id\":\"s\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"header\":{},\"aggregateId\":\"a\",\"tenantId\":\"t\","
		"\"commandId\":\"c\",\"requestId\":\"r\",\"version\":0,"
		"\"body\":[{\"id\":\"e\",\"name\":\"n\",\"revision\":\"1\","
		"\"bodyType\":\"b\",\"body\":{}}],\"createTime\":1}",
		/* no commandId */
		"{\"id\":\"s\",\"contextName\":\"c\",\"aggregateName\":\"A\","
		"\"header\":{},\"aggregateId\":\"a\",\"tenantId\":\"t\","
		"\"requestId\":\"r\",\"version\":1,"
		"\"body\":[{\"id\":\"e\",\"name\":\"n\",\"revision\":\"1\","
		"\"bodyType\":\"b\",\"body\":{}}],\"createTime\":1}",
	};
	const agr_wow_event evs[2] = {
		{ "e1", "Deposited", NULL, "bank.Deposited", "{\"n\":1}", 7 },
		{ "e2", "Noted", "2.0", "bank.Noted", "\"text\"", 6 },
	};
	agr_wow_event_stream s = {
		.id = "s", .context_name = "bank", .aggregate_name = "Account",
		.aggregate_id = "acc-1", .command_id = "cmd", .version = 1,
		.events = evs, .event_count = 2, .create_time = 5,
	};
	agr_wow_event_stream *d;
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len), 0);
	ck_assert_str_eq(json,
		"{\"id\":\"s\",\"contextName\":\"bank\",\"aggregateName\":"
		"\"Account\",\"header\":{},\"aggregateId\":\"acc-1\","
		"\"tenantId\":\"(0)\",\"ownerId\":\"\",\"spaceId\":\"\","
		"\"commandId\":\"cmd\",\"requestId\":\"cmd\",\"version\":1,"
		"\"body\":[{\"id\":\"e1\",\"name\":\"Deposited\",\"revision\":"
		"\"0.0.1\",\"bodyType\":\"bank.Deposited\",\"body\":{\"n\":1}},"
		"{\"id\":\"e2\",\"name\":\"Noted\",\"revision\":\"2.0\","
		"\"bodyType\":\"bank.Noted\",\"body\":\"text\"}],"
		"\"createTime\":5}");
	ck_assert_int_eq(agr_wow_event_stream_decode(json, len, &d), 0);
	ck_assert_uint_eq(d->event_count, 2);
	ck_assert_str_eq(d->events[0].revision, "0.0.1");
	ck_assert_str_eq(d->events[1].body, "\"text\"");
	agr_wow_event_stream_free(d);
	free(json);

	s.version = 0;
	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len),
			 -EINVAL);
	s.version = 1;
	s.event_count = 0;
	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len),
			 -EINVAL);

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		d = (agr_wow_event_stream *)1;
		ck_assert_int_eq(agr_wow_event_stream_decode(bad[i],
							     strlen(bad[i]),
							     &d), -EBADMSG);
		ck_assert_ptr_null(d);
	}
}
END_TEST

/* The stream example as a state event: StateEventJsonSerializer order. */
static const char spec_state[] =
	"{\"id\":\"stream-1\",\"contextName\":\"sales\",\"aggregateName\":"
	"\"Order\",\"header\":{},\"aggregateId\":\"order-1\",\"tenantId\":"
	"\"tenant-1\",\"ownerId\":\"owner-1\",\"spaceId\":\"space-1\","
	"\"commandId\":\"command-1\",\"requestId\":\"request-1\",\"version\":5,"
	"\"firstOperator\":\"op-1\",\"firstEventTime\":1500,\"state\":"
	"{\"orderId\":\"order-1\",\"status\":\"CREATED\"},\"tags\":"
	"{\"region\":[\"east\"]},\"deleted\":false,"
	"\"body\":[{\"id\":\"event-1\",\"name\":\"OrderCreated\",\"revision\":"
	"\"1\",\"bodyType\":"
	"\"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated\","
	"\"body\":{\"orderId\":\"order-1\"}}],\"createTime\":2000}";

START_TEST(test_state_event)
{
	static const char body[] = "{\"orderId\":\"order-1\"}";
	static const char state[] = "{\"orderId\":\"order-1\",\"status\":"
				    "\"CREATED\"}";
	static const char tags[] = "{\"region\":[\"east\"]}";
	const agr_wow_event ev = {
		"event-1", "OrderCreated", "1",
		"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated",
		body, sizeof(body) - 1,
	};
	agr_wow_state_event e = {
		.stream = {
			.id = "stream-1", .context_name = "sales",
			.aggregate_name = "Order", .aggregate_id = "order-1",
			.tenant_id = "tenant-1", .owner_id = "owner-1",
			.space_id = "space-1", .command_id = "command-1",
			.request_id = "request-1", .version = 5,
			.events = &ev, .event_count = 1, .create_time = 2000,
		},
		.first_operator = "op-1",
		.first_event_time = 1500,
		.state = state,
		.state_len = sizeof(state) - 1,
		.tags = tags,
		.tags_len = sizeof(tags) - 1,
	};
	agr_wow_state_event *d;
	char *json, *cut;
	size_t len;

	ck_assert_int_eq(agr_wow_state_event_encode(&e, &json, &len), 0);
	ck_assert_str_eq(json, spec_state);
	free(json);

	ck_assert_int_eq(agr_wow_state_event_decode(spec_state,
						    sizeof(spec_state) - 1, &d),
			 0);
	ck_assert_str_eq(d->stream.aggregate_id, "order-1");
	ck_assert_int_eq(d->stream.version, 5);
	ck_assert_str_eq(d->stream.events[0].name, "OrderCreated");
	ck_assert_str_eq(d->first_operator, "op-1");
	ck_assert_int_eq(d->first_event_time, 1500);
	ck_assert_str_eq(d->state, state);
	ck_assert_str_eq(d->tags, tags);
	ck_assert(!d->deleted);
	agr_wow_state_event_free(d);

	/* a state event is also a domain event stream */
	{
		agr_wow_event_stream *st;

		ck_assert_int_eq(agr_wow_event_stream_decode(
					 spec_state, sizeof(spec_state) - 1,
					 &st), 0);
		agr_wow_event_stream_free(st);
	}

	/* optional: firstOperator, firstEventTime, tags */
	e.first_operator = NULL;
	e.tags = NULL;
	e.deleted = true;
	ck_assert_int_eq(agr_wow_state_event_encode(&e, &json, &len), 0);
	ck_assert_ptr_nonnull(strstr(json, "\"firstOperator\":\"\","));
	ck_assert_ptr_nonnull(strstr(json, "\"tags\":{},\"deleted\":true,"));
	free(json);
	cut = strdup(spec_state);
	memmove(strstr(cut, "\"firstOperator\""),
		strstr(cut, "\"state\""), strlen(strstr(cut, "\"state\"")) + 1);
	ck_assert_int_eq(agr_wow_state_event_decode(cut, strlen(cut), &d), 0);
	ck_assert_str_eq(d->first_operator, "");
	ck_assert_int_eq(d->first_event_time, 0);
	agr_wow_state_event_free(d);
	free(cut);

	/* required: state (an object) and deleted */
	cut = strdup(spec_state);
	memmove(strstr(cut, "\"deleted\""), strstr(cut, "\"body\""),
		strlen(strstr(cut, "\"body\"")) + 1);
	ck_assert_int_eq(agr_wow_state_event_decode(cut, strlen(cut), &d),
			 -EBADMSG);
	free(cut);
	cut = strdup(spec_state);
	memmove(strstr(cut, "\"state\""), strstr(cut, "\"tags\""),
		strlen(strstr(cut, "\"tags\"")) + 1);
	ck_assert_int_eq(agr_wow_state_event_decode(cut, strlen(cut), &d),
			 -EBADMSG);
	free(cut);
	e.state = "[]";
	e.state_len = 2;
	ck_assert_int_eq(agr_wow_state_event_encode(&e, &json, &len),
			 -EBADMSG);
}
END_TEST

START_TEST(test_snapshot_document)
{
	static const char expect[] =
		"{\"contextName\":\"order-service\",\"aggregateName\":\"order\","
		"\"aggregateId\":\"order-001\",\"tenantId\":\"tenant-001\","
		"\"ownerId\":\"\",\"spaceId\":\"\",\"version\":10,"
		"\"eventId\":\"event-010\",\"firstOperator\":\"user-001\","
		"\"operator\":\"user-002\",\"firstEventTime\":1699920000000,"
		"\"eventTime\":1699930000000,\"state\":{\"id\":\"order-001\","
		"\"status\":\"PAID\",\"totalAmount\":100.00},"
		"\"snapshotTime\":1699930000001,\"tags\":{},\"deleted\":false}";
	static const char state[] = "{\"id\":\"order-001\",\"status\":"
				    "\"PAID\",\"totalAmount\":100.00}";
	agr_wow_snapshot s = {
		.context_name = "order-service", .aggregate_name = "order",
		.aggregate_id = "order-001", .tenant_id = "tenant-001",
		.version = 10, .event_id = "event-010",
		.first_operator = "user-001", .operator_ = "user-002",
		.first_event_time = 1699920000000,
		.event_time = 1699930000000,
		.state = state, .state_len = sizeof(state) - 1,
		.snapshot_time = 1699930000001,
	}, *d;
	char *json, *cut;
	size_t len;

	ck_assert_int_eq(agr_wow_snapshot_encode(&s, &json, &len), 0);
	ck_assert_str_eq(json, expect);
	ck_assert_int_eq(agr_wow_snapshot_decode(json, len, &d), 0);
	ck_assert_str_eq(d->aggregate_id, "order-001");
	ck_assert_str_eq(d->tenant_id, "tenant-001");
	ck_assert_int_eq(d->version, 10);
	ck_assert_str_eq(d->event_id, "event-010");
	ck_assert_str_eq(d->operator_, "user-002");
	ck_assert_int_eq(d->event_time, 1699930000000);
	ck_assert_int_eq(d->snapshot_time, 1699930000001);
	ck_assert_str_eq(d->state, state);
	ck_assert_str_eq(d->tags, "{}");
	ck_assert(!d->deleted);
	agr_wow_snapshot_free(d);

	/* snapshotTime and deleted are required; eventId is not */
	cut = strdup(json);
	memmove(strstr(cut, "\"snapshotTime\""), strstr(cut, "\"tags\""),
		strlen(strstr(cut, "\"tags\"")) + 1);
	ck_assert_int_eq(agr_wow_snapshot_decode(cut, strlen(cut), &d),
			 -EBADMSG);
	free(cut);
	cut = strdup(json);
	memmove(strstr(cut, "\"eventId\""), strstr(cut, "\"firstOperator\""),
		strlen(strstr(cut, "\"firstOperator\"")) + 1);
	ck_assert_int_eq(agr_wow_snapshot_decode(cut, strlen(cut), &d), 0);
	ck_assert_str_eq(d->event_id, "");
	agr_wow_snapshot_free(d);
	free(cut);
	free(json);

	s.version = 0;
	ck_assert_int_eq(agr_wow_snapshot_encode(&s, &json, &len), -EINVAL);
}
END_TEST

/* An event body may be any JSON value, bare numbers and literals too. */
START_TEST(test_stream_scalar_bodies)
{
	static const char *const bodies[] = { "1", "-2.5e3", "true", "false",
					      "\"x\"", "[1,{}]", "{}" };
	const char *body = bodies[_i];
	agr_wow_event ev = { "e", "n", NULL, "b", body, strlen(body) };
	agr_wow_event_stream s = {
		.id = "s", .context_name = "c", .aggregate_name = "a",
		.aggregate_id = "i", .command_id = "c", .version = 1,
		.events = &ev, .event_count = 1,
	}, *d;
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len), 0);
	ck_assert_int_eq(agr_wow_event_stream_decode(json, len, &d), 0);
	ck_assert_str_eq(d->events[0].body, body);
	agr_wow_event_stream_free(d);
	free(json);
	/* but not a bare number as a whole document, nor one cut short */
	ck_assert_int_eq(agr_wow_event_stream_decode(body, strlen(body), &d),
			 -EBADMSG);
	ev.body_len = strlen(body) + 1; /* the NUL: not JSON */
	ck_assert_int_eq(agr_wow_event_stream_encode(&s, &json, &len),
			 -EBADMSG);
}
END_TEST

/* Every cut of a valid document is refused, none crashes or leaks. */
START_TEST(test_truncations_refused)
{
	agr_wow_command *c;
	agr_wow_event_stream *st;

	for (size_t n = 1; n < sizeof(spec_command) - 1; n++)
		ck_assert_msg(agr_wow_command_decode(spec_command, n, &c) ==
				      -EBADMSG, "cut at %zu decoded", n);
	for (size_t n = 1; n < sizeof(spec_stream) - 1; n++)
		ck_assert_msg(agr_wow_event_stream_decode(spec_stream, n, &st) ==
				      -EBADMSG, "cut at %zu decoded", n);
	/* a command is not a stream, nor the other way round */
	ck_assert_int_eq(agr_wow_event_stream_decode(spec_command,
						     sizeof(spec_command) - 1,
						     &st), -EBADMSG);
	ck_assert_int_eq(agr_wow_command_decode(spec_stream,
						sizeof(spec_stream) - 1, &c),
			 -EBADMSG);
}
END_TEST

static void quiet(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

static Suite *codec_suite(void)
{
	Suite *s = suite_create("wow_codec");
	TCase *names = tcase_create("names");
	TCase *json = tcase_create("json");

	tcase_add_loop_test(names, test_id_vectors, 0, ARRAY_SIZE(ids));
	tcase_add_test(names, test_b64_rejects);
	tcase_add_test(names, test_es_keys_wow_examples);
	tcase_add_test(names, test_alias_topics_groups_lease);
	suite_add_tcase(s, names);

	tcase_add_test(json, test_command_encode_spec_example);
	tcase_add_test(json, test_command_decode_spec_example);
	tcase_add_test(json, test_command_decode_defaults_unknown_order);
	tcase_add_loop_test(json, test_command_decode_missing_required, 0, 12);
	tcase_add_loop_test(json, test_command_decode_optional_absent, 0, 5);
	tcase_add_loop_test(json, test_command_decode_bad, 0, 13);
	tcase_add_test(json, test_command_escapes_and_round_trip);
	tcase_add_test(json, test_stream_spec_example);
	tcase_add_test(json, test_stream_defaults_and_errors);
	tcase_add_test(json, test_truncations_refused);
	tcase_add_test(json, test_state_event);
	tcase_add_test(json, test_snapshot_document);
	tcase_add_loop_test(json, test_stream_scalar_bodies, 0, 7);
	suite_add_tcase(s, json);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(codec_suite());
	int failed;

	agr_set_log_hook(quiet, NULL);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
