/* SPDX-License-Identifier: MIT */
/*
 * fault_doorbells.c - check_fault's doorbells that fail (from threads,
 * from workers, for good, under load, across schedulers) and a
 * submission queue that looks full; each message still completes
 * exactly once, in order per id.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring.h>
#include <aggring/fault.h>

#include "fault_test.h"
#include "testutil.h"

/* ---- doorbells ---- */

static const struct {
	int err;
} bell_errors[] = { { -EBADFD }, { -EOVERFLOW }, { -ENOMEM } };

/* Errors logged about a doorbell (one retried and heard is not one). */
static int doorbell_errors(void)
{
	return tu_logbook_count(&logbook, AGR_LOG_ERROR, "doorbell", NULL,
				NULL);
}

/* From a thread without a ring: retried until heard. */
START_TEST(doorbell_from_thread_fails)
{
	int err = bell_errors[_i].err;
	struct flow *f = flow_new();
	char needle[64];

	f->d = f->next = flow_dispatcher(f, "flt", &order, 2, 8);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, err, 0, 3), 0);
	send_one_by_one(f, AGR_FAULT_DOORBELL, 3);
	ASSERT_LOGGED(AGR_LOG_WARN, "doorbell to ring fd", strerror(-err));
	snprintf(needle, sizeof(needle), "delivered after 4 attempts");
	ASSERT_LOGGED(AGR_LOG_INFO, needle, strerror(-err));
	ck_assert_int_eq(doorbell_errors(), 0);
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

/* Sends leaves one by one until a send's doorbell fails. */
static void *send_until_refused(void *arg)
{
	struct flow *f = arg;
	struct tmsg *t;
	int round;

	for (round = 0; round < MAX_ROUNDS; round++) {
		t = flow_msg(f, round % NIDS, 0, "leaf");
		TU_EXPECT(agr_dispatcher_send(f->d, &t->m) == 0);
		if (agr_fault_fired(AGR_FAULT_DOORBELL) > 0)
			break;
		TU_EXPECT(tu_tally_wait(&f->leaves, round + 1, TU_LONG_NS));
	}
	return NULL;
}

/*
 * The kernel refuses a doorbell for seconds: the send keeps trying and
 * says so, and once the kernel takes it the message runs.
 */
START_TEST(doorbell_keeps_failing)
{
	struct flow *f = flow_new();
	pthread_t th;

	f->d = f->next = flow_dispatcher(f, "flt", &order, 1, 1);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, -EBADFD, 0,
				       1000000000), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, send_until_refused, f), 0);
	ck_assert(tu_tally_wait(&log_errors, 1, TU_LONG_NS));
	ASSERT_LOGGED(AGR_LOG_ERROR, "still failing", strerror(EBADFD));
	agr_fault_reset(); /* the kernel takes doorbells again */
	pthread_join(th, NULL);
	ASSERT_LOGGED(AGR_LOG_INFO, "delivered after", strerror(EBADFD));
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

/*
 * A doorbell refused for good (the kernel says the ring is no ring):
 * logged, and the bell is armed again, so the next activation on that
 * worker (another group) rings and both messages run.
 */
START_TEST(doorbell_fails_for_good)
{
	struct flow *f = flow_new();
	struct tmsg *t;

	f->d = f->next = flow_dispatcher(f, "flt", &order, 1, 2);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, -EBADF, 0, 1), 0);
	send_until_refused(f);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_DOORBELL), 1);
	ASSERT_LOGGED(AGR_LOG_ERROR, "doorbell to ring fd", strerror(EBADF));
	t = flow_msg(f, 1, 1, "leaf");
	ck_assert_int_eq(agr_dispatcher_send(f->d, &t->m), 0);
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

struct producer {
	struct flow *f;
	struct tmsg *msgs[MAX_MSGS / 2];
	int n;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	int i;

	for (i = 0; i < p->n; i++)
		TU_EXPECT(agr_dispatcher_send(p->f->d, &p->msgs[i]->m) == 0);
	return NULL;
}

/* Two producers, faults among their doorbells: none lost or doubled. */
START_TEST(doorbell_faults_under_load)
{
	struct producer prod[2];
	struct flow *f = flow_new();
	pthread_t th[2];
	int i, k, id;

	f->d = f->next = flow_dispatcher(f, "flt", &order, 2, 8);
	/* Producer k owns ids k, k+2, ...: its order is theirs. */
	for (k = 0; k < 2; k++) {
		prod[k].f = f;
		prod[k].n = 2000;
		for (i = 0; i < prod[k].n; i++) {
			id = (2 * i + k) % NIDS;
			prod[k].msgs[i] = flow_msg(f, id, id, "leaf");
		}
	}
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, -EOVERFLOW, 2, 6),
			 0);
	for (k = 0; k < 2; k++)
		ck_assert_int_eq(pthread_create(&th[k], NULL, produce,
						&prod[k]), 0);
	for (k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	assert_exactly_once(f);
	for (id = 0; id < NIDS; id++)
		ck_assert_int_eq(atomic_load(&f->next_seq[id]),
				 4000 / NIDS);
	ck_assert_int_eq(doorbell_errors(), 0);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

/* From a worker to a peer: the failure CQE makes it ring again. */
START_TEST(doorbell_from_worker_fails)
{
	int err = bell_errors[_i].err;
	struct flow *f = flow_new();

	f->d = f->next = flow_dispatcher(f, "flt", &order, 2, 2);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL_SQE, err, 0, 1), 0);
	forward_one_by_one(f, AGR_FAULT_DOORBELL_SQE, 1);
	ASSERT_LOGGED(AGR_LOG_WARN, "flt-Order-0: doorbell to flt-Order-1",
		      strerror(-err));
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

#define CHAIN 1000 /* round trips between two workers */

/*
 * The retry's fault first: armed the other way round, a worker could
 * fail the SQE and retry before the second fault is armed.
 */
static void arm_sqe_then_thread(void)
{
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, -EOVERFLOW, 0, 2),
			 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL_SQE, -ENOMEM, 0, 1),
			 0);
}

/* ... and its second try fails too, twice: still heard. */
START_TEST(doorbell_from_worker_retry_fails)
{
	struct flow *f = flow_new();

	f->d = f->next = flow_dispatcher(f, "flt", &order, 2, 2);
	chain(f, CHAIN, arm_sqe_then_thread);
	/* The chain may finish before the failure CQE is reaped. */
	ASSERT_LOGGED(AGR_LOG_INFO, "delivered after 3 attempts",
		      strerror(EOVERFLOW));
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_DOORBELL_SQE), 1);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_DOORBELL), 2);
	ck_assert_int_eq(doorbell_errors(), 0);
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

static void arm_cross(void)
{
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_DOORBELL, -EBADFD, 0, 4), 0);
}

/* A worker rings another scheduler's worker: sent and retried at once. */
START_TEST(doorbell_cross_scheduler_fails)
{
	struct flow *f = flow_new();
	int id;

	f->d = flow_dispatcher(f, "fa", &order, 1, 1);
	f->next = flow_dispatcher(f, "fb", &payment, 1, 1);
	chain(f, CHAIN, arm_cross);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_DOORBELL), 4);
	ASSERT_LOGGED(AGR_LOG_WARN, "doorbell to ring fd",
		      strerror(EBADFD));
	ck_assert_int_eq(doorbell_errors(), 0);
	assert_exactly_once(f);
	for (id = 0; id < NIDS; id++)
		ck_assert_int_ge(atomic_load(&f->next_seq[id]), 1);
	stop_and_free(f->d);
	stop_and_free(f->next);
	flow_free(f);
}
END_TEST

/* ---- a full submission queue ---- */

static uint64_t sq_full_of(agr_scheduler *s, int worker)
{
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(s, worker, &m), 0);
	return m.sq_full;
}

int tmp_file(void)
{
	char path[] = "/tmp/aggring-fault-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

static void xfer_next(struct xfer *x);

static void xfer_cb(int res, void *arg)
{
	struct xfer *x = arg;
	int n = atomic_fetch_add(&x->calls, 1);

	if (n < (int)ARRAY_SIZE(x->results))
		x->results[n] = res;
	if (res > 0)
		x->done += (unsigned)res;
	if (res <= 0 || x->done >= IO_LEN ||
	    n + 1 >= (int)ARRAY_SIZE(x->results)) {
		tu_latch_count_down(&x->finished);
		return;
	}
	xfer_next(x); /* io.h promises no full transfer: the caller loops */
}

static void xfer_next(struct xfer *x)
{
	agr_worker *w = agr_worker_current();
	int ret;

	if (x->write)
		ret = agr_io_write(w, x->fd, x->buf + x->done,
				   IO_LEN - x->done, x->done, xfer_cb, x);
	else
		ret = agr_io_read(w, x->fd, x->buf + x->done,
				  IO_LEN - x->done, x->done, xfer_cb, x);
	if (x->done == 0)
		x->submit_ret = ret;
	if (ret != 0)
		tu_latch_count_down(&x->finished);
}

static void xfer_task(void *arg)
{
	xfer_next(arg);
}

void xfer_init(struct xfer *x, int fd, bool write, char *buf)
{
	memset(x, 0, sizeof(*x));
	x->fd = fd;
	x->write = write;
	x->buf = buf;
	x->submit_ret = 1;
	tu_latch_init(&x->finished, 1);
}

void xfer_run(agr_scheduler *s, struct xfer *x)
{
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, xfer_task, x), 0);
	ck_assert(tu_latch_wait(&x->finished, TU_LONG_NS));
	tu_latch_destroy(&x->finished);
}

char *pattern(void)
{
	char *buf = malloc(IO_LEN);
	int i;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < IO_LEN; i++)
		buf[i] = (char)('a' + i % 23);
	return buf;
}

/* The SQ looks full `_i` times: flushed and retried, I/O completes. */
START_TEST(sq_full_io)
{
	unsigned k = (unsigned)_i;
	char *buf = pattern(), back[IO_LEN];
	agr_supplier *sup;
	agr_scheduler *s;
	struct xfer x;
	uint64_t before;
	int fd = tmp_file();

	ck_assert_int_eq(agr_supplier_new("flt", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	before = sq_full_of(s, 0);
	xfer_init(&x, fd, true, buf);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_SQ_FULL, 0, 0, k), 0);
	xfer_run(s, &x);
	ck_assert_int_eq(x.submit_ret, 0);
	ck_assert_int_eq(atomic_load(&x.calls), 1);
	ck_assert_int_eq(x.results[0], IO_LEN);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_SQ_FULL), k);
	ck_assert_uint_eq(sq_full_of(s, 0) - before, k);
	ck_assert_int_eq(pread(fd, back, IO_LEN, 0), IO_LEN);
	ck_assert(memcmp(back, buf, IO_LEN) == 0);
	agr_supplier_free(sup);
	close(fd);
	free(buf);
}
END_TEST

/* A doorbell finds no SQE even after flushing: sent from the thread. */
START_TEST(sq_full_doorbell)
{
	struct flow *f = flow_new();
	agr_scheduler *s;
	uint64_t before;

	f->d = f->next = flow_dispatcher(f, "flt", &order, 2, 2);
	s = agr_dispatcher_scheduler(f->d);
	before = sq_full_of(s, 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_SQ_FULL, 0, 0,
				       1 + SQ_FLUSH_TRIES), 0);
	forward_one_by_one(f, AGR_FAULT_SQ_FULL, 1 + SQ_FLUSH_TRIES);
	ck_assert_uint_eq(sq_full_of(s, 0) - before, SQ_FLUSH_TRIES);
	assert_exactly_once(f);
	stop_and_free(f->d);
	flow_free(f);
}
END_TEST

void fault_doorbell_tests(TCase *doorbell, TCase *sq_full)
{
	tcase_add_loop_test(doorbell, doorbell_from_thread_fails, 0,
			    (int)ARRAY_SIZE(bell_errors));
	tcase_add_test(doorbell, doorbell_faults_under_load);
	tcase_add_test(doorbell, doorbell_keeps_failing);
	tcase_add_test(doorbell, doorbell_fails_for_good);
	tcase_add_loop_test(doorbell, doorbell_from_worker_fails, 0,
			    (int)ARRAY_SIZE(bell_errors));
	tcase_add_test(doorbell, doorbell_from_worker_retry_fails);
	tcase_add_test(doorbell, doorbell_cross_scheduler_fails);
	tcase_add_loop_test(sq_full, sq_full_io, 1, SQ_FLUSH_TRIES + 1);
	tcase_add_test(sq_full, sq_full_doorbell);
}
