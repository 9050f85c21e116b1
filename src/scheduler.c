/* SPDX-License-Identifier: MIT */
/*
 * scheduler.c - the worker threads of one named aggregate, tasks, and
 * graceful and immediate dispose.
 */
#include "scheduler.h"

#include "util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct task {
	struct agr__work work;
	agr_task_fn fn;
	agr_task_cancel_fn on_cancel;
	void *arg;
};

static void run_task(struct agr__work *work, struct agr_worker *w, int status)
{
	struct task *t = agr__container_of(work, struct task, work);
	agr_task_fn fn = t->fn;
	agr_task_cancel_fn on_cancel = t->on_cancel;
	void *arg = t->arg;

	(void)w;
	free(t); /* before the call: a task may free what it needs */
	if (status == 0)
		fn(arg);
	else if (on_cancel)
		on_cancel(arg, status);
}

AGR_API const char *agr_scheduler_name(const agr_scheduler *s)
{
	return s ? s->name : NULL;
}

AGR_API int agr_scheduler_parallelism(const agr_scheduler *s)
{
	return s ? s->parallelism : -EINVAL;
}

AGR_API int agr_scheduler_schedule_cancellable(agr_scheduler *s,
					       unsigned hint, agr_task_fn fn,
					       agr_task_cancel_fn on_cancel,
					       void *arg)
{
	struct task *t;

	if (!s || !fn)
		return -EINVAL;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->work.fn = run_task;
	t->fn = fn;
	t->on_cancel = on_cancel;
	t->arg = arg;
	if (!agr__scheduler_enter(s)) {
		free(t);
		return -ESHUTDOWN;
	}
	agr__worker_post(agr__scheduler_worker(s, hint), &t->work);
	agr__scheduler_leave(s);
	return 0;
}

AGR_API int agr_scheduler_schedule(agr_scheduler *s, unsigned hint,
				   agr_task_fn fn, void *arg)
{
	return agr_scheduler_schedule_cancellable(s, hint, fn, NULL, arg);
}

AGR_API bool agr_scheduler_is_disposed(agr_scheduler *s)
{
	return s && agr__gate_closed(&s->gate);
}

bool agr__scheduler_terminated(struct agr_scheduler *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	done = s->live == 0;
	pthread_mutex_unlock(&s->lock);
	return done;
}

AGR_API bool agr_scheduler_is_terminated(agr_scheduler *s)
{
	return s && agr__scheduler_terminated(s);
}

AGR_API int agr_scheduler_worker_metrics(agr_scheduler *s, int index,
					 agr_worker_metrics *out)
{
	if (!s || !out || index < 0 || index >= s->parallelism)
		return -EINVAL;
	agr__worker_stats_copy(s->workers[index], out);
	return 0;
}

/* ---- every live scheduler of the process, for watchers ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct agr_scheduler *registry;

static void registry_add(struct agr_scheduler *s)
{
	pthread_mutex_lock(&registry_lock);
	s->registry_prev = NULL;
	s->registry_next = registry;
	if (registry)
		registry->registry_prev = s;
	registry = s;
	pthread_mutex_unlock(&registry_lock);
}

/* Once this returns, no watcher looks at the workers of `s`. */
static void registry_remove(struct agr_scheduler *s)
{
	pthread_mutex_lock(&registry_lock);
	if (s->registry_prev)
		s->registry_prev->registry_next = s->registry_next;
	else if (registry == s)
		registry = s->registry_next;
	if (s->registry_next)
		s->registry_next->registry_prev = s->registry_prev;
	s->registry_prev = s->registry_next = NULL;
	pthread_mutex_unlock(&registry_lock);
}

void agr__scheduler_for_each(void (*fn)(struct agr_scheduler *s, void *arg),
			     void *arg)
{
	struct agr_scheduler *s;

	pthread_mutex_lock(&registry_lock);
	for (s = registry; s; s = s->registry_next)
		fn(s, arg);
	pthread_mutex_unlock(&registry_lock);
}

void agr__scheduler_each_worker(struct agr_scheduler *s,
				void (*fn)(struct agr_worker *w, void *arg),
				void *arg)
{
	int i;

	for (i = 0; i < s->parallelism; i++)
		fn(s->workers[i], arg);
}

void agr__scheduler_watch_add(struct agr_scheduler *s,
			      struct agr__sched_watch *watch)
{
	pthread_mutex_lock(&registry_lock);
	watch->next = s->watches;
	s->watches = watch;
	pthread_mutex_unlock(&registry_lock);
}

void agr__scheduler_watch_remove(struct agr_scheduler *s,
				 struct agr__sched_watch *watch)
{
	struct agr__sched_watch **p;

	pthread_mutex_lock(&registry_lock);
	for (p = &s->watches; *p; p = &(*p)->next) {
		if (*p == watch) {
			*p = watch->next;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
}

void agr__scheduler_run_watches_of(struct agr_scheduler *s, uint64_t now_ns,
				   uint64_t threshold_ns)
{
	struct agr__sched_watch *watch;

	for (watch = s->watches; watch; watch = watch->next)
		watch->fn(watch->arg, now_ns, threshold_ns);
}

/* ---- creation ---- */

/* Hooks of every worker: the worker's thread tells us. */
static void worker_ready(void *arg, int err)
{
	struct agr_scheduler *s = arg;

	pthread_mutex_lock(&s->lock);
	if (err && !s->start_err)
		s->start_err = err;
	s->ready++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void worker_exited(void *arg)
{
	struct agr_scheduler *s = arg;

	pthread_mutex_lock(&s->lock);
	s->live--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Worker `index`, its thread named "<scheduler>-<index>". */
static int worker_new(struct agr_scheduler *s, unsigned index,
		      struct agr_worker **out)
{
	char name[256];
	struct agr__worker_config cfg = {
		.sched = s,
		.index = index,
		.thread_name = name,
		.hooks = { .ready = worker_ready, .exited = worker_exited,
			   .arg = s },
		.settings = &s->settings,
	};

	snprintf(name, sizeof(name), "%.200s-%u", s->name, index);
	return agr__worker_new(&cfg, out);
}

static int start_threads(struct agr_scheduler *s)
{
	int i, ret = 0;

	for (i = 0; i < s->parallelism; i++) {
		pthread_mutex_lock(&s->lock);
		s->live++;
		pthread_mutex_unlock(&s->lock);
		ret = agr__worker_start(s->workers[i]);
		if (ret) {
			agr__log(AGR_LOG_ERROR,
				 "%s: cannot create worker thread %d: %s",
				 s->name, i, strerror(-ret));
			pthread_mutex_lock(&s->lock);
			s->live--;
			pthread_mutex_unlock(&s->lock);
			return ret;
		}
		s->started++;
	}
	return 0;
}

/* Waits for every started worker to report its ring setup. */
static int await_rings(struct agr_scheduler *s)
{
	int err;

	pthread_mutex_lock(&s->lock);
	while (s->ready < s->started)
		pthread_cond_wait(&s->cond, &s->lock);
	err = s->start_err;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static void scheduler_free_memory(struct agr_scheduler *s)
{
	int i;

	while (s->attached) {
		struct attached_gate *a = s->attached;

		s->attached = a->next;
		free(a);
	}
	if (s->workers) {
		for (i = 0; i < s->parallelism; i++)
			agr__worker_free(s->workers[i]);
		free(s->workers);
	}
	pthread_cond_destroy(&s->idle_cond);
	pthread_mutex_destroy(&s->idle_lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->cpus_copy);
	free(s->name);
	free(s);
}

/* Copies `settings`, with a list of CPUs of our own. */
static int copy_settings(struct agr_scheduler *s,
			 const struct agr__worker_settings *settings)
{
	s->settings = settings ? *settings : agr__worker_defaults;
	if (!s->settings.cpus || s->settings.ncpus <= 0)
		return 0;
	s->cpus_copy = malloc((size_t)s->settings.ncpus * sizeof(int));
	if (!s->cpus_copy)
		return -ENOMEM;
	memcpy(s->cpus_copy, s->settings.cpus,
	       (size_t)s->settings.ncpus * sizeof(int));
	s->settings.cpus = s->cpus_copy;
	return 0;
}

static int alloc_scheduler(const char *supplier_name,
			   const char *aggregate_name, int parallelism,
			   const struct agr__worker_settings *settings,
			   struct agr_scheduler **out)
{
	struct agr_scheduler *s;
	size_t len;
	int i;

	if (posix_memalign((void **)&s, AGR__CACHELINE, sizeof(*s)) != 0)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	agr__cond_init_monotonic(&s->cond);
	atomic_init(&s->idle_waiters, 0);
	pthread_mutex_init(&s->idle_lock, NULL);
	agr__cond_init_monotonic(&s->idle_cond);
	s->parallelism = parallelism;
	len = strlen(supplier_name) + strlen(aggregate_name) + 2;
	s->name = malloc(len);
	s->workers = calloc((size_t)parallelism, sizeof(*s->workers));
	if (!s->name || !s->workers || copy_settings(s, settings))
		goto nomem;
	snprintf(s->name, len, "%s-%s", supplier_name, aggregate_name);
	for (i = 0; i < parallelism; i++) {
		if (worker_new(s, (unsigned)i, &s->workers[i]))
			goto nomem;
	}
	*out = s;
	return 0;
nomem:
	scheduler_free_memory(s);
	return -ENOMEM;
}

int agr__scheduler_new(const char *supplier_name, const char *aggregate_name,
		       int parallelism,
		       const struct agr__worker_settings *settings,
		       struct agr_scheduler **out)
{
	struct agr_scheduler *s;
	int ret;

	ret = alloc_scheduler(supplier_name, aggregate_name, parallelism,
			      settings, &s);
	if (ret)
		return ret;
	ret = start_threads(s);
	if (!ret)
		ret = await_rings(s);
	else
		await_rings(s);
	if (ret) {
		agr__scheduler_free(s);
		return ret;
	}
	registry_add(s);
	*out = s;
	return 0;
}

/* ---- dispose ---- */

int agr__scheduler_attach_gate(struct agr_scheduler *s, agr__gate *gate)
{
	struct attached_gate *a = malloc(sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->gate = gate;
	pthread_mutex_lock(&s->lock);
	a->next = s->attached;
	s->attached = a;
	if (s->state != AGR__SCHED_RUNNING)
		agr__gate_close(gate); /* disposed already: admit nothing */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void agr__scheduler_detach_gate(struct agr_scheduler *s, agr__gate *gate)
{
	struct attached_gate **p, *a;

	pthread_mutex_lock(&s->lock);
	for (p = &s->attached; (a = *p) != NULL; p = &a->next) {
		if (a->gate == gate) {
			*p = a->next;
			free(a);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* Senders of the layers above first, then our own. */
static void close_gates(struct agr_scheduler *s)
{
	struct attached_gate *a;

	pthread_mutex_lock(&s->lock);
	for (a = s->attached; a; a = a->next)
		agr__gate_close(a->gate);
	pthread_mutex_unlock(&s->lock);
	agr__gate_close(&s->gate);
}

void agr__scheduler_dispose(struct agr_scheduler *s, bool immediate)
{
	enum agr__sched_state want =
		immediate ? AGR__SCHED_FORCED : AGR__SCHED_GRACEFUL;
	int i;

	pthread_mutex_lock(&s->lock);
	if (s->state >= want) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->state = want;
	pthread_mutex_unlock(&s->lock);

	close_gates(s);
	for (i = 0; i < s->parallelism; i++)
		agr__worker_request_stop(s->workers[i], immediate);
}

/*
 * With `lock` held, waits on `cond` until done(arg) or the deadline
 * (UINT64_MAX: none): 0, or -ETIMEDOUT if done(arg) is still false then.
 */
static int wait_until(pthread_cond_t *cond, pthread_mutex_t *lock,
		      bool (*done)(void *), void *arg, uint64_t deadline_ns)
{
	struct timespec ts = agr__timespec_of(deadline_ns);

	while (!done(arg)) {
		if (deadline_ns == UINT64_MAX)
			pthread_cond_wait(cond, lock);
		else if (pthread_cond_timedwait(cond, lock, &ts) == ETIMEDOUT)
			return done(arg) ? 0 : -ETIMEDOUT;
	}
	return 0;
}

static bool all_exited(void *arg)
{
	struct agr_scheduler *s = arg;

	return s->live == 0;
}

int agr__scheduler_await(struct agr_scheduler *s, uint64_t deadline_ns)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = wait_until(&s->cond, &s->lock, all_exited, s, deadline_ns);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int agr__scheduler_wait_idle(struct agr_scheduler *s, bool (*idle)(void *),
			     void *arg, uint64_t deadline_ns)
{
	int ret;

	pthread_mutex_lock(&s->idle_lock);
	/* Counted before idle() looks: see agr__scheduler_note_idle(). */
	atomic_fetch_add(&s->idle_waiters, 1);
	ret = wait_until(&s->idle_cond, &s->idle_lock, idle, arg, deadline_ns);
	atomic_fetch_sub(&s->idle_waiters, 1);
	pthread_mutex_unlock(&s->idle_lock);
	return ret;
}

/*
 * Under the lock, so that a waiter between its idle() and its wait
 * cannot miss it: it holds the lock until the wait releases it.
 */
void agr__scheduler_wake_idle_waiters(struct agr_scheduler *s)
{
	pthread_mutex_lock(&s->idle_lock);
	pthread_cond_broadcast(&s->idle_cond);
	pthread_mutex_unlock(&s->idle_lock);
}

/* Items can only be left in an inbox of a worker that never started. */
static void drop_leftovers(struct agr_scheduler *s)
{
	int i;

	for (i = 0; i < s->parallelism; i++)
		agr__worker_adopt_orphans(s->workers[i]);
}

/* A free that waits for its workers says why this often. */
#define FREE_REPORT_NS (5ull * 1000000000u)

/* Names a worker that has not exited, and what keeps it. */
static void report_unjoined(struct agr_worker *w, uint64_t waited_ns)
{
	unsigned long long secs = waited_ns / 1000000000u;

	if (agr__worker_tearing_down(w))
		agr__log(AGR_LOG_WARN,
			 "agr_supplier_free(): worker %s has not ended after "
			 "%llu s: it waits for the kernel to end %d ring "
			 "operation(s) of its force stop (it names them itself)",
			 agr__worker_name(w), secs, agr__worker_inflight(w));
	else
		agr__log(AGR_LOG_WARN,
			 "agr_supplier_free(): worker %s has not ended after "
			 "%llu s: a task, function or I/O callback on it has "
			 "not returned (blocked in a call? C cannot stop a "
			 "thread; agr_worker_interrupted() says to return)",
			 agr__worker_name(w), secs);
}

/*
 * Waits for the workers to exit before they are joined, naming every
 * FREE_REPORT_NS each that has not and why: a free never waits
 * silently.
 */
static void await_exit_aloud(struct agr_scheduler *s)
{
	uint64_t start = agr__now_ns(), next = start;
	int i;

	for (;;) {
		next += FREE_REPORT_NS;
		if (agr__scheduler_await(s, next) == 0)
			return;
		for (i = 0; i < s->parallelism; i++)
			if (!agr__worker_exited(s->workers[i]))
				report_unjoined(s->workers[i],
						agr__now_ns() - start);
	}
}

void agr__scheduler_free(struct agr_scheduler *s)
{
	int i;

	if (!s)
		return;
	agr__scheduler_dispose(s, true);
	registry_remove(s);
	await_exit_aloud(s);
	for (i = 0; i < s->parallelism; i++)
		agr__worker_join(s->workers[i]);
	drop_leftovers(s);
	/* Every sender is gone and every thread joined: rings may close. */
	scheduler_free_memory(s);
}
