/* SPDX-License-Identifier: MIT */
/*
 * scheduler_call.c - agr_scheduler_call_on(): run a function on one
 * worker and wait for its return value, as Seastar's smp::submit_to.
 *
 * The call is a cancellable task whose record lives on the caller's
 * stack: the caller waits until the task has run or been dropped, so
 * the record outlives every use of it. The worker's last touch is the
 * unlock after setting `done`; the caller returns only after it got
 * the lock again.
 */
#include "scheduler.h"

#include "util.h"
#include "worker.h"

#include <string.h>

/* A caller still waiting says so this often (never silently). */
#define CALL_REPORT_NS (5ull * 1000000000u)

struct call {
	agr_call_fn fn;
	void *arg;
	int result;
	int status; /* 0: fn ran; -ECANCELED: dropped by a force stop */
	bool done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void call_finish(struct call *c, int status, int result)
{
	pthread_mutex_lock(&c->lock);
	c->status = status;
	c->result = result;
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void call_run(void *arg)
{
	struct call *c = arg;

	call_finish(c, 0, c->fn(c->arg));
}

static void call_dropped(void *arg, int reason)
{
	call_finish(arg, reason, 0);
}

/* Waits for the task, logging every CALL_REPORT_NS what it waits for. */
static void call_wait(struct call *c, struct agr_worker *w)
{
	uint64_t start = agr__now_ns(), next = start + CALL_REPORT_NS;
	struct timespec ts = agr__timespec_of(next);

	pthread_mutex_lock(&c->lock);
	while (!c->done) {
		if (pthread_cond_timedwait(&c->cond, &c->lock, &ts) !=
		    ETIMEDOUT)
			continue;
		agr__log(AGR_LOG_WARN,
			 "agr_scheduler_call_on: still waiting after %llu s "
			 "for a function on %s: it has not returned, or the "
			 "work before it on that worker has not",
			 (unsigned long long)((agr__now_ns() - start) /
					      1000000000u),
			 agr__worker_name(w));
		next += CALL_REPORT_NS;
		ts = agr__timespec_of(next);
	}
	pthread_mutex_unlock(&c->lock);
}

AGR_API int agr_scheduler_call_on(agr_scheduler *s, int worker,
				  agr_call_fn fn, void *arg, int *result)
{
	struct agr_worker *w;
	struct call c;
	int ret;

	if (!s || !fn || worker < 0 || worker >= agr__scheduler_workers(s))
		return -EINVAL;
	w = agr__scheduler_worker(s, (unsigned)worker);
	if (agr__current_worker == w)
		return -EDEADLK;
	memset(&c, 0, sizeof(c));
	c.fn = fn;
	c.arg = arg;
	pthread_mutex_init(&c.lock, NULL);
	agr__cond_init_monotonic(&c.cond);
	ret = agr_scheduler_schedule_cancellable(s, (unsigned)worker,
						 call_run, call_dropped, &c);
	if (ret == 0) {
		/*
		 * From another worker, the doorbell may be an SQE of ours
		 * that would ride our next submit: we block before that.
		 */
		if (agr__current_worker)
			agr__worker_flush(agr__current_worker);
		call_wait(&c, w);
		ret = c.status;
		if (ret == 0 && result)
			*result = c.result;
	}
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
	return ret;
}
