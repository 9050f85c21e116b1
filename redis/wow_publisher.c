/* SPDX-License-Identifier: MIT */
/*
 * wow_publisher.c - `XADD <topic> * msg <json>`, as Wow's
 * AbstractRedisMessageBus sends: no MAXLEN, Wow never trims.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/wow_bus.h>
#include <hiredis/hiredis.h>

struct publish {
	agr_wow_publish_fn done;
	void *arg;
};

static void on_xadd(agr_redis *r, const struct redisReply *reply, int err,
		    void *arg)
{
	struct publish p = *(struct publish *)arg;

	(void)r;
	free(arg);
	if (!err && reply->type != REDIS_REPLY_STRING) {
		if (reply->type == REDIS_REPLY_ERROR)
			agr_log(AGR_LOG_WARN, "XADD: %s", reply->str);
		err = -EPROTO;
	}
	p.done(err, err ? NULL : reply->str, p.arg);
}

int agr_wow_publish(agr_redis *r, const char *topic, const char *json,
		    size_t len, agr_wow_publish_fn done, void *arg)
{
	const char *argv[5] = { "XADD", topic, "*", "msg", json };
	size_t argvlen[5];
	struct publish *p;
	int ret;

	if (!r || !topic || !*topic || !json || !done)
		return -EINVAL;
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->done = done;
	p->arg = arg;
	argvlen[0] = 4;
	argvlen[1] = strlen(topic);
	argvlen[2] = 1;
	argvlen[3] = 3;
	argvlen[4] = len;
	ret = agr_redis_command_argv(r, topic, argvlen[1], 5, argv, argvlen,
				     on_xadd, p);
	if (ret < 0)
		free(p);
	return ret;
}
