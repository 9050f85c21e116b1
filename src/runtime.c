/* SPDX-License-Identifier: MIT */
/*
 * runtime.c - components in registration order, admission leases, and
 * the graceful stop under one global deadline (the reference's Runtime
 * Lifecycle).
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
 *
 * The stop runs on a thread of its own, so that a component's blocking
 * stop cannot hold agr_runtime_stop() past the deadline. Callers wait
 * on the condition variable until the result is published, or until
 * the deadline, when the first to notice force-stops everything. One
 * flag, `forcing`, claims that terminal force, so it happens once,
 * whoever gets there first: the deadline, a failure, or
 * agr_runtime_force_stop().
 */
#include "dispatcher.h"
#include "handle.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/composite.h>
#include <aggring/runtime.h>
#include <aggring/worker.h>

#define LEASE_WATCH ((uint_fast64_t)1)
#define LEASE_CLOSED ((uint_fast64_t)2)
#define LEASE_SHIFT 2
#define LEASE_ONE ((uint_fast64_t)1 << LEASE_SHIFT)

struct slot {
	AGR__ALIGNED_CACHELINE atomic_uint_fast64_t word;
	struct agr_runtime *rt;
};

struct component {
	struct slot slot; /* first, for its alignment */
	char *name;
	agr_component_kind kind;
	agr_component_ops ops;
	void *self; /* the dispatcher, the composite, or the user's */

	/* The report; guarded by the runtime's lock. */
	uint64_t in_flight_at_deadline;
	uint64_t quiesce_ns, stop_ns, force_ns;
	int quiesce_result, stop_result, force_result;
	bool quiesce_ran, stop_ran, force_ran;
};

struct agr_runtime {
	struct slot user; /* agr_runtime_lease_acquire() */
	uint64_t timeout_ns;
	uint64_t quiet_ns;

	/*
	 * `cond` signals any progress of the stop and every watched slot
	 * that empties. The component list never changes once the stop
	 * has begun or been forced.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct component **comps;
	size_t ncomps, cap;
	agr_runtime_state state;
	bool began;	   /* agr_runtime_stop() started the sequence */
	bool thread_started;
	bool abandoned;	   /* the stop thread calls no more components */
	bool forcing;	   /* the terminal force is claimed */
	bool finished;	   /* `result` is final */
	bool deadline_passed;
	pthread_t thread;
	uint64_t zero_events; /* watched slots emptied */
	uint64_t began_ns, deadline_ns;
	uint64_t closed_ns, quiesced_ns, drained_ns, finished_ns;
	int first_error;
	int result;
	agr__magic magic; /* handle.h */
};

static uint64_t time_left(uint64_t deadline)
{
	uint64_t now = agr__now_ns();

	return deadline > now ? deadline - now : 0;
}

static void keep_first(int *first, int ret)
{
	if (ret < 0 && *first == 0)
		*first = ret;
}

/* ---- leases ---- */

static void slot_init(struct slot *s, struct agr_runtime *rt)
{
	atomic_init(&s->word, 0);
	s->rt = rt;
}

static uint64_t slot_count(struct slot *s)
{
	return atomic_load_explicit(&s->word, memory_order_acquire) >>
	       LEASE_SHIFT;
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

static void set_lease_flags_locked(struct agr_runtime *rt,
				   uint_fast64_t flags)
{
	size_t i;

	atomic_fetch_or(&rt->user.word, flags);
	for (i = 0; i < rt->ncomps; i++)
		atomic_fetch_or(&rt->comps[i]->slot.word, flags);
}

static uint64_t active_locked(struct agr_runtime *rt)
{
	uint64_t n = slot_count(&rt->user);
	size_t i;

	for (i = 0; i < rt->ncomps; i++)
		n += slot_count(&rt->comps[i]->slot);
	return n;
}

/* ---- creation and registration ---- */

AGR_API void agr_runtime_options_init(agr_runtime_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->shutdown_timeout_ns = AGR_RUNTIME_DEFAULT_TIMEOUT_NS;
	o->quiet_period_ns = AGR_RUNTIME_DEFAULT_QUIET_NS;
}

AGR_API int agr_runtime_new(const agr_runtime_options *options,
			    agr_runtime **out)
{
	struct agr_runtime *rt;
	agr_runtime_options o;

	if (!out) {
		agr__log(AGR_LOG_ERROR, "agr_runtime_new: out is NULL; -EINVAL");
		return -EINVAL;
	}
	agr_runtime_options_init(&o);
	if (options)
		o = *options;
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

static int dispatcher_quiesce(void *self)
{
	return agr_dispatcher_quiesce(self);
}

static int dispatcher_stop(void *self, uint64_t deadline)
{
	return agr_dispatcher_stop_gracefully(self, time_left(deadline));
}

static int dispatcher_force(void *self)
{
	return agr_dispatcher_force_stop(self);
}

static const agr_component_ops dispatcher_ops = {
	.quiesce = dispatcher_quiesce,
	.stop_gracefully = dispatcher_stop,
	.force_stop = dispatcher_force,
};

static int composite_quiesce(void *self)
{
	return agr_composite_quiesce(self);
}

static int composite_stop(void *self, uint64_t deadline)
{
	return agr_composite_stop_gracefully(self, time_left(deadline));
}

static int composite_force(void *self)
{
	return agr_composite_force_stop(self);
}

static const agr_component_ops composite_ops = {
	.quiesce = composite_quiesce,
	.stop_gracefully = composite_stop,
	.force_stop = composite_force,
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
	return c;
}

static void free_component(struct component *c)
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
	return rt->began || rt->forcing ? -ESHUTDOWN : 0;
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
			  &dispatcher_ops, d);
	if (!c)
		return -ENOMEM;
	ret = add_leased(rt, c, &d, 1);
	if (ret)
		free_component(c);
	return ret;
}

AGR_API int agr_runtime_add_composite(agr_runtime *rt, agr_composite *comp)
{
	agr_dispatcher *ds[2];
	struct component *c;
	int ret;

	if (!rt || !comp)
		return -EINVAL;
	ds[0] = agr_composite_state_event(comp);
	ds[1] = agr_composite_event_stream(comp);
	c = new_component(rt, agr_composite_name(comp),
			  AGR_COMPONENT_COMPOSITE, &composite_ops, comp);
	if (!c)
		return -ENOMEM;
	ret = add_leased(rt, c, ds, 2);
	if (ret)
		free_component(c);
	return ret;
}

AGR_API int agr_runtime_add_component(agr_runtime *rt, const char *name,
				      const agr_component_ops *ops,
				      void *self)
{
	struct component *c;
	int ret;

	if (!rt || !name || !*name || !ops)
		return -EINVAL;
	c = new_component(rt, name, AGR_COMPONENT_USER, ops, self);
	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&rt->lock);
	ret = open_for_registration_locked(rt);
	if (!ret)
		ret = append_locked(rt, c);
	pthread_mutex_unlock(&rt->lock);
	if (ret)
		free_component(c);
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
	n = active_locked(rt);
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

/* ---- recording (under the lock) ---- */

static void set_state_locked(struct agr_runtime *rt, agr_runtime_state s)
{
	rt->state = s;
	pthread_cond_broadcast(&rt->cond);
}

/* A component's step failed: logged, and the stop's result unless
 * an earlier failure or the terminal force came first. */
static void note_failure_locked(struct agr_runtime *rt,
				const struct component *c, const char *step,
				int ret)
{
	if (ret >= 0)
		return;
	/* The number: a component of the user's may return any errno. */
	agr__log(AGR_LOG_ERROR, "runtime: %s of \"%s\" failed (error %d)",
		 step, c->name, ret);
	if (!rt->forcing && rt->first_error == 0)
		rt->first_error = ret;
}

static void note_deadline_locked(struct agr_runtime *rt)
{
	uint64_t in_flight = 0;
	size_t i;

	rt->deadline_passed = true;
	for (i = 0; i < rt->ncomps; i++) {
		struct component *c = rt->comps[i];

		c->in_flight_at_deadline = slot_count(&c->slot);
		in_flight += c->in_flight_at_deadline;
	}
	agr__log(AGR_LOG_WARN,
		 "runtime: the shutdown deadline passed with %llu message(s) "
		 "in flight; force-stopping %zu component(s)",
		 (unsigned long long)in_flight, rt->ncomps);
}

static void publish_locked(struct agr_runtime *rt, int result)
{
	rt->result = result;
	rt->finished = true;
	rt->finished_ns = agr__now_ns();
	set_state_locked(rt, AGR_RUNTIME_STOPPED);
}

/* ---- the terminal force ---- */

static int force_one(struct agr_runtime *rt, struct component *c)
{
	uint64_t t0 = agr__now_ns();
	int ret = c->ops.force_stop ? c->ops.force_stop(c->self) : 0;

	pthread_mutex_lock(&rt->lock);
	c->force_ran = true;
	c->force_ns = agr__now_ns() - t0;
	c->force_result = ret;
	if (ret < 0)
		agr__log(AGR_LOG_ERROR,
			 "runtime: force stop of \"%s\" failed (error %d)",
			 c->name, ret);
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

/*
 * Closes admission, abandons the graceful sequence, force-stops every
 * component in reverse order and publishes the result: the first
 * failure, else `cause` (-ETIMEDOUT for the deadline, -ECANCELED for
 * agr_runtime_force_stop()). Only the first caller acts; it returns the
 * first force_stop error, the others 0.
 */
static int force_and_finish(struct agr_runtime *rt, int cause)
{
	int result, first = 0;
	size_t n;

	pthread_mutex_lock(&rt->lock);
	if (rt->forcing || rt->finished) {
		pthread_mutex_unlock(&rt->lock);
		return 0;
	}
	rt->forcing = true;
	rt->abandoned = true;
	if (!rt->began_ns)
		rt->began_ns = agr__now_ns();
	if (cause == -ETIMEDOUT)
		note_deadline_locked(rt);
	result = rt->first_error ? rt->first_error : cause;
	set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
	pthread_cond_broadcast(&rt->cond); /* out of the stop's waits */
	n = rt->ncomps;
	pthread_mutex_unlock(&rt->lock);

	while (n-- > 0)
		keep_first(&first, force_one(rt, rt->comps[n]));

	pthread_mutex_lock(&rt->lock);
	publish_locked(rt, result);
	pthread_mutex_unlock(&rt->lock);
	return first;
}

/* ---- the stop thread ---- */

/*
 * One wait on the condition variable, no later than `until` nor the
 * deadline. Returns 0, -ECANCELED once abandoned, -ETIMEDOUT once the
 * deadline has passed.
 */
static int wait_step_locked(struct agr_runtime *rt, uint64_t until)
{
	struct timespec ts;

	if (rt->abandoned)
		return -ECANCELED;
	if (agr__now_ns() >= rt->deadline_ns)
		return -ETIMEDOUT;
	ts = agr__timespec_of(until < rt->deadline_ns ? until
						       : rt->deadline_ns);
	pthread_cond_timedwait(&rt->cond, &rt->lock, &ts);
	if (rt->abandoned)
		return -ECANCELED;
	return agr__now_ns() >= rt->deadline_ns ? -ETIMEDOUT : 0;
}

static int wait_no_lease_locked(struct agr_runtime *rt)
{
	int ret;

	while (active_locked(rt) > 0) {
		ret = wait_step_locked(rt, UINT64_MAX);
		if (ret)
			return ret;
	}
	return rt->abandoned ? -ECANCELED : 0;
}

/*
 * Waits out the quiet period; *quiet says whether it passed with no
 * lease taken. Any lease taken and released meanwhile emptied a
 * watched slot and so counted a zero event.
 */
static int wait_quiet_period_locked(struct agr_runtime *rt, bool *quiet)
{
	uint64_t events = rt->zero_events;
	uint64_t end = agr__deadline_after(rt->quiet_ns);
	int ret;

	while (agr__now_ns() < end) {
		ret = wait_step_locked(rt, end);
		if (ret)
			return ret;
	}
	*quiet = active_locked(rt) == 0 && rt->zero_events == events;
	return 0;
}

/* Step 1: leases still granted until a quiet period passes idle. */
static int quiet_boundary(struct agr_runtime *rt)
{
	bool quiet = false;
	int ret;

	pthread_mutex_lock(&rt->lock);
	do {
		ret = wait_no_lease_locked(rt);
		if (!ret)
			ret = wait_quiet_period_locked(rt, &quiet);
	} while (!ret && !quiet);
	if (!ret) {
		set_lease_flags_locked(rt, LEASE_CLOSED);
		rt->closed_ns = agr__now_ns();
		set_state_locked(rt, AGR_RUNTIME_DRAINING);
	}
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

/*
 * Claims the next step of component c for the stop thread: refused
 * (-ECANCELED) once abandoned, so that after the terminal force began
 * no component sees a further graceful step. *result reads
 * -EINPROGRESS in the report until the step returns.
 */
static int claim_step(struct agr_runtime *rt, bool *ran, int *result)
{
	int ret;

	pthread_mutex_lock(&rt->lock);
	ret = rt->abandoned ? -ECANCELED : 0;
	if (!ret) {
		*ran = true;
		*result = -EINPROGRESS;
	}
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

static void record_step(struct agr_runtime *rt, struct component *c,
			const char *step, uint64_t t0, uint64_t *ns,
			int *result, int ret)
{
	pthread_mutex_lock(&rt->lock);
	*ns = agr__now_ns() - t0;
	*result = ret;
	note_failure_locked(rt, c, step, ret);
	pthread_mutex_unlock(&rt->lock);
}

/* Step 2a: quiesce in registration order. */
static int quiesce_all(struct agr_runtime *rt)
{
	struct component *c;
	uint64_t t0;
	size_t i;
	int ret;

	for (i = 0; i < rt->ncomps; i++) {
		c = rt->comps[i];
		ret = claim_step(rt, &c->quiesce_ran, &c->quiesce_result);
		if (ret)
			return ret;
		t0 = agr__now_ns();
		ret = c->ops.quiesce ? c->ops.quiesce(c->self) : 0;
		record_step(rt, c, "quiesce", t0, &c->quiesce_ns,
			    &c->quiesce_result, ret);
	}
	return 0;
}

/* Step 2b: wait until the quiesced components hold no lease. */
static int drain(struct agr_runtime *rt)
{
	int ret;

	pthread_mutex_lock(&rt->lock);
	rt->quiesced_ns = agr__now_ns();
	ret = wait_no_lease_locked(rt);
	if (!ret) {
		rt->drained_ns = agr__now_ns();
		set_state_locked(rt, AGR_RUNTIME_STOPPING);
	}
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

/* Step 3: stop gracefully, one at a time, in reverse order. */
static int stop_all(struct agr_runtime *rt)
{
	struct component *c;
	uint64_t t0;
	size_t i = rt->ncomps;
	int ret;

	while (i-- > 0) {
		c = rt->comps[i];
		if (agr__now_ns() >= rt->deadline_ns)
			return -ETIMEDOUT;
		ret = claim_step(rt, &c->stop_ran, &c->stop_result);
		if (ret)
			return ret;
		t0 = agr__now_ns();
		ret = c->ops.stop_gracefully
			      ? c->ops.stop_gracefully(c->self,
						       rt->deadline_ns)
			      : 0;
		record_step(rt, c, "graceful stop", t0, &c->stop_ns,
			    &c->stop_result, ret);
	}
	return 0;
}

/* The sequence went through: 0, or step 4 after a failure. */
static void finish_sequence(struct agr_runtime *rt)
{
	bool failed;

	pthread_mutex_lock(&rt->lock);
	failed = rt->first_error != 0;
	if (!failed && !rt->forcing && !rt->finished)
		publish_locked(rt, 0);
	pthread_mutex_unlock(&rt->lock);
	if (failed)
		force_and_finish(rt, 0);
}

static void *stop_thread(void *arg)
{
	struct agr_runtime *rt = arg;
	int ret = quiet_boundary(rt);

	if (!ret)
		ret = quiesce_all(rt);
	if (!ret)
		ret = drain(rt);
	if (!ret)
		ret = stop_all(rt);
	if (ret == -ETIMEDOUT)
		force_and_finish(rt, -ETIMEDOUT);
	else if (ret == 0)
		finish_sequence(rt);
	/* -ECANCELED: whoever abandoned the sequence finishes it. */
	return NULL;
}

/* With every signal blocked, so that they go to the application. */
static int spawn_stop_thread(struct agr_runtime *rt)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&rt->thread, NULL, stop_thread, rt);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	pthread_setname_np(rt->thread, "agr-stop");
	rt->thread_started = true;
	return 0;
}

/* Sets the deadline and starts the stop thread; its error, if any. */
static int begin_locked(struct agr_runtime *rt)
{
	int ret;

	rt->began = true;
	rt->began_ns = agr__now_ns();
	rt->deadline_ns = agr__deadline_after(rt->timeout_ns);
	set_lease_flags_locked(rt, LEASE_WATCH);
	set_state_locked(rt, AGR_RUNTIME_QUIET);
	ret = spawn_stop_thread(rt);
	if (ret) {
		agr__log(AGR_LOG_ERROR,
			 "runtime: cannot create the stop thread (error %d); "
			 "force-stopping instead", ret);
		rt->first_error = ret;
	}
	return ret;
}

/* Until the result is published; the first to see the deadline forces. */
static int await_result_locked(struct agr_runtime *rt)
{
	struct timespec ts = agr__timespec_of(rt->deadline_ns);

	while (!rt->finished) {
		if (rt->forcing) {
			pthread_cond_wait(&rt->cond, &rt->lock);
		} else if (agr__now_ns() >= rt->deadline_ns) {
			pthread_mutex_unlock(&rt->lock);
			force_and_finish(rt, -ETIMEDOUT);
			pthread_mutex_lock(&rt->lock);
		} else {
			pthread_cond_timedwait(&rt->cond, &rt->lock, &ts);
		}
	}
	return rt->result;
}

AGR_API int agr_runtime_stop(agr_runtime *rt)
{
	int ret = 0;

	if (!rt)
		return -EINVAL;
	if (agr_worker_current())
		return -EDEADLK;
	pthread_mutex_lock(&rt->lock);
	if (!rt->began && !rt->forcing)
		ret = begin_locked(rt);
	if (ret) {
		/* A rejected stop thread never runs the cleanup inline. */
		pthread_mutex_unlock(&rt->lock);
		force_and_finish(rt, 0);
		pthread_mutex_lock(&rt->lock);
	}
	ret = await_result_locked(rt);
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

AGR_API int agr_runtime_force_stop(agr_runtime *rt)
{
	if (!rt)
		return -EINVAL;
	return force_and_finish(rt, -ECANCELED);
}

/* ---- the report ---- */

static void add_stats(agr_component_report *r, agr_dispatcher *d)
{
	agr_dispatcher_stats st;

	if (agr_dispatcher_stats_get(d, &st) != 0)
		return;
	r->handled += st.handled + st.failed + st.skipped;
	r->failed += st.failed;
	r->discarded += st.discarded;
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
		add_stats(r, agr_composite_state_event(c->self));
		add_stats(r, agr_composite_event_stream(c->self));
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
	for (i = 0; i < cap && i < rt->ncomps; i++)
		fill_component_locked(rt->comps[i], &components[i]);
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

/* ---- teardown ---- */

/* Until no lease is held: the last release is then out of its lock. */
static void wait_no_lease_forever(struct agr_runtime *rt)
{
	pthread_mutex_lock(&rt->lock);
	set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
	while (active_locked(rt) > 0)
		pthread_cond_wait(&rt->cond, &rt->lock);
	pthread_mutex_unlock(&rt->lock);
}

AGR_API void agr_runtime_free(agr_runtime *rt)
{
	bool joinable;
	size_t i;

	if (!rt)
		return;
	if (!agr__handle_retire(&rt->magic, AGR__H_RUNTIME, __func__, rt))
		return;
	agr_runtime_force_stop(rt); /* a no-op once the stop has a result */
	pthread_mutex_lock(&rt->lock);
	joinable = rt->thread_started;
	pthread_mutex_unlock(&rt->lock);
	if (joinable)
		pthread_join(rt->thread, NULL);
	wait_no_lease_forever(rt);
	for (i = 0; i < rt->ncomps; i++)
		free_component(rt->comps[i]);
	free(rt->comps);
	pthread_cond_destroy(&rt->cond);
	pthread_mutex_destroy(&rt->lock);
	free(rt);
}
