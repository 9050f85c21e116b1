/* SPDX-License-Identifier: MIT */
/*
 * wow_decode.c - the bus's built-in decoder: the topic's suffix says
 * which of Wow's documents an entry's msg is (aggring/wow_codec.h).
 */
#include <errno.h>
#include <string.h>

#include <aggring/wow_bus.h>
#include <aggring/wow_codec.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static void free_command(void *v)
{
	agr_wow_command_free(v);
}

static void free_event_stream(void *v)
{
	agr_wow_event_stream_free(v);
}

static void free_state_event(void *v)
{
	agr_wow_state_event_free(v);
}

int agr_wow_decode_default(const char *topic, const char *msg, size_t len,
			   agr_wow_decoded *out, void *arg)
{
	int ret;

	(void)arg;
	if (!topic || !msg || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (ends_with(topic, ":command")) {
		agr_wow_command *c;

		ret = agr_wow_command_decode(msg, len, &c);
		if (ret < 0)
			return ret;
		out->aggregate_id = c->aggregate_id;
		out->type = c->name;
		out->value = c;
		out->free_value = free_command;
		return 0;
	}
	if (ends_with(topic, ":state")) {
		agr_wow_state_event *e;

		ret = agr_wow_state_event_decode(msg, len, &e);
		if (ret < 0)
			return ret;
		out->aggregate_id = e->stream.aggregate_id;
		out->value = e;
		out->free_value = free_state_event;
		return 0;
	}
	if (ends_with(topic, ":event")) {
		agr_wow_event_stream *s;

		ret = agr_wow_event_stream_decode(msg, len, &s);
		if (ret < 0)
			return ret;
		out->aggregate_id = s->aggregate_id;
		out->value = s;
		out->free_value = free_event_stream;
		return 0;
	}
	agr_log(AGR_LOG_ERROR, "agr_wow_decode_default: topic %s is none of "
		"Wow's (:command, :event, :state)", topic);
	return -EINVAL;
}
