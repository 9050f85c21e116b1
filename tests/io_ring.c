/* SPDX-License-Identifier: MIT */
/*
 * io_ring.c - check_io's ring: timeouts, calls refused off their worker
 * or without a callback (and the log lines that say so), a full
 * submission queue flushed and retried, one turn's operations submitted
 * together, and AGR_SUBMIT_BATCH's early submits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* struct statx */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring.h>

#include "io_test.h"
#include "testutil.h"

START_TEST(timeout_fires_and_another_is_cancelled)
{
	struct timers t = { .long_res = 1, .short_res = 1, .cancel_ret = -1,
			    .cancel_none_ret = -1 };
	struct rig g;

	t.long_key.t = t.short_key.t = t.nobody.t = &t;
	tu_latch_init(&t.done, 2);
	rig_up(&g, 1);
	run_on(g.s, 0, start_timers, &t);
	ck_assert(tu_latch_wait(&t.done, TU_LONG_NS));
	ck_assert_int_eq(t.long_ret, 0);
	ck_assert_int_eq(t.short_ret, 0);
	ck_assert_int_eq(t.short_res, -ETIME);
	/* Late is possible on a loaded machine; early is not. */
	ck_assert_uint_ge(t.fired - t.start, 5 * MS);
	ck_assert_int_eq(t.cancel_none_ret, 0);
	ck_assert_int_eq(t.cancel_ret, 1);
	ck_assert_int_eq(t.long_res, -ECANCELED);
	rig_down(&g);
	ck_assert_int_eq(t.short_calls, 1);
	ck_assert_int_eq(t.long_calls, 1);
	tu_assert_no_worker_failure();
	tu_latch_destroy(&t.done);
}
END_TEST

/* ---- what the library logged ---- */

static struct tu_logbook logbook = { .lock = PTHREAD_MUTEX_INITIALIZER,
				     .grew = PTHREAD_COND_INITIALIZER };

/* Lines that start with "<call>: " and hold `why`. */
static int logged_for(const char *call, const char *why)
{
	size_t len = strlen(call);
	int i, n = 0;

	pthread_mutex_lock(&logbook.lock);
	for (i = 0; i < logbook.n; i++)
		if (!strncmp(logbook.line[i], call, len) &&
		    logbook.line[i][len] == ':' && strstr(logbook.line[i], why))
			n++;
	pthread_mutex_unlock(&logbook.lock);
	return n;
}

/* Each of the first n calls logged its -EINVAL, saying `why`. */
static void assert_each_logged(int n, const char *why)
{
	int i;

	for (i = 0; i < n; i++)
		ck_assert_msg(logged_for(call_names[i], why) == 1,
			      "%s logged \"%s\" %d times, want once",
			      call_names[i], why,
			      logged_for(call_names[i], why));
}

START_TEST(calls_refuse_other_threads_and_null_callbacks)
{
	atomic_int calls = 0;
	struct misuse m = { .calls = &calls, .inflight = -1 };
	int ret[NCALLS];
	struct rig g;

	rig_up(&g, 2);
	m.peer = worker_at(&g, 1);
	tu_logbook_clear(&logbook);
	agr_set_log_hook(tu_logbook_keep, &logbook);

	call_every_op(m.peer, count_call, &calls, ret);
	assert_all_einval(ret, NCALLS, "from the test thread");
	assert_each_logged(NCALLS, "a thread that is no worker");
	tu_logbook_clear(&logbook);
	call_every_op(NULL, count_call, &calls, ret);
	assert_all_einval(ret, NCALLS, "without a worker");
	assert_each_logged(NCALLS, "the worker is NULL");
	tu_logbook_clear(&logbook);
	ck_assert_int_eq(agr_io_inflight(NULL), -EINVAL);

	tu_latch_init(&m.done, 1);
	run_on(g.s, 0, misuse_task, &m);
	ck_assert(tu_latch_wait(&m.done, TU_LONG_NS));
	assert_all_einval(m.null_cb, NCALLS - 1, "with a NULL callback");
	/* A cancel takes no callback: it just finds nothing. */
	ck_assert_int_eq(m.null_cb[NCALLS - 1], 0);
	assert_each_logged(NCALLS - 1, "the callback is NULL");
	assert_all_einval(m.at_peer, NCALLS, "on a peer worker's ring");
	ck_assert_int_eq(m.null_sqe_out, -EINVAL);
	ck_assert_int_eq(m.null_path, -EINVAL);
	ck_assert_int_eq(m.null_addr, -EINVAL);
	ck_assert_int_eq(m.inflight, 0);
	ck_assert_int_eq(logged_for("agr_io_sqe", "sqe is NULL"), 1);
	ck_assert_int_eq(logged_for("agr_io_openat", "path is NULL"), 1);
	ck_assert_int_eq(logged_for("agr_io_connect", "addr is NULL"), 1);
	assert_each_logged(NCALLS, "(called from ");
	agr_set_log_hook(NULL, NULL);

	rig_down(&g);
	ck_assert_int_eq(atomic_load(&calls), 0);
	tu_latch_destroy(&m.done);
}
END_TEST

/* ==== a full submission queue; batching ==== */

struct flood;

struct flood_slot {
	struct flood *f;
	int calls, res;
};

struct flood {
	int nops, ntimers, n;
	struct flood_slot *slots;
	agr_worker *w;
	int issued, first_err, inflight_after, completed;
	unsigned queued_after, sq_entries, cq_entries;
	struct tu_latch done;
};

static void flood_done(int res, void *arg)
{
	struct flood_slot *s = arg;
	struct flood *f = s->f;

	TU_EXPECT(agr_worker_current() == f->w);
	s->calls++;
	s->res = res;
	/* No callback runs inside the task, so `issued` is final here. */
	if (++f->completed == f->issued)
		tu_latch_count_down(&f->done);
}

/* One task prepares far more operations than the SQ holds. */
static void flood_task(void *arg)
{
	struct flood *f = arg;
	struct io_uring *ring = agr_worker_ring(agr_worker_current());
	struct io_uring_sqe *sqe;
	int i, ret;

	f->w = agr_worker_current();
	for (i = 0; i < f->n; i++) {
		if (i < f->nops) {
			ret = agr_io_sqe(f->w, flood_done, &f->slots[i], &sqe);
			if (ret == 0)
				io_uring_prep_nop(sqe);
		} else {
			ret = agr_io_timeout(f->w, MS, flood_done,
					     &f->slots[i]);
		}
		if (ret == 0)
			f->issued++;
		else if (f->first_err == 0)
			f->first_err = ret;
	}
	f->inflight_after = agr_io_inflight(f->w);
	f->queued_after = io_uring_sq_ready(ring);
	f->sq_entries = ring->sq.ring_entries;
	f->cq_entries = ring->cq.ring_entries;
	if (f->issued == 0)
		tu_latch_count_down(&f->done);
}

/*
 * _i == 0: 2,000 NOPs and 500 timers from one task, far more than the
 * SQ holds: the SQ is flushed and the call retried. _i == 1: 6,000
 * NOPs, more completions than the CQ holds at once: the kernel keeps
 * the rest aside and the worker must still reap every one.
 */
START_TEST(full_sq_is_flushed_and_retried)
{
	struct flood f = { .nops = _i == 0 ? 2000 : 6000,
			   .ntimers = _i == 0 ? 500 : 0 };
	struct rig g;
	int i;

	f.n = f.nops + f.ntimers;
	f.slots = calloc((size_t)f.n, sizeof(*f.slots));
	ck_assert_ptr_nonnull(f.slots);
	for (i = 0; i < f.n; i++)
		f.slots[i].f = &f;
	tu_latch_init(&f.done, 1);
	rig_up(&g, 1);
	run_on(g.s, 0, flood_task, &f);
	ck_assert_msg(tu_latch_wait(&f.done, TU_LONG_NS),
		      "callbacks still missing");
	ck_assert_int_eq(f.first_err, 0);
	ck_assert_int_eq(f.issued, f.n);
	ck_assert_uint_gt(f.n, f.sq_entries); /* the premise */
	if (_i == 1)
		ck_assert_uint_gt(f.n, f.cq_entries);
	ck_assert_uint_le(f.queued_after, f.sq_entries);
	ck_assert_int_eq(f.inflight_after, f.n);
	rig_down(&g);
	for (i = 0; i < f.n; i++) {
		ck_assert_msg(f.slots[i].calls == 1, "op %d: %d callbacks", i,
			      f.slots[i].calls);
		ck_assert_int_eq(f.slots[i].res, i < f.nops ? 0 : -ETIME);
	}
	ck_assert_int_eq(f.completed, f.n);
	tu_assert_no_worker_failure();
	tu_latch_destroy(&f.done);
	free(f.slots);
}
END_TEST

/*
 * Four operations prepared by one task go to the kernel together (none
 * was submitted on its own: four is no more than the default
 * AGR_SUBMIT_BATCH): three wait in the SQ as the task ends, the raw SQE
 * that came first joins them as it returns, and all four are in flight
 * when the first callback runs: it sees the other three.
 */
START_TEST(ops_of_one_turn_go_to_the_kernel_together)
{
	char path[PATH_MAX], in[16] = "";
	int fd = tmp_file(path, sizeof(path)), i, most = 0;
	struct op plan[] = {
		with_next(op_nop()),
		with_next(op_write(&fd, "batched", 0)),
		with_next(op_read(&fd, in, sizeof(in), 0, WANT_ANY)),
		op_timeout(MS, -ETIME),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	ck_assert_uint_eq(r.queued[0], 3);
	for (i = 0; i < 4; i++)
		if (r.inflight_seen[i] > most)
			most = r.inflight_seen[i];
	ck_assert_int_eq(most, 3);
	rig_down(&g);
	close(fd);
	unlink(path);
}
END_TEST

/* ---- AGR_SUBMIT_BATCH: prepared SQEs go to the kernel early ---- */

#define EARLY_SENDS 5

#define SENDS_AFTER_RAW 3

static const struct early_case {
	const char *setting; /* AGR_SUBMIT_BATCH; NULL: unset */
	/* Bytes that arrived after each send, then after agr_io_sqe(). */
	int arrived[EARLY_SENDS + 1];
	int after_raw; /* ... and after the sends made while it is open */
	uint64_t early_submits;
	int errors; /* "not 0..256" reports, one per worker */
} early_cases[] = {
	{ NULL, { 0, 0, 0, 0, 4, 4 }, 4, 1, 0 }, /* the default, 4 */
	{ "2", { 0, 0, 2, 2, 4, 4 }, 6, 3, 0 },
	{ "1", { 0, 1, 2, 3, 4, 5 }, 7, 7, 0 },
	{ "0", { 0, 0, 0, 0, 0, 0 }, 0, 0, 0 }, /* all wait for the turn */
	{ "257", { 0, 0, 0, 0, 4, 4 }, 4, 1, 1 },
	{ "abc", { 0, 0, 0, 0, 4, 4 }, 4, 1, 1 },
};

struct early {
	int sock[2];
	int ret[EARLY_SENDS + SENDS_AFTER_RAW];
	int arrived[EARLY_SENDS + 1];
	int arrived_with_raw_open;
	int raw_ret;
	atomic_int sent, nops;
	struct tu_latch done; /* every callback ran */
};

static atomic_int submit_batch_errors;

static void count_submit_batch_errors(agr_log_level level, const char *msg,
				      void *arg)
{
	(void)arg;
	if (level == AGR_LOG_ERROR && strstr(msg, "AGR_SUBMIT_BATCH=\"") &&
	    strstr(msg, "is not an integer in 0..256"))
		atomic_fetch_add(&submit_batch_errors, 1);
}

/*
 * Bytes waiting on the socket. A send the kernel took has arrived:
 * io_uring sends on a socket with room inline, in the submit call.
 */
static int queued_bytes(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

static void early_sent(int res, void *arg)
{
	struct early *e = arg;

	TU_EXPECT(res == 1);
	atomic_fetch_add(&e->sent, 1);
	tu_latch_count_down(&e->done);
}

static void early_nop(int res, void *arg)
{
	struct early *e = arg;

	TU_EXPECT(res == 0);
	atomic_fetch_add(&e->nops, 1);
	tu_latch_count_down(&e->done);
}

static int send_byte(agr_worker *w, struct early *e)
{
	return agr_io_send(w, e->sock[1], "x", 1, MSG_NOSIGNAL, early_sent, e);
}

/*
 * One byte per send over a socket pair, looking after each call how
 * many arrived: the submitted sends. Then a raw SQE, prepared last:
 * taking it may submit what was prepared before, and sends made while
 * it is open still go early, since it is not in the ring until the task
 * returns: the kernel cannot read it unprepared.
 */
static void early_task(void *arg)
{
	struct early *e = arg;
	agr_worker *w = agr_worker_current();
	struct io_uring_sqe *sqe = NULL;
	int i;

	for (i = 0; i < EARLY_SENDS; i++) {
		e->ret[i] = send_byte(w, e);
		e->arrived[i] = queued_bytes(e->sock[0]);
	}
	e->raw_ret = agr_io_sqe(w, early_nop, e, &sqe);
	e->arrived[EARLY_SENDS] = queued_bytes(e->sock[0]);
	for (; i < EARLY_SENDS + SENDS_AFTER_RAW; i++)
		e->ret[i] = send_byte(w, e);
	e->arrived_with_raw_open = queued_bytes(e->sock[0]);
	if (e->raw_ret == 0)
		io_uring_prep_nop(sqe);
}

START_TEST(submit_batch_sends_prepared_sqes_early)
{
	const struct early_case *c = &early_cases[_i];
	struct early e = { .raw_ret = -1 };
	agr_worker_metrics m;
	struct rig g;
	int i;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    e.sock), 0);
	tu_latch_init(&e.done, EARLY_SENDS + SENDS_AFTER_RAW + 1);
	atomic_store(&submit_batch_errors, 0);
	agr_set_log_hook(count_submit_batch_errors, NULL);
	if (c->setting)
		ck_assert_int_eq(setenv("AGR_SUBMIT_BATCH", c->setting, 1), 0);
	else
		unsetenv("AGR_SUBMIT_BATCH");
	rig_up(&g, 1);
	run_on(g.s, 0, early_task, &e);
	ck_assert_msg(tu_latch_wait(&e.done, TU_LONG_NS),
		      "callbacks still missing");
	ck_assert_int_eq(agr_scheduler_worker_metrics(g.s, 0, &m), 0);
	rig_down(&g);
	unsetenv("AGR_SUBMIT_BATCH");
	agr_set_log_hook(NULL, NULL);

	for (i = 0; i < EARLY_SENDS + SENDS_AFTER_RAW; i++)
		ck_assert_int_eq(e.ret[i], 0);
	ck_assert_int_eq(e.raw_ret, 0);
	for (i = 0; i <= EARLY_SENDS; i++)
		ck_assert_msg(e.arrived[i] == c->arrived[i],
			      "AGR_SUBMIT_BATCH=%s: %d bytes after call %d, "
			      "want %d", c->setting ? c->setting : "(unset)",
			      e.arrived[i], i + 1, c->arrived[i]);
	ck_assert_int_eq(e.arrived_with_raw_open, c->after_raw);
	ck_assert_int_eq(queued_bytes(e.sock[0]),
			 EARLY_SENDS + SENDS_AFTER_RAW);
	ck_assert_int_eq(atomic_load(&e.sent),
			 EARLY_SENDS + SENDS_AFTER_RAW);
	ck_assert_int_eq(atomic_load(&e.nops), 1);
	ck_assert_uint_eq(m.early_submits, c->early_submits);
	ck_assert_int_eq(atomic_load(&submit_batch_errors), c->errors);
	tu_assert_no_worker_failure();
	close(e.sock[0]);
	close(e.sock[1]);
	tu_latch_destroy(&e.done);
}
END_TEST

/* ==== dispatcher functions that chain I/O ==== */

static void journal_add(struct journal *j, int ev)
{
	pthread_mutex_lock(&j->lock);
	TU_EXPECT(j->n < MAX_EVENTS);
	if (j->n < MAX_EVENTS)
		j->ev[j->n++] = ev;
	pthread_mutex_unlock(&j->lock);
}

static int journal_pos(struct journal *j, int ev)
{
	int i, pos = -1;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < j->n && pos < 0; i++)
		if (j->ev[i] == ev)
			pos = i;
	pthread_mutex_unlock(&j->lock);
	return pos;
}

void assert_before(struct journal *j, int a, int b)
{
	int pa = journal_pos(j, a), pb = journal_pos(j, b);

	ck_assert_msg(pa >= 0 && pb >= 0 && pa < pb,
		      "event %d at %d, event %d at %d: want the first before",
		      a, pa, b, pb);
}

/* Copied first: a failed check must not leave the lock held. */
void assert_journal_is(struct journal *j, const int *want, int n)
{
	int got[MAX_EVENTS], ngot, i;

	pthread_mutex_lock(&j->lock);
	ngot = j->n;
	memcpy(got, j->ev, sizeof(got));
	pthread_mutex_unlock(&j->lock);
	ck_assert_int_eq(ngot, n);
	for (i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "event %d is %d, want %d", i,
			      got[i], want[i]);
}

static void journal_step(struct run *r)
{
	struct dmsg *dm = r->ctx;

	journal_add(&dm->t->j, EV(dm->seq, EV_STEP(r->first)));
}

static void finish_job(struct run *r)
{
	struct dmsg *dm = r->ctx;

	agr_exchange_done(dm->ex, run_status(r));
}

/* open, write, fsync, read, close; then maybe wake a JOB_WAIT. */
static int file_job_ops(struct dmsg *dm, bool signal)
{
	int n = 0;

	dm->ops[n++] = op_openat(&dm->t->cwd, dm->path,
				 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
				 &dm->fd, WANT_FD);
	dm->ops[n++] = op_write(&dm->fd, dm->out, 0);
	dm->ops[n++] = op_fsync(&dm->fd, 0, 0);
	dm->ops[n++] = op_read(&dm->fd, dm->in, sizeof(dm->in), 0,
			       (int)strlen(dm->out));
	dm->ops[n++] = op_close(&dm->fd, 0);
	if (signal)
		dm->ops[n++] = op_send(&dm->t->sv[1], "!", 1);
	return n;
}

void dmsg_init(struct dmsg *dm, struct dtest *t, const char *id,
	       int seq, enum job job)
{
	int n;

	memset(dm, 0, sizeof(*dm));
	dm->m.aggregate_id = id;
	dm->m.type = "job";
	dm->m.user = dm;
	dm->t = t;
	dm->seq = seq;
	dm->job = job;
	dm->fd = -1;
	dm->status = 1;
	snprintf(dm->out, sizeof(dm->out), "message %d", seq);
	n = snprintf(dm->path, sizeof(dm->path), "%s/m%d", t->dir, seq);
	ck_assert(n > 0 && (size_t)n < sizeof(dm->path));
	if (job == JOB_WAIT) {
		dm->ops[0] = op_recv(&t->sv[0], dm->in, 1, 1);
		n = 1;
	} else {
		n = file_job_ops(dm, job == JOB_FILE_THEN_SIGNAL);
	}
	run_init(&dm->run, dm->ops, n);
	dm->run.on_step = journal_step;
	dm->run.on_end = finish_job;
	dm->run.ctx = dm;
}

static int run_job(agr_exchange *ex, void *arg)
{
	struct dmsg *dm = agr_exchange_message(ex)->user;

	(void)arg;
	dm->ex = ex;
	dm->ran_on = agr_worker_current();
	TU_EXPECT(dm->ran_on == agr_exchange_worker(ex));
	journal_add(&dm->t->j, EV(dm->seq, EV_START));
	dm->run.w = agr_exchange_worker(ex);
	run_next(&dm->run);
	if (dm->job == JOB_WAIT)
		tu_latch_count_down(&dm->t->armed);
	return AGR_PENDING;
}

static void job_completed(agr_message *msg, int status, void *arg)
{
	struct dmsg *dm = msg->user;
	struct dtest *t = arg;

	dm->status = status;
	atomic_fetch_add(&dm->completions, 1);
	journal_add(&t->j, EV(dm->seq, EV_COMPLETE));
	tu_latch_count_down(&t->completed);
}

/* Ids starting with 'A' go to group 1, others to group 2. */
static int by_first_letter(const agr_message *msg, int parallelism,
			   void *arg)
{
	(void)parallelism;
	(void)arg;
	return msg->aggregate_id[0] == 'A' ? 1 : 2;
}

agr_dispatcher *dtest_up(struct dtest *t, agr_supplier *sup,
			 bool owns, int messages)
{
	agr_dispatcher_options o = {
		.name = "io-jobs",
		.named_aggregate = { "sales", "Order" },
		.parallelism = 4,
		.supplier = sup,
		.owns_supplier = owns,
		.on_complete = job_completed,
		.complete_arg = t,
		.group_key = by_first_letter,
	};
	agr_dispatcher *d = NULL;

	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->j.lock, NULL);
	tu_latch_init(&t->completed, messages);
	tu_latch_init(&t->armed, 1);
	t->cwd = AT_FDCWD;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    t->sv), 0);
	tmp_dir(t->dir, sizeof(t->dir));
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, "job", run_job, NULL), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

void dtest_down(struct dtest *t)
{
	close(t->sv[0]);
	close(t->sv[1]);
	ck_assert_int_eq(rmdir(t->dir), 0);
	tu_latch_destroy(&t->armed);
	tu_latch_destroy(&t->completed);
	pthread_mutex_destroy(&t->j.lock);
}

void send_ok(agr_dispatcher *d, struct dmsg *dm)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &dm->m), 0);
}

/* A file job ended well: its plan, its status, its file. */
void assert_file_job(struct dmsg *dm)
{
	assert_plan(&dm->run);
	ck_assert_int_eq(dm->status, 0);
	ck_assert_int_eq(atomic_load(&dm->completions), 1);
	ck_assert_str_eq(dm->in, dm->out);
	assert_file_holds(dm->path, dm->out);
	ck_assert_int_eq(unlink(dm->path), 0);
}

void io_ring_tests(TCase *ring)
{
	tcase_add_test(ring, timeout_fires_and_another_is_cancelled);
	tcase_add_test(ring, calls_refuse_other_threads_and_null_callbacks);
	tcase_add_loop_test(ring, full_sq_is_flushed_and_retried, 0, 2);
	tcase_add_test(ring, ops_of_one_turn_go_to_the_kernel_together);
	tcase_add_loop_test(ring, submit_batch_sends_prepared_sqes_early, 0,
			    (int)ARRAY_SIZE(early_cases));
}
