/* SPDX-License-Identifier: MIT */
#include "testutil.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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

static void *aside_main(void *arg)
{
	struct tu_aside *a = arg;

	a->fn(a->arg);
	tu_latch_count_down(&a->returned);
	return NULL;
}

void tu_aside_start(struct tu_aside *a, void (*fn)(void *), void *arg)
{
	a->fn = fn;
	a->arg = arg;
	tu_latch_init(&a->returned, 1);
	ck_assert_int_eq(pthread_create(&a->thread, NULL, aside_main, a), 0);
}

bool tu_aside_wait(struct tu_aside *a, uint64_t timeout_ns)
{
	return timeout_ns ? tu_latch_wait(&a->returned, timeout_ns) :
			    tu_latch_count(&a->returned) == 0;
}

void tu_aside_join(struct tu_aside *a)
{
	pthread_join(a->thread, NULL);
	tu_latch_destroy(&a->returned);
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

void tu_count_down(void *latch)
{
	tu_latch_count_down(latch);
}

void tu_journal_init(struct tu_journal *j)
{
	pthread_mutex_init(&j->lock, NULL);
	j->n = 0;
}

void tu_journal_destroy(struct tu_journal *j)
{
	pthread_mutex_destroy(&j->lock);
}

void tu_journal_reset(struct tu_journal *j)
{
	pthread_mutex_lock(&j->lock);
	j->n = 0;
	pthread_mutex_unlock(&j->lock);
}

void tu_journal_add(struct tu_journal *j, const char *a, const char *b)
{
	pthread_mutex_lock(&j->lock);
	if (j->n < TU_JOURNAL_STEPS) {
		snprintf(j->steps[j->n], TU_JOURNAL_STEP_LEN, "%s%s%s", a,
			 b ? ":" : "", b ? b : "");
		j->n++;
	}
	pthread_mutex_unlock(&j->lock);
}

int tu_journal_count(struct tu_journal *j, const char *step)
{
	int i, n = 0;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < j->n; i++)
		n += strcmp(j->steps[i], step) == 0;
	pthread_mutex_unlock(&j->lock);
	return n;
}

void tu_journal_assert(struct tu_journal *j, const char *const *expected,
		       int k, int n)
{
	int i;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < k && i < j->n; i++)
		ck_assert_str_eq(j->steps[i], expected[i]);
	ck_assert_int_eq(j->n, n);
	pthread_mutex_unlock(&j->lock);
}

void tu_logbook_init(struct tu_logbook *b)
{
	pthread_mutex_init(&b->lock, NULL);
	tu_cond_init_monotonic(&b->grew);
	b->n = 0;
}

void tu_logbook_clear(struct tu_logbook *b)
{
	pthread_mutex_lock(&b->lock);
	b->n = 0;
	pthread_mutex_unlock(&b->lock);
}

void tu_logbook_keep(agr_log_level level, const char *msg, void *book)
{
	struct tu_logbook *b = book;

	pthread_mutex_lock(&b->lock);
	if (b->n < TU_LOG_LINES) {
		b->level[b->n] = level;
		snprintf(b->line[b->n], sizeof(b->line[0]), "%s", msg);
		b->n++;
		pthread_cond_broadcast(&b->grew);
	}
	pthread_mutex_unlock(&b->lock);
}

static bool holds(const char *line, const char *part)
{
	return !part || strstr(line, part);
}

static int count_locked(struct tu_logbook *b, int level, const char *p1,
			const char *p2, const char *p3)
{
	int i, n = 0;

	for (i = 0; i < b->n; i++)
		n += (level == TU_LOG_ANY || (int)b->level[i] == level) &&
		     holds(b->line[i], p1) && holds(b->line[i], p2) &&
		     holds(b->line[i], p3);
	return n;
}

int tu_logbook_count(struct tu_logbook *b, int level, const char *p1,
		     const char *p2, const char *p3)
{
	return tu_logbook_wait(b, level, p1, p2, p3, 0);
}

int tu_logbook_wait(struct tu_logbook *b, int level, const char *p1,
		    const char *p2, const char *p3, uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	int n;

	pthread_mutex_lock(&b->lock);
	while ((n = count_locked(b, level, p1, p2, p3)) < 1 && timeout_ns &&
	       pthread_cond_timedwait(&b->grew, &b->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&b->lock);
	return n;
}

void tu_logbook_dump(struct tu_logbook *b)
{
	int i;

	pthread_mutex_lock(&b->lock);
	for (i = 0; i < b->n; i++)
		fprintf(stderr, "log[%d] %d: %s\n", i, (int)b->level[i],
			b->line[i]);
	pthread_mutex_unlock(&b->lock);
}

const char *tu_or_empty(const char *s)
{
	return s ? s : "";
}

void tu_stuck_recv_init(struct tu_stuck_recv *r)
{
	memset(r, 0, sizeof(*r));
	atomic_init(&r->submit_ret, 1);
	atomic_init(&r->recv_res, 1);
	atomic_init(&r->calls, 0);
	tu_latch_init(&r->started, 1);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r->fds), 0);
}

void tu_stuck_recv_destroy(struct tu_stuck_recv *r)
{
	close(r->fds[0]);
	close(r->fds[1]);
	tu_latch_destroy(&r->started);
}

static void stuck_recv_finished(int res, void *arg)
{
	struct tu_stuck_recv *r = arg;

	atomic_store(&r->recv_res, res);
	agr_exchange_done(r->ex, res < 0 ? res : 0);
}

int tu_stuck_recv_fn(agr_exchange *ex, void *arg)
{
	struct tu_stuck_recv *r = arg;
	int ret;

	if (atomic_fetch_add(&r->calls, 1) > 0)
		return 0;
	r->ex = ex;
	ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0], r->buf,
			  sizeof(r->buf), 0, stuck_recv_finished, r);
	atomic_store(&r->submit_ret, ret);
	tu_latch_count_down(&r->started);
	return ret < 0 ? ret : AGR_PENDING;
}
