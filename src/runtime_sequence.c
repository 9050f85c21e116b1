/* SPDX-License-Identifier: MIT */
/*
 * runtime_sequence.c - a runtime's startup behind a readiness barrier,
 * its graceful stop under one global deadline, and its free
 * (aggring/runtime.h).
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
#include "runtime.h"
#include "util.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/composite.h>
#include <aggring/runtime.h>
#include <aggring/worker.h>

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
	agr__runtime_set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
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

	while (agr__runtime_active_locked(rt, rt->nentered) > 0) {
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
	*quiet = agr__runtime_active_locked(rt, rt->nentered) == 0 &&
		 rt->zero_events == events;
	return 0;
}

/* Until no lease is held, or a failure closes admission first. */
static int wait_idle_or_closed_locked(struct agr_runtime *rt)
{
	int ret;

	while (!rt->admission_closed &&
	       agr__runtime_active_locked(rt, rt->nentered) > 0) {
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
	agr__runtime_set_lease_flags_locked(rt, LEASE_WATCH);
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

/* ---- teardown ---- */

/* Until no lease is held: the last release is then out of its lock. */
static void wait_no_lease_forever(struct agr_runtime *rt)
{
	pthread_mutex_lock(&rt->lock);
	agr__runtime_set_lease_flags_locked(rt, LEASE_WATCH | LEASE_CLOSED);
	while (agr__runtime_active_locked(rt, rt->ncomps) > 0)
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
		agr__runtime_free_component(rt->comps[i]);
	free(rt->comps);
	pthread_cond_destroy(&rt->cond);
	pthread_mutex_destroy(&rt->lock);
	free(rt);
}
