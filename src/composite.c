/* SPDX-License-Identifier: MIT */
/*
 * composite.c - an event-stream and a state-event dispatcher on one
 * scheduler, started, quiesced and stopped as one (the reference's
 * CompositeEventDispatcher).
 *
 * The children only ever see borrowed views of the supplier, so their
 * own stops leave the scheduler running; the composite alone stops the
 * supplier, after both children, and only when it owns it.
 */
#include "handle.h"
#include "internal.h"
#include "util.h"
#include "versioned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/composite.h>

/* Children in start and quiesce order; stops walk it backwards. */
enum { DOMAIN, STATE, NCHILDREN };

static const char *const child_label[NCHILDREN] = { "domain", "state" };
static const char *const start_step[NCHILDREN] = { "start:domain",
						   "start:state" };
static const char *const close_step[NCHILDREN] = { "close:domain",
						   "close:state" };
static const char *const stop_step[NCHILDREN] = { "stop:domain",
						  "stop:state" };
static const char *const force_step[NCHILDREN] = { "force:domain",
						   "force:state" };

struct agr_composite {
	char *name;
	agr_supplier *supplier;
	bool owns_supplier;
	agr_supplier *views[NCHILDREN];
	agr_dispatcher *children[NCHILDREN];
	agr_composite_step_fn on_step;
	void *step_arg;
	atomic_bool quiesced; /* the close hooks fired */
	atomic_bool force_requested;
	agr__magic magic; /* handle.h */
};

static void trace(const struct agr_composite *c, const char *step)
{
	if (c->on_step)
		c->on_step(step, c->step_arg);
}

/* ---- creation ---- */

static char *child_name(const char *given, const char *composite,
			const char *label)
{
	size_t n;
	char *s;

	if (given)
		return strdup(given);
	n = strlen(composite) + 1 + strlen(label) + 1;
	s = malloc(n);
	if (s)
		snprintf(s, n, "%s.%s", composite, label);
	return s;
}

static int new_child(struct agr_composite *c, int which,
		     const agr_dispatcher_options *given,
		     const agr_composite_options *o)
{
	agr_dispatcher_options co = *given;
	char *name = child_name(given->name, o->name, child_label[which]);
	int ret;

	if (!name)
		return -ENOMEM;
	ret = agr_supplier_borrow(o->supplier, &c->views[which]);
	if (!ret) {
		co.name = name;
		co.named_aggregate = o->named_aggregate;
		co.supplier = c->views[which];
		co.owns_supplier = false;
		ret = agr_dispatcher_new(&co, &c->children[which]);
	}
	free(name); /* the dispatcher keeps its own copy */
	return ret;
}

/* Frees what exists of the children and their views; not the supplier. */
static void free_children(struct agr_composite *c)
{
	int i;

	for (i = NCHILDREN; i-- > 0;) {
		agr_dispatcher_free(c->children[i]);
		agr_supplier_free(c->views[i]);
	}
}

static const struct agr__layout options_layout =
	AGR__LAYOUT(agr_composite_options, AGR_COMPOSITE_OPTIONS_INIT);

AGR_API int agr_composite_new(const agr_composite_options *opts,
			      agr_composite **out)
{
	agr_composite_options local = AGR_COMPOSITE_OPTIONS_INIT;
	const agr_composite_options *o = &local;
	struct agr_composite *c;
	int ret;

	if (opts && out &&
	    (ret = agr__read_versioned(&local, opts, &options_layout,
				       "agr_composite_new")))
		return ret;
	if (!opts || !out || !o->name || !*o->name || !o->supplier) {
		agr__log(AGR_LOG_ERROR, "agr_composite_new: %s; -EINVAL",
			 !opts ? "options is NULL" :
			 !out ? "out is NULL" :
			 !o->name || !*o->name ? "options.name is NULL or empty" :
						 "options.supplier is NULL");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	atomic_init(&c->quiesced, false);
	atomic_init(&c->force_requested, false);
	c->name = strdup(o->name);
	ret = c->name ? 0 : -ENOMEM;
	if (!ret)
		ret = new_child(c, DOMAIN, &o->event_stream, o);
	if (!ret)
		ret = new_child(c, STATE, &o->state_event, o);
	if (ret) {
		free_children(c);
		free(c->name);
		free(c);
		return ret;
	}
	c->supplier = o->supplier;
	c->owns_supplier = o->owns_supplier;
	c->on_step = o->on_step;
	c->step_arg = o->step_arg;
	agr__handle_claim(&c->magic, AGR__H_COMPOSITE);
	*out = c;
	return 0;
}

/* ---- access ---- */

AGR_API agr_dispatcher *agr_composite_event_stream(agr_composite *c)
{
	return c ? c->children[DOMAIN] : NULL;
}

AGR_API agr_dispatcher *agr_composite_state_event(agr_composite *c)
{
	return c ? c->children[STATE] : NULL;
}

AGR_API const char *agr_composite_name(const agr_composite *c)
{
	return c ? c->name : NULL;
}

/* ---- lifecycle ---- */

/* In child order; a child that fails keeps the later ones from starting. */
AGR_API int agr_composite_start(agr_composite *c)
{
	int i, ret;

	if (!c)
		return -EINVAL;
	for (i = 0; i < NCHILDREN; i++) {
		trace(c, start_step[i]);
		ret = agr_dispatcher_start(c->children[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* The first call closes each child's intake, firing its close hook. */
AGR_API int agr_composite_quiesce(agr_composite *c)
{
	int i, first = 0;

	if (!c)
		return -EINVAL;
	if (atomic_exchange(&c->quiesced, true))
		return 0;
	for (i = 0; i < NCHILDREN; i++) {
		trace(c, close_step[i]);
		agr__keep_first(&first,
				agr_dispatcher_quiesce(c->children[i]));
	}
	return first;
}

AGR_API int agr_composite_stop_gracefully(agr_composite *c,
					  uint64_t timeout_ns)
{
	uint64_t deadline = agr__deadline_after(timeout_ns);
	int i, first = 0;

	if (!c)
		return -EINVAL;
	agr__keep_first(&first, agr_composite_quiesce(c));
	for (i = NCHILDREN; i-- > 0;) {
		trace(c, stop_step[i]);
		agr__keep_first(&first, agr_dispatcher_stop_gracefully(
						c->children[i],
						agr__time_left(deadline)));
	}
	/* A force stop owns the supplier's end from the moment it began. */
	if (c->owns_supplier && !atomic_load(&c->force_requested)) {
		trace(c, "stop:scheduler");
		agr__keep_first(&first, agr_supplier_stop_gracefully(
						c->supplier,
						agr__time_left(deadline)));
	}
	return first;
}

AGR_API int agr_composite_force_stop(agr_composite *c)
{
	int i, first = 0;

	if (!c)
		return -EINVAL;
	if (atomic_exchange(&c->force_requested, true))
		return 0;
	for (i = NCHILDREN; i-- > 0;) {
		trace(c, force_step[i]);
		agr__keep_first(&first,
				agr_dispatcher_force_stop(c->children[i]));
	}
	if (c->owns_supplier) {
		trace(c, "force:scheduler");
		agr__keep_first(&first, agr_supplier_force_stop(c->supplier));
	}
	return first;
}

AGR_API void agr_composite_free(agr_composite *c)
{
	if (!c)
		return;
	if (!agr__handle_retire(&c->magic, AGR__H_COMPOSITE, __func__, c))
		return;
	/* The children first: they wait for their messages on the workers. */
	free_children(c);
	if (c->owns_supplier)
		agr_supplier_free(c->supplier);
	free(c->name);
	free(c);
}
