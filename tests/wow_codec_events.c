/* SPDX-License-Identifier: MIT */
/*
 * wow_codec_events.c - check_wow_codec's event documents, byte for
 * byte: the domain event stream (the spec's example, defaults, errors,
 * scalar bodies), the state event, the snapshot, and truncated input
 * refused.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/redis.h>

#include "wow_codec_test.h"

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
						     strlen(spec_stream),
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

/* Streams the decoder refuses: each lacks or breaks one field. */
static const char *const bad_streams[] = {
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

START_TEST(test_stream_defaults_and_errors)
{
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
}
END_TEST

START_TEST(test_stream_decode_refuses_bad_fields)
{
	agr_wow_event_stream *d;

	for (size_t i = 0; i < ARRAY_SIZE(bad_streams); i++) {
		const char *json = bad_streams[i];

		d = (agr_wow_event_stream *)1;
		ck_assert_int_eq(agr_wow_event_stream_decode(json, strlen(json),
							     &d), -EBADMSG);
		ck_assert_ptr_null(d);
	}
}
END_TEST

static const char state_body[] = "{\"orderId\":\"order-1\"}";
static const char state_state[] = "{\"orderId\":\"order-1\",\"status\":"
				  "\"CREATED\"}";
static const char state_tags[] = "{\"region\":[\"east\"]}";
static const agr_wow_event state_ev = {
	"event-1", "OrderCreated", "1",
	"me.ahoo.wow.serialization.JsonSerializerEventTest$OrderCreated",
	state_body, sizeof(state_body) - 1,
};

/* The state event spec_state holds, as a struct. */
static agr_wow_state_event spec_state_struct(void)
{
	return (agr_wow_state_event){
		.stream = {
			.id = "stream-1", .context_name = "sales",
			.aggregate_name = "Order", .aggregate_id = "order-1",
			.tenant_id = "tenant-1", .owner_id = "owner-1",
			.space_id = "space-1", .command_id = "command-1",
			.request_id = "request-1", .version = 5,
			.events = &state_ev, .event_count = 1,
			.create_time = 2000,
		},
		.first_operator = "op-1",
		.first_event_time = 1500,
		.state = state_state,
		.state_len = sizeof(state_state) - 1,
		.tags = state_tags,
		.tags_len = sizeof(state_tags) - 1,
	};
}

START_TEST(test_state_event)
{
	agr_wow_state_event e = spec_state_struct(), *d;
	agr_wow_event_stream *st;
	char *json;
	size_t len;

	ck_assert_int_eq(agr_wow_state_event_encode(&e, &json, &len), 0);
	ck_assert_str_eq(json, spec_state);
	free(json);

	ck_assert_int_eq(agr_wow_state_event_decode(spec_state,
						    strlen(spec_state), &d),
			 0);
	ck_assert_str_eq(d->stream.aggregate_id, "order-1");
	ck_assert_int_eq(d->stream.version, 5);
	ck_assert_str_eq(d->stream.events[0].name, "OrderCreated");
	ck_assert_str_eq(d->first_operator, "op-1");
	ck_assert_int_eq(d->first_event_time, 1500);
	ck_assert_str_eq(d->state, state_state);
	ck_assert_str_eq(d->tags, state_tags);
	ck_assert(!d->deleted);
	agr_wow_state_event_free(d);

	/* a state event is also a domain event stream */
	ck_assert_int_eq(agr_wow_event_stream_decode(spec_state,
						     strlen(spec_state),
						     &st), 0);
	agr_wow_event_stream_free(st);
}
END_TEST

/* Optional: firstOperator, firstEventTime, tags. */
START_TEST(test_state_event_optional_fields)
{
	agr_wow_state_event e = spec_state_struct(), *d;
	char *json, *cut;
	size_t len;

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
}
END_TEST

/* Required: state (an object) and deleted. */
START_TEST(test_state_event_required_fields)
{
	agr_wow_state_event e = spec_state_struct(), *d;
	char *json, *cut;
	size_t len;

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

	for (size_t n = 1; n < strlen(spec_command); n++)
		ck_assert_msg(agr_wow_command_decode(spec_command, n, &c) ==
				      -EBADMSG, "cut at %zu decoded", n);
	for (size_t n = 1; n < strlen(spec_stream); n++)
		ck_assert_msg(agr_wow_event_stream_decode(spec_stream, n, &st) ==
				      -EBADMSG, "cut at %zu decoded", n);
	/* a command is not a stream, nor the other way round */
	ck_assert_int_eq(agr_wow_event_stream_decode(spec_command,
						     strlen(spec_command), &st),
			 -EBADMSG);
	ck_assert_int_eq(agr_wow_command_decode(spec_stream,
						strlen(spec_stream), &c),
			 -EBADMSG);
}
END_TEST

void wow_codec_event_tests(TCase *json)
{
	tcase_add_test(json, test_stream_spec_example);
	tcase_add_test(json, test_stream_defaults_and_errors);
	tcase_add_test(json, test_stream_decode_refuses_bad_fields);
	tcase_add_test(json, test_truncations_refused);
	tcase_add_test(json, test_state_event);
	tcase_add_test(json, test_state_event_optional_fields);
	tcase_add_test(json, test_state_event_required_fields);
	tcase_add_test(json, test_snapshot_document);
	tcase_add_loop_test(json, test_stream_scalar_bodies, 0, 7);
}
