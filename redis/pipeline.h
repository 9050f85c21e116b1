/* SPDX-License-Identifier: MIT */
/*
 * pipeline.h - the commands of one connection awaiting their replies,
 * in the order their bytes went out: a ring of callbacks. The first
 * `sent` of them were handed to the socket; the rest still sit in the
 * connection's output.
 */
#ifndef AGGRING_REDIS_PIPELINE_H
#define AGGRING_REDIS_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

struct redisReply;

/* A reply (err 0) or why none will come (err < 0, reply NULL). */
typedef void (*agr__redis_reply_cb)(void *arg, struct redisReply *reply,
				    int err);

struct agr__redis_pending {
	agr__redis_reply_cb cb;
	void *arg;
};

struct agr__redis_pipe {
	struct agr__redis_pending *v;
	size_t cap;  /* a power of two */
	size_t head; /* index of the oldest */
	size_t n;    /* entries */
	size_t sent; /* of those, the first `sent` are on the wire */
};

/* 0 or -ENOMEM. push_front adds an entry not yet sent ahead of the rest. */
int agr__redis_pipe_push(struct agr__redis_pipe *p, agr__redis_reply_cb cb,
			 void *arg);
int agr__redis_pipe_push_front(struct agr__redis_pipe *p,
			       agr__redis_reply_cb cb, void *arg);
/* Removes the oldest sent entry into *out; false if none was sent. */
bool agr__redis_pipe_pop_sent(struct agr__redis_pipe *p,
			      struct agr__redis_pending *out);
/* Removes the oldest entry, sent or not; false when empty. */
bool agr__redis_pipe_pop(struct agr__redis_pipe *p,
			 struct agr__redis_pending *out);
/* Undo the last push, or the last push_front. */
void agr__redis_pipe_drop_back(struct agr__redis_pipe *p);
void agr__redis_pipe_drop_front(struct agr__redis_pipe *p);
/* Every entry is now on the wire. */
void agr__redis_pipe_mark_sent(struct agr__redis_pipe *p);
size_t agr__redis_pipe_sent(const struct agr__redis_pipe *p);
size_t agr__redis_pipe_len(const struct agr__redis_pipe *p);
void agr__redis_pipe_free(struct agr__redis_pipe *p);

#endif /* AGGRING_REDIS_PIPELINE_H */
