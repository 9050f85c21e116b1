/* SPDX-License-Identifier: MIT */
/*
 * fault.c - the armed fault plan and the testing API of aggring/fault.h.
 * Compiled only with --enable-fault-injection.
 *
 * One mutex guards the plan: fault builds are for tests, where being
 * exact (the n-th hit fails, across threads) matters more than speed.
 * An unarmed point costs one relaxed load.
 */
#include "fault.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#ifndef IORING_NOP_INJECT_RESULT
#define IORING_NOP_INJECT_RESULT (1U << 0) /* Linux 6.10 */
#endif

struct plan {
	int value;
	unsigned skip, count;
	unsigned reached, fired;
};

static const char *const point_names[AGR_FAULT_POINTS] = {
	[AGR_FAULT_RING_SETUP] = "ring_setup",
	[AGR_FAULT_THREAD_CREATE] = "thread_create",
	[AGR_FAULT_DOORBELL] = "doorbell",
	[AGR_FAULT_DOORBELL_SQE] = "doorbell_sqe",
	[AGR_FAULT_SQ_FULL] = "sq_full",
	[AGR_FAULT_IO_RESULT] = "io_result",
	[AGR_FAULT_IO_SHORT] = "io_short",
	[AGR_FAULT_GO_IDLE_PAUSE] = "go_idle_pause",
};

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan plans[AGR_FAULT_POINTS];
static atomic_uint armed; /* bit per point: a fast "no" */

static bool valid_point(agr_fault_point point)
{
	return (unsigned)point < AGR_FAULT_POINTS;
}

/* The values `point` can be armed with (aggring/fault.h). */
static bool valid_value(agr_fault_point point, int value)
{
	if (point == AGR_FAULT_SQ_FULL)
		return true; /* no value */
	if (point == AGR_FAULT_IO_SHORT)
		return value >= 0; /* a byte count */
	if (point == AGR_FAULT_GO_IDLE_PAUSE)
		return value > 0; /* microseconds */
	return value < 0; /* a negative errno */
}

AGR_API int agr_fault_arm(agr_fault_point point, int value, unsigned skip,
			  unsigned count)
{
	if (!valid_point(point) || count == 0 || !valid_value(point, value))
		return -EINVAL;
	pthread_mutex_lock(&plan_lock);
	plans[point] = (struct plan){ .value = value, .skip = skip,
				      .count = count };
	atomic_fetch_or(&armed, 1u << point);
	pthread_mutex_unlock(&plan_lock);
	return 0;
}

AGR_API void agr_fault_reset(void)
{
	pthread_mutex_lock(&plan_lock);
	memset(plans, 0, sizeof(plans));
	atomic_store(&armed, 0);
	pthread_mutex_unlock(&plan_lock);
}

static unsigned read_counter(agr_fault_point point, bool fired)
{
	unsigned n;

	if (!valid_point(point))
		return 0;
	pthread_mutex_lock(&plan_lock);
	n = fired ? plans[point].fired : plans[point].reached;
	pthread_mutex_unlock(&plan_lock);
	return n;
}

AGR_API unsigned agr_fault_fired(agr_fault_point point)
{
	return read_counter(point, true);
}

AGR_API unsigned agr_fault_reached(agr_fault_point point)
{
	return read_counter(point, false);
}

/* One hit of an armed point: pass while skipping, else fail. */
static bool hit(struct plan *p, agr_fault_point point, int *value)
{
	p->reached++;
	if (p->skip > 0) {
		p->skip--;
		return false;
	}
	p->fired++;
	if (value)
		*value = p->value;
	if (--p->count == 0)
		atomic_fetch_and(&armed, ~(1u << point));
	return true;
}

static bool is_armed(agr_fault_point point)
{
	return atomic_load_explicit(&armed, memory_order_relaxed) &
	       (1u << point);
}

bool agr__fault(agr_fault_point point, int *value)
{
	bool fail = false;
	int v = 0;

	if (!is_armed(point))
		return false;
	pthread_mutex_lock(&plan_lock);
	if (plans[point].count > 0)
		fail = hit(&plans[point], point, &v);
	pthread_mutex_unlock(&plan_lock);
	if (!fail)
		return false;
	if (value)
		*value = v;
	agr__log(AGR_LOG_DEBUG, "fault injected at %s: %d",
		 point_names[point], v);
	return true;
}

/* A short count hits only completions longer than the armed size. */
static bool short_count(int *res)
{
	bool fail = false;
	struct plan *p = &plans[AGR_FAULT_IO_SHORT];

	if (*res <= 0 || !is_armed(AGR_FAULT_IO_SHORT))
		return false;
	pthread_mutex_lock(&plan_lock);
	if (p->count > 0 && *res > p->value)
		fail = hit(p, AGR_FAULT_IO_SHORT, res);
	pthread_mutex_unlock(&plan_lock);
	if (fail)
		agr__log(AGR_LOG_DEBUG, "fault injected at io_short: %d",
			 *res);
	return fail;
}

void agr__fault_io(int *res)
{
	int v;

	if (agr__fault(AGR_FAULT_IO_RESULT, &v))
		*res = v;
	else
		short_count(res);
}

void agr__fault_doorbell_sqe(struct io_uring_sqe *sqe)
{
	unsigned char flags = sqe->flags;
	int v;

	if (!agr__fault(AGR_FAULT_DOORBELL_SQE, &v))
		return;
	/*
	 * A NOP that completes with `v` and posts nothing to the target:
	 * to the sender it looks exactly like a failed MSG_RING. A kernel
	 * without INJECT_RESULT fails the NOP with -EINVAL, still a failure.
	 */
	io_uring_prep_nop(sqe);
	sqe->flags = flags;
	sqe->rw_flags = IORING_NOP_INJECT_RESULT;
	sqe->len = (unsigned)v;
}

void agr__fault_pause(agr_fault_point point)
{
	struct timespec ts;
	int us;

	if (!agr__fault(point, &us))
		return;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (long)(us % 1000000) * 1000;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}
