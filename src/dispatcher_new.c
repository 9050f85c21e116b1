/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_new.c - a dispatcher's creation: options checked, groups,
 * handlers, held sets and sweeps allocated (aggring/dispatcher.h).
 */
#include "dispatcher.h"
#include "fault.h"
#include "settings.h"
#include "versioned.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/dispatcher.h>
#include <aggring/group_key.h>

/* ---- creation ---- */

/* Logs why agr_dispatcher_new() refuses its arguments: -EINVAL. */
static int bad_option(const char *name, const char *why)
{
	agr__log(AGR_LOG_ERROR, "agr_dispatcher_new(%s): %s; -EINVAL",
		 name ? name : "NULL", why);
	return -EINVAL;
}

static int check_options(const agr_dispatcher_options *o)
{
	const agr_named_aggregate *n = &o->named_aggregate;
	const char *name = o->name && *o->name ? o->name : NULL;

	if (!name)
		return bad_option(NULL, "options.name is NULL or empty");
	if (!o->supplier)
		return bad_option(name, "options.supplier is NULL");
	if (!o->on_complete)
		return bad_option(name, "options.on_complete is NULL");
	if (!n->context_name || !*n->context_name)
		return bad_option(name, "named_aggregate.context_name is NULL "
					"or empty");
	if (!n->aggregate_name || !*n->aggregate_name)
		return bad_option(name, "named_aggregate.aggregate_name is "
					"NULL or empty");
	if (o->parallelism < 0)
		return bad_option(name, "options.parallelism is negative");
	return 0;
}

static void init_groups(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		agr__mpsc_init(&g->queue);
		atomic_init(&g->state, G_IDLE);
		atomic_init(&g->depth, 0);
		atomic_init(&g->admitted, 0);
		atomic_init(&g->refused, 0);
		atomic_init(&g->handled, 0);
		atomic_init(&g->failed, 0);
		atomic_init(&g->skipped, 0);
		atomic_init(&g->discarded, 0);
		atomic_init(&g->interrupted, 0);
		atomic_init(&g->current, NULL);
		atomic_init(&g->pending_since, 0);
		for (int k = 0; k < PENDING_TYPE_WORDS; k++)
			atomic_init(&g->pending_type[k], 0);
		g->work.fn = agr__group_run;
		g->d = d;
		g->worker = agr__scheduler_worker(d->sched, (unsigned)i);
		g->held = &d->held[i % agr__scheduler_workers(d->sched)];
		g->index = (unsigned)i;
	}
}

static void init_sweeps(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].d = d;
		d->sweeps[i].worker_index = (unsigned)i;
		d->held[i].d = d;
		d->held[i].poller.poll = agr__held_poll;
	}
}

void agr__dispatcher_free_memory(struct agr_dispatcher *d)
{
	size_t i;

	for (i = 0; i < d->nhandlers; i++)
		free(d->handlers[i].type);
	free(d->handlers);
	free(d->sweeps);
	for (i = 0; i < d->nheld; i++)
		free(d->held[i].groups);
	free(d->held);
	free(d->latency);
	free(d->groups);
	free(d->name);
	free(d->context_name);
	free(d->aggregate_name);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int alloc_dispatcher(const agr_dispatcher_options *o, int parallelism,
			    struct agr_dispatcher **out)
{
	struct agr_dispatcher *d;

	if (posix_memalign((void **)&d, AGR__CACHELINE, sizeof(*d)) != 0)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	atomic_init(&d->started, false);
	atomic_init(&d->forced, false);
	atomic_init(&d->sweeps_pending, 0);
	pthread_mutex_init(&d->lock, NULL);
	d->parallelism = parallelism;
	d->name = strdup(o->name);
	d->context_name = strdup(o->named_aggregate.context_name);
	d->aggregate_name = strdup(o->named_aggregate.aggregate_name);
	if (posix_memalign((void **)&d->groups, AGR__CACHELINE,
			   (size_t)parallelism * sizeof(*d->groups)) != 0)
		d->groups = NULL;
	if (!d->name || !d->context_name || !d->aggregate_name ||
	    !d->groups) {
		agr__dispatcher_free_memory(d);
		return -ENOMEM;
	}
	memset(d->groups, 0, (size_t)parallelism * sizeof(*d->groups));
	*out = d;
	return 0;
}

/* Room for each worker to hold all its groups, up to HOLD_MAX. */
static int alloc_held(struct agr_dispatcher *d, size_t workers)
{
	size_t i, groups;

	d->held = calloc(workers, sizeof(*d->held));
	if (!d->held)
		return -ENOMEM;
	d->nheld = workers;
	for (i = 0; i < workers; i++) {
		groups = ((size_t)d->parallelism + workers - 1 - i) / workers;
		d->held[i].cap = (unsigned)(groups < HOLD_MAX ? groups :
								HOLD_MAX);
		if (d->held[i].cap == 0)
			continue;
		d->held[i].groups =
			calloc(d->held[i].cap, sizeof(*d->held[i].groups));
		if (!d->held[i].groups)
			return -ENOMEM;
	}
	return 0;
}

static int alloc_latency(struct agr_dispatcher *d)
{
	size_t size = (size_t)agr__scheduler_workers(d->sched) * sizeof(*d->latency);

	if (posix_memalign((void **)&d->latency, AGR__CACHELINE, size) != 0) {
		d->latency = NULL;
		return -ENOMEM;
	}
	memset(d->latency, 0, size);
	return 0;
}

static const struct agr__layout options_layout =
	AGR__LAYOUT(agr_dispatcher_options, AGR_DISPATCHER_OPTIONS_INIT);

AGR_API int agr_dispatcher_new(const agr_dispatcher_options *opts,
			       agr_dispatcher **out)
{
	agr_dispatcher_options local = AGR_DISPATCHER_OPTIONS_INIT;
	const agr_dispatcher_options *o = &local;
	struct agr_dispatcher *d;
	int parallelism, ret;

	if (!opts || !out) {
		agr__log(AGR_LOG_ERROR, "agr_dispatcher_new: %s is NULL; "
			 "-EINVAL", opts ? "out" : "options");
		return -EINVAL;
	}
	if ((ret = agr__read_versioned(&local, opts, &options_layout,
				       "agr_dispatcher_new")) ||
	    (ret = check_options(o)))
		return ret;
	parallelism = agr__setting_count(AGR__SETTING_PARALLELISM,
					 o->parallelism,
					 64 * agr__online_cpus());
	if (parallelism < 0)
		return parallelism;
	ret = alloc_dispatcher(o, parallelism, &d);
	if (ret)
		return ret;
	ret = agr_supplier_get_or_init(o->supplier, &o->named_aggregate,
				       &d->sched);
	if (!ret) {
		size_t workers = (size_t)agr__scheduler_workers(d->sched);

		d->sweeps = calloc(workers, sizeof(*d->sweeps));
		ret = d->sweeps ? alloc_held(d, workers) : -ENOMEM;
	}
	if (!ret && o->metrics)
		ret = alloc_latency(d);
	if (!ret)
		ret = agr__scheduler_attach_gate(d->sched, &d->gate);
	if (ret) {
		agr__dispatcher_free_memory(d);
		return ret;
	}
	d->supplier = o->supplier;
	d->owns_supplier = o->owns_supplier;
	d->on_complete = o->on_complete;
	d->complete_arg = o->complete_arg;
	d->group_key = o->group_key;
	d->group_key_arg = o->group_key_arg;
	d->queue_limit = o->queue_limit;
	d->count_depth = o->queue_limit || o->metrics;
	d->lifecycle = D_NEW;
	init_groups(d);
	init_sweeps(d);
	d->stuck_watch.fn = agr__dispatcher_watch_stuck;
	d->stuck_watch.arg = d;
	agr__scheduler_watch_add(d->sched, &d->stuck_watch);
	agr__handle_claim(&d->magic, AGR__H_DISPATCHER);
	*out = d;
	return 0;
}

AGR_API int agr_dispatcher_register(agr_dispatcher *d, const char *type,
				    agr_handler_fn fn, void *arg)
{
	struct handler *h;
	char *copy = NULL;
	int ret = 0;

	if (!d || !fn) {
		agr__log(AGR_LOG_ERROR, "agr_dispatcher_register: %s is NULL; "
			 "-EINVAL", d ? "fn" : "the dispatcher");
		return -EINVAL;
	}
	if (type && !(copy = strdup(type)))
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	if (d->lifecycle != D_NEW || atomic_load(&d->started)) {
		ret = -EBUSY;
	} else {
		h = realloc(d->handlers, (d->nhandlers + 1) * sizeof(*h));
		if (!h) {
			ret = -ENOMEM;
		} else {
			d->handlers = h;
			h[d->nhandlers++] = (struct handler){ copy, fn, arg };
			/* The array owns the copy now (freed with it). */
			// cppcheck-suppress memleak
			copy = NULL;
		}
	}
	pthread_mutex_unlock(&d->lock);
	free(copy);
	return ret;
}

int agr__dispatcher_set_lease(agr_dispatcher *d,
			      const struct agr__lease_ops *ops)
{
	int ret = 0;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	/* Messages already admitted hold no lease to release. */
	if (d->lifecycle != D_NEW || agr__dispatcher_busy(d))
		ret = -EBUSY;
	else if (ops && d->lease.acquire)
		ret = -EEXIST;
	else if (ops)
		d->lease = *ops;
	else
		memset(&d->lease, 0, sizeof(d->lease));
	pthread_mutex_unlock(&d->lock);
	return ret;
}
