/* SPDX-License-Identifier: MIT */
/*
 * wow_pending.c - one pending sweep over a topic's group, as Wow's
 * RedisPendingMessageScanner and Recoverer run it:
 *  1. XPENDING <topic> <group>: nothing pending ends it; else its max id
 *     is where this sweep ends (entries added later wait for the next);
 *  2. XINFO CONSUMERS: each consumer's idle time (a lookup failure
 *     counts every consumer as active: nothing is claimed);
 *  3. pages of XPENDING <topic> <group> <start> <end> <batch>, start "-"
 *     then "(<last id>" (exclusive, Redis >= 6.2), until a short page
 *     or the last id is the end;
 *  4. an entry is claimable when its owner is not us, it was idle for
 *     min-idle, and its owner is not active: idle in XINFO for min-idle
 *     and no lease key (EXISTS); those are XCLAIMed with min-idle (two
 *     racing recoverers cannot both win one) and delivered;
 *  5. an entry of ours idle for min-idle that we do not hold (ops->held)
 *     was delivered to us in a reply we never read (a connection lost
 *     with it, a node killed after its AOF write): it is XCLAIMed to us
 *     again, as nobody else ever takes a live consumer's entries.
 */
#include "wow_bus_internal.h"

#include <aggring/wow_codec.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

enum owner_state { O_UNKNOWN, O_ACTIVE, O_IDLE, O_CHECKING, O_DEAD };

struct owner {
	char *name;
	long long idle_ms; /* from XINFO; -1: not listed */
	enum owner_state state;
};

struct candidate {
	char *id;
	size_t owner; /* index in owners; unused when ours */
	bool ours;    /* ours, lost on its way: claimed again */
};

struct agr__wowbus_sweep {
	agr_redis *r;
	const char *topic, *group, *self;
	unsigned index, batch;
	uint64_t min_idle_ms;
	const struct agr__wowbus_sweep_ops *ops;
	void *owner_arg;
	char end[64];
	char start[66];
	bool at_end;	      /* the page just read was the last */
	struct owner *owners; /* XINFO CONSUMERS, then owners seen */
	size_t nowners, cap;
	struct candidate *cand; /* this page's entries of idle owners */
	size_t ncand;
	char **claim;	      /* XCLAIM's ids: candidates of dead owners */
	size_t nclaim;
	unsigned checks;      /* EXISTS replies awaited */
	int err;
};

static void page_clear(struct agr__wowbus_sweep *s)
{
	for (size_t i = 0; i < s->ncand; i++)
		free(s->cand[i].id);
	s->ncand = 0;
	s->nclaim = 0; /* its ids belong to the candidates */
}

static void sweep_free(struct agr__wowbus_sweep *s)
{
	page_clear(s);
	free(s->cand);
	for (size_t i = 0; i < s->nowners; i++)
		free(s->owners[i].name);
	free(s->owners);
	free(s->claim);
	free(s);
}

static void finish_sweep(struct agr__wowbus_sweep *s, int err)
{
	s->ops->done(s->owner_arg, s->index, err);
	sweep_free(s);
}

static int reply_failed(struct agr__wowbus_sweep *s, const char *what,
			const redisReply *reply, int err)
{
	if (!err && reply->type != REDIS_REPLY_ERROR)
		return 0;
	if (err != -ECANCELED)
		agr_log(AGR_LOG_WARN,
			"pending sweep of %s: %s failed (%s)", s->topic,
			what, err ? strerror(-err) :
			agr__wowbus_reply_text(reply));
	return err ? err : -EPROTO;
}

static struct owner *owner_find(struct agr__wowbus_sweep *s, const char *name)
{
	for (size_t i = 0; i < s->nowners; i++)
		if (!strcmp(s->owners[i].name, name))
			return &s->owners[i];
	return NULL;
}

static struct owner *owner_add(struct agr__wowbus_sweep *s, const char *name,
			       long long idle_ms)
{
	struct owner *o;

	if (s->nowners == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct owner *n = realloc(s->owners, cap * sizeof(*n));

		if (!n)
			return NULL;
		s->owners = n;
		s->cap = cap;
	}
	o = &s->owners[s->nowners];
	o->name = strdup(name);
	if (!o->name)
		return NULL;
	o->idle_ms = idle_ms;
	o->state = idle_ms >= 0 && (uint64_t)idle_ms < s->min_idle_ms ?
			   O_ACTIVE : O_IDLE;
	s->nowners++;
	return o;
}

static void read_page(struct agr__wowbus_sweep *s);

static void next_page_or_finish(struct agr__wowbus_sweep *s)
{
	page_clear(s);
	/* A dead consumer's backlog is taken a page at a time, as room allows. */
	if (s->at_end || !s->ops->has_room(s->owner_arg))
		finish_sweep(s, 0);
	else
		read_page(s);
}

static void on_claim(agr_redis *r, const redisReply *reply, int err,
		     void *arg)
{
	struct agr__wowbus_sweep *s = arg;
	int e = reply_failed(s, "XCLAIM", reply, err);

	(void)r;
	if (e) {
		finish_sweep(s, e);
		return;
	}
	if (reply->type == REDIS_REPLY_ARRAY)
		s->ops->deliver(s->owner_arg, s->index, reply);
	next_page_or_finish(s);
}

static void claim(struct agr__wowbus_sweep *s)
{
	size_t argc = 5 + s->nclaim;
	const char **argv = malloc(argc * sizeof(*argv));
	size_t *len = malloc(argc * sizeof(*len));
	char idle[24];
	int ret = -ENOMEM;

	if (argv && len) {
		snprintf(idle, sizeof(idle), "%llu",
			 (unsigned long long)s->min_idle_ms);
		argv[0] = "XCLAIM";
		argv[1] = s->topic;
		argv[2] = s->group;
		argv[3] = s->self;
		argv[4] = idle;
		for (size_t i = 0; i < s->nclaim; i++)
			argv[5 + i] = s->claim[i];
		for (size_t i = 0; i < argc; i++)
			len[i] = strlen(argv[i]);
		ret = agr_redis_command_argv(s->r, s->topic, strlen(s->topic),
					     (int)argc, argv, len, on_claim, s);
	}
	free(argv);
	free(len);
	if (ret < 0)
		finish_sweep(s, ret);
}

/* Every lookup is in: the candidates of dead owners are claimed. */
static void claim_dead(struct agr__wowbus_sweep *s)
{
	size_t ours = 0;

	s->nclaim = 0;
	if (s->ncand) {
		char **ids = realloc(s->claim, s->ncand * sizeof(*ids));

		if (!ids) {
			finish_sweep(s, -ENOMEM);
			return;
		}
		s->claim = ids;
	}
	for (size_t i = 0; i < s->ncand; i++) {
		if (s->cand[i].ours)
			ours++;
		if (s->cand[i].ours ||
		    s->owners[s->cand[i].owner].state == O_DEAD)
			s->claim[s->nclaim++] = s->cand[i].id;
	}
	if (ours)
		agr_log(AGR_LOG_WARN,
			"pending sweep of %s: %zu entries of ours never "
			"reached us; claiming them again", s->topic, ours);
	if (s->nclaim)
		claim(s);
	else
		next_page_or_finish(s);
}

struct check {
	struct agr__wowbus_sweep *s;
	size_t owner;
};

static void on_exists(agr_redis *r, const redisReply *reply, int err,
		      void *arg)
{
	struct check *c = arg;
	struct agr__wowbus_sweep *s = c->s;
	struct owner *o = &s->owners[c->owner];

	(void)r;
	if (err || reply->type != REDIS_REPLY_INTEGER) {
		if (!s->err)
			s->err = err ? err : -EPROTO;
		o->state = O_ACTIVE; /* a failed lookup counts as active */
	} else {
		o->state = reply->integer ? O_ACTIVE : O_DEAD;
	}
	free(c);
	if (--s->checks)
		return;
	if (s->err == -ECANCELED) {
		finish_sweep(s, s->err);
		return;
	}
	s->err = 0;
	claim_dead(s);
}

static int check_owner(struct agr__wowbus_sweep *s, size_t idx)
{
	char *key;
	struct check *c;
	int ret = agr_wow_lease_key(s->topic, s->group, s->owners[idx].name,
				    &key, NULL);

	if (ret < 0)
		return ret;
	c = malloc(sizeof(*c));
	if (!c) {
		free(key);
		return -ENOMEM;
	}
	c->s = s;
	c->owner = idx;
	s->owners[idx].state = O_CHECKING;
	s->checks++; /* first: the reply may come at once */
	ret = agr_redis_command(s->r, key, on_exists, c, "EXISTS %s", key);
	free(key);
	if (ret < 0) {
		s->checks--;
		s->owners[idx].state = O_ACTIVE;
		free(c);
		return ret;
	}
	return 0;
}

static bool entry_fields(const redisReply *e, const char **id,
			 const char **owner, long long *idle)
{
	if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
	    e->element[0]->type != REDIS_REPLY_STRING ||
	    e->element[1]->type != REDIS_REPLY_STRING ||
	    e->element[2]->type != REDIS_REPLY_INTEGER)
		return false;
	*id = e->element[0]->str;
	*owner = e->element[1]->str;
	*idle = e->element[2]->integer;
	return true;
}

static int push_candidate(struct agr__wowbus_sweep *s, const char *id,
			  size_t owner, bool ours)
{
	struct candidate *n = realloc(s->cand, (s->ncand + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->cand = n;
	n[s->ncand].id = strdup(id);
	if (!n[s->ncand].id)
		return -ENOMEM;
	n[s->ncand].owner = owner;
	n[s->ncand].ours = ours;
	s->ncand++;
	return 0;
}

static int add_candidate(struct agr__wowbus_sweep *s, const char *id,
			 const char *owner_name)
{
	struct owner *o = owner_find(s, owner_name);

	if (!o)
		o = owner_add(s, owner_name, -1);
	if (!o)
		return -ENOMEM;
	if (o->state == O_ACTIVE)
		return 0;
	return push_candidate(s, id, (size_t)(o - s->owners), false);
}

/* Ours and not held: its delivery never reached us. */
static bool ours_lost(const struct agr__wowbus_sweep *s, const char *id)
{
	return s->ops->held && !s->ops->held(s->owner_arg, s->index, id);
}

/* Keeps the page's candidates, then looks up the leases not yet known. */
static int scan_page(struct agr__wowbus_sweep *s, const redisReply *page)
{
	const char *id = NULL, *owner_name;
	long long idle;
	int ret;

	s->at_end = page->elements < s->batch;
	for (size_t i = 0; i < page->elements; i++) {
		if (!entry_fields(page->element[i], &id, &owner_name, &idle))
			continue;
		if ((uint64_t)idle < s->min_idle_ms)
			continue;
		if (strcmp(owner_name, s->self))
			ret = add_candidate(s, id, owner_name);
		else if (ours_lost(s, id))
			ret = push_candidate(s, id, 0, true);
		else
			ret = 0;
		if (ret < 0)
			return ret;
	}
	if (page->elements && page->element[page->elements - 1]->type ==
	    REDIS_REPLY_ARRAY && page->element[page->elements - 1]->elements &&
	    page->element[page->elements - 1]->element[0]->type ==
	    REDIS_REPLY_STRING) {
		const char *last =
			page->element[page->elements - 1]->element[0]->str;

		if (!strcmp(last, s->end))
			s->at_end = true;
		snprintf(s->start, sizeof(s->start), "(%s", last);
	} else {
		s->at_end = true;
	}
	for (size_t i = 0; i < s->nowners; i++)
		if (s->owners[i].state == O_IDLE) {
			ret = check_owner(s, i);
			if (ret < 0)
				return ret;
		}
	return 0;
}

static void on_page(agr_redis *r, const redisReply *reply, int err,
		    void *arg)
{
	struct agr__wowbus_sweep *s = arg;
	int e = reply_failed(s, "XPENDING page", reply, err);

	(void)r;
	if (!e && reply->type != REDIS_REPLY_ARRAY)
		e = -EPROTO;
	if (e) {
		finish_sweep(s, e);
		return;
	}
	/* A guard check: replies that come at once cannot end the sweep. */
	s->checks++;
	e = scan_page(s, reply);
	if (e) {
		s->err = e;
		s->at_end = true;
	}
	if (--s->checks)
		return; /* the lookups' replies go on */
	if (s->err == -ECANCELED) {
		finish_sweep(s, s->err);
		return;
	}
	s->err = 0;
	claim_dead(s);
}

static void read_page(struct agr__wowbus_sweep *s)
{
	char count[16];
	int ret;

	snprintf(count, sizeof(count), "%u", s->batch);
	ret = agr_redis_command(s->r, s->topic, on_page, s,
				"XPENDING %s %s %s %s %s", s->topic, s->group,
				s->start, s->end, count);
	if (ret < 0)
		finish_sweep(s, ret);
}

/* XINFO CONSUMERS: RESP2 gives each consumer as a flat name/value list. */
static int read_consumers(struct agr__wowbus_sweep *s, const redisReply *reply)
{
	for (size_t i = 0; i < reply->elements; i++) {
		const redisReply *c = reply->element[i];
		const char *name = NULL;
		long long idle = -1;

		if (c->type != REDIS_REPLY_ARRAY)
			continue;
		for (size_t k = 0; k + 1 < c->elements; k += 2) {
			const redisReply *f = c->element[k];
			const redisReply *v = c->element[k + 1];

			if (f->type != REDIS_REPLY_STRING &&
			    f->type != REDIS_REPLY_STATUS)
				continue;
			if (!strcmp(f->str, "name") &&
			    v->type == REDIS_REPLY_STRING)
				name = v->str;
			else if (!strcmp(f->str, "idle") &&
				 v->type == REDIS_REPLY_INTEGER)
				idle = v->integer;
		}
		if (name && !owner_find(s, name) && !owner_add(s, name, idle))
			return -ENOMEM;
	}
	return 0;
}

static void on_consumers(agr_redis *r, const redisReply *reply, int err,
			 void *arg)
{
	struct agr__wowbus_sweep *s = arg;
	int e = reply_failed(s, "XINFO CONSUMERS", reply, err);

	(void)r;
	if (!e && reply->type != REDIS_REPLY_ARRAY)
		e = -EPROTO;
	if (!e)
		e = read_consumers(s, reply);
	if (e) {
		/* Wow: a lookup failure counts every consumer as active. */
		finish_sweep(s, e);
		return;
	}
	read_page(s);
}

static void on_summary(agr_redis *r, const redisReply *reply, int err,
		       void *arg)
{
	struct agr__wowbus_sweep *s = arg;
	int e = reply_failed(s, "XPENDING", reply, err);

	(void)r;
	if (e) {
		finish_sweep(s, e);
		return;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
	    reply->element[0]->type != REDIS_REPLY_INTEGER ||
	    reply->element[0]->integer == 0 ||
	    reply->element[2]->type != REDIS_REPLY_STRING) {
		finish_sweep(s, 0); /* nothing pending */
		return;
	}
	snprintf(s->end, sizeof(s->end), "%s", reply->element[2]->str);
	e = agr_redis_command(s->r, s->topic, on_consumers, s,
			      "XINFO CONSUMERS %s %s", s->topic, s->group);
	if (e < 0)
		finish_sweep(s, e);
}

int agr__wowbus_sweep_start(agr_redis *r, const char *topic, unsigned index,
			 const char *group, const char *self,
			 uint64_t min_idle_ms, unsigned batch,
			 const struct agr__wowbus_sweep_ops *ops, void *owner)
{
	struct agr__wowbus_sweep *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->r = r;
	s->topic = topic;
	s->index = index;
	s->group = group;
	s->self = self;
	s->min_idle_ms = min_idle_ms;
	s->batch = batch;
	s->ops = ops;
	s->owner_arg = owner;
	strcpy(s->start, "-");
	ret = agr_redis_command(r, topic, on_summary, s, "XPENDING %s %s",
				topic, group);
	if (ret < 0)
		free(s);
	return ret;
}
