/* SPDX-License-Identifier: MIT */
/*
 * runtime.c - components in registration order, admission leases, the
 * startup behind a readiness barrier, and the graceful stop under one
 * global deadline (the reference's WowRuntime).
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
 *
 * Startup runs on the caller of agr_runtime_start(). A failure, a stop
 * or a force during it makes the loop stop at the next step; the stop
 * thread, started by whoever began the stop, first waits for the loop
 * to leave the component it is in (under the deadline), and then runs
 * the same sequence over the components the startup entered.
 *
 * A component forced while one of its steps runs is forced once more
 * when that step returns (the reference's compensation): what the step
 * took after the first force is released too.
 */
#include "dispatcher.h"
#include "handle.h"
#include "util.h"
#include "versioned.h"

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
	void *step_arg; /* what ops get: self, or this for owned_ops */

	/* Guarded by the runtime's lock. */
	bool in_step;	       /* one of its steps is running */
	bool force_started;
	bool force_done;       /* the first force_stop returned */
	bool force_overlapped; /* ... and began while a step ran */
	bool compensated;      /* the second force_stop is claimed */

	/* The report; guarded by the runtime's lock. */
	uint64_t in_flight_at_deadline;
	uint64_t quiesce_ns, stop_ns, force_ns;
	int prepare_result, start_result;
	int quiesce_result, stop_result, force_result;
	bool prepare_ran, start_ran;
	bool quiesce_ran, stop_ran, force_ran;
	unsigned force_calls;
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
	/*
	 * The components the graceful steps visit: comps[0..nentered).
	 * All of them unless agr_runtime_start() was called; then those
	 * whose prepare began (a prefix, in registration order).
	 */
	size_t nentered;
	agr_runtime_state state;
	bool start_called; /* agr_runtime_start() ran; the list is fixed */
	bool starting;	   /* its loop is still calling components */
	bool cleanup_phase; /* the startup failed; the stop cleans up */
	bool began;	   /* the stop sequence began */
	bool rollback;	   /* ... to undo a failed startup */
	bool admission_closed;
	bool thread_started;
	bool abandoned;	   /* the stop thread calls no more components */
	bool forcing;	   /* the terminal force is claimed */
	bool finished;	   /* `result` is final */
	bool cleanup_failed; /* a step of the stop sequence failed */
	bool deadline_passed;
	pthread_t thread;
	uint64_t zero_events; /* watched slots emptied */
	uint64_t began_ns, deadline_ns;
	uint64_t closed_ns, quiesced_ns, drained_ns, finished_ns;
	int first_error;    /* the primary failure */
	int suppressed[AGR_RUNTIME_MAX_SUPPRESSED]; /* the later ones */
	size_t nsuppressed; /* every later one, even beyond the array */
	int startup_result; /* what agr_runtime_start() returned */
	int cleanup_result; /* the first failure while cleaning up */
	int result;
	agr__magic magic; /* handle.h */
};

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

/* Leases held by the user and by comps[0..ncomps). */
static uint64_t active_locked(struct agr_runtime *rt, size_t ncomps)
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
	ds[0] = agr_composite_event_stream(comp);
	ds[1] = agr_composite_state_event(comp);
	c = new_component(rt, agr_composite_name(comp),
			  AGR_COMPONENT_COMPOSITE, &owned_ops, comp);
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
	n = active_locked(rt, rt->ncomps);
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

/*
 * The first failure is primary; later ones are kept as suppressed, the
 * first AGR_RUNTIME_MAX_SUPPRESSED of them in order. Once the result is
 * published it is sealed: nothing changes it any more.
 */
static void record_failure_locked(struct agr_runtime *rt, int ret)
{
	if (ret >= 0 || rt->finished)
		return;
	if (rt->cleanup_phase && rt->cleanup_result == 0)
		rt->cleanup_result = ret;
	if (rt->first_error == 0) {
		rt->first_error = ret;
		return;
	}
	if (rt->nsuppressed < AGR_RUNTIME_MAX_SUPPRESSED)
		rt->suppressed[rt->nsuppressed] = ret;
	rt->nsuppressed++;
}

/*
 * A step of the stop sequence failed: logged, and recorded unless the
 * terminal force came first (a step it cut short may fail for that).
 */
static void note_failure_locked(struct agr_runtime *rt,
				const struct component *c, const char *step,
				int ret)
{
	if (ret >= 0)
		return;
	/* The number: a component of the user's may return any errno. */
	agr__log(AGR_LOG_ERROR, "runtime: %s of \"%s\" failed (error %d)",
		 step, c->name, ret);
	if (rt->forcing)
		return;
	rt->cleanup_failed = true;
	record_failure_locked(rt, ret);
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

/* Later leases are refused: senders get -ESHUTDOWN and redeliver. */
static void close_admission_locked(struct agr_runtime *rt)
{
	if (rt->admission_closed)
		return;
	set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
	rt->admission_closed = true;
	rt->closed_ns = agr__now_ns();
	pthread_cond_broadcast(&rt->cond);
}

static void publish_locked(struct agr_runtime *rt, int result)
{
	rt->result = result;
	rt->finished = true;
	rt->finished_ns = agr__now_ns();
	set_state_locked(rt, AGR_RUNTIME_STOPPED);
}

/* ---- force stops, with their compensation ---- */

/* The second force, once both the first and the step it cut returned. */
static bool claim_compensation_locked(struct component *c)
{
	if (!c->force_overlapped || !c->force_done || c->in_step ||
	    c->compensated)
		return false;
	c->compensated = true;
	return true;
}

static int call_force(struct agr_runtime *rt, struct component *c)
{
	uint64_t t0 = agr__now_ns();
	int ret = c->ops.force_stop ? c->ops.force_stop(c->step_arg) : 0;

	pthread_mutex_lock(&rt->lock);
	if (c->force_calls++ == 0)
		c->force_result = ret;
	c->force_ns += agr__now_ns() - t0;
	if (ret < 0) {
		agr__log(AGR_LOG_ERROR,
			 "runtime: force stop of \"%s\" failed (error %d)",
			 c->name, ret);
		record_failure_locked(rt, ret);
	}
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

/* Forces `c` once (plus its compensation); 0 if it was forced before. */
static int force_one(struct agr_runtime *rt, struct component *c)
{
	bool again;
	int ret;

	pthread_mutex_lock(&rt->lock);
	if (c->force_started) {
		pthread_mutex_unlock(&rt->lock);
		return 0;
	}
	c->force_started = true;
	c->force_ran = true;
	c->force_overlapped = c->in_step;
	pthread_mutex_unlock(&rt->lock);

	ret = call_force(rt, c);
	pthread_mutex_lock(&rt->lock);
	c->force_done = true;
	again = claim_compensation_locked(c);
	pthread_mutex_unlock(&rt->lock);
	if (again)
		agr__keep_first(&ret, call_force(rt, c));
	return ret;
}

enum step_kind { STEP_GRACEFUL, STEP_PREPARE, STEP_START };

static bool startup_continues_locked(const struct agr_runtime *rt)
{
	return !rt->began && !rt->forcing && rt->first_error == 0;
}

/*
 * Marks a step of `c` begun: refused (-ECANCELED) once `c` is being
 * forced, once the sequence is abandoned (so that after the terminal
 * force began no component sees a further graceful step), and for a
 * startup step once the startup has failed or a stop came. A prepare
 * that begins makes `c` one the stop visits. *result reads -EINPROGRESS
 * in the report until the step returns.
 */
static int claim_step(struct agr_runtime *rt, struct component *c,
		      enum step_kind kind, bool *ran, int *result)
{
	bool open;

	pthread_mutex_lock(&rt->lock);
	open = !rt->abandoned && !c->force_started &&
	       (kind == STEP_GRACEFUL || startup_continues_locked(rt));
	if (open) {
		if (kind == STEP_PREPARE)
			rt->nentered++;
		c->in_step = true;
		*ran = true;
		*result = -EINPROGRESS;
	}
	pthread_mutex_unlock(&rt->lock);
	return open ? 0 : -ECANCELED;
}

/* The step returned: if a force overlapped it, force once more. */
static void end_step(struct agr_runtime *rt, struct component *c)
{
	bool again;

	pthread_mutex_lock(&rt->lock);
	c->in_step = false;
	again = claim_compensation_locked(c);
	pthread_mutex_unlock(&rt->lock);
	if (again)
		call_force(rt, c);
}

/*
 * Closes admission, abandons the graceful sequence, force-stops every
 * component in reverse order and publishes the result: the primary
 * failure, 0 if there was none (graceful observers of an explicit
 * force complete successfully). `cause` (-ETIMEDOUT for the deadline)
 * is recorded first. Only the first caller acts; it returns the first
 * force_stop error, the others 0.
 */
static int force_and_finish(struct agr_runtime *rt, int cause)
{
	int first = 0;
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
	record_failure_locked(rt, cause);
	close_admission_locked(rt);
	pthread_cond_broadcast(&rt->cond); /* out of the stop's waits */
	n = rt->ncomps;
	pthread_mutex_unlock(&rt->lock);

	while (n-- > 0)
		agr__keep_first(&first, force_one(rt, rt->comps[n]));

	pthread_mutex_lock(&rt->lock);
	publish_locked(rt, rt->first_error);
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

/* Until the entered components and the user hold no lease. */
static int wait_no_lease_locked(struct agr_runtime *rt)
{
	int ret;

	while (active_locked(rt, rt->nentered) > 0) {
		ret = wait_step_locked(rt, UINT64_MAX);
		if (ret)
			return ret;
	}
	return rt->abandoned ? -ECANCELED : 0;
}

/* Step 0: a startup in progress leaves the component it is in. */
static int wait_startup_exit(struct agr_runtime *rt)
{
	int ret = 0;

	pthread_mutex_lock(&rt->lock);
	while (rt->starting && !ret)
		ret = wait_step_locked(rt, UINT64_MAX);
	pthread_mutex_unlock(&rt->lock);
	return ret;
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

	while (agr__now_ns() < end && !rt->admission_closed) {
		ret = wait_step_locked(rt, end);
		if (ret)
			return ret;
	}
	*quiet = active_locked(rt, rt->nentered) == 0 &&
		 rt->zero_events == events;
	return 0;
}

/* Until no lease is held, or a failure closes admission first. */
static int wait_idle_or_closed_locked(struct agr_runtime *rt)
{
	int ret;

	while (!rt->admission_closed && active_locked(rt, rt->nentered) > 0) {
		ret = wait_step_locked(rt, UINT64_MAX);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Step 1: leases still granted until a quiet period passes idle; a
 * failure (or a failed startup) closes admission at once instead.
 */
static int quiet_boundary(struct agr_runtime *rt)
{
	bool quiet = false;
	int ret = 0;

	pthread_mutex_lock(&rt->lock);
	while (!ret && !quiet && !rt->admission_closed) {
		ret = wait_idle_or_closed_locked(rt);
		if (!ret)
			ret = wait_quiet_period_locked(rt, &quiet);
	}
	if (!ret) {
		close_admission_locked(rt);
		set_state_locked(rt, AGR_RUNTIME_DRAINING);
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
	end_step(rt, c);
}

static size_t entered(struct agr_runtime *rt)
{
	size_t n;

	pthread_mutex_lock(&rt->lock);
	n = rt->nentered;
	pthread_mutex_unlock(&rt->lock);
	return n;
}

/* Step 2a: quiesce in registration order. */
static int quiesce_all(struct agr_runtime *rt)
{
	size_t i, n = entered(rt);
	struct component *c;
	uint64_t t0;
	int ret;

	for (i = 0; i < n; i++) {
		c = rt->comps[i];
		ret = claim_step(rt, c, STEP_GRACEFUL, &c->quiesce_ran,
				 &c->quiesce_result);
		if (ret)
			return ret;
		t0 = agr__now_ns();
		ret = c->ops.quiesce ? c->ops.quiesce(c->step_arg) : 0;
		record_step(rt, c, "quiesce", t0, &c->quiesce_ns,
			    &c->quiesce_result, ret);
	}
	return 0;
}

/* Step 2b: wait until the quiesced components hold no lease. */
static int runtime_drain(struct agr_runtime *rt)
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
	size_t i = entered(rt);
	struct component *c;
	uint64_t t0;
	int ret;

	while (i-- > 0) {
		c = rt->comps[i];
		if (agr__now_ns() >= rt->deadline_ns)
			return -ETIMEDOUT;
		ret = claim_step(rt, c, STEP_GRACEFUL, &c->stop_ran,
				 &c->stop_result);
		if (ret)
			return ret;
		t0 = agr__now_ns();
		ret = c->ops.stop_gracefully
			      ? c->ops.stop_gracefully(c->step_arg,
						       rt->deadline_ns)
			      : 0;
		record_step(rt, c, "graceful stop", t0, &c->stop_ns,
			    &c->stop_result, ret);
	}
	return 0;
}

/*
 * Dispatchers and composites the startup never reached get no graceful
 * step, but may hold messages sent before: their force discards them,
 * so that every lease is released.
 */
static void force_unentered(struct agr_runtime *rt)
{
	size_t i = rt->ncomps, n = entered(rt);

	while (i-- > n)
		if (rt->comps[i]->kind != AGR_COMPONENT_USER)
			force_one(rt, rt->comps[i]);
}

/*
 * The sequence went through: the primary failure (a failed startup's
 * error) or 0; or step 4 after a failure of the sequence itself, or of
 * any kind unless this undoes a failed startup.
 */
static void finish_sequence(struct agr_runtime *rt)
{
	bool failed;

	pthread_mutex_lock(&rt->lock);
	failed = rt->cleanup_failed || (!rt->rollback && rt->first_error);
	pthread_mutex_unlock(&rt->lock);
	if (failed) {
		force_and_finish(rt, 0);
		return;
	}
	force_unentered(rt);
	pthread_mutex_lock(&rt->lock);
	if (!rt->forcing && !rt->finished)
		publish_locked(rt, rt->first_error);
	pthread_mutex_unlock(&rt->lock);
}

static void *stop_thread(void *arg)
{
	struct agr_runtime *rt = arg;
	int ret = wait_startup_exit(rt);

	if (!ret)
		ret = quiet_boundary(rt);
	if (!ret)
		ret = quiesce_all(rt);
	if (!ret)
		ret = runtime_drain(rt);
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

/*
 * Sets the deadline and starts the stop thread; its error, if any (the
 * caller then forces, unlocked). With `closed`, admission closes now
 * and the quiet period is skipped (a failure); with `rollback`, the
 * sequence undoes a failed startup, whose error is not a reason to
 * force.
 */
static int begin_locked(struct agr_runtime *rt, bool closed, bool rollback)
{
	int ret;

	rt->began = true;
	rt->rollback = rollback;
	rt->began_ns = agr__now_ns();
	rt->deadline_ns = agr__deadline_after(rt->timeout_ns);
	if (!rt->start_called)
		rt->nentered = rt->ncomps;
	set_lease_flags_locked(rt, LEASE_WATCH);
	if (closed) {
		close_admission_locked(rt);
		set_state_locked(rt, AGR_RUNTIME_DRAINING);
	} else {
		set_state_locked(rt, AGR_RUNTIME_QUIET);
	}
	ret = spawn_stop_thread(rt);
	if (ret) {
		agr__log(AGR_LOG_ERROR,
			 "runtime: cannot create the stop thread (error %d); "
			 "force-stopping instead", ret);
		record_failure_locked(rt, ret);
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

/* Begins the stop unless it has begun; forces if the thread failed. */
static void begin_or_force_locked(struct agr_runtime *rt, bool closed,
				  bool rollback)
{
	if (rt->began || rt->forcing || rt->finished)
		return;
	if (begin_locked(rt, closed, rollback)) {
		/* A rejected stop thread never runs the cleanup inline. */
		pthread_mutex_unlock(&rt->lock);
		force_and_finish(rt, 0);
		pthread_mutex_lock(&rt->lock);
	}
}

AGR_API int agr_runtime_stop(agr_runtime *rt)
{
	int ret;

	if (!rt)
		return -EINVAL;
	if (agr_worker_current())
		return -EDEADLK;
	pthread_mutex_lock(&rt->lock);
	begin_or_force_locked(rt, false, false);
	ret = await_result_locked(rt);
	pthread_mutex_unlock(&rt->lock);
	return ret;
}

AGR_API int agr_runtime_force_stop(agr_runtime *rt)
{
	if (!rt)
		return -EINVAL;
	return force_and_finish(rt, 0);
}

AGR_API int agr_runtime_report_failure(agr_runtime *rt, int error)
{
	if (!rt || error >= 0) {
		agr__log(AGR_LOG_ERROR,
			 "agr_runtime_report_failure: %s", !rt
				 ? "NULL runtime"
				 : "the error must be a negative errno");
		return -EINVAL;
	}
	pthread_mutex_lock(&rt->lock);
	if (rt->finished) {
		pthread_mutex_unlock(&rt->lock);
		return -EALREADY;
	}
	agr__log(AGR_LOG_ERROR,
		 "runtime: a component reported a fatal failure (error %d); "
		 "stopping", error);
	record_failure_locked(rt, error);
	close_admission_locked(rt);
	begin_or_force_locked(rt, true, rt->starting);
	pthread_mutex_unlock(&rt->lock);
	return 0;
}

/* ---- startup ---- */

/*
 * Prepares (or starts) one component, unless the startup has failed or
 * a stop came. Returns 0, the component's error, or -ECANCELED.
 */
static int startup_step(struct agr_runtime *rt, struct component *c,
			bool prepare)
{
	bool open;
	int ret;

	ret = prepare ? claim_step(rt, c, STEP_PREPARE, &c->prepare_ran,
				   &c->prepare_result)
		      : claim_step(rt, c, STEP_START, &c->start_ran,
				   &c->start_result);
	if (ret)
		return ret;
	if (prepare)
		ret = c->ops.prepare ? c->ops.prepare(c->step_arg, rt) : 0;
	else
		ret = c->ops.start ? c->ops.start(c->step_arg) : 0;

	pthread_mutex_lock(&rt->lock);
	*(prepare ? &c->prepare_result : &c->start_result) = ret;
	if (ret < 0) {
		agr__log(AGR_LOG_ERROR,
			 "runtime: %s of \"%s\" failed (error %d)",
			 prepare ? "prepare" : "start", c->name, ret);
		record_failure_locked(rt, ret);
	}
	open = startup_continues_locked(rt);
	pthread_mutex_unlock(&rt->lock);
	end_step(rt, c);
	if (ret < 0)
		return ret;
	return open ? 0 : -ECANCELED;
}

/* The readiness barrier: every component prepared before any starts. */
static int run_startup(struct agr_runtime *rt)
{
	size_t i, n = rt->ncomps; /* fixed once start_called */
	int ret = 0;

	for (i = 0; i < n && !ret; i++)
		ret = startup_step(rt, rt->comps[i], true);
	for (i = 0; i < n && !ret; i++)
		ret = startup_step(rt, rt->comps[i], false);
	return ret;
}

/* Claims the one startup: -EALREADY for a second call. */
static int claim_startup_locked(struct agr_runtime *rt)
{
	if (rt->start_called)
		return -EALREADY;
	rt->start_called = true;
	if (rt->began || rt->forcing)
		return -ESHUTDOWN;
	rt->starting = true;
	set_state_locked(rt, AGR_RUNTIME_STARTING);
	return 0;
}

AGR_API int agr_runtime_start(agr_runtime *rt)
{
	int ret;

	if (!rt)
		return -EINVAL;
	if (agr_worker_current())
		return -EDEADLK;
	pthread_mutex_lock(&rt->lock);
	ret = claim_startup_locked(rt);
	pthread_mutex_unlock(&rt->lock);
	if (ret)
		return ret;
	ret = run_startup(rt);

	pthread_mutex_lock(&rt->lock);
	rt->starting = false;
	pthread_cond_broadcast(&rt->cond); /* the stop thread may wait */
	if (!ret && startup_continues_locked(rt)) {
		set_state_locked(rt, AGR_RUNTIME_RUNNING);
		pthread_mutex_unlock(&rt->lock);
		return 0;
	}
	/* Failed or aborted: clean up as a stop does, then report it. */
	ret = rt->first_error ? rt->first_error : -ECANCELED;
	rt->startup_result = ret;
	rt->cleanup_phase = true;
	begin_or_force_locked(rt, true, true);
	await_result_locked(rt);
	pthread_mutex_unlock(&rt->lock);
	return ret;
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

/* ---- teardown ---- */

/* Until no lease is held: the last release is then out of its lock. */
static void wait_no_lease_forever(struct agr_runtime *rt)
{
	pthread_mutex_lock(&rt->lock);
	set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
	while (active_locked(rt, rt->ncomps) > 0)
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
