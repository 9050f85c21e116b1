/* SPDX-License-Identifier: MIT */
/*
 * wow_lease.c - a consumer lease as Wow's RedisConsumerLeaseRegistry
 * keeps it: SET <key> <token> EX <ttl> (no NX: the key is this
 * consumer's own), a heartbeat that extends it only while it still
 * holds our token, and a release that deletes it only then. A SET that
 * failed, or a refused heartbeat, is retaken at the next beat (Wow reads
 * on without a lease then).
 */
#include "wow_bus_internal.h"

#include <aggring/wow_codec.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

static const char HEARTBEAT_LUA[] =
	"if redis.call('get', KEYS[1]) == ARGV[1] then "
	"return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
static const char RELEASE_LUA[] =
	"if redis.call('get', KEYS[1]) == ARGV[1] then "
	"return redis.call('del', KEYS[1]) else return 0 end";

struct lease_call {
	struct agr__wowbus_lease *lease;
	void (*done)(void *arg);
	void *arg;
};

static void make_token(char *out, size_t size)
{
	unsigned char raw[16];
	static const char hex[] = "0123456789abcdef";

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		/* Uniqueness per process and moment is all a token needs. */
		uint64_t t = (uint64_t)(uintptr_t)out ^ (uint64_t)getpid();

		memcpy(raw, &t, sizeof(t));
		memcpy(raw + 8, &t, sizeof(t));
	}
	for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < size; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
		out[2 * i + 2] = '\0';
	}
}

int agr__wowbus_lease_init(struct agr__wowbus_lease *l, const char *topic,
			   const char *group, const char *consumer,
			   uint64_t ttl_ms)
{
	int ret;

	memset(l, 0, sizeof(*l));
	ret = agr_wow_lease_key(topic, group, consumer, &l->key, NULL);
	if (ret < 0)
		return ret;
	make_token(l->token, sizeof(l->token));
	l->ttl_ms = ttl_ms;
	return 0;
}

void agr__wowbus_lease_fini(struct agr__wowbus_lease *l)
{
	free(l->key);
	l->key = NULL;
}

static struct lease_call *call_new(struct agr__wowbus_lease *l,
				   void (*done)(void *arg), void *arg)
{
	struct lease_call *c = malloc(sizeof(*c));

	if (c) {
		c->lease = l;
		c->done = done;
		c->arg = arg;
	}
	return c;
}

static void call_end(struct lease_call *c)
{
	if (c->done)
		c->done(c->arg);
	free(c);
}

static void on_set(agr_redis *r, const struct redisReply *reply, int err,
		   void *arg)
{
	struct lease_call *c = arg;
	struct agr__wowbus_lease *l = c->lease;

	(void)r;
	l->held = !err && reply->type == REDIS_REPLY_STATUS;
	l->take_failed = !l->held && err != -ECANCELED;
	if (l->take_failed)
		agr_log(AGR_LOG_WARN,
			"lease %s not taken (%s): reading without it "
			"until the next heartbeat takes it",
			l->key, err ? strerror(-err) :
			agr__wowbus_reply_text(reply));
	call_end(c);
}

int agr__wowbus_lease_take(struct agr__wowbus_lease *l, agr_redis *r,
			void (*done)(void *arg), void *arg)
{
	struct lease_call *c = call_new(l, done, arg);
	int ret;

	if (!c)
		return -ENOMEM;
	if (l->ttl_ms % 1000 == 0)
		ret = agr_redis_command(r, l->key, on_set, c,
					"SET %s %s EX %llu", l->key, l->token,
					(unsigned long long)(l->ttl_ms / 1000));
	else
		ret = agr_redis_command(r, l->key, on_set, c,
					"SET %s %s PX %llu", l->key, l->token,
					(unsigned long long)l->ttl_ms);
	if (ret < 0)
		free(c);
	return ret;
}

static void on_heartbeat(agr_redis *r, const struct redisReply *reply,
			 int err, void *arg)
{
	struct agr__wowbus_lease *l = arg;

	(void)r;
	if (err == -ECANCELED)
		return;
	if (err || reply->type != REDIS_REPLY_INTEGER || reply->integer != 1) {
		/*
		 * Wow stops the heartbeat here and reads on without a lease
		 * for good, its entries claimable whenever they are idle
		 * long enough; the next beat takes the lease again instead
		 * (a node that restarted lost it, or it expired meanwhile).
		 */
		agr_log(AGR_LOG_WARN,
			"lease %s: heartbeat refused (%s); taking it again",
			l->key, err ? strerror(-err) :
			agr__wowbus_reply_text(reply));
		l->held = false;
		l->take_failed = true;
	}
}

int agr__wowbus_lease_heartbeat(struct agr__wowbus_lease *l, agr_redis *r)
{
	if (l->released)
		return 0;
	/*
	 * Wow reads on without a lease its SET could not take; taking it
	 * at a later beat keeps a reconnected consumer's entries its own.
	 */
	if (l->take_failed) {
		l->take_failed = false;
		return agr__wowbus_lease_take(l, r, NULL, NULL);
	}
	if (!l->held)
		return 0;
	return agr_redis_command(r, l->key, on_heartbeat, l,
				 "EVAL %s 1 %s %s %llu", HEARTBEAT_LUA, l->key,
				 l->token, (unsigned long long)l->ttl_ms);
}

static void on_release(agr_redis *r, const struct redisReply *reply,
		       int err, void *arg)
{
	struct lease_call *c = arg;

	(void)r;
	if (err && err != -ECANCELED)
		agr_log(AGR_LOG_WARN,
			"lease %s: release failed (%s); it expires",
			c->lease->key, strerror(-err));
	(void)reply;
	call_end(c);
}

int agr__wowbus_lease_release(struct agr__wowbus_lease *l, agr_redis *r,
			   void (*done)(void *arg), void *arg)
{
	struct lease_call *c;
	int ret;

	if (l->released)
		return -EALREADY;
	l->released = true;
	c = call_new(l, done, arg);
	if (!c)
		return -ENOMEM;
	ret = agr_redis_command(r, l->key, on_release, c, "EVAL %s 1 %s %s",
				RELEASE_LUA, l->key, l->token);
	if (ret < 0)
		free(c);
	return ret;
}
