/* SPDX-License-Identifier: MIT */
#include "testutil.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <liburing.h>

void tu_require_io_uring(void)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(2, &ring, 0);

	if (ret < 0) {
		fprintf(stderr,
			"SKIP: cannot create an io_uring ring: %s (seccomp, "
			"kernel.io_uring_disabled or an old kernel)\n",
			strerror(-ret));
		exit(TU_SKIP);
	}
	io_uring_queue_exit(&ring);
}

int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

uint64_t tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tu_latch_init(struct tu_latch *l, int count)
{
	pthread_mutex_init(&l->lock, NULL);
	tu_cond_init_monotonic(&l->cond);
	l->count = count;
}

void tu_latch_destroy(struct tu_latch *l)
{
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
}

void tu_latch_count_down(struct tu_latch *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->count > 0 && --l->count == 0)
		pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

bool tu_latch_wait(struct tu_latch *l, uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	bool ok;

	pthread_mutex_lock(&l->lock);
	while (l->count > 0) {
		if (pthread_cond_timedwait(&l->cond, &l->lock, &ts) ==
		    ETIMEDOUT)
			break;
	}
	ok = l->count == 0;
	pthread_mutex_unlock(&l->lock);
	return ok;
}

int tu_latch_count(struct tu_latch *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->count;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* The latch's lock and clock; the tally counts up instead of down. */
void tu_tally_init(struct tu_tally *t)
{
	pthread_mutex_init(&t->lock, NULL);
	tu_cond_init_monotonic(&t->cond);
	t->n = 0;
}

void tu_tally_destroy(struct tu_tally *t)
{
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}

void tu_tally_add(struct tu_tally *t)
{
	pthread_mutex_lock(&t->lock);
	t->n++;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

long tu_tally_value(struct tu_tally *t)
{
	long n;

	pthread_mutex_lock(&t->lock);
	n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}

bool tu_tally_wait(struct tu_tally *t, long n, uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	bool ok;

	pthread_mutex_lock(&t->lock);
	while (t->n < n &&
	       pthread_cond_timedwait(&t->cond, &t->lock, &ts) != ETIMEDOUT)
		;
	ok = t->n >= n;
	pthread_mutex_unlock(&t->lock);
	return ok;
}

struct timespec tu_deadline_after(uint64_t timeout_ns)
{
	uint64_t deadline = tu_now_ns() + timeout_ns;
	struct timespec ts = {
		.tv_sec = (time_t)(deadline / 1000000000ull),
		.tv_nsec = (long)(deadline % 1000000000ull),
	};

	return ts;
}

void tu_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
}

static atomic_int worker_failures;
static atomic_int first_failed_line;

void tu_expect_at(bool ok, int line)
{
	int none = 0;

	if (ok)
		return;
	atomic_fetch_add(&worker_failures, 1);
	atomic_compare_exchange_strong(&first_failed_line, &none, line);
}

void tu_assert_no_worker_failure(void)
{
	ck_assert_msg(atomic_load(&worker_failures) == 0,
		      "%d check(s) failed on a worker, the first at line %d",
		      atomic_load(&worker_failures),
		      atomic_load(&first_failed_line));
}

void tu_reset_worker_failures(void)
{
	atomic_store(&worker_failures, 0);
	atomic_store(&first_failed_line, 0);
}
