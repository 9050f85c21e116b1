/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_life.c - a dispatcher's start, quiesce, graceful and force
 * stops (the sweeps that cancel its I/O on each worker) and free
 * (aggring/dispatcher.h).
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

/* ---- lifecycle ---- */

AGR_API int agr_dispatcher_start(agr_dispatcher *d)
{
	int i, expected, ret = 0;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	if (d->lifecycle == D_QUIESCED) {
		ret = -ESHUTDOWN;
	} else if (d->lifecycle == D_NEW) {
		d->lifecycle = D_RUNNING;
		atomic_store(&d->started, true);
		for (i = 0; i < d->parallelism; i++) {
			expected = G_PARKED;
			if (atomic_compare_exchange_strong(&d->groups[i].state,
							   &expected,
							   G_SCHEDULED))
				agr__worker_post(d->groups[i].worker,
						 &d->groups[i].work);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Never started: parked messages are discarded here, on this thread. */
static void discard_parked(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < d->parallelism; i++)
		if (atomic_load(&d->groups[i].state) == G_PARKED)
			agr__group_discard_all(&d->groups[i]);
}

/*
 * Closes intake. Returns true when the dispatcher never started: the
 * caller then discards the parked messages, after dropping the lock
 * (completion callbacks must not run under it).
 */
static bool quiesce_locked(struct agr_dispatcher *d)
{
	bool never_started = d->lifecycle == D_NEW;

	if (d->lifecycle == D_QUIESCED)
		return false;
	agr__gate_close(&d->gate);
	d->lifecycle = D_QUIESCED;
	return never_started;
}

AGR_API int agr_dispatcher_quiesce(agr_dispatcher *d)
{
	bool discard;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	discard = quiesce_locked(d);
	pthread_mutex_unlock(&d->lock);
	if (discard)
		discard_parked(d);
	return 0;
}

/* ---- the graceful stop ---- */

#define REPORT_EVERY_NS (5ull * 1000000000ull)
#define RESCUE_POLL_NS (50ull * 1000000ull)

static void run_sweep(struct agr__work *work, struct agr_worker *w,
		      int status);

/*
 * Once the workers exited (a dispose tore them down), sweeps on this
 * thread what their own sweeps had to leave: messages left pending
 * whose I/O was still being cancelled when the dispose dropped them.
 */
static void sweep_exited_workers(struct agr_dispatcher *d)
{
	int i;

	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].work.fn = run_sweep;
		atomic_fetch_add(&d->sweeps_pending, 1);
		agr__worker_post(agr__scheduler_worker(d->sched, (unsigned)i),
				 &d->sweeps[i].work);
	}
}

/*
 * agr__dispatcher_wait_idle() for a stop. A forced dispatcher whose
 * workers exited is swept here (looked at every RESCUE_POLL_NS: their
 * exit tells no one above). With `what`, says every REPORT_EVERY_NS
 * what it waits for: only a function blocked in a call (or I/O the
 * kernel will not cancel) can hold a forced dispatcher.
 */
static int wait_idle_for_stop(struct agr_dispatcher *d, uint64_t deadline,
			      const char *what)
{
	uint64_t start = agr__now_ns(), report_at = start + REPORT_EVERY_NS;
	uint64_t now = start, until;

	for (;;) {
		until = now + RESCUE_POLL_NS;
		if (what && until > report_at)
			until = report_at;
		if (until > deadline)
			until = deadline;
		if (agr__dispatcher_wait_idle(d, until) == 0)
			return 0;
		if (atomic_load(&d->forced) &&
		    agr__scheduler_terminated(d->sched))
			sweep_exited_workers(d);
		now = agr__now_ns();
		if (now >= deadline)
			return agr__dispatcher_wait_idle(d, now);
		if (what && now >= report_at) {
			agr__dispatcher_report_holders(d, what, now - start);
			report_at = now + REPORT_EVERY_NS;
		}
	}
}

AGR_API int agr_dispatcher_stop_gracefully(agr_dispatcher *d,
					   uint64_t timeout_ns)
{
	uint64_t deadline = agr__deadline_after(timeout_ns);
	uint64_t now;
	int ret;

	if (!d)
		return -EINVAL;
	agr_dispatcher_quiesce(d);
	ret = wait_idle_for_stop(d, deadline, NULL);
	if (ret) {
		agr__dispatcher_report_holders(d, "agr_dispatcher_stop_gracefully() ran out",
			       timeout_ns);
		return ret;
	}
	if (!d->owns_supplier)
		return 0;
	now = agr__now_ns();
	ret = agr_supplier_stop_gracefully(d->supplier,
					   deadline > now ? deadline - now : 0);
	if (ret == -ETIMEDOUT)
		agr__log(AGR_LOG_WARN,
			 "%s: agr_dispatcher_stop_gracefully() ran out: every "
			 "message completed, but the workers of supplier %s "
			 "have not all ended", d->name,
			 agr_supplier_name(d->supplier));
	return ret;
}

/* Looks again after this long while I/O of a message is being cancelled. */
#define SWEEP_RECHECK_NS 1000000ull

/* The sweep is over: our last touch of d. */
static void end_sweep(struct sweep *s)
{
	struct agr_scheduler *sched = s->d->sched;

	atomic_fetch_sub(&s->d->sweeps_pending, 1);
	agr__scheduler_note_idle(sched);
}

/*
 * Ends the current message of g if the force allows it: true once g
 * holds none. On a live worker its I/O is cancelled first, and the
 * message is discarded only once none is left (a buffer of it may be
 * the kernel's until then); on a worker that exited no I/O is left.
 */
static bool settle_group(struct group *g, struct agr_worker *w, bool live)
{
	struct agr_exchange *ex = current_of(g);

	if (!ex)
		return true;
	if (ex->pending == 0)
		return false; /* finishing: a forwarded call is queued */
	if (live && agr__worker_cancel_owner(w, ex, NULL, NULL) != 0)
		return false;
	if (!agr__group_discard_pending(g, ex))
		return false; /* a forwarded call is queued: it goes first */
	if (live)
		/* discards the queue, then goes idle */
		agr__group_take_next(g);
	else
		agr__group_discard_all(g);
	return true;
}

/* Dropped by a dispose that is tearing `w` down with I/O in flight. */
static bool io_may_remain(struct agr_worker *w)
{
	if (agr__worker_exited(w))
		return false;
	return agr__current_worker != w || agr__worker_inflight(w) > 0;
}

static void sweep_fired(int res, void *arg)
{
	struct sweep *s = arg;

	run_sweep(&s->work, agr__current_worker,
		  res == -ECANCELED &&
				  agr__worker_closing(agr__current_worker) ?
			  -ECANCELED :
			  0);
}

/*
 * Runs on the worker, or (status != 0) while a dispose drops its inbox,
 * or on the thread that adopts the inbox of the exited worker, which
 * agr_dispatcher_free() makes sure of: a message left pending ends then
 * at the latest.
 */
static void run_sweep(struct agr__work *work, struct agr_worker *w,
		      int status)
{
	struct sweep *s = agr__container_of(work, struct sweep, work);
	struct agr_dispatcher *d = s->d;
	int i, step = agr__scheduler_workers(d->sched);
	bool live = status == 0, settled = true;

	if (!live && io_may_remain(w)) {
		end_sweep(s); /* agr_dispatcher_free() sweeps once it exited */
		return;
	}
	for (i = (int)s->worker_index; i < d->parallelism; i += step)
		if (!settle_group(&d->groups[i], w, live))
			settled = false;
	if (settled) {
		end_sweep(s);
		return;
	}
	/* I/O still being cancelled, or a forwarded call queued first. */
	if (live && agr_io_timeout(w, SWEEP_RECHECK_NS, sweep_fired, s) == 0)
		return;
	agr__worker_post(w, &s->work);
}

/* Asks each worker to cancel the I/O of this dispatcher's messages. */
static void post_sweeps(struct agr_dispatcher *d)
{
	int i;

	if (!agr__scheduler_enter(d->sched))
		return; /* disposed: its workers cancel everything */
	for (i = 0; i < agr__scheduler_workers(d->sched); i++) {
		d->sweeps[i].work.fn = run_sweep;
		atomic_fetch_add(&d->sweeps_pending, 1);
		agr__worker_post(agr__scheduler_worker(d->sched, (unsigned)i),
				 &d->sweeps[i].work);
	}
	agr__scheduler_leave(d->sched);
}

AGR_API int agr_dispatcher_force_stop(agr_dispatcher *d)
{
	bool first, discard;

	if (!d)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	discard = quiesce_locked(d);
	first = !atomic_exchange(&d->forced, true);
	pthread_mutex_unlock(&d->lock);
	if (discard)
		discard_parked(d);
	else if (first && atomic_load(&d->started))
		post_sweeps(d);
	if (d->owns_supplier)
		agr_supplier_force_stop(d->supplier);
	return 0;
}

AGR_API void agr_dispatcher_free(agr_dispatcher *d)
{
	if (!d)
		return;
	if (!agr__handle_retire(&d->magic, AGR__H_DISPATCHER, __func__, d))
		return;
	if (!agr__gate_closed(&d->gate) || agr__dispatcher_busy(d))
		agr_dispatcher_force_stop(d);
	else
		agr_dispatcher_quiesce(d);
	wait_idle_for_stop(d, UINT64_MAX, "agr_dispatcher_free() waits");
	agr__scheduler_watch_remove(d->sched, &d->stuck_watch);
	agr__scheduler_detach_gate(d->sched, &d->gate);
	if (d->owns_supplier)
		agr_supplier_free(d->supplier);
	agr__dispatcher_free_memory(d);
}
