/* SPDX-License-Identifier: MIT */
/*
 * check_wow_codec.c - Wow's Redis names and JSON, byte for byte
 * (libaggring-redis, aggring/wow_codec.h): names and commands here, the
 * event documents in wow_codec_events.c.
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

#include "wow_codec_test.h"

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
}
END_TEST

START_TEST(test_es_keys_append_script_and_tenants)
{
	agr_wow_es_keys k;
	const agr_wow_named order = { "order-service", NULL, "order" };

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
	ck_assert_uint_eq(len, strlen(spec_command));
	free(json);
}
END_TEST

START_TEST(test_command_decode_spec_example)
{
	agr_wow_command *c;

	ck_assert_int_eq(agr_wow_command_decode(spec_command,
						strlen(spec_command), &c),
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
}
END_TEST

START_TEST(test_command_encoder_refuses_bad_input)
{
	agr_wow_command c = spec_command_struct();
	char *json;
	size_t len;

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
	tcase_add_test(names, test_es_keys_append_script_and_tenants);
	tcase_add_test(names, test_alias_topics_groups_lease);
	suite_add_tcase(s, names);

	tcase_add_test(json, test_command_encode_spec_example);
	tcase_add_test(json, test_command_decode_spec_example);
	tcase_add_test(json, test_command_decode_defaults_unknown_order);
	tcase_add_loop_test(json, test_command_decode_missing_required, 0, 12);
	tcase_add_loop_test(json, test_command_decode_optional_absent, 0, 5);
	tcase_add_loop_test(json, test_command_decode_bad, 0, 13);
	tcase_add_test(json, test_command_escapes_and_round_trip);
	tcase_add_test(json, test_command_encoder_refuses_bad_input);
	wow_codec_event_tests(json);
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
