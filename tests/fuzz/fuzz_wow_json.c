/* SPDX-License-Identifier: MIT */
/*
 * fuzz_wow_json.c - libFuzzer target for Wow's message decoders and key
 * codec over arbitrary bytes: no crash, no leak, no undefined
 * behaviour; what decodes re-encodes and decodes again to the same
 * fields; Base64URL decoding accepts only what encoding produces.
 *
 * Build (as .ci/run builds fuzz_group_key):
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined \
 *	  -fno-sanitize-recover=all -Iinclude -Iredis -D_GNU_SOURCE \
 *	  $(pkg-config --cflags json-c) tests/fuzz/fuzz_wow_json.c \
 *	  redis/wow_utf8.c redis/wow_buf.c redis/wow_b64.c \
 *	  redis/wow_sha256.c redis/wow_keys.c redis/wow_json.c \
 *	  redis/wow_command.c redis/wow_event_stream.c \
 *	  redis/wow_state_event.c redis/wow_snapshot_json.c \
 *	  src/group_key.c \
 *	  $(pkg-config --libs json-c) -o fuzz_wow_json
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/wow_codec.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The library's log line, silenced (the decoders log every refusal). */
void agr_log(agr_log_level level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

static void same(const char *a, const char *b)
{
	if (strcmp(a, b))
		abort();
}

static void command_round_trip(const agr_wow_command *c)
{
	agr_wow_command *again;
	char *json;
	size_t len;

	if (agr_wow_command_encode(c, &json, &len))
		abort();
	if (agr_wow_command_decode(json, len, &again))
		abort();
	same(c->id, again->id);
	same(c->aggregate_id, again->aggregate_id);
	same(c->request_id, again->request_id);
	same(c->body, again->body);
	if (c->header_count != again->header_count ||
	    c->create_time != again->create_time ||
	    c->has_aggregate_version != again->has_aggregate_version)
		abort();
	agr_wow_command_free(again);
	free(json);
}

static void stream_round_trip(const agr_wow_event_stream *s)
{
	agr_wow_event_stream *again;
	char *json;
	size_t len;

	if (agr_wow_event_stream_encode(s, &json, &len))
		abort();
	if (agr_wow_event_stream_decode(json, len, &again))
		abort();
	same(s->id, again->id);
	same(s->events[0].body, again->events[0].body);
	if (s->event_count != again->event_count ||
	    s->version != again->version)
		abort();
	agr_wow_event_stream_free(again);
	free(json);
}

static void b64_canonical(const char *s, size_t size)
{
	char *plain, *text;
	size_t plen, tlen;

	if (agr_wow_b64_decode(s, size, &plain, &plen))
		return;
	if (agr_wow_b64_encode(plain, plen, &text, &tlen))
		abort();
	if (tlen != size || memcmp(text, s, size))
		abort();
	free(plain);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	agr_wow_command *c;
	agr_wow_event_stream *st;
	agr_wow_state_event *se;
	agr_wow_snapshot *snap;
	agr_wow_es_keys k;
	char *id;

	if (!agr_wow_command_decode(s, size, &c)) {
		command_round_trip(c);
		agr_wow_command_free(c);
	}
	if (!agr_wow_event_stream_decode(s, size, &st)) {
		stream_round_trip(st);
		agr_wow_event_stream_free(st);
	}
	if (!agr_wow_state_event_decode(s, size, &se))
		agr_wow_state_event_free(se);
	if (!agr_wow_snapshot_decode(s, size, &snap))
		agr_wow_snapshot_free(snap);
	b64_canonical(s, size);

	id = strndup(s, size);
	if (id && *id) {
		const agr_wow_named n = { "ctx", NULL, "agg" };

		if (!agr_wow_es_keys_build(&n, id, id, &k)) {
			if (k.bucket < 0 || k.bucket > 127)
				abort();
			agr_wow_es_keys_free(&k);
		}
	}
	free(id);
	return 0;
}
