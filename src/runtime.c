/* SPDX-License-Identifier: MIT */
/*
 * runtime.c - components in registration order, admission leases and
 * the report of a runtime (the reference's WowRuntime); its startup and
 * graceful stop under one global deadline are in runtime_sequence.c.
 *
 * Leases. Each component has a lease slot: one atomic word holding the
 * number of leases and two flags. CLOSED refuses new leases; WATCH
 * asks the release that empties the slot to take the runtime's lock
 * and say so. A release is a compare-and-swap while nobody watches or
 * more leases remain, so the hot path takes no lock; and because WATCH
 * lives in the same word, setting it makes a concurrent unwatched
 * release retry and see it: an emptied slot is never missed. A release
 * that empties a watched slot touches the runtime only under its lock,
 * which is what lets agr_runtime_free() wait for the last one safely.
 */
#include "dispatcher.h"
#include "handle.h"
#include "runtime.h"
#include "util.h"
#include "versioned.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/composite.h>
#include <aggring/runtime.h>
#include <aggring/worker.h>

/* ---- leases ---- */

static void slot_init(struct slot *s, struct agr_runtime *rt)
{
	atomic_init(&s->word, 0);
	s->rt = rt;
}

static void report_unbalanced(void)
{
	agr__log(AGR_LOG_ERROR,
		 "runtime: a lease was released that was never acquired (a "
		 "dispatcher registered after messages were sent to it?); "
		 "ignored");
}

/* The release that may empty a watched slot: under the lock. */
static void release_watched(struct slot *s)
{
	struct agr_runtime *rt = s->rt;
	uint_fast64_t old;

	pthread_mutex_lock(&rt->lock);
	old = atomic_load(&s->word);
	if (old < LEASE_ONE) {
		report_unbalanced();
	} else {
		old = atomic_fetch_sub(&s->word, LEASE_ONE);
		if (old < 2 * LEASE_ONE) {
			rt->zero_events++;
			pthread_cond_broadcast(&rt->cond);
		}
	}
	pthread_mutex_unlock(&rt->lock);
}

static void lease_release(void *arg)
{
	struct slot *s = arg;
	uint_fast64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);

	for (;;) {
		if (agr__unlikely(w < LEASE_ONE)) {
			report_unbalanced();
			return;
		}
		if (agr__unlikely((w & LEASE_WATCH) && w < 2 * LEASE_ONE)) {
			release_watched(s);
			return;
		}
		if (atomic_compare_exchange_weak_explicit(
			    &s->word, &w, w - LEASE_ONE, memory_order_release,
			    memory_order_relaxed))
			return;
	}
}

/*
 * One atomic add; the flag it returns says whether admission was
 * already closed, so a lease and the close are ordered in the word.
 */
static bool lease_acquire(void *arg)
{
	struct slot *s = arg;
	uint_fast64_t old = atomic_fetch_add_explicit(&s->word, LEASE_ONE,
						      memory_order_relaxed);

	if (agr__likely(!(old & LEASE_CLOSED)))
		return true;
	lease_release(s);
	return false;
}

void agr__runtime_set_lease_flags_locked(struct agr_runtime *rt,
					  uint_fast64_t flags)
{
	size_t i;

	atomic_fetch_or(&rt->user.word, flags);
	for (i = 0; i < rt->ncomps; i++)
		atomic_fetch_or(&rt->comps[i]->slot.word, flags);
}

uint64_t agr__runtime_active_locked(struct agr_runtime *rt, size_t ncomps)
{
	uint64_t n = slot_count(&rt->user);
	size_t i;

	for (i = 0; i < ncomps; i++)
		n += slot_count(&rt->comps[i]->slot);
	return n;
}

/* ---- creation and registration ---- */

AGR_API void agr_runtime_options_init(agr_runtime_options *o)
{
	if (!o)
		return;
	*o = (agr_runtime_options)AGR_RUNTIME_OPTIONS_INIT;
}

static const struct agr__layout options_layout =
	AGR__LAYOUT(agr_runtime_options, AGR_RUNTIME_OPTIONS_INIT);
static const struct agr__layout ops_layout =
	AGR__LAYOUT(agr_component_ops, AGR_COMPONENT_OPS_INIT);

AGR_API int agr_runtime_new(const agr_runtime_options *options,
			    agr_runtime **out)
{
	struct agr_runtime *rt;
	agr_runtime_options o = AGR_RUNTIME_OPTIONS_INIT;
	int ret;

	if (!out) {
		agr__log(AGR_LOG_ERROR, "agr_runtime_new: out is NULL; -EINVAL");
		return -EINVAL;
	}
	if (options && (ret = agr__read_versioned(&o, options, &options_layout,
						  "agr_runtime_new")))
		return ret;
	if (o.shutdown_timeout_ns == 0 ||
	    o.quiet_period_ns >= o.shutdown_timeout_ns) {
		agr__log(AGR_LOG_ERROR,
			 "agr_runtime_new: %s; -EINVAL",
			 o.shutdown_timeout_ns == 0 ?
				 "shutdown_timeout_ns is 0" :
				 "quiet_period_ns is not below "
				 "shutdown_timeout_ns");
		return -EINVAL;
	}
	if (posix_memalign((void **)&rt, AGR__CACHELINE, sizeof(*rt)) != 0)
		return -ENOMEM;
	memset(rt, 0, sizeof(*rt));
	slot_init(&rt->user, rt);
	rt->timeout_ns = o.shutdown_timeout_ns;
	rt->quiet_ns = o.quiet_period_ns;
	rt->state = AGR_RUNTIME_RUNNING;
	pthread_mutex_init(&rt->lock, NULL);
	agr__cond_init_monotonic(&rt->cond);
	agr__handle_claim(&rt->magic, AGR__H_RUNTIME);
	*out = rt;
	return 0;
}

/*
 * A registered dispatcher's or composite's steps, the one place that
 * names their calls. agr_component_ops wants a function per step, so
 * each of the four below hands its step to owned_step(); they are
 * called with the component itself (its step_arg), whose kind picks
 * the dispatcher's call or the composite's.
 */
enum owned_step { OWNED_QUIESCE, OWNED_STOP, OWNED_FORCE, OWNED_START };

static int owned_step(const struct component *c, enum owned_step step,
		      uint64_t deadline)
{
	bool disp = c->kind == AGR_COMPONENT_DISPATCHER;

	switch (step) {
	case OWNED_QUIESCE:
		return disp ? agr_dispatcher_quiesce(c->self)
			    : agr_composite_quiesce(c->self);
	case OWNED_STOP:
		return disp ? agr_dispatcher_stop_gracefully(
				      c->self, agr__time_left(deadline))
			    : agr_composite_stop_gracefully(
				      c->self, agr__time_left(deadline));
	case OWNED_FORCE:
		return disp ? agr_dispatcher_force_stop(c->self)
			    : agr_composite_force_stop(c->self);
	case OWNED_START:
		return disp ? agr_dispatcher_start(c->self)
			    : agr_composite_start(c->self);
	}
	return -EINVAL;
}

static int owned_quiesce(void *c)
{
	return owned_step(c, OWNED_QUIESCE, 0);
}

static int owned_stop(void *c, uint64_t deadline)
{
	return owned_step(c, OWNED_STOP, deadline);
}

static int owned_force(void *c)
{
	return owned_step(c, OWNED_FORCE, 0);
}

static int owned_start(void *c)
{
	return owned_step(c, OWNED_START, 0);
}

/* A new dispatcher or composite already admits and parks: no prepare. */
static const agr_component_ops owned_ops = {
	.quiesce = owned_quiesce,
	.stop_gracefully = owned_stop,
	.force_stop = owned_force,
	.start = owned_start,
};

static struct component *new_component(struct agr_runtime *rt,
				       const char *name,
				       agr_component_kind kind,
				       const agr_component_ops *ops,
				       void *self)
{
	struct component *c;

	if (posix_memalign((void **)&c, AGR__CACHELINE, sizeof(*c)) != 0)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->name = strdup(name ? name : "");
	if (!c->name) {
		free(c);
		return NULL;
	}
	slot_init(&c->slot, rt);
	c->kind = kind;
	c->ops = *ops;
	c->self = self;
	c->step_arg = kind == AGR_COMPONENT_USER ? self : c;
	return c;
}

void agr__runtime_free_component(struct component *c)
{
	if (!c)
		return;
	free(c->name);
	free(c);
}

static bool is_registered_locked(struct agr_runtime *rt, const void *obj)
{
	struct component *c;
	size_t i;

	for (i = 0; i < rt->ncomps; i++) {
		c = rt->comps[i];
		if (c->self == obj)
			return true;
		if (c->kind == AGR_COMPONENT_COMPOSITE &&
		    (agr_composite_event_stream(c->self) == obj ||
		     agr_composite_state_event(c->self) == obj))
			return true;
	}
	return false;
}

static int open_for_registration_locked(struct agr_runtime *rt)
{
	if (rt->began || rt->forcing)
		return -ESHUTDOWN;
	return rt->start_called ? -EBUSY : 0;
}

static int append_locked(struct agr_runtime *rt, struct component *c)
{
	struct component **grown;
	size_t cap;

	if (rt->ncomps == rt->cap) {
		cap = rt->cap ? 2 * rt->cap : 8;
		grown = realloc(rt->comps, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		rt->comps = grown;
		rt->cap = cap;
	}
	rt->comps[rt->ncomps++] = c;
	return 0;
}

static int install_lease(agr_dispatcher *d, struct component *c)
{
	const struct agr__lease_ops ops = {
		.acquire = lease_acquire,
		.release = lease_release,
		.arg = &c->slot,
	};

	return agr__dispatcher_set_lease(d, &ops);
}

static void uninstall_leases(agr_dispatcher **ds, int n)
{
	while (n-- > 0)
		agr__dispatcher_set_lease(ds[n], NULL);
}

/* Installs the slot's hooks on each of `ds`; all or none. */
static int install_leases(agr_dispatcher **ds, int n, struct component *c)
{
	int i, ret;

	for (i = 0; i < n; i++) {
		ret = install_lease(ds[i], c);
		if (ret) {
			uninstall_leases(ds, i);
			return ret;
		}
	}
	return 0;
}

/*
 * Registers a dispatcher or composite whose message-taking dispatchers
 * are ds[0..n).
 */
static int add_leased(struct agr_runtime *rt, struct component *c,
		      agr_dispatcher **ds, int n)
{
	int ret;

	pthread_mutex_lock(&rt->lock);
	ret = open_for_registration_locked(rt);
	if (!ret && is_registered_locked(rt, c->self))
		ret = -EEXIST;
	if (!ret)
		ret = install_leases(ds, n, c);
	if (!ret) {
		ret = append_locked(rt, c);
		if (ret)
			uninstall_leases(ds, n);
	}
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

AGR_API int agr_runtime_add_dispatcher(agr_runtime *rt, agr_dispatcher *d)
{
	struct component *c;
	int ret;

	if (!rt || !d)
		return -EINVAL;
	c = new_component(rt, agr_dispatcher_name(d), AGR_COMPONENT_DISPATCHER,
			  &owned_ops, d);
	if (!c)
		return -ENOMEM;
	ret = add_leased(rt, c, &d, 1);
	if (ret)
		agr__runtime_free_component(c);
	return ret;
}

AGR_API int agr_runtime_add_composite(agr_runtime *rt, agr_composite *comp)
{
	agr_dispatcher *ds[2];
	struct component *c;
	int ret;

	if (!rt || !comp)
		return -EINVAL;
	ds[0] = agr_composite_event_stream(comp);
	ds[1] = agr_composite_state_event(comp);
	c = new_component(rt, agr_composite_name(comp),
			  AGR_COMPONENT_COMPOSITE, &owned_ops, comp);
	if (!c)
		return -ENOMEM;
	ret = add_leased(rt, c, ds, 2);
	if (ret)
		agr__runtime_free_component(c);
	return ret;
}

AGR_API int agr_runtime_add_component(agr_runtime *rt, const char *name,
				      const agr_component_ops *ops,
				      void *self)
{
	agr_component_ops local = AGR_COMPONENT_OPS_INIT;
	struct component *c;
	int ret;

	if (!rt || !name || !*name || !ops)
		return -EINVAL;
	ret = agr__read_versioned(&local, ops, &ops_layout,
				  "agr_runtime_add_component");
	if (ret)
		return ret;
	c = new_component(rt, name, AGR_COMPONENT_USER, &local, self);
	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&rt->lock);
	ret = open_for_registration_locked(rt);
	if (!ret)
		ret = append_locked(rt, c);
	pthread_mutex_unlock(&rt->lock);
	if (ret)
		agr__runtime_free_component(c);
	return ret;
}

AGR_API int agr_runtime_lease_acquire(agr_runtime *rt)
{
	if (!rt)
		return -EINVAL;
	return lease_acquire(&rt->user) ? 0 : -ESHUTDOWN;
}

AGR_API void agr_runtime_lease_release(agr_runtime *rt)
{
	if (rt)
		lease_release(&rt->user);
}

AGR_API uint64_t agr_runtime_active(agr_runtime *rt)
{
	uint64_t n;

	if (!rt)
		return 0;
	pthread_mutex_lock(&rt->lock);
	n = agr__runtime_active_locked(rt, rt->ncomps);
	pthread_mutex_unlock(&rt->lock);
	return n;
}

AGR_API agr_runtime_state agr_runtime_state_get(agr_runtime *rt)
{
	agr_runtime_state s;

	if (!rt)
		return AGR_RUNTIME_STOPPED;
	pthread_mutex_lock(&rt->lock);
	s = rt->state;
	pthread_mutex_unlock(&rt->lock);
	return s;
}

AGR_API uint64_t agr_runtime_now_ns(void)
{
	return agr__now_ns();
}

/* ---- the report ---- */

static void add_stats(agr_component_report *r, agr_dispatcher *d)
{
	agr_dispatcher_stats st;

	if (agr_dispatcher_stats_get(d, &st) != 0)
		return;
	r->handled += st.handled + st.failed + st.skipped + st.interrupted;
	r->failed += st.failed;
	r->discarded += st.discarded;
	r->interrupted += st.interrupted;
}

static void fill_component_locked(struct component *c,
				  agr_component_report *r)
{
	memset(r, 0, sizeof(*r));
	r->name = c->name;
	r->kind = c->kind;
	if (c->kind == AGR_COMPONENT_DISPATCHER) {
		add_stats(r, c->self);
	} else if (c->kind == AGR_COMPONENT_COMPOSITE) {
		add_stats(r, agr_composite_event_stream(c->self));
		add_stats(r, agr_composite_state_event(c->self));
	}
	r->in_flight = slot_count(&c->slot);
	r->in_flight_at_deadline = c->in_flight_at_deadline;
	r->quiesce_ns = c->quiesce_ns;
	r->stop_ns = c->stop_ns;
	r->force_ns = c->force_ns;
	r->quiesce_result = c->quiesce_result;
	r->stop_result = c->stop_result;
	r->force_result = c->force_result;
	r->quiesce_ran = c->quiesce_ran;
	r->stop_ran = c->stop_ran;
	r->force_ran = c->force_ran;
	r->prepare_result = c->prepare_result;
	r->start_result = c->start_result;
	r->prepare_ran = c->prepare_ran;
	r->start_ran = c->start_ran;
	r->force_calls = c->force_calls;
}

static uint64_t span(uint64_t from, uint64_t to)
{
	return from && to > from ? to - from : 0;
}

AGR_API int agr_runtime_report_get(agr_runtime *rt, agr_runtime_report *out,
				   agr_component_report *components,
				   size_t cap)
{
	size_t i;

	if (!rt || !out || (cap && !components))
		return -EINVAL;
	pthread_mutex_lock(&rt->lock);
	if (!rt->finished) {
		pthread_mutex_unlock(&rt->lock);
		return -EBUSY;
	}
	memset(out, 0, sizeof(*out));
	out->result = rt->result;
	out->deadline_passed = rt->deadline_passed;
	out->forced = rt->forcing;
	out->quiet_ns = span(rt->began_ns, rt->closed_ns);
	out->drain_ns = span(rt->quiesced_ns, rt->drained_ns);
	out->total_ns = span(rt->began_ns, rt->finished_ns);
	out->ncomponents = rt->ncomps;
	out->startup_result = rt->startup_result;
	out->cleanup_result = rt->cleanup_result;
	out->nsuppressed = rt->nsuppressed;
	for (i = 0; i < rt->nsuppressed && i < AGR_RUNTIME_MAX_SUPPRESSED; i++)
		out->suppressed[i] = rt->suppressed[i];
	for (i = 0; i < cap && i < rt->ncomps; i++)
		fill_component_locked(rt->comps[i], &components[i]);
	pthread_mutex_unlock(&rt->lock);
	return 0;
}
