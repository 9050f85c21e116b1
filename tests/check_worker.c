/* SPDX-License-Identifier: MIT */
/*
 * check_worker.c - the worker a task runs on: its identity, its thread
 * name, and the I/O it submits to its own ring (timers, cancellation,
 * sockets, files), including an immediate dispose with I/O in flight;
 * its settings from the environment in worker_settings.c.
 *
 * Results are recorded on the worker and asserted on the test thread:
 * a failed ck_assert on a worker thread would end the child abruptly.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>

#include "worker_test.h"
#include "testutil.h"

#define MS 1000000ull

agr_supplier *new_supplier(int parallelism)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("worker", parallelism, &sup), 0);
	ck_assert_ptr_nonnull(sup);
	return sup;
}

agr_scheduler *lookup(agr_supplier *sup, const char *aggregate)
{
	agr_named_aggregate named = { "sales", aggregate };
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_get_or_init(sup, &named, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

void run_on(agr_scheduler *s, unsigned hint, agr_task_fn fn,
	    void *arg)
{
	ck_assert_int_eq(agr_scheduler_schedule(s, hint, fn, arg), 0);
}

/* ---- identity ---- */

static void probe_task(void *arg)
{
	struct probe *p = arg;

	p->w = agr_worker_current();
	p->sched = agr_worker_scheduler(p->w);
	p->index = agr_worker_index(p->w);
	p->interrupted = agr_worker_interrupted();
	p->has_ring = agr_worker_ring(p->w) != NULL;
	pthread_getname_np(pthread_self(), p->name, sizeof(p->name));
	tu_latch_count_down(&p->done);
}

/* Runs probe_task on worker `hint` and waits for it. */
void probe(agr_scheduler *s, unsigned hint, struct probe *p)
{
	memset(p, 0, sizeof(*p));
	tu_latch_init(&p->done, 1);
	run_on(s, hint, probe_task, p);
	ck_assert(tu_latch_wait(&p->done, TU_LONG_NS));
	tu_latch_destroy(&p->done);
}

START_TEST(identity_inside_and_outside_a_task)
{
	static const unsigned hints[] = { 0, 1, 2, 5, 7, 4000000001u };
	agr_supplier *sup = new_supplier(3);
	agr_scheduler *s = lookup(sup, "Order");
	agr_worker *by_index[3] = { NULL };
	struct probe p;
	char want[32];
	size_t i;

	ck_assert_ptr_null(agr_worker_current());
	ck_assert_int_eq(agr_worker_index(NULL), -EINVAL);
	ck_assert_ptr_null(agr_worker_scheduler(NULL));
	ck_assert_ptr_null(agr_worker_ring(NULL));

	for (i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		probe(s, hints[i], &p);
		ck_assert_ptr_nonnull(p.w);
		ck_assert_int_eq(p.index, (int)(hints[i] % 3));
		ck_assert_ptr_eq(p.sched, s);
		ck_assert(p.has_ring);
		snprintf(want, sizeof(want), "worker-Order-%d", p.index);
		ck_assert_str_eq(p.name, want);
		/* One hint class, one worker. */
		if (by_index[p.index])
			ck_assert_ptr_eq(by_index[p.index], p.w);
		by_index[p.index] = p.w;
	}
	ck_assert_ptr_null(agr_worker_current());
	agr_supplier_free(sup);
}
END_TEST

START_TEST(long_thread_name_is_cut_to_15_bytes)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "VeryLongAggregateName");
	struct probe p;

	probe(s, 1, &p);
	ck_assert_int_eq(p.index, 1);
	ck_assert_uint_eq(strlen(p.name), 15);
	ck_assert_str_eq(p.name, "worker-VeryLong");
	agr_supplier_free(sup);
}
END_TEST

START_TEST(not_interrupted_off_a_worker_or_in_a_normal_task)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup, "Order");
	struct probe p;

	ck_assert(!agr_worker_interrupted());
	probe(s, 0, &p);
	ck_assert_ptr_nonnull(p.w);
	ck_assert(!p.interrupted);
	ck_assert(!agr_worker_interrupted());
	agr_supplier_free(sup);
}
END_TEST

/* ---- timers ---- */

struct timer {
	uint64_t timeout_ns;
	agr_worker *submitter, *completer;
	pthread_t submit_thread, complete_thread;
	uint64_t start, end;
	int submit_ret, res, calls;
	struct tu_latch done;
};

static void timer_fired(int res, void *arg)
{
	struct timer *t = arg;

	t->end = tu_now_ns();
	t->completer = agr_worker_current();
	t->complete_thread = pthread_self();
	t->res = res;
	t->calls++;
	tu_latch_count_down(&t->done);
}

static void start_timer(void *arg)
{
	struct timer *t = arg;

	t->submitter = agr_worker_current();
	t->submit_thread = pthread_self();
	t->start = tu_now_ns();
	t->submit_ret = agr_io_timeout(t->submitter, t->timeout_ns,
				       timer_fired, t);
	if (t->submit_ret)
		tu_latch_count_down(&t->done);
}

START_TEST(timeout_fires_on_the_submitting_worker)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "Order");
	struct timer t = { .timeout_ns = 20 * MS };

	tu_latch_init(&t.done, 1);
	run_on(s, 1, start_timer, &t);
	ck_assert(tu_latch_wait(&t.done, TU_LONG_NS));
	ck_assert_int_eq(t.submit_ret, 0);
	ck_assert_int_eq(t.res, -ETIME);
	ck_assert_int_eq(t.calls, 1);
	ck_assert_ptr_nonnull(t.submitter);
	ck_assert_ptr_eq(t.completer, t.submitter);
	ck_assert(pthread_equal(t.complete_thread, t.submit_thread));
	/* Only a lower bound: a loaded machine may fire late, never early. */
	ck_assert_uint_ge(t.end - t.start, t.timeout_ns);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&t.done);
}
END_TEST

/*
 * A 60 s timer is cancelled from the callback of a 1 ms one, so it is
 * certainly in the kernel by then. A task queued from the cancelled
 * callback then reads the in-flight count once that op is released.
 */
struct cancel_probe {
	int long_ret, short_ret;
	/* Its address is the long timer's arg; not the first member. */
	struct cancel_probe *self;
	int cancel_ret, long_res, long_calls;
	int inflight_after;
	struct tu_latch done;
};

static void read_inflight(void *arg)
{
	struct cancel_probe *c = arg;

	c->inflight_after = agr_io_inflight(agr_worker_current());
	tu_latch_count_down(&c->done);
}

static void long_timer_fired(int res, void *self)
{
	struct cancel_probe *c = *(struct cancel_probe **)self;
	agr_worker *w = agr_worker_current();

	c->long_res = res;
	c->long_calls++;
	if (agr_scheduler_schedule(agr_worker_scheduler(w),
				   (unsigned)agr_worker_index(w), read_inflight,
				   c) != 0)
		tu_latch_count_down(&c->done);
}

static void short_timer_fired(int res, void *arg)
{
	struct cancel_probe *c = arg;

	(void)res;
	c->cancel_ret = agr_io_cancel(agr_worker_current(), &c->self);
}

static void start_two_timers(void *arg)
{
	struct cancel_probe *c = arg;
	agr_worker *w = agr_worker_current();

	c->long_ret = agr_io_timeout(w, 60000 * MS, long_timer_fired,
				     &c->self);
	c->short_ret = agr_io_timeout(w, 1 * MS, short_timer_fired, c);
	if (c->long_ret || c->short_ret)
		tu_latch_count_down(&c->done);
}

START_TEST(cancel_ends_a_long_timeout)
{
	agr_supplier *sup = new_supplier(1);
	agr_scheduler *s = lookup(sup, "Order");
	struct cancel_probe c = { .inflight_after = -1 };

	c.self = &c;
	tu_latch_init(&c.done, 1);
	run_on(s, 0, start_two_timers, &c);
	ck_assert(tu_latch_wait(&c.done, TU_LONG_NS));
	ck_assert_int_eq(c.long_ret, 0);
	ck_assert_int_eq(c.short_ret, 0);
	ck_assert_int_eq(c.cancel_ret, 1);
	ck_assert_int_eq(c.long_res, -ECANCELED);
	ck_assert_int_eq(c.long_calls, 1);
	ck_assert_int_eq(c.inflight_after, 0);
	/* Nothing left in flight, so a graceful stop ends at once. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&c.done);
}
END_TEST

/* ---- misuse ---- */

static void never_called(int res, void *arg)
{
	(void)res;
	atomic_fetch_add((atomic_int *)arg, 1);
}

struct misuse {
	agr_worker *other; /* a peer worker of the same scheduler */
	atomic_int *calls;
	int null_cb_timeout, null_cb_read, peer_timeout, peer_cancel;
	int inflight;
	struct tu_latch done;
};

static void misuse_task(void *arg)
{
	struct misuse *m = arg;
	agr_worker *w = agr_worker_current();
	char buf[1];

	m->null_cb_timeout = agr_io_timeout(w, MS, NULL, NULL);
	m->null_cb_read = agr_io_read(w, 0, buf, 1, 0, NULL, NULL);
	m->peer_timeout = agr_io_timeout(m->other, MS, never_called,
					 m->calls);
	m->peer_cancel = agr_io_cancel(m->other, NULL);
	m->inflight = agr_io_inflight(w);
	tu_latch_count_down(&m->done);
}

START_TEST(io_is_refused_off_its_worker_and_without_a_callback)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "Order");
	atomic_int calls = 0;
	struct misuse m = { .calls = &calls };
	struct probe p;
	char buf[4];
	struct iovec iov = { buf, sizeof(buf) };

	probe(s, 1, &p);
	ck_assert_ptr_nonnull(p.w);

	/* From the test thread, with a real worker or none. */
	ck_assert_int_eq(agr_io_timeout(NULL, MS, never_called, &calls),
			 -EINVAL);
	ck_assert_int_eq(agr_io_timeout(p.w, MS, never_called, &calls),
			 -EINVAL);
	ck_assert_int_eq(agr_io_read(p.w, 0, buf, 4, 0, never_called, &calls),
			 -EINVAL);
	ck_assert_int_eq(agr_io_writev(p.w, 1, &iov, 1, 0, never_called,
				       &calls), -EINVAL);
	ck_assert_int_eq(agr_io_openat(p.w, AT_FDCWD, "/", O_RDONLY, 0,
				       never_called, &calls), -EINVAL);
	ck_assert_int_eq(agr_io_cancel(p.w, NULL), -EINVAL);
	ck_assert_int_eq(agr_io_inflight(NULL), -EINVAL);

	/* From worker 0: a NULL cb, and ops aimed at worker 1. */
	m.other = p.w;
	tu_latch_init(&m.done, 1);
	run_on(s, 0, misuse_task, &m);
	ck_assert(tu_latch_wait(&m.done, TU_LONG_NS));
	ck_assert_int_eq(m.null_cb_timeout, -EINVAL);
	ck_assert_int_eq(m.null_cb_read, -EINVAL);
	ck_assert_int_eq(m.peer_timeout, -EINVAL);
	ck_assert_int_eq(m.peer_cancel, -EINVAL);
	ck_assert_int_eq(m.inflight, 0);

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(atomic_load(&calls), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&m.done);
}
END_TEST

/* ---- immediate dispose with I/O in flight ---- */

struct stuck_io {
	int sv[2];
	char buf[16];
	int timer_ret, recv_ret;
	atomic_int timer_calls, recv_calls;
	atomic_int timer_res, recv_res;
	struct tu_latch submitted;
};

static void stuck_timer_done(int res, void *arg)
{
	struct stuck_io *st = arg;

	atomic_store(&st->timer_res, res);
	atomic_fetch_add(&st->timer_calls, 1);
}

static void stuck_recv_done(int res, void *arg)
{
	struct stuck_io *st = arg;

	atomic_store(&st->recv_res, res);
	atomic_fetch_add(&st->recv_calls, 1);
}

static void submit_stuck_io(void *arg)
{
	struct stuck_io *st = arg;
	agr_worker *w = agr_worker_current();

	st->timer_ret = agr_io_timeout(w, 60000 * MS, stuck_timer_done, st);
	st->recv_ret = agr_io_recv(w, st->sv[0], st->buf, sizeof(st->buf), 0,
				   stuck_recv_done, st);
	tu_latch_count_down(&st->submitted);
}

START_TEST(force_stop_cancels_inflight_io_before_stop_returns)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "Order");
	struct stuck_io st = { .timer_res = 1, .recv_res = 1 };

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, st.sv), 0);
	tu_latch_init(&st.submitted, 1);
	run_on(s, 1, submit_stuck_io, &st);
	ck_assert(tu_latch_wait(&st.submitted, TU_LONG_NS));
	ck_assert_int_eq(st.timer_ret, 0);
	ck_assert_int_eq(st.recv_ret, 0);

	ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert(agr_scheduler_is_terminated(s));
	ck_assert_int_eq(atomic_load(&st.timer_calls), 1);
	ck_assert_int_eq(atomic_load(&st.recv_calls), 1);
	ck_assert_int_eq(atomic_load(&st.timer_res), -ECANCELED);
	ck_assert_int_eq(atomic_load(&st.recv_res), -ECANCELED);
	agr_supplier_free(sup);
	close(st.sv[0]);
	close(st.sv[1]);
	tu_latch_destroy(&st.submitted);
}
END_TEST

/* ---- tasks scheduled from a worker ---- */

struct hop {
	agr_scheduler *target;
	unsigned hint;
	agr_worker *ran_on;
	agr_scheduler *ran_in;
	struct tu_latch *done;
};

struct fan {
	struct hop hops[3];
	int ret[3];
	struct tu_latch done;
};

static void hop_task(void *arg)
{
	struct hop *h = arg;

	h->ran_on = agr_worker_current();
	h->ran_in = agr_worker_scheduler(h->ran_on);
	tu_latch_count_down(h->done);
}

static void fan_out(void *arg)
{
	struct fan *f = arg;
	int i;

	for (i = 0; i < 3; i++) {
		f->ret[i] = agr_scheduler_schedule(f->hops[i].target,
						   f->hops[i].hint, hop_task,
						   &f->hops[i]);
		if (f->ret[i])
			tu_latch_count_down(&f->done);
	}
}

/*
 * From worker 0: to itself, to its peer (a doorbell SQE on its own
 * ring) and to another scheduler's worker. Many rounds, so targets are
 * often asleep when the doorbell leaves.
 */
START_TEST(task_schedules_tasks_from_a_worker)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "Order");
	agr_scheduler *other = lookup(sup, "Cart");
	struct fan f;
	int round, i;

	for (round = 0; round < 50; round++) {
		memset(&f, 0, sizeof(f));
		f.hops[0] = (struct hop){ s, 0, NULL, NULL, &f.done };
		f.hops[1] = (struct hop){ s, 1, NULL, NULL, &f.done };
		f.hops[2] = (struct hop){ other, 1, NULL, NULL, &f.done };
		tu_latch_init(&f.done, 3);
		run_on(s, 0, fan_out, &f);
		ck_assert(tu_latch_wait(&f.done, TU_LONG_NS));
		for (i = 0; i < 3; i++) {
			ck_assert_int_eq(f.ret[i], 0);
			ck_assert_ptr_eq(f.hops[i].ran_in, f.hops[i].target);
			ck_assert_int_eq(agr_worker_index(f.hops[i].ran_on),
					 (int)f.hops[i].hint);
		}
		tu_latch_destroy(&f.done);
	}
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
}
END_TEST

/* ---- a file round trip: open, write, fsync, read, close ---- */

static const char payload[] = "aggring worker file round trip";

struct file_io {
	char path[64];
	agr_worker *w;
	int fd;
	char in[sizeof(payload)];
	int open_res, write_res, fsync_res, read_res, close_res;
	bool same_worker;
	struct tu_latch done;
};

static void check_worker(struct file_io *f)
{
	if (agr_worker_current() != f->w)
		f->same_worker = false;
}

/* Ends the chain when a step failed to submit or to complete. */
static void next_or_end(struct file_io *f, int ret)
{
	if (ret < 0)
		tu_latch_count_down(&f->done);
}

static void file_closed(int res, void *arg)
{
	struct file_io *f = arg;

	check_worker(f);
	f->close_res = res;
	tu_latch_count_down(&f->done);
}

static void file_read(int res, void *arg)
{
	struct file_io *f = arg;

	check_worker(f);
	f->read_res = res;
	next_or_end(f, agr_io_close(f->w, f->fd, file_closed, f));
}

static void file_synced(int res, void *arg)
{
	struct file_io *f = arg;

	check_worker(f);
	f->fsync_res = res;
	next_or_end(f, res < 0 ? res :
			agr_io_read(f->w, f->fd, f->in, sizeof(f->in), 0,
				    file_read, f));
}

static void file_written(int res, void *arg)
{
	struct file_io *f = arg;

	check_worker(f);
	f->write_res = res;
	next_or_end(f, res < 0 ? res :
			agr_io_fsync(f->w, f->fd, 0, file_synced, f));
}

static void file_opened(int res, void *arg)
{
	struct file_io *f = arg;

	check_worker(f);
	f->open_res = res;
	f->fd = res;
	next_or_end(f, res < 0 ? res :
			agr_io_write(f->w, f->fd, payload, sizeof(payload), 0,
				     file_written, f));
}

static void open_file(void *arg)
{
	struct file_io *f = arg;

	f->w = agr_worker_current();
	f->same_worker = true;
	next_or_end(f, agr_io_openat(f->w, AT_FDCWD, f->path, O_RDWR, 0,
				     file_opened, f));
}

START_TEST(file_round_trip_on_the_worker)
{
	agr_supplier *sup = new_supplier(2);
	agr_scheduler *s = lookup(sup, "Order");
	struct file_io f = { .fd = -1, .open_res = 1, .write_res = 1,
			     .fsync_res = 1, .read_res = 1, .close_res = 1 };
	char check[sizeof(payload)] = { 0 };
	int fd;

	snprintf(f.path, sizeof(f.path), "/tmp/aggring-worker-XXXXXX");
	fd = mkstemp(f.path);
	ck_assert_int_ge(fd, 0);
	close(fd);

	tu_latch_init(&f.done, 1);
	run_on(s, 1, open_file, &f);
	ck_assert(tu_latch_wait(&f.done, TU_LONG_NS));
	ck_assert_int_ge(f.open_res, 0);
	ck_assert_int_eq(f.write_res, (int)sizeof(payload));
	ck_assert_int_eq(f.fsync_res, 0);
	ck_assert_int_eq(f.read_res, (int)sizeof(payload));
	ck_assert_int_eq(f.close_res, 0);
	ck_assert(f.same_worker);
	ck_assert_mem_eq(f.in, payload, sizeof(payload));

	/* The bytes are really in the file, not only in our buffer. */
	fd = open(f.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, check, sizeof(check), 0),
			 (int)sizeof(payload));
	ck_assert_mem_eq(check, payload, sizeof(payload));
	close(fd);
	unlink(f.path);

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&f.done);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("worker");
	TCase *tc = tcase_create("core");

	/* Generous even when run by hand, outside `make check`. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, identity_inside_and_outside_a_task);
	tcase_add_test(tc, long_thread_name_is_cut_to_15_bytes);
	tcase_add_test(tc, not_interrupted_off_a_worker_or_in_a_normal_task);
	tcase_add_test(tc, timeout_fires_on_the_submitting_worker);
	tcase_add_test(tc, cancel_ends_a_long_timeout);
	tcase_add_test(tc, io_is_refused_off_its_worker_and_without_a_callback);
	tcase_add_test(tc, force_stop_cancels_inflight_io_before_stop_returns);
	tcase_add_test(tc, task_schedules_tasks_from_a_worker);
	tcase_add_test(tc, file_round_trip_on_the_worker);
	worker_settings_tests(tc);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
