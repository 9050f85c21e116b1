/* SPDX-License-Identifier: MIT */
/*
 * pipeline.c - the commands of one connection awaiting their replies.
 */
#include "pipeline.h"

#include <errno.h>
#include <stdlib.h>

static int pipe_grow(struct agr__redis_pipe *p)
{
	size_t cap = p->cap ? p->cap * 2 : 64;
	struct agr__redis_pending *v;

	if (p->n < p->cap)
		return 0;
	v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		v[i] = p->v[(p->head + i) & (p->cap - 1)];
	free(p->v);
	p->v = v;
	p->cap = cap;
	p->head = 0;
	return 0;
}

int agr__redis_pipe_push(struct agr__redis_pipe *p, agr__redis_reply_cb cb,
			 void *arg)
{
	int ret = pipe_grow(p);

	if (ret < 0)
		return ret;
	p->v[(p->head + p->n) & (p->cap - 1)] =
		(struct agr__redis_pending){ .cb = cb, .arg = arg };
	p->n++;
	return 0;
}

/* Only while nothing is on the wire: the new entry goes out first. */
int agr__redis_pipe_push_front(struct agr__redis_pipe *p,
			       agr__redis_reply_cb cb, void *arg)
{
	int ret;

	if (p->sent)
		return -EINVAL;
	ret = pipe_grow(p);
	if (ret < 0)
		return ret;
	p->head = (p->head - 1) & (p->cap - 1);
	p->v[p->head] = (struct agr__redis_pending){ .cb = cb, .arg = arg };
	p->n++;
	return 0;
}

bool agr__redis_pipe_pop(struct agr__redis_pipe *p,
			 struct agr__redis_pending *out)
{
	if (p->n == 0)
		return false;
	*out = p->v[p->head];
	p->head = (p->head + 1) & (p->cap - 1);
	p->n--;
	if (p->sent)
		p->sent--;
	return true;
}

bool agr__redis_pipe_pop_sent(struct agr__redis_pipe *p,
			      struct agr__redis_pending *out)
{
	if (p->sent == 0)
		return false;
	return agr__redis_pipe_pop(p, out);
}

void agr__redis_pipe_drop_back(struct agr__redis_pipe *p)
{
	if (p->n > p->sent)
		p->n--;
}

void agr__redis_pipe_drop_front(struct agr__redis_pipe *p)
{
	if (p->n > 0 && p->sent == 0) {
		p->head = (p->head + 1) & (p->cap - 1);
		p->n--;
	}
}

void agr__redis_pipe_mark_sent(struct agr__redis_pipe *p)
{
	p->sent = p->n;
}

size_t agr__redis_pipe_sent(const struct agr__redis_pipe *p)
{
	return p->sent;
}

size_t agr__redis_pipe_len(const struct agr__redis_pipe *p)
{
	return p->n;
}

void agr__redis_pipe_free(struct agr__redis_pipe *p)
{
	free(p->v);
	*p = (struct agr__redis_pipe){ 0 };
}
