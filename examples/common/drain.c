/* SPDX-License-Identifier: MIT */
#include "drain.h"

#include <time.h>

void drain_init(struct drain *d)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&d->lock, NULL);
	/* Deadlines on the monotonic clock: a clock step does not move them. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &attr);
	pthread_condattr_destroy(&attr);
	d->live = 0;
}

void drain_destroy(struct drain *d)
{
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
}

void drain_add(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	d->live++;
	pthread_mutex_unlock(&d->lock);
}

void drain_done(struct drain *d)
{
	pthread_mutex_lock(&d->lock);
	if (--d->live == 0)
		pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

bool drain_wait(struct drain *d, uint64_t timeout_ns)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(timeout_ns / 1000000000ull);
	ts.tv_nsec += (long)(timeout_ns % 1000000000ull);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&d->lock);
	while (d->live > 0 &&
	       pthread_cond_timedwait(&d->cond, &d->lock, &ts) == 0)
		;
	done = d->live == 0;
	pthread_mutex_unlock(&d->lock);
	return done;
}
