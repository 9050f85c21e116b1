/* SPDX-License-Identifier: MIT */
/*
 * wow_bus_internal.h - what the bus consumer's files share: the
 * per-topic lease (wow_lease.c) and pending sweep (wow_pending.c). The
 * consumer (wow_bus_consumer.c) owns both and drives them from its
 * worker; every function here runs there.
 */
#ifndef AGGRING_REDIS_WOW_BUS_INTERNAL_H
#define AGGRING_REDIS_WOW_BUS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/common.h>
#include <aggring/redis_client.h>
#include <aggring/wow_bus.h>

struct redisReply;

/* A reply's text for a log line ("(nil)", the error, ...). */
const char *agr__wowbus_reply_text(const struct redisReply *reply);

/*
 * One consumer lease (spec 2): taken with SET EX before the live read,
 * kept alive by a Lua heartbeat, released by a Lua compare-and-delete.
 */
struct agr__wowbus_lease {
	char *key;	/* agr_wow_lease_key() */
	char token[40];
	uint64_t ttl_ms;
	bool held;	/* SET answered OK and no heartbeat was refused */
	bool take_failed; /* the SET failed: the next beat takes it again */
	bool released;
};

int agr__wowbus_lease_init(struct agr__wowbus_lease *l, const char *topic,
			   const char *group, const char *consumer,
			   uint64_t ttl_ms);
void agr__wowbus_lease_fini(struct agr__wowbus_lease *l);
/* done(arg) runs once when the SET is answered, whatever the answer. */
int agr__wowbus_lease_take(struct agr__wowbus_lease *l, agr_redis *r,
			   void (*done)(void *arg), void *arg);
/* Extends a held lease, or takes one whose SET failed. */
int agr__wowbus_lease_heartbeat(struct agr__wowbus_lease *l, agr_redis *r);
/* -EALREADY when released before; else done(arg) runs once. */
int agr__wowbus_lease_release(struct agr__wowbus_lease *l, agr_redis *r,
			      void (*done)(void *arg), void *arg);

/*
 * A pending sweep over one topic (spec 2, steps 1-4). The consumer
 * starts one at a time per topic; `deliver` takes an XCLAIM reply's
 * entries down the normal path, `done` tells the sweep ended (0, or
 * the error: failures retry at the next sweep). The strings must live
 * until done.
 */
struct agr__wowbus_sweep_ops {
	void (*deliver)(void *owner, unsigned topic,
			const struct redisReply *entries);
	/* False: the owner holds enough; the sweep ends after this page. */
	bool (*has_room)(void *owner);
	/*
	 * True if entry `id` of ours is in flight or kept on purpose; an
	 * entry of ours idle for min-idle that is not was lost on its way
	 * and is claimed again. NULL: ours are never claimed (Wow's rule).
	 */
	bool (*held)(void *owner, unsigned topic, const char *id);
	void (*done)(void *owner, unsigned topic, int err);
};

int agr__wowbus_sweep_start(agr_redis *r, const char *topic, unsigned index,
			    const char *group, const char *self,
			    uint64_t min_idle_ms, unsigned batch,
			    const struct agr__wowbus_sweep_ops *ops,
			    void *owner);

#endif /* AGGRING_REDIS_WOW_BUS_INTERNAL_H */
