/* SPDX-License-Identifier: MIT */
/* wow_reply.c - a Redis reply's text, for the bus's log lines. */
#include "wow_bus_internal.h"

#include <hiredis/hiredis.h>

const char *agr__wowbus_reply_text(const struct redisReply *reply)
{
	if (!reply)
		return "(no reply)";
	switch (reply->type) {
	case REDIS_REPLY_NIL:
		return "(nil)";
	case REDIS_REPLY_ARRAY:
		return "(array)";
	case REDIS_REPLY_INTEGER:
		return "(integer)";
	default:
		return reply->str ? reply->str : "(empty)";
	}
}
