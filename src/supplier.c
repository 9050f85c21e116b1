/* SPDX-License-Identifier: MIT */
/*
 * supplier.c - caches one scheduler per named aggregate and owns their
 * lifecycle (the reference's AggregateSchedulerSupplier).
 */
#include "handle.h"
#include "options.h"
#include "scheduler.h"
#include "settings.h"
#include "util.h"
#include "watchdog.h"

#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *next;
	char *context_name;
	char *aggregate_name;
	struct agr_scheduler *sched;
};

struct agr_supplier {
	struct agr_supplier *owner; /* NULL unless a borrowed view */
	char *name;
	int parallelism;
	struct agr__worker_settings settings; /* cpus: cpus_copy */
	int *cpus_copy;

	/*
	 * The lifecycle lock: lookups, creation, and the stop snapshot.
	 * Once `stopping` is set the entry list never changes again, so
	 * it is the snapshot every stop and force works on.
	 */
	pthread_mutex_t lock;
	struct entry *entries;
	int size;
	bool stopping;
	agr__magic magic; /* handle.h */
};

AGR_API void agr_supplier_options_init(agr_supplier_options *o)
{
	if (o)
		*o = (agr_supplier_options)AGR_SUPPLIER_OPTIONS_INIT;
}

/* A supplier with checked settings; `st->cpus` is copied. */
static int supplier_new(const char *name, int parallelism,
			const struct agr__worker_settings *st,
			agr_supplier **out)
{
	struct agr_supplier *sup;
	int resolved, ret;

	resolved = agr__setting_count(AGR__SETTING_SCHEDULER_POOL_SIZE,
				      parallelism, agr__online_cpus());
	if (resolved < 0)
		return resolved;
	sup = calloc(1, sizeof(*sup));
	if (!sup)
		return -ENOMEM;
	sup->name = strdup(name);
	sup->settings = *st;
	if (st->ncpus > 0) {
		sup->cpus_copy = malloc((size_t)st->ncpus * sizeof(int));
		if (sup->cpus_copy)
			memcpy(sup->cpus_copy, st->cpus,
			       (size_t)st->ncpus * sizeof(int));
		sup->settings.cpus = sup->cpus_copy;
	}
	if (!sup->name || (st->ncpus > 0 && !sup->cpus_copy)) {
		free(sup->cpus_copy);
		free(sup->name);
		free(sup);
		return -ENOMEM;
	}
	if (st->watchdog_ns && (ret = agr__watchdog_retain(st->watchdog_ns))) {
		agr__log(AGR_LOG_ERROR, "supplier %s: cannot start its "
			 "watchdog: %s", name, strerror(-ret));
		free(sup->cpus_copy);
		free(sup->name);
		free(sup);
		return ret;
	}
	sup->parallelism = resolved;
	pthread_mutex_init(&sup->lock, NULL);
	agr__handle_claim(&sup->magic, AGR__H_SUPPLIER);
	*out = sup;
	return 0;
}

AGR_API int agr_supplier_new(const char *name, int parallelism,
			     agr_supplier **out)
{
	if (!name || !*name || !out || parallelism < 0) {
		agr__log(AGR_LOG_ERROR, "agr_supplier_new(%s): %s; -EINVAL",
			 name ? name : "NULL",
			 !name || !*name ? "the name is NULL or empty" :
			 !out		 ? "out is NULL" :
					   "the parallelism is negative");
		return -EINVAL;
	}
	return supplier_new(name, parallelism, &agr__worker_defaults, out);
}

AGR_API int agr_supplier_new_opts(const char *name,
				  const agr_supplier_options *opts,
				  agr_supplier **out)
{
	struct agr__worker_settings st;
	int parallelism, ret;

	if (!name || !*name || !out || !opts) {
		agr__log(AGR_LOG_ERROR, "agr_supplier_new_opts: %s is %s",
			 !name || !*name ? "the name" : !out ? "out" : "opts",
			 !name ? "NULL" : !*name ? "empty" : "NULL");
		return -EINVAL;
	}
	ret = agr__supplier_settings(name, opts, &st, &parallelism);
	if (ret)
		return ret;
	return supplier_new(name, parallelism, &st, out);
}

AGR_API int agr_supplier_borrow(agr_supplier *owner, agr_supplier **out)
{
	struct agr_supplier *view;

	if (!owner || !out)
		return -EINVAL;
	while (owner->owner)
		owner = owner->owner; /* a view of a view is a view */
	view = calloc(1, sizeof(*view));
	if (!view)
		return -ENOMEM;
	view->owner = owner;
	view->name = owner->name;
	view->parallelism = owner->parallelism;
	agr__handle_claim(&view->magic, AGR__H_SUPPLIER);
	*out = view;
	return 0;
}

AGR_API const char *agr_supplier_name(const agr_supplier *sup)
{
	return sup ? sup->name : NULL;
}

AGR_API int agr_supplier_parallelism(const agr_supplier *sup)
{
	return sup ? sup->parallelism : -EINVAL;
}

AGR_API bool agr_supplier_is_borrowed(const agr_supplier *sup)
{
	return sup && sup->owner;
}

static struct entry *find(struct agr_supplier *sup,
			  const agr_named_aggregate *named)
{
	struct entry *e;

	for (e = sup->entries; e; e = e->next)
		if (!strcmp(e->aggregate_name, named->aggregate_name) &&
		    !strcmp(e->context_name, named->context_name))
			return e;
	return NULL;
}

static int create(struct agr_supplier *sup, const agr_named_aggregate *named,
		  struct entry **out)
{
	struct entry *e = calloc(1, sizeof(*e));
	int ret = -ENOMEM;

	if (!e)
		return -ENOMEM;
	e->context_name = strdup(named->context_name);
	e->aggregate_name = strdup(named->aggregate_name);
	if (e->context_name && e->aggregate_name)
		ret = agr__scheduler_new(sup->name, named->aggregate_name,
					 sup->parallelism, &sup->settings,
					 &e->sched);
	if (ret) {
		free(e->context_name);
		free(e->aggregate_name);
		free(e);
		return ret;
	}
	e->next = sup->entries;
	sup->entries = e;
	sup->size++;
	*out = e;
	return 0;
}

/* What is wrong with a named aggregate, or NULL when nothing is. */
static const char *invalid_named(const agr_named_aggregate *named)
{
	if (!named)
		return "the named aggregate is NULL";
	if (!named->context_name || !*named->context_name)
		return "its context_name is NULL or empty";
	if (!named->aggregate_name || !*named->aggregate_name)
		return "its aggregate_name is NULL or empty";
	return NULL;
}

AGR_API int agr_supplier_get_or_init(agr_supplier *sup,
				     const agr_named_aggregate *named,
				     agr_scheduler **out)
{
	const char *why = invalid_named(named);
	struct entry *e;
	int ret = 0;

	if (!sup || !out || why) {
		agr__log(AGR_LOG_ERROR, "agr_supplier_get_or_init: %s; -EINVAL",
			 !sup ? "the supplier is NULL" :
			 !out ? "out is NULL" :
				why);
		return -EINVAL;
	}
	if (sup->owner)
		return agr_supplier_get_or_init(sup->owner, named, out);
	/*
	 * Creation happens under the lock: a first lookup is rare, and it
	 * makes "one scheduler per key" and "none escapes the stop" plain.
	 */
	pthread_mutex_lock(&sup->lock);
	if (sup->stopping) {
		ret = -ESHUTDOWN;
	} else {
		e = find(sup, named);
		if (!e)
			ret = create(sup, named, &e);
		if (!ret)
			*out = e->sched;
	}
	pthread_mutex_unlock(&sup->lock);
	if (ret == -ESHUTDOWN)
		agr__log(AGR_LOG_DEBUG,
			 "Aggregate scheduler supplier[%s] has stopped.",
			 sup->name);
	return ret;
}

AGR_API int agr_supplier_size(agr_supplier *sup)
{
	int n;

	if (!sup)
		return -EINVAL;
	if (sup->owner)
		return agr_supplier_size(sup->owner);
	pthread_mutex_lock(&sup->lock);
	n = sup->size;
	pthread_mutex_unlock(&sup->lock);
	return n;
}

/* Closes creation (once) and disposes every cached scheduler. */
static void dispose_all(struct agr_supplier *sup, bool immediate)
{
	struct entry *e;

	pthread_mutex_lock(&sup->lock);
	sup->stopping = true;
	for (e = sup->entries; e; e = e->next)
		agr__scheduler_dispose(e->sched, immediate);
	pthread_mutex_unlock(&sup->lock);
}

AGR_API int agr_supplier_stop_gracefully(agr_supplier *sup,
					 uint64_t timeout_ns)
{
	uint64_t deadline = agr__deadline_after(timeout_ns);
	struct entry *e;
	int ret;

	if (!sup)
		return -EINVAL;
	if (sup->owner)
		return 0;
	/* A repeated graceful dispose is a no-op; force is never undone. */
	dispose_all(sup, false);
	for (e = sup->entries; e; e = e->next) {
		ret = agr__scheduler_await(e->sched, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

AGR_API int agr_supplier_force_stop(agr_supplier *sup)
{
	if (!sup)
		return -EINVAL;
	if (!sup->owner)
		dispose_all(sup, true);
	return 0;
}

AGR_API void agr_supplier_free(agr_supplier *sup)
{
	struct entry *e;

	if (!sup)
		return;
	if (!agr__handle_retire(&sup->magic, AGR__H_SUPPLIER, __func__, sup))
		return;
	if (sup->owner) {
		free(sup);
		return;
	}
	dispose_all(sup, true);
	while ((e = sup->entries) != NULL) {
		sup->entries = e->next;
		agr__scheduler_free(e->sched);
		free(e->context_name);
		free(e->aggregate_name);
		free(e);
	}
	pthread_mutex_destroy(&sup->lock);
	if (sup->settings.watchdog_ns)
		agr__watchdog_release();
	free(sup->cpus_copy);
	free(sup->name);
	free(sup);
}
