/* SPDX-License-Identifier: MIT */
/*
 * check_dispatcher.c - the dispatcher: routing to groups, strict order
 * within a group, concurrency between groups, asynchronous functions,
 * several functions per message, queue limits, graceful and forced
 * stop, and the accounting that every admitted message completes
 * exactly once. Includes every dispatcher case of the reference's own
 * tests.
 *
 * Functions and completion callbacks run on worker threads: what they
 * see is recorded there (EXPECT, the journal, fields of the message)
 * and asserted on the test thread, since a failed ck_assert on a worker
 * would end the child abruptly.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "testutil.h"

#define MS 1000000ull
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const agr_named_aggregate order = { "sales", "Order" };
static const agr_named_aggregate payment = { "sales", "Payment" };

/* ---- a count that can be waited on ---- */

/* ---- the journal: what happened, in order ---- */

#define MAX_EVENTS 512

enum {
	EV_START = 1000, /* + seq: a function began */
	EV_DONE = 2000,	 /* + seq: the completion callback ran */
	EV_TIMER = 3000, /* + seq: its timer fired */
	EV_FN = 4000,	 /* + 100 * function + seq (seq < 100) */
};

struct journal {
	pthread_mutex_t lock;
	int events[MAX_EVENTS];
	int nevents;
	struct tu_tally completed;
};

static void journal_init(struct journal *j)
{
	pthread_mutex_init(&j->lock, NULL);
	j->nevents = 0;
	tu_tally_init(&j->completed);
}

static void journal_destroy(struct journal *j)
{
	tu_tally_destroy(&j->completed);
	pthread_mutex_destroy(&j->lock);
}

static void journal_add(struct journal *j, int ev)
{
	pthread_mutex_lock(&j->lock);
	TU_EXPECT(j->nevents < MAX_EVENTS);
	if (j->nevents < MAX_EVENTS)
		j->events[j->nevents++] = ev;
	pthread_mutex_unlock(&j->lock);
}

/* Index of the first `ev`, or -1. */
static int journal_pos(struct journal *j, int ev)
{
	int i, pos = -1;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < j->nevents && pos < 0; i++)
		if (j->events[i] == ev)
			pos = i;
	pthread_mutex_unlock(&j->lock);
	return pos;
}

static bool journal_wait(struct journal *j, long completions)
{
	return tu_tally_wait(&j->completed, completions, TU_LONG_NS);
}

/* Every event of `evs` happened, in this order (others may interleave). */
static void assert_in_order(struct journal *j, const int *evs, size_t n)
{
	int prev = -1, pos;
	size_t i;

	for (i = 0; i < n; i++) {
		pos = journal_pos(j, evs[i]);
		ck_assert_msg(pos > prev, "event %d at %d, expected after %d",
			      evs[i], pos, prev);
		prev = pos;
	}
}

/* The journal holds exactly `evs`. */
static void assert_exactly(struct journal *j, const int *evs, size_t n)
{
	size_t i;

	pthread_mutex_lock(&j->lock);
	ck_assert_int_eq(j->nevents, (int)n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(j->events[i], evs[i]);
	pthread_mutex_unlock(&j->lock);
}

#define ASSERT_ORDER(j, ...)                                   \
	do {                                                   \
		const int evs_[] = { __VA_ARGS__ };            \
		assert_in_order((j), evs_, ARRAY_SIZE(evs_));  \
	} while (0)

#define ASSERT_EVENTS(j, ...)                                  \
	do {                                                   \
		const int evs_[] = { __VA_ARGS__ };            \
		assert_exactly((j), evs_, ARRAY_SIZE(evs_));   \
	} while (0)

/* ---- test messages ---- */

struct tmsg {
	agr_message m; /* m.user points back here */
	int seq;
	int status;
	atomic_int completions;
	/* Seen by the function that handled it. */
	int group, worker, current;
	agr_dispatcher *disp;
	agr_scheduler *sched;
};

static void tmsg_init(struct tmsg *t, const char *id, int seq)
{
	memset(t, 0, sizeof(*t));
	atomic_init(&t->completions, 0);
	t->m.aggregate_id = id;
	t->m.user = t;
	t->seq = seq;
	t->status = 1; /* not completed */
	t->group = t->worker = t->current = -1;
}

static struct tmsg *current_tmsg(agr_exchange *ex)
{
	return agr_exchange_message(ex)->user;
}

/* The completion callback of most tests; `arg` is a journal. */
static void record_completion(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = msg->user;
	struct journal *j = arg;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	journal_add(j, EV_DONE + t->seq);
	tu_tally_add(&j->completed);
}

/* Notes where it ran and that it started; done at once. Arg: journal. */
static int handle(agr_exchange *ex, void *arg)
{
	struct tmsg *t = current_tmsg(ex);

	t->group = agr_exchange_group(ex);
	t->worker = agr_worker_index(agr_exchange_worker(ex));
	t->current = agr_worker_index(agr_worker_current());
	t->disp = agr_exchange_dispatcher(ex);
	t->sched = agr_worker_scheduler(agr_exchange_worker(ex));
	journal_add(arg, EV_START + t->seq);
	return 0;
}

/* ---- dispatchers ---- */

static agr_supplier *new_supplier(int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("disp", workers, &sup), 0);
	return sup;
}

static agr_dispatcher_options options(agr_supplier *sup, bool owns,
				      int groups, void *complete_arg)
{
	agr_dispatcher_options o = {
		.name = "orders",
		.named_aggregate = order,
		.parallelism = groups,
		.supplier = sup,
		.owns_supplier = owns,
		.on_complete = record_completion,
		.complete_arg = complete_arg,
	};

	return o;
}

/* An Order dispatcher owning a supplier of `workers` workers. */
static agr_dispatcher_options owned_options(int workers, int groups,
					    void *complete_arg)
{
	return options(new_supplier(workers), true, groups, complete_arg);
}

static agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o)
{
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(o, &d), 0);
	ck_assert_ptr_nonnull(d);
	return d;
}

static void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
		   void *arg)
{
	ck_assert_int_eq(agr_dispatcher_register(d, type, fn, arg), 0);
}

static void start(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
}

static void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

static agr_dispatcher_stats stats_of(const agr_dispatcher *d)
{
	agr_dispatcher_stats st;

	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	return st;
}

static void stop(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
}

static void stop_and_free(agr_dispatcher *d)
{
	stop(d);
	agr_dispatcher_free(d);
}

/* The counters are exact once stopped. */
static agr_dispatcher_stats stop_and_get_stats(agr_dispatcher *d)
{
	stop(d);
	return stats_of(d);
}

/*
 * Writes "<prefix><n>" for the first n whose group (of `groups`) runs on
 * worker `worker` of `workers` and is not `not_group`; returns the group.
 */
static int pick_id(char *buf, size_t len, const char *prefix, int groups,
		   int workers, int worker, int not_group)
{
	int n, g;

	for (n = 0; n < 100000; n++) {
		snprintf(buf, len, "%s%d", prefix, n);
		g = agr_group_key(buf, groups);
		if (g % workers == worker && g != not_group)
			return g;
	}
	ck_abort_msg("no id of prefix %s fits", prefix);
}

/* Polls `v` (1 ms apart, not a synchronisation) until it reaches `n`. */
static bool wait_at_least(atomic_long *v, long n, uint64_t timeout_ns)
{
	const struct timespec tick = { 0, 1000000 };
	uint64_t deadline = tu_now_ns() + timeout_ns;

	while (atomic_load(v) < n) {
		if (tu_now_ns() > deadline)
			return false;
		nanosleep(&tick, NULL);
	}
	return true;
}

/* Polls (1 ms apart) until every worker of `s` has ended. */
static bool wait_until_terminated(agr_scheduler *s, uint64_t timeout_ns)
{
	const struct timespec tick = { 0, 1000000 };
	uint64_t deadline = tu_now_ns() + timeout_ns;

	while (!agr_scheduler_is_terminated(s)) {
		if (tu_now_ns() > deadline)
			return false;
		nanosleep(&tick, NULL);
	}
	return true;
}

/* Counts what the library logs, by level. */
static atomic_int logged[AGR_LOG_DEBUG + 1];

static void count_log(agr_log_level level, const char *msg, void *arg)
{
	(void)msg;
	(void)arg;
	if ((unsigned)level < ARRAY_SIZE(logged))
		atomic_fetch_add(&logged[level], 1);
}

/* ---- a graceful stop on another thread ---- */

struct stopper {
	pthread_t thread;
	agr_dispatcher *d;
	struct journal *j;
	struct tu_latch calling;
	int result;
	long completed_at_return;
};

static void *stop_in_thread(void *arg)
{
	struct stopper *s = arg;

	tu_latch_count_down(&s->calling);
	s->result = agr_dispatcher_stop_gracefully(s->d, TU_LONG_NS);
	s->completed_at_return = tu_tally_value(&s->j->completed);
	return NULL;
}

static void stopper_start(struct stopper *s, agr_dispatcher *d,
			  struct journal *j)
{
	s->d = d;
	s->j = j;
	s->result = 1;
	tu_latch_init(&s->calling, 1);
	ck_assert_int_eq(pthread_create(&s->thread, NULL, stop_in_thread, s),
			 0);
	ck_assert(tu_latch_wait(&s->calling, TU_LONG_NS));
}

static int stopper_join(struct stopper *s)
{
	pthread_join(s->thread, NULL);
	tu_latch_destroy(&s->calling);
	return s->result;
}

/* ---- a message the test holds open ---- */

/* The message with seq 1 stays pending until the test finishes it. */
struct held {
	struct journal j;
	struct tu_latch started;
	agr_exchange *ex;
};

static void held_init(struct held *h)
{
	journal_init(&h->j);
	tu_latch_init(&h->started, 1);
	h->ex = NULL;
}

static void held_destroy(struct held *h)
{
	tu_latch_destroy(&h->started);
	journal_destroy(&h->j);
}

static int hold_first(agr_exchange *ex, void *arg)
{
	struct held *h = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&h->j, EV_START + seq);
	if (seq != 1)
		return 0;
	h->ex = ex;
	tu_latch_count_down(&h->started);
	return AGR_PENDING;
}

/* ==== reference cases ==== */

START_TEST(routes_to_group_and_its_worker)
{
	static const char *const ids[] = {
		"order-1", "order-2", "ordre-\xc3\xa9", "", "x",
		"a-longer-aggregate-id-42", "\xff", "order-7",
	};
	struct tmsg t[ARRAY_SIZE(ids)];
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	int i, n = (int)ARRAY_SIZE(ids), want, on_worker[2] = { 0, 0 };

	journal_init(&j);
	o = owned_options(2, 16, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	ck_assert_str_eq(agr_dispatcher_name(d), "orders");
	ck_assert_int_eq(agr_dispatcher_parallelism(d), 16);
	ck_assert_int_eq(agr_scheduler_parallelism(agr_dispatcher_scheduler(d)),
			 2);
	start(d);
	for (i = 0; i < n; i++) {
		tmsg_init(&t[i], ids[i], i);
		send_ok(d, &t[i]);
	}
	ck_assert(journal_wait(&j, n));
	for (i = 0; i < n; i++) {
		want = agr_group_key(ids[i], 16);
		ck_assert_int_ge(want, 0);
		ck_assert_int_eq(agr_dispatcher_group_of(d, &t[i].m), want);
		ck_assert_int_eq(t[i].group, want);
		ck_assert_int_eq(t[i].worker, want % 2);
		ck_assert_int_eq(t[i].current, want % 2);
		ck_assert_ptr_eq(t[i].disp, d);
		ck_assert_ptr_eq(t[i].sched, agr_dispatcher_scheduler(d));
		ck_assert_int_eq(t[i].status, 0);
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
		on_worker[want % 2]++;
	}
	/* The ids cover both workers. */
	ck_assert(on_worker[0] > 0 && on_worker[1] > 0);
	ck_assert_uint_eq(stop_and_get_stats(d).handled, (unsigned)n);
	agr_dispatcher_free(d);
	journal_destroy(&j);
}
END_TEST

START_TEST(graceful_stop_when_idle_completes)
{
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	journal_init(&j);
	o = owned_options(2, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	start(d);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	/* It owns the supplier, so the workers are gone too. */
	ck_assert(agr_scheduler_is_terminated(agr_dispatcher_scheduler(d)));
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	agr_dispatcher_free(d);
	ck_assert_int_eq(tu_tally_value(&j.completed), 0);
	journal_destroy(&j);
}
END_TEST

START_TEST(graceful_stop_drains_in_order)
{
	struct tmsg t1, t2, late;
	struct stopper s;
	struct held h;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	held_init(&h);
	o = owned_options(1, 8, &h.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	tmsg_init(&late, "order-2", 3);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));

	/* 1 is active, 2 queued behind it: a short stop runs out... */
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	/* ...having closed intake, and started nothing else. */
	ck_assert_int_eq(agr_dispatcher_send(d, &late.m), -ESHUTDOWN);
	ASSERT_EVENTS(&h.j, EV_START + 1);

	stopper_start(&s, d, &h.j);
	agr_exchange_done(h.ex, 0);
	ck_assert_int_eq(stopper_join(&s), 0);
	/* It returned only once both had completed, in order [1, 2]. */
	ck_assert_int_eq(s.completed_at_return, 2);
	ASSERT_EVENTS(&h.j, EV_START + 1, EV_DONE + 1, EV_START + 2,
		      EV_DONE + 2);
	ck_assert_int_eq(t1.status, 0); /* no cancellation */
	ck_assert_int_eq(t2.status, 0);
	st = stats_of(d);
	ck_assert_uint_eq(st.handled, 2);
	ck_assert_uint_eq(st.discarded, 0);
	ck_assert_uint_eq(st.refused, 1);
	agr_dispatcher_free(d);
	ck_assert_int_eq(atomic_load(&late.completions), 0);
	held_destroy(&h);
}
END_TEST

START_TEST(stop_before_start_is_final)
{
	struct journal j;
	struct tmsg t;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), -ESHUTDOWN);
	tmsg_init(&t, "order-1", 1);
	ck_assert_int_eq(agr_dispatcher_send(d, &t.m), -ESHUTDOWN);
	ck_assert_int_eq(agr_dispatcher_start(d), -ESHUTDOWN);
	agr_dispatcher_free(d);
	ck_assert_int_eq(atomic_load(&t.completions), 0);
	ck_assert_int_eq(tu_tally_value(&j.completed), 0);
	journal_destroy(&j);
}
END_TEST

START_TEST(stop_before_start_discards_admitted)
{
	struct tmsg t[3], late;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	int i;

	journal_init(&j);
	o = owned_options(2, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	tmsg_init(&t[0], "order-1", 1);
	tmsg_init(&t[1], "order-1", 2);
	tmsg_init(&t[2], "order-9", 3);
	for (i = 0; i < 3; i++)
		send_ok(d, &t[i]); /* admitted; they wait for start */
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
		ck_assert_int_eq(t[i].status, AGR_DISCARDED);
		ck_assert_int_eq(journal_pos(&j, EV_START + t[i].seq), -1);
	}
	ck_assert_int_eq(agr_dispatcher_start(d), -ESHUTDOWN);
	tmsg_init(&late, "order-1", 4);
	ck_assert_int_eq(agr_dispatcher_send(d, &late.m), -ESHUTDOWN);
	st = stats_of(d);
	ck_assert_uint_eq(st.admitted, 3);
	ck_assert_uint_eq(st.discarded, 3);
	ck_assert_uint_eq(st.handled, 0);
	ck_assert_uint_eq(st.refused, 1);
	agr_dispatcher_free(d);
	ck_assert_int_eq(tu_tally_value(&j.completed), 3);
	ck_assert_int_eq(atomic_load(&late.completions), 0);
	journal_destroy(&j);
}
END_TEST

START_TEST(sends_before_start_wait_for_start)
{
	struct tmsg t[4];
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	int i;

	journal_init(&j);
	o = owned_options(2, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	for (i = 0; i < 3; i++)
		tmsg_init(&t[i], "order-1", i + 1);
	tmsg_init(&t[3], "order-5", 4);
	for (i = 0; i < 4; i++)
		send_ok(d, &t[i]);
	/* Nothing runs before start (a wait expected to run out). */
	ck_assert(!tu_tally_wait(&j.completed, 1, 20 * MS));
	ck_assert_int_eq(journal_pos(&j, EV_START + 1), -1);
	start(d);
	ck_assert(journal_wait(&j, 4));
	ASSERT_ORDER(&j, EV_START + 1, EV_DONE + 1, EV_START + 2, EV_DONE + 2,
		     EV_START + 3, EV_DONE + 3);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(t[i].status, 0);
	stop_and_free(d);
	journal_destroy(&j);
}
END_TEST

START_TEST(sends_after_stop_are_refused)
{
	struct tmsg first, t[5];
	agr_message *batch[2];
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	size_t admitted = 99;
	int i;

	journal_init(&j);
	o = owned_options(2, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	start(d);
	tmsg_init(&first, "order-1", 1);
	send_ok(d, &first);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	ck_assert_int_eq(first.status, 0);

	for (i = 0; i < 5; i++) {
		tmsg_init(&t[i], i % 2 ? "order-1" : "order-2", 10 + i);
		ck_assert_int_eq(agr_dispatcher_send(d, &t[i].m), -ESHUTDOWN);
	}
	st = stats_of(d);
	ck_assert_uint_eq(st.refused, 5);
	ck_assert_uint_eq(st.admitted, 1);
	batch[0] = &t[0].m;
	batch[1] = &t[1].m;
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 2, &admitted),
			 -ESHUTDOWN);
	ck_assert_uint_eq(admitted, 0);
	/* One refusal for the batch: its first message; t[1] not offered. */
	ck_assert_uint_eq(stats_of(d).refused, 6);
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert_int_eq(agr_dispatcher_send(d, &t[2].m), -ESHUTDOWN);
	agr_dispatcher_free(d);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), 0);
	ck_assert_int_eq(tu_tally_value(&j.completed), 1);
	journal_destroy(&j);
}
END_TEST

/* Message seq 1 fails with -EIO; the others succeed. */
static int fail_first(agr_exchange *ex, void *arg)
{
	int seq = current_tmsg(ex)->seq;

	journal_add(arg, EV_START + seq);
	return seq == 1 ? -EIO : 0;
}

START_TEST(handler_error_is_reported)
{
	struct tmsg t1, t2;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, fail_first, &j);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(journal_wait(&j, 2));
	ck_assert_int_eq(t1.status, -EIO);
	ck_assert_int_eq(t2.status, 0);
	ASSERT_ORDER(&j, EV_DONE + 1, EV_START + 2, EV_DONE + 2);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.handled, 1);
	agr_dispatcher_free(d);
	journal_destroy(&j);
}
END_TEST

/* ---- a function stuck on I/O that never completes ---- */

struct stuck_recv {
	struct journal j;
	struct tu_latch started;
	int fds[2];
	char buf[8];
	agr_exchange *ex;
	int submit_ret;
	int recv_res;
};

static void recv_finished(int res, void *arg)
{
	struct stuck_recv *r = arg;

	r->recv_res = res;
	agr_exchange_done(r->ex, res < 0 ? res : 0);
}

/* Message seq 1 waits for bytes nobody sends. */
static int recv_forever(agr_exchange *ex, void *arg)
{
	struct stuck_recv *r = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&r->j, EV_START + seq);
	if (seq != 1)
		return 0;
	r->ex = ex;
	r->submit_ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0],
				    r->buf, sizeof(r->buf), 0, recv_finished,
				    r);
	tu_latch_count_down(&r->started);
	return r->submit_ret < 0 ? r->submit_ret : AGR_PENDING;
}

/* _i == 0: the dispatcher owns its supplier; 1: it does not. */
START_TEST(force_stop_cancels_blocked_io)
{
	agr_supplier *sup = new_supplier(1);
	struct stuck_recv r = { .recv_res = 1 };
	struct tmsg t[5], late;
	struct stopper s;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &r.j);
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	uint64_t before;
	int i;

	journal_init(&r.j);
	tu_latch_init(&r.started, 1);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r.fds), 0);
	d = new_dispatcher(&o);
	add_fn(d, NULL, recv_forever, &r);
	start(d);
	for (i = 0; i < 5; i++)
		tmsg_init(&t[i], "order-1", i + 1);
	send_ok(d, &t[0]);
	ck_assert(tu_latch_wait(&r.started, TU_LONG_NS));
	ck_assert_int_eq(r.submit_ret, 0);
	for (i = 1; i < 5; i++)
		send_ok(d, &t[i]); /* queued behind the stuck one */
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	stopper_start(&s, d, &r.j);

	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert_uint_lt(tu_now_ns() - before, 1000 * MS);

	ck_assert(journal_wait(&r.j, 5));
	/* The force took over the graceful stop, which succeeds. */
	ck_assert_int_eq(stopper_join(&s), 0);
	ck_assert_int_eq(r.recv_res, -ECANCELED);
	ck_assert_int_eq(t[0].status, -ECANCELED);
	ck_assert_int_eq(t[0].status, AGR_DISCARDED);
	for (i = 1; i < 5; i++) {
		ck_assert_int_eq(t[i].status, AGR_DISCARDED);
		ck_assert_int_eq(journal_pos(&r.j, EV_START + t[i].seq), -1);
	}
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	tmsg_init(&late, "order-1", 9);
	ck_assert_int_eq(agr_dispatcher_send(d, &late.m), -ESHUTDOWN);
	st = stats_of(d);
	ck_assert_uint_eq(st.admitted, 5);
	ck_assert_uint_eq(st.handled + st.failed + st.skipped + st.discarded,
			  5);
	ck_assert_uint_ge(st.discarded, 4);
	ck_assert_uint_eq(st.handled, 0);
	agr_dispatcher_free(d);
	if (_i != 0)
		agr_supplier_free(sup);
	ck_assert_int_eq(tu_tally_value(&r.j.completed), 5);
	close(r.fds[0]);
	close(r.fds[1]);
	tu_latch_destroy(&r.started);
	journal_destroy(&r.j);
}
END_TEST

/* ---- a force stop ends chains of I/O ---- */

#define CHAINS 1000

struct chain_run {
	struct tu_latch running; /* every chain has hopped a few times */
	atomic_bool forced;
	atomic_long hops_after_force;
	struct tu_tally completed;
};

/* One message whose handler resubmits a NOP from each NOP's callback. */
struct chain {
	agr_message m; /* m.user points here */
	struct chain_run *run;
	agr_exchange *ex;
	int index;
	int hops;
	int status;
	atomic_int completions;
};

static void chain_hop(int res, void *arg);

static int chain_next(struct chain *c)
{
	struct io_uring_sqe *sqe;
	int ret = agr_io_sqe(agr_exchange_worker(c->ex), chain_hop, c, &sqe);

	if (ret == 0)
		io_uring_prep_nop(sqe);
	return ret;
}

static void chain_hop(int res, void *arg)
{
	struct chain *c = arg;
	int ret;

	if (atomic_load(&c->run->forced))
		atomic_fetch_add(&c->run->hops_after_force, 1);
	if (++c->hops == 4)
		tu_latch_count_down(&c->run->running);
	/* A chain ends only when the library refuses its next hop. */
	ret = res < 0 ? res : chain_next(c);
	if (ret < 0)
		agr_exchange_done(c->ex, ret);
}

static int chain_start(agr_exchange *ex, void *arg)
{
	struct chain *c = agr_exchange_message(ex)->user;
	int ret;

	(void)arg;
	c->ex = ex;
	ret = chain_next(c);
	return ret < 0 ? ret : AGR_PENDING;
}

static int chain_group(const agr_message *msg, int parallelism, void *arg)
{
	(void)arg;
	return ((const struct chain *)msg->user)->index % parallelism;
}

static void chain_completed(agr_message *msg, int status, void *arg)
{
	struct chain *c = msg->user;

	c->status = status;
	atomic_fetch_add(&c->completions, 1);
	tu_tally_add(arg);
}

/*
 * 1,000 groups each run a handler that resubmits I/O from its own
 * callbacks and would never stop by itself. After the force stop, the
 * library refuses their next submissions (-ECANCELED), so every chain
 * ends within a few hops and every message completes exactly once with
 * the error its handler got. _i == 0: the supplier is shared, so the
 * dispatcher's force refuses the chains' I/O (-ECANCELED, which is
 * AGR_DISCARDED); 1: the dispatcher owns it and forces it too, and the
 * workers' teardown refuses it (-ESHUTDOWN, as io.h says).
 */
START_TEST(force_stop_ends_resubmitting_chains)
{
	struct chain_run run = { 0 };
	struct chain *c = calloc(CHAINS, sizeof(*c));
	agr_supplier *sup = new_supplier(2);
	agr_dispatcher_options o = options(sup, _i == 1, CHAINS,
					   &run.completed);
	agr_dispatcher *d;
	uint64_t before;
	long after;
	int i;

	ck_assert_ptr_nonnull(c);
	tu_latch_init(&run.running, CHAINS);
	tu_tally_init(&run.completed);
	o.on_complete = chain_completed;
	o.group_key = chain_group;
	d = new_dispatcher(&o);
	add_fn(d, NULL, chain_start, NULL);
	start(d);
	for (i = 0; i < CHAINS; i++) {
		c[i].run = &run;
		c[i].index = i;
		c[i].m.aggregate_id = "chain";
		c[i].m.user = &c[i];
		ck_assert_int_eq(agr_dispatcher_send(d, &c[i].m), 0);
	}
	ck_assert(tu_latch_wait(&run.running, TU_LONG_NS));

	atomic_store(&run.forced, true);
	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert(tu_tally_wait(&run.completed, CHAINS, TU_LONG_NS));
	after = atomic_load(&run.hops_after_force);
	fprintf(stderr, "force stop ended %d chains in %.1f ms, %ld hops "
		"after it\n", CHAINS, (double)(tu_now_ns() - before) / 1e6,
		after);
	/* Until its worker takes the sweep, a chain hops a turn or two. */
	ck_assert_int_le(after, 16 * CHAINS);
	agr_dispatcher_free(d);
	if (_i == 0)
		agr_supplier_free(sup);
	for (i = 0; i < CHAINS; i++) {
		ck_assert_int_eq(atomic_load(&c[i].completions), 1);
		ck_assert_int_eq(c[i].status,
				 _i == 0 ? AGR_DISCARDED : -ESHUTDOWN);
	}
	tu_tally_destroy(&run.completed);
	tu_latch_destroy(&run.running);
	free(c);
}
END_TEST

/*
 * A function pending on the test thread (no I/O to cancel) is finished
 * from that thread after a force stop: the message completes once
 * (discarded by the force, which finds no I/O left, or by that call,
 * whichever comes first), and the one queued behind it is discarded.
 * _i == 0: the dispatcher owns the supplier, whose workers have ended
 * by then; 1: it does not.
 */
START_TEST(done_from_another_thread_after_force_stop_completes)
{
	agr_supplier *sup = new_supplier(1);
	struct tmsg t1, t2;
	struct held h;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &h.j);
	agr_scheduler *sched;
	agr_dispatcher *d;

	held_init(&h);
	d = new_dispatcher(&o);
	sched = agr_dispatcher_scheduler(d);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	if (_i == 0)
		ck_assert(wait_until_terminated(sched, TU_LONG_NS));
	agr_exchange_done(h.ex, -ECANCELED);
	ck_assert_msg(journal_wait(&h.j, 2),
		      "%ld of 2 messages completed after the force stop",
		      tu_tally_value(&h.j.completed));
	ck_assert_int_eq(t1.status, -ECANCELED);
	ck_assert_int_eq(t2.status, AGR_DISCARDED);
	agr_dispatcher_free(d);
	if (_i != 0)
		agr_supplier_free(sup);
	held_destroy(&h);
}
END_TEST

/* ==== issue cases ==== */

/* ---- per-id order and per-group exclusion under load ---- */

#define ORDER_IDS 10000
#define ORDER_PER_ID 20
#define ORDER_MSGS (ORDER_IDS * ORDER_PER_ID)
#define ORDER_PRODUCERS 4
#define ORDER_GROUPS 256
#define ORDER_BATCH 64

struct order_run {
	agr_dispatcher *d;
	agr_message *msgs; /* [id * ORDER_PER_ID + seq]; user = seq */
	char (*ids)[24];
	atomic_uchar *completions;
	atomic_int *next_seq; /* per id */
	atomic_int inflight[ORDER_GROUPS];
	atomic_long remaining, sent;
	struct tu_latch all_done;
};

struct producer {
	pthread_t thread;
	struct order_run *r;
	int index;
};

static int check_order(agr_exchange *ex, void *arg)
{
	struct order_run *r = arg;
	agr_message *m = agr_exchange_message(ex);
	int id = (int)((m - r->msgs) / ORDER_PER_ID);
	int seq = (int)(uintptr_t)m->user;
	int g = agr_exchange_group(ex);

	TU_EXPECT(atomic_fetch_add(&r->inflight[g], 1) == 0);
	TU_EXPECT(atomic_load_explicit(&r->next_seq[id],
				    memory_order_relaxed) == seq);
	atomic_store_explicit(&r->next_seq[id], seq + 1,
			      memory_order_relaxed);
	atomic_fetch_sub(&r->inflight[g], 1);
	return 0;
}

static void count_order_completion(agr_message *m, int status, void *arg)
{
	struct order_run *r = arg;

	TU_EXPECT(status == 0);
	TU_EXPECT(atomic_fetch_add(&r->completions[m - r->msgs], 1) == 0);
	if (atomic_fetch_sub(&r->remaining, 1) == 1)
		tu_latch_count_down(&r->all_done);
}

static void send_order_batch(struct order_run *r, agr_message **batch,
			     size_t n)
{
	size_t admitted = 0;

	if (n == 0)
		return;
	TU_EXPECT(agr_dispatcher_send_batch(r->d, batch, n, &admitted) == 0);
	TU_EXPECT(admitted == n);
	atomic_fetch_add(&r->sent, (long)n);
}

/* Producer p owns ids p, p + 4, ...; 0 and 1 send, 2 and 3 batch. */
static void *produce_in_order(void *arg)
{
	struct producer *p = arg;
	struct order_run *r = p->r;
	agr_message *batch[ORDER_BATCH], *m;
	bool batched = p->index >= 2;
	size_t n = 0;
	int id, seq;

	for (seq = 0; seq < ORDER_PER_ID; seq++) {
		for (id = p->index; id < ORDER_IDS; id += ORDER_PRODUCERS) {
			m = &r->msgs[id * ORDER_PER_ID + seq];
			if (!batched) {
				TU_EXPECT(agr_dispatcher_send(r->d, m) == 0);
				atomic_fetch_add(&r->sent, 1);
				continue;
			}
			batch[n++] = m;
			if (n == ORDER_BATCH) {
				send_order_batch(r, batch, n);
				n = 0;
			}
		}
	}
	send_order_batch(r, batch, n);
	return NULL;
}

static struct order_run *order_run_new(void)
{
	struct order_run *r = calloc(1, sizeof(*r));
	int id, seq;

	ck_assert_ptr_nonnull(r);
	r->msgs = calloc(ORDER_MSGS, sizeof(*r->msgs));
	r->ids = calloc(ORDER_IDS, sizeof(*r->ids));
	r->completions = calloc(ORDER_MSGS, sizeof(*r->completions));
	r->next_seq = calloc(ORDER_IDS, sizeof(*r->next_seq));
	ck_assert(r->msgs && r->ids && r->completions && r->next_seq);
	for (id = 0; id < ORDER_IDS; id++) {
		snprintf(r->ids[id], sizeof(r->ids[id]), "agg-%d", id);
		for (seq = 0; seq < ORDER_PER_ID; seq++) {
			agr_message *m = &r->msgs[id * ORDER_PER_ID + seq];

			m->aggregate_id = r->ids[id];
			m->type = "Tick";
			m->user = (void *)(uintptr_t)seq;
		}
	}
	atomic_init(&r->remaining, ORDER_MSGS);
	tu_latch_init(&r->all_done, 1);
	return r;
}

static void order_run_free(struct order_run *r)
{
	tu_latch_destroy(&r->all_done);
	free(r->next_seq);
	free(r->completions);
	free(r->ids);
	free(r->msgs);
	free(r);
}

START_TEST(per_id_order_under_load)
{
	struct order_run *r = order_run_new();
	struct producer p[ORDER_PRODUCERS];
	agr_dispatcher_options o = owned_options(2, ORDER_GROUPS, r);
	agr_dispatcher_stats st;
	int i;

	o.on_complete = count_order_completion;
	r->d = new_dispatcher(&o);
	add_fn(r->d, NULL, check_order, r);
	for (i = 0; i < ORDER_PRODUCERS; i++) {
		p[i] = (struct producer){ .r = r, .index = i };
		ck_assert_int_eq(pthread_create(&p[i].thread, NULL,
						produce_in_order, &p[i]), 0);
	}
	/* Start while they send: parked groups must not lose order. */
	ck_assert(wait_at_least(&r->sent, ORDER_MSGS / 20, TU_LONG_NS));
	start(r->d);
	for (i = 0; i < ORDER_PRODUCERS; i++)
		pthread_join(p[i].thread, NULL);
	ck_assert(tu_latch_wait(&r->all_done, 4 * TU_LONG_NS));
	tu_assert_no_worker_failure();
	for (i = 0; i < ORDER_MSGS; i++)
		ck_assert_int_eq(atomic_load(&r->completions[i]), 1);
	for (i = 0; i < ORDER_IDS; i++)
		ck_assert_int_eq(atomic_load(&r->next_seq[i]), ORDER_PER_ID);
	st = stop_and_get_stats(r->d);
	ck_assert_uint_eq(st.admitted, ORDER_MSGS);
	ck_assert_uint_eq(st.handled, ORDER_MSGS);
	agr_dispatcher_free(r->d);
	order_run_free(r);
}
END_TEST

/* ---- groups overlap ---- */

struct rendezvous {
	struct tu_latch both;
	atomic_int met;
};

/* Arrives, then waits for the other group's function to arrive too. */
static int meet(agr_exchange *ex, void *arg)
{
	struct rendezvous *r = arg;

	(void)ex;
	tu_latch_count_down(&r->both);
	if (tu_latch_wait(&r->both, TU_LONG_NS))
		atomic_fetch_add(&r->met, 1);
	return 0;
}

START_TEST(groups_run_concurrently)
{
	struct rendezvous rv = { .met = 0 };
	char id_a[32], id_b[32];
	struct tmsg a, b;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	journal_init(&j);
	tu_latch_init(&rv.both, 2);
	pick_id(id_a, sizeof(id_a), "left-", 64, 2, 0, -1);
	pick_id(id_b, sizeof(id_b), "right-", 64, 2, 1, -1);
	o = owned_options(2, 64, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, meet, &rv);
	start(d);
	tmsg_init(&a, id_a, 1);
	tmsg_init(&b, id_b, 2);
	send_ok(d, &a);
	send_ok(d, &b);
	ck_assert(journal_wait(&j, 2));
	ck_assert_int_eq(atomic_load(&rv.met), 2); /* they overlapped */
	stop_and_free(d);
	tu_latch_destroy(&rv.both);
	journal_destroy(&j);
}
END_TEST

/* ---- an asynchronous function holds its group, not its worker ---- */

struct async_run {
	struct journal j;
	struct tmsg *other; /* of another group on the same worker */
	agr_exchange *ex;
	int send_ret, timer_ret, timer_res;
};

static void async_timer_fired(int res, void *arg)
{
	struct async_run *r = arg;

	r->timer_res = res;
	journal_add(&r->j, EV_TIMER + 1);
	agr_exchange_done(r->ex, 0);
}

/*
 * Seq 1 sends the other group's message, arms a 50 ms timer and stays
 * pending until it fires; every other message is done at once.
 */
static int wait_for_timer(agr_exchange *ex, void *arg)
{
	struct async_run *r = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&r->j, EV_START + seq);
	if (seq != 1)
		return 0;
	r->ex = ex;
	r->send_ret = agr_dispatcher_send(agr_exchange_dispatcher(ex),
					  &r->other->m);
	r->timer_ret = agr_io_timeout(agr_exchange_worker(ex), 50 * MS,
				      async_timer_fired, r);
	return r->timer_ret < 0 ? r->timer_ret : AGR_PENDING;
}

START_TEST(async_function_holds_only_its_group)
{
	struct async_run r = { .send_ret = 1, .timer_ret = 1 };
	struct tmsg a1, a2, b1;
	char id_a[32], id_b[32];
	agr_dispatcher_options o;
	agr_dispatcher *d;
	int group_a;

	journal_init(&r.j);
	group_a = pick_id(id_a, sizeof(id_a), "a-", 64, 1, 0, -1);
	pick_id(id_b, sizeof(id_b), "b-", 64, 1, 0, group_a);
	tmsg_init(&a1, id_a, 1);
	tmsg_init(&a2, id_a, 2);
	tmsg_init(&b1, id_b, 10);
	r.other = &b1;
	o = owned_options(1, 64, &r.j); /* one worker for both groups */
	d = new_dispatcher(&o);
	add_fn(d, NULL, wait_for_timer, &r);
	start(d);
	send_ok(d, &a1);
	send_ok(d, &a2);
	ck_assert(journal_wait(&r.j, 3));
	ck_assert_int_eq(r.send_ret, 0);
	ck_assert_int_eq(r.timer_ret, 0);
	ck_assert_int_eq(r.timer_res, -ETIME);
	/* B ran while A1 was pending; A2 waited for A1's completion. */
	ASSERT_ORDER(&r.j, EV_START + 1, EV_START + 10, EV_DONE + 10,
		     EV_TIMER + 1, EV_DONE + 1, EV_START + 2, EV_DONE + 2);
	ck_assert_int_eq(a1.status, 0);
	ck_assert_int_eq(a2.status, 0);
	ck_assert_int_eq(b1.status, 0);
	stop_and_free(d);
	journal_destroy(&r.j);
}
END_TEST

/* ---- force stop with thousands queued, racing the producers ---- */

#define FLOOD_MSGS 20000
#define FLOOD_IDS 200
#define FLOOD_PRODUCERS 2

struct flood {
	agr_dispatcher *d;
	agr_message *msgs; /* FLOOD_MSGS of work, then the blocker */
	char (*ids)[24];
	int *send_ret;
	int *status;
	atomic_uchar *completions;
	struct tu_tally completed;
	struct tu_latch blocked;
	atomic_long admitted;
	atomic_bool saw_interrupt;
};

struct flooder {
	pthread_t thread;
	struct flood *f;
	int index;
};

static void flood_completed(agr_message *m, int status, void *arg)
{
	struct flood *f = arg;
	size_t i = (size_t)(m - f->msgs);

	f->status[i] = status;
	atomic_fetch_add(&f->completions[i], 1);
	tu_tally_add(&f->completed);
}

/* Holds its worker until the force stop interrupts it. */
static int block_until_interrupted(agr_exchange *ex, void *arg)
{
	const struct timespec tick = { 0, 1000000 };
	struct flood *f = arg;
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;

	(void)ex;
	tu_latch_count_down(&f->blocked);
	while (!agr_worker_interrupted() && tu_now_ns() < deadline)
		nanosleep(&tick, NULL); /* a poll interval */
	atomic_store(&f->saw_interrupt, agr_worker_interrupted());
	return 0;
}

static int work_a_little(agr_exchange *ex, void *arg)
{
	unsigned x = 0, i;

	(void)ex;
	(void)arg;
	for (i = 0; i < 1000; i++) {
		x += i;
		__asm__ __volatile__("" : "+r"(x)); /* keep the loop */
	}
	return 0;
}

static void *flood_sends(void *arg)
{
	struct flooder *p = arg;
	struct flood *f = p->f;
	int i, ret;

	for (i = p->index; i < FLOOD_MSGS; i += FLOOD_PRODUCERS) {
		ret = agr_dispatcher_send(f->d, &f->msgs[i]);
		f->send_ret[i] = ret;
		if (ret == 0)
			atomic_fetch_add(&f->admitted, 1);
	}
	return NULL;
}

static struct flood *flood_new(void)
{
	struct flood *f = calloc(1, sizeof(*f));
	int i;

	ck_assert_ptr_nonnull(f);
	f->msgs = calloc(FLOOD_MSGS + 1, sizeof(*f->msgs));
	f->ids = calloc(FLOOD_IDS, sizeof(*f->ids));
	f->send_ret = calloc(FLOOD_MSGS + 1, sizeof(*f->send_ret));
	f->status = calloc(FLOOD_MSGS + 1, sizeof(*f->status));
	f->completions = calloc(FLOOD_MSGS + 1, sizeof(*f->completions));
	ck_assert(f->msgs && f->ids && f->send_ret && f->status &&
		  f->completions);
	for (i = 0; i < FLOOD_IDS; i++)
		snprintf(f->ids[i], sizeof(f->ids[i]), "flood-%d", i);
	for (i = 0; i < FLOOD_MSGS; i++) {
		f->msgs[i].aggregate_id = f->ids[i % FLOOD_IDS];
		f->msgs[i].type = "work";
	}
	f->msgs[FLOOD_MSGS].aggregate_id = "blocker";
	f->msgs[FLOOD_MSGS].type = "block";
	tu_tally_init(&f->completed);
	tu_latch_init(&f->blocked, 1);
	return f;
}

static void flood_free(struct flood *f)
{
	tu_latch_destroy(&f->blocked);
	tu_tally_destroy(&f->completed);
	free(f->completions);
	free(f->status);
	free(f->send_ret);
	free(f->ids);
	free(f->msgs);
	free(f);
}

/* Each admitted message completed once, handled or discarded. */
static void assert_flood_accounting(struct flood *f,
				    const agr_dispatcher_stats *st)
{
	uint64_t handled = 0, discarded = 0;
	int i;

	for (i = 0; i <= FLOOD_MSGS; i++) {
		if (f->send_ret[i] != 0) {
			ck_assert_int_eq(f->send_ret[i], -ESHUTDOWN);
			ck_assert_int_eq(atomic_load(&f->completions[i]), 0);
			continue;
		}
		ck_assert_int_eq(atomic_load(&f->completions[i]), 1);
		if (f->status[i] == 0)
			handled++;
		else if (f->status[i] == AGR_DISCARDED)
			discarded++;
		else
			ck_abort_msg("message %d: status %d", i, f->status[i]);
	}
	ck_assert_uint_eq(handled, st->handled);
	ck_assert_uint_eq(discarded, st->discarded);
}

/* Counts a test message's completions; no journal. */
static void count_completion(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = msg->user;

	(void)arg;
	t->status = status;
	atomic_fetch_add(&t->completions, 1);
}

/*
 * Dispatchers come and go on one supplier's workers, each stopped while
 * its groups may still be going idle and freed at once. The workers
 * outlive every dispatcher: one that touched a group after the step
 * that left it idle would touch freed memory (ASan, valgrind), and a
 * stop that missed the last group going idle would wait out its
 * deadline and fail.
 */
START_TEST(stop_and_free_while_groups_go_idle)
{
	enum { ROUNDS = 200, MSGS = 96, GROUPS = 48 };
	static struct tmsg t[MSGS];
	static char ids[MSGS][24];
	agr_supplier *sup = new_supplier(2);
	agr_dispatcher_options o = options(sup, false, GROUPS, NULL);
	agr_dispatcher *d;
	int round, i;

	o.on_complete = count_completion;
	for (i = 0; i < MSGS; i++)
		snprintf(ids[i], sizeof(ids[i]), "order-%d", i);
	for (round = 0; round < ROUNDS; round++) {
		d = new_dispatcher(&o);
		add_fn(d, NULL, work_a_little, NULL);
		start(d);
		for (i = 0; i < MSGS; i++) {
			tmsg_init(&t[i], ids[i], i);
			send_ok(d, &t[i]);
		}
		stop(d);
		/* Every message completed once, before the stop returned. */
		for (i = 0; i < MSGS; i++) {
			ck_assert_int_eq(atomic_load(&t[i].completions), 1);
			ck_assert_int_eq(t[i].status, 0);
		}
		agr_dispatcher_free(d);
	}
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(force_stop_with_thousands_queued)
{
	struct flood *f = flood_new();
	struct flooder p[FLOOD_PRODUCERS];
	agr_dispatcher_options o = owned_options(2, 64, f);
	agr_dispatcher_stats st;
	uint64_t before;
	long admitted;
	int i;

	o.on_complete = flood_completed;
	f->d = new_dispatcher(&o);
	add_fn(f->d, "block", block_until_interrupted, f);
	add_fn(f->d, "work", work_a_little, f);
	start(f->d);
	ck_assert_int_eq(agr_dispatcher_send(f->d, &f->msgs[FLOOD_MSGS]), 0);
	ck_assert(tu_latch_wait(&f->blocked, TU_LONG_NS));
	for (i = 0; i < FLOOD_PRODUCERS; i++) {
		p[i] = (struct flooder){ .f = f, .index = i };
		ck_assert_int_eq(pthread_create(&p[i].thread, NULL,
						flood_sends, &p[i]), 0);
	}
	ck_assert(wait_at_least(&f->admitted, FLOOD_MSGS / 4, TU_LONG_NS));

	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(f->d), 0);
	ck_assert_uint_lt(tu_now_ns() - before, 1000 * MS);

	for (i = 0; i < FLOOD_PRODUCERS; i++)
		pthread_join(p[i].thread, NULL);
	admitted = atomic_load(&f->admitted) + 1; /* and the blocker */
	ck_assert(tu_tally_wait(&f->completed, admitted, TU_LONG_NS));
	st = stats_of(f->d);
	ck_assert_uint_eq(st.admitted, (uint64_t)admitted);
	ck_assert_uint_eq(st.handled + st.failed + st.skipped + st.discarded,
			  (uint64_t)admitted);
	ck_assert_uint_eq(st.refused, (uint64_t)(FLOOD_MSGS + 1 - admitted));
	ck_assert_uint_gt(st.discarded, 0);
	assert_flood_accounting(f, &st);
	agr_dispatcher_free(f->d);
	/* Nothing completed twice, not even while freeing. */
	ck_assert_int_eq(tu_tally_value(&f->completed), admitted);
	ck_assert(atomic_load(&f->saw_interrupt));
	ck_assert_int_eq(f->status[FLOOD_MSGS], 0);
	flood_free(f);
}
END_TEST

START_TEST(queue_limit_gives_eagain)
{
	struct tmsg t[10], other;
	struct held h;
	char other_id[32];
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	int i;

	held_init(&h);
	o = owned_options(1, 8, &h.j);
	o.queue_limit = 4;
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	for (i = 0; i < 10; i++)
		tmsg_init(&t[i], "order-1", i + 1);
	pick_id(other_id, sizeof(other_id), "other-", 8, 1, 0,
		agr_group_key("order-1", 8));
	tmsg_init(&other, other_id, 50);

	send_ok(d, &t[0]);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	/* The held message counts: three more fit, then the group is full. */
	for (i = 1; i < 4; i++)
		send_ok(d, &t[i]);
	for (i = 4; i < 10; i++)
		ck_assert_int_eq(agr_dispatcher_send(d, &t[i].m), -EAGAIN);
	send_ok(d, &other); /* the limit is per group */
	ck_assert(journal_wait(&h.j, 1));
	ck_assert_int_eq(other.status, 0);
	ck_assert_uint_eq(stats_of(d).refused, 6);

	agr_exchange_done(h.ex, 0);
	ck_assert(journal_wait(&h.j, 5));
	ASSERT_ORDER(&h.j, EV_DONE + 1, EV_START + 2, EV_DONE + 2,
		     EV_START + 3, EV_DONE + 3, EV_START + 4, EV_DONE + 4);
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), i < 4);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(t[i].status, 0);

	/* Drained: the group takes messages again. */
	for (i = 4; i < 8; i++)
		send_ok(d, &t[i]);
	ck_assert(journal_wait(&h.j, 9));
	for (i = 4; i < 8; i++)
		ck_assert_int_eq(t[i].status, 0);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.admitted, 9);
	ck_assert_uint_eq(st.handled, 9);
	ck_assert_uint_eq(st.refused, 6);
	agr_dispatcher_free(d);
	for (i = 8; i < 10; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), 0);
	held_destroy(&h);
}
END_TEST

/* ---- several functions for one message ---- */

enum { FN_A1 = 1, FN_A2 = 2, FN_ANY = 3 };
#define EV_FN_OF(fn, seq) (EV_FN + 100 * (fn) + (seq))


/*
 * Held groups: X to group A starts A; A's function sends Y to group B
 * (B idle: an activation); B's function sends Z back to A. A was
 * drained and held by then, so Z is pushed and picked up without a
 * second activation of A: the worker runs two items, not three.
 */
struct relay {
	struct journal j;
	struct tmsg x, y, z;
};

static int relay_fn(agr_exchange *ex, void *arg)
{
	struct relay *r = arg;
	struct tmsg *t = current_tmsg(ex);
	agr_dispatcher *d = agr_exchange_dispatcher(ex);

	journal_add(&r->j, EV_START + t->seq);
	if (t == &r->x)
		ck_assert_int_eq(agr_dispatcher_send(d, &r->y.m), 0);
	else if (t == &r->y)
		ck_assert_int_eq(agr_dispatcher_send(d, &r->z.m), 0);
	return 0;
}

static uint64_t worker_items(agr_dispatcher *d)
{
	agr_worker_metrics m;

	ck_assert_int_eq(agr_scheduler_worker_metrics(
				 agr_dispatcher_scheduler(d), 0, &m), 0);
	return m.items;
}

START_TEST(held_group_takes_a_send_without_an_activation)
{
	char id_a[32], id_b[32];
	struct relay r;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	uint64_t before;
	int ga;

	journal_init(&r.j);
	ga = pick_id(id_a, sizeof(id_a), "a", 8, 1, 0, -1);
	pick_id(id_b, sizeof(id_b), "b", 8, 1, 0, ga);
	tmsg_init(&r.x, id_a, 1);
	tmsg_init(&r.y, id_b, 2);
	tmsg_init(&r.z, id_a, 3);
	o = owned_options(1, 8, &r.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, relay_fn, &r);
	start(d);
	before = worker_items(d);
	send_ok(d, &r.x);
	ck_assert(journal_wait(&r.j, 3));
	ASSERT_ORDER(&r.j, EV_START + 1, EV_START + 2, EV_START + 3);
	ck_assert_uint_eq(worker_items(d) - before, 2);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&r.z.completions), 1);
	journal_destroy(&r.j);
}
END_TEST


/*
 * CPU time (clock ticks) of this process's threads whose name starts
 * with `prefix`: the workers of a supplier of that name.
 */
static long worker_ticks(const char *prefix)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], buf[1024];
	unsigned long utime, stime;
	long ticks = 0;
	const char *p;
	FILE *f;
	size_t n;

	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat",
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* it just ended */
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		p = strchr(buf, '(');
		if (!p || strncmp(p + 1, prefix, strlen(prefix)) != 0)
			continue;
		p = strrchr(buf, ')');
		/* After the name: state and 10 more fields, then the times. */
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &utime, &stime) == 2)
			ticks += (long)(utime + stime);
	}
	closedir(dir);
	return ticks;
}

/*
 * Held groups must not keep an idle worker awake: once the messages
 * are done, the workers let their groups go and sleep in the kernel.
 * Two seconds of idle time cost them at most a tick each (one may
 * land on the last microseconds of a spin), not the 200 a spinning
 * worker would take.
 */
static int do_nothing(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void tally_completion(agr_message *msg, int status, void *arg)
{
	(void)msg;
	(void)status;
	tu_tally_add(arg);
}

START_TEST(idle_workers_burn_no_cpu_after_a_burst)
{
	const struct timespec window = { 2, 0 };
	agr_message *msgs = calloc(1000, sizeof(*msgs));
	char (*ids)[16] = calloc(1000, 16);
	struct tu_tally done;
	agr_dispatcher_options o;
	agr_supplier *sup = NULL;
	agr_dispatcher *d;
	long before;
	int i;

	ck_assert_ptr_nonnull(msgs);
	ck_assert_ptr_nonnull(ids);
	tu_tally_init(&done);
	ck_assert_int_eq(agr_supplier_new("idlecpu", 2, &sup), 0);
	o = options(sup, true, 64, &done);
	o.on_complete = tally_completion;
	d = new_dispatcher(&o);
	add_fn(d, NULL, do_nothing, NULL);
	start(d);
	for (i = 0; i < 1000; i++) {
		snprintf(ids[i], sizeof(ids[i]), "acct-%d", i % 97);
		msgs[i].aggregate_id = ids[i];
		ck_assert_int_eq(agr_dispatcher_send(d, &msgs[i]), 0);
	}
	ck_assert(tu_tally_wait(&done, 1000, TU_LONG_NS));
	before = worker_ticks("idlecpu-");
	nanosleep(&window, NULL); /* the window measured, not a wait */
	ck_assert_int_le(worker_ticks("idlecpu-") - before, 2);
	stop_and_free(d);
	tu_tally_destroy(&done);
	free(ids);
	free(msgs);
}
END_TEST

struct fanout {
	struct journal j;
	struct tu_latch started; /* the three functions of message 1 */
	struct tu_latch finished;
	agr_exchange *ex;
	long after_first, after_second;
};

static void fan_note(agr_exchange *ex, struct fanout *f, int fn)
{
	journal_add(&f->j, EV_FN_OF(fn, current_tmsg(ex)->seq));
	tu_latch_count_down(&f->started);
}

static int fan_a1(agr_exchange *ex, void *arg)
{
	struct fanout *f = arg;

	fan_note(ex, f, FN_A1);
	f->ex = ex;
	return AGR_PENDING;
}

static int fan_a2(agr_exchange *ex, void *arg)
{
	struct fanout *f = arg;

	fan_note(ex, f, FN_A2);
	f->ex = ex;
	return AGR_PENDING;
}

static int fan_any(agr_exchange *ex, void *arg)
{
	fan_note(ex, arg, FN_ANY);
	return 0;
}

/* On the group's worker: finishes both pending functions, with errors. */
static void finish_both(void *arg)
{
	struct fanout *f = arg;
	agr_exchange *ex = f->ex;

	agr_exchange_done(ex, -EIO);
	f->after_first = tu_tally_value(&f->j.completed);
	agr_exchange_done(ex, -ENOENT); /* a later error is not the status */
	f->after_second = tu_tally_value(&f->j.completed);
	tu_latch_count_down(&f->finished);
}

START_TEST(matching_functions_run_together)
{
	struct fanout f = { .ex = NULL };
	struct tmsg a, b, n;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	int fn;

	journal_init(&f.j);
	tu_latch_init(&f.started, 3);
	tu_latch_init(&f.finished, 1);
	o = owned_options(1, 8, &f.j);
	d = new_dispatcher(&o);
	add_fn(d, "A", fan_a1, &f);
	add_fn(d, "A", fan_a2, &f);
	add_fn(d, NULL, fan_any, &f);
	start(d);
	tmsg_init(&a, "order-1", 1);
	a.m.type = "A";
	send_ok(d, &a);
	ck_assert(tu_latch_wait(&f.started, TU_LONG_NS));
	/* All three started; the message waits for the two pending ones. */
	ck_assert_int_eq(tu_tally_value(&f.j.completed), 0);
	ck_assert_int_eq(agr_scheduler_schedule(agr_dispatcher_scheduler(d),
						0, finish_both, &f), 0);
	ck_assert(tu_latch_wait(&f.finished, TU_LONG_NS));
	ck_assert_int_eq(f.after_first, 0);
	ck_assert_int_eq(f.after_second, 1);
	ck_assert_int_eq(a.status, -EIO);
	for (fn = FN_A1; fn <= FN_ANY; fn++)
		ASSERT_ORDER(&f.j, EV_FN_OF(fn, 1), EV_DONE + 1);

	tmsg_init(&b, "order-1", 2);
	b.m.type = "B";
	tmsg_init(&n, "order-1", 3); /* no type */
	send_ok(d, &b);
	send_ok(d, &n);
	ck_assert(journal_wait(&f.j, 3));
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(n.status, 0);
	ASSERT_ORDER(&f.j, EV_FN_OF(FN_ANY, 2), EV_DONE + 2,
		     EV_FN_OF(FN_ANY, 3), EV_DONE + 3);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A1, 2)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A2, 2)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A1, 3)), -1);
	ck_assert_int_eq(journal_pos(&f.j, EV_FN_OF(FN_A2, 3)), -1);
	ck_assert_int_eq(atomic_load(&a.completions), 1);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.handled, 2);
	agr_dispatcher_free(d);
	tu_latch_destroy(&f.finished);
	tu_latch_destroy(&f.started);
	journal_destroy(&f.j);
}
END_TEST

START_TEST(unmatched_message_is_skipped)
{
	struct journal j;
	struct tmsg b;
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, "A", handle, &j);
	start(d);
	tmsg_init(&b, "order-1", 1);
	b.m.type = "B";
	send_ok(d, &b);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(b.status, 0);
	ck_assert_int_eq(journal_pos(&j, EV_START + 1), -1);
	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.skipped, 1);
	ck_assert_uint_eq(st.handled, 0);
	agr_dispatcher_free(d);
	journal_destroy(&j);
}
END_TEST

/* ---- bad input ---- */

START_TEST(new_rejects_bad_options)
{
	static const agr_named_aggregate no_context = { NULL, "Order" };
	static const agr_named_aggregate empty_aggregate = { "sales", "" };
	agr_supplier *sup = new_supplier(1);
	agr_dispatcher_options good = options(sup, false, 8, NULL), o;
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(NULL, &d), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_new(&good, NULL), -EINVAL);
	o = good;
	o.name = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.name = "";
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.supplier = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.on_complete = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.parallelism = -1;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.named_aggregate = no_context;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	o = good;
	o.named_aggregate = empty_aggregate;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(agr_supplier_size(sup), 0); /* nothing was made */

	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	ck_assert_int_eq(agr_dispatcher_new(&good, &d), -ESHUTDOWN);
	ck_assert_ptr_null(d);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(send_and_register_reject_bad_input)
{
	struct tmsg ok, no_id;
	agr_message *batch[2];
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	size_t admitted = 99;

	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	ck_assert_int_eq(agr_dispatcher_register(d, "A", NULL, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_register(NULL, "A", handle, &j),
			 -EINVAL);
	add_fn(d, NULL, handle, &j);
	start(d);
	ck_assert_int_eq(agr_dispatcher_register(d, "A", handle, &j), -EBUSY);
	ck_assert_int_eq(agr_dispatcher_register(d, NULL, handle, &j), -EBUSY);

	tmsg_init(&ok, "order-1", 1);
	tmsg_init(&no_id, NULL, 2);
	ck_assert_int_eq(agr_dispatcher_send(NULL, &ok.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &no_id.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_group_of(d, NULL), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &no_id.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send_batch(d, NULL, 1, &admitted),
			 -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 0, &admitted), 0);
	ck_assert_uint_eq(admitted, 0);
	batch[0] = &ok.m;
	batch[1] = NULL;
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 2, &admitted),
			 -EINVAL);
	ck_assert_uint_eq(admitted, 1); /* stops at the bad one */
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(ok.status, 0);
	ck_assert_uint_eq(stats_of(d).refused, 0);
	ck_assert_int_eq(agr_dispatcher_stats_get(d, NULL), -EINVAL);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&no_id.completions), 0);
	journal_destroy(&j);
}
END_TEST

/* Routes by the test message's seq, in range or not. */
static int key_is_seq(const agr_message *msg, int parallelism, void *arg)
{
	(void)parallelism;
	atomic_fetch_add((atomic_int *)arg, 1);
	return ((const struct tmsg *)msg->user)->seq;
}

START_TEST(custom_group_key)
{
	struct tmsg in_range, too_big, negative;
	atomic_int calls = 0;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	o = owned_options(2, 8, &j);
	o.group_key = key_is_seq;
	o.group_key_arg = &calls;
	d = new_dispatcher(&o);
	add_fn(d, NULL, handle, &j);
	start(d);
	tmsg_init(&in_range, "order-1", 3);
	tmsg_init(&too_big, "order-1", 8);
	tmsg_init(&negative, "order-1", -1);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &in_range.m), 3);
	ck_assert_int_eq(agr_dispatcher_group_of(d, &too_big.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &too_big.m), -EINVAL);
	ck_assert_int_eq(agr_dispatcher_send(d, &negative.m), -EINVAL);
	send_ok(d, &in_range);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(in_range.group, 3);
	ck_assert_int_eq(in_range.worker, 1);
	ck_assert_int_gt(atomic_load(&calls), 0);
	ck_assert_int_gt(atomic_load(&logged[AGR_LOG_ERROR]), 0);
	stop_and_free(d);
	ck_assert_int_eq(atomic_load(&too_big.completions), 0);
	ck_assert_int_eq(atomic_load(&negative.completions), 0);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

static int return_garbage(agr_exchange *ex, void *arg)
{
	journal_add(arg, EV_START + current_tmsg(ex)->seq);
	return 42;
}

START_TEST(garbage_return_is_einval)
{
	struct journal j;
	struct tmsg t;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, return_garbage, &j);
	start(d);
	tmsg_init(&t, "order-1", 1);
	send_ok(d, &t);
	ck_assert(journal_wait(&j, 1));
	ck_assert_int_eq(t.status, -EINVAL);
	ck_assert_uint_eq(stop_and_get_stats(d).failed, 1);
	ck_assert_int_gt(atomic_load(&logged[AGR_LOG_ERROR]), 0);
	agr_dispatcher_free(d);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

/* Finishes itself, twice, before returning AGR_PENDING once. */
static int done_twice(agr_exchange *ex, void *arg)
{
	journal_add(arg, EV_START + current_tmsg(ex)->seq);
	agr_exchange_done(ex, 0);
	agr_exchange_done(ex, -EIO); /* nothing pending: ignored */
	return AGR_PENDING;
}

/* ---- the watchdog names stuck messages ---- */

struct stuck {
	pthread_mutex_t lock;
	agr_exchange *ex;
	char line[512];
	struct tu_tally reports, started;
};

static struct stuck *stuck_now; /* the log hook's view */

static void stuck_log(agr_log_level level, const char *msg, void *arg)
{
	struct stuck *st = stuck_now;

	(void)arg;
	if (level != AGR_LOG_WARN || !st || !strstr(msg, "stuck message"))
		return;
	pthread_mutex_lock(&st->lock);
	snprintf(st->line, sizeof(st->line), "%s", msg);
	pthread_mutex_unlock(&st->lock);
	tu_tally_add(&st->reports);
}

static int pend_forever(agr_exchange *ex, void *arg)
{
	struct stuck *st = arg;

	pthread_mutex_lock(&st->lock);
	st->ex = ex;
	pthread_mutex_unlock(&st->lock);
	tu_tally_add(&st->started);
	return AGR_PENDING;
}

static void finish_stuck(struct stuck *st)
{
	agr_exchange *ex;

	pthread_mutex_lock(&st->lock);
	ex = st->ex;
	st->ex = NULL;
	pthread_mutex_unlock(&st->lock);
	agr_exchange_done(ex, 0);
}

/*
 * A function that returned AGR_PENDING and never finishes is named by
 * the watchdog (dispatcher, group, worker, type, age), once per
 * message, and counted in the stats and the exposition.
 */
START_TEST(watchdog_names_a_stuck_message)
{
	struct stuck st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct journal j;
	struct tmsg a, b;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	char page[16384], want[96];

	journal_init(&j);
	tu_tally_init(&st.reports);
	tu_tally_init(&st.started);
	stuck_now = &st;
	agr_set_log_hook(stuck_log, NULL);
	o = owned_options(1, 4, &j);
	d = new_dispatcher(&o);
	add_fn(d, "Pay", pend_forever, &st);
	start(d);
	ck_assert_int_eq(agr_watchdog_start(20 * MS), 0);
	tmsg_init(&a, "order-1", 1);
	a.m.type = "Pay";
	send_ok(d, &a);
	ck_assert(tu_tally_wait(&st.reports, 1, TU_LONG_NS));
	snprintf(want, sizeof(want), "orders group %d (worker 0)",
		 agr_dispatcher_group_of(d, &a.m));
	pthread_mutex_lock(&st.lock);
	ck_assert_msg(strstr(st.line, want), "report: %s", st.line);
	ck_assert(strstr(st.line, "type \"Pay\""));
	ck_assert(strstr(st.line, " ms: a function returned AGR_PENDING"));
	pthread_mutex_unlock(&st.lock);
	finish_stuck(&st);
	ck_assert(journal_wait(&j, 1));

	/* A second stuck message is a second report, not more of the first. */
	tmsg_init(&b, "order-1", 2);
	b.m.type = "Pay";
	send_ok(d, &b);
	ck_assert(tu_tally_wait(&st.reports, 2, TU_LONG_NS));
	finish_stuck(&st);
	ck_assert(journal_wait(&j, 2));
	ck_assert_uint_eq(stats_of(d).stuck, 2);
	ck_assert_int_gt(agr_metrics_write_prometheus(
				 (agr_dispatcher *const[]){ d }, 1,
				 page, sizeof(page)), 0);
	ck_assert(strstr(page, "\naggring_stuck_messages_total{context=\"sales"
			       "\",aggregate=\"Order\",dispatcher=\"orders\"} "
			       "2\n"));
	agr_watchdog_stop();
	ck_assert_int_eq(tu_tally_value(&st.reports), 2);
	stop_and_free(d);
	agr_set_log_hook(NULL, NULL);
	stuck_now = NULL;
	tu_tally_destroy(&st.reports);
	tu_tally_destroy(&st.started);
	journal_destroy(&j);
}
END_TEST

START_TEST(second_done_is_ignored)
{
	struct tmsg t1, t2;
	struct journal j;
	agr_dispatcher_options o;
	agr_dispatcher *d;

	agr_set_log_hook(count_log, NULL);
	journal_init(&j);
	o = owned_options(1, 8, &j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, done_twice, &j);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(journal_wait(&j, 2));
	stop_and_free(d); /* every message done, nothing left to complete */
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ck_assert_int_eq(atomic_load(&t2.completions), 1);
	ck_assert_int_eq(t1.status, 0);
	ck_assert_int_eq(t2.status, 0);
	ck_assert_int_eq(tu_tally_value(&j.completed), 2);
	ck_assert_int_ge(atomic_load(&logged[AGR_LOG_WARN]), 2);
	agr_set_log_hook(NULL, NULL);
	journal_destroy(&j);
}
END_TEST

/* Creates a dispatcher with `parallelism` and returns its group count. */
static int resolved_parallelism(int parallelism)
{
	agr_dispatcher_options o = owned_options(1, parallelism, NULL);
	agr_dispatcher *d = NULL;
	int ret = agr_dispatcher_new(&o, &d), groups;

	if (ret) {
		agr_supplier_free(o.supplier);
		return ret;
	}
	groups = agr_dispatcher_parallelism(d);
	agr_dispatcher_free(d);
	return groups;
}

START_TEST(default_parallelism_is_64_per_cpu)
{
	unsetenv("AGR_PARALLELISM");
	ck_assert_int_eq(resolved_parallelism(0),
			 64 * (int)sysconf(_SC_NPROCESSORS_ONLN));
	ck_assert_int_eq(resolved_parallelism(5), 5);
}
END_TEST

START_TEST(parallelism_env_overrides_default)
{
	agr_set_log_hook(count_log, NULL);
	setenv("AGR_PARALLELISM", "7", 1);
	ck_assert_int_eq(resolved_parallelism(0), 7);
	ck_assert_int_eq(resolved_parallelism(5), 5); /* explicit wins */
	setenv("AGR_PARALLELISM", "zero", 1);
	ck_assert_int_eq(resolved_parallelism(0), -EINVAL);
	setenv("AGR_PARALLELISM", "-3", 1);
	ck_assert_int_eq(resolved_parallelism(0), -EINVAL);
	agr_set_log_hook(NULL, NULL);
}
END_TEST

/* ---- forwarding between two dispatchers ---- */

#define FORWARDS 64

struct forwarding {
	agr_dispatcher *payments;
	struct journal orders_j, payments_j;
	struct tmsg in[FORWARDS], out[FORWARDS];
	char in_ids[FORWARDS][24], out_ids[FORWARDS][24];
};

/* An order's function sends the payment of the same seq. */
static int forward_payment(agr_exchange *ex, void *arg)
{
	struct forwarding *f = arg;
	struct tmsg *t = current_tmsg(ex);

	TU_EXPECT(agr_dispatcher_send(f->payments, &f->out[t->seq].m) == 0);
	return 0;
}

START_TEST(forwarding_between_dispatchers)
{
	struct forwarding *f = calloc(1, sizeof(*f));
	agr_supplier *sup = new_supplier(2);
	agr_dispatcher_options oo, po;
	agr_dispatcher *orders;
	int i;

	ck_assert_ptr_nonnull(f);
	journal_init(&f->orders_j);
	journal_init(&f->payments_j);
	oo = options(sup, false, 16, &f->orders_j);
	po = options(sup, false, 16, &f->payments_j);
	po.name = "payments";
	po.named_aggregate = payment;
	orders = new_dispatcher(&oo);
	f->payments = new_dispatcher(&po);
	ck_assert_ptr_ne(agr_dispatcher_scheduler(orders),
			 agr_dispatcher_scheduler(f->payments));
	add_fn(orders, NULL, forward_payment, f);
	add_fn(f->payments, NULL, handle, &f->payments_j);
	start(f->payments);
	start(orders);
	for (i = 0; i < FORWARDS; i++) {
		snprintf(f->in_ids[i], sizeof(f->in_ids[i]), "order-%d", i);
		snprintf(f->out_ids[i], sizeof(f->out_ids[i]), "pay-%d", i);
		tmsg_init(&f->in[i], f->in_ids[i], i);
		tmsg_init(&f->out[i], f->out_ids[i], i);
		send_ok(orders, &f->in[i]);
	}
	ck_assert(journal_wait(&f->orders_j, FORWARDS));
	ck_assert(journal_wait(&f->payments_j, FORWARDS));
	tu_assert_no_worker_failure();
	for (i = 0; i < FORWARDS; i++) {
		ck_assert_int_eq(f->in[i].status, 0);
		ck_assert_int_eq(f->out[i].status, 0);
		ck_assert_int_eq(atomic_load(&f->out[i].completions), 1);
		ck_assert_ptr_eq(f->out[i].disp, f->payments);
		ck_assert_ptr_eq(f->out[i].sched,
				 agr_dispatcher_scheduler(f->payments));
		ck_assert_int_eq(f->out[i].current, f->out[i].worker);
	}
	stop(orders);
	ck_assert_uint_eq(stop_and_get_stats(f->payments).handled, FORWARDS);
	agr_dispatcher_free(f->payments);
	agr_dispatcher_free(orders);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	journal_destroy(&f->payments_j);
	journal_destroy(&f->orders_j);
	free(f);
}
END_TEST

/* ---- the scheduler going away under a running dispatcher ---- */

#define RACE_MSGS 20000

struct race {
	agr_dispatcher *d;
	struct tu_latch sending;
	char ids[64][24];
	agr_message *msgs;
	atomic_int *completions;
	atomic_long admitted, refused, other;
};

static void count_race_completion(agr_message *msg, int status, void *arg)
{
	struct race *r = arg;

	(void)status;
	atomic_fetch_add(&r->completions[msg - r->msgs], 1);
}

static int noop_fn(agr_exchange *ex, void *arg)
{
	(void)ex;
	(void)arg;
	return 0;
}

static void *race_sends(void *arg)
{
	struct race *r = arg;
	int i, ret;

	for (i = 0; i < RACE_MSGS; i++) {
		if (i == 100)
			tu_latch_count_down(&r->sending);
		ret = agr_dispatcher_send(r->d, &r->msgs[i]);
		if (ret == 0)
			atomic_fetch_add(&r->admitted, 1);
		else if (ret == -ESHUTDOWN)
			atomic_fetch_add(&r->refused, 1);
		else
			atomic_fetch_add(&r->other, 1);
	}
	return NULL;
}

/*
 * The supplier (not the dispatcher) is stopped while a producer sends:
 * the scheduler's dispose closes the dispatcher's intake first, so each
 * send is either refused (and never completes) or admitted and completed
 * exactly once, handled or discarded. _i == 0: graceful, 1: forced.
 */
START_TEST(supplier_stop_under_sends_loses_nothing)
{
	agr_supplier *sup = new_supplier(2);
	struct race r = { .msgs = calloc(RACE_MSGS, sizeof(agr_message)) };
	agr_dispatcher_options o = options(sup, false, 16, &r);
	agr_message late = { .aggregate_id = "late" };
	pthread_t producer;
	long completed = 0;
	int i;

	r.completions = calloc(RACE_MSGS, sizeof(atomic_int));
	ck_assert_ptr_nonnull(r.msgs);
	ck_assert_ptr_nonnull(r.completions);
	for (i = 0; i < 64; i++)
		snprintf(r.ids[i], sizeof(r.ids[i]), "race-%d", i);
	for (i = 0; i < RACE_MSGS; i++)
		r.msgs[i].aggregate_id = r.ids[i % 64];
	o.on_complete = count_race_completion;
	r.d = new_dispatcher(&o);
	add_fn(r.d, NULL, noop_fn, NULL);
	start(r.d);
	tu_latch_init(&r.sending, 1);
	ck_assert_int_eq(pthread_create(&producer, NULL, race_sends, &r), 0);
	ck_assert(tu_latch_wait(&r.sending, TU_LONG_NS));
	if (_i == 0)
		ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS),
				 0);
	else
		ck_assert_int_eq(agr_supplier_force_stop(sup), 0);
	pthread_join(producer, NULL);
	ck_assert_int_eq(agr_dispatcher_send(r.d, &late), -ESHUTDOWN);
	agr_dispatcher_free(r.d);
	agr_supplier_free(sup);

	ck_assert_int_eq(atomic_load(&r.other), 0);
	ck_assert_int_eq(atomic_load(&r.admitted) + atomic_load(&r.refused),
			 RACE_MSGS);
	ck_assert_int_ge(atomic_load(&r.admitted), 100);
	for (i = 0; i < RACE_MSGS; i++) {
		ck_assert_int_le(atomic_load(&r.completions[i]), 1);
		completed += atomic_load(&r.completions[i]);
	}
	ck_assert_int_eq(completed, atomic_load(&r.admitted));
	tu_latch_destroy(&r.sending);
	free(r.completions);
	free(r.msgs);
}
END_TEST

/* ==== misuse refused, and a force stop bounds every message ==== */

/* ---- what the library logged, word for word ---- */

#define LOG_LINES 128

static struct {
	pthread_mutex_t lock;
	pthread_cond_t grew;
	int n;
	char line[LOG_LINES][400];
} logbook = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void keep_log(agr_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	pthread_mutex_lock(&logbook.lock);
	if (logbook.n < LOG_LINES) {
		snprintf(logbook.line[logbook.n], sizeof(logbook.line[0]),
			 "%s", msg);
		logbook.n++;
		pthread_cond_broadcast(&logbook.grew);
	}
	pthread_mutex_unlock(&logbook.lock);
}

static void logbook_open(void)
{
	pthread_mutex_lock(&logbook.lock);
	logbook.n = 0;
	pthread_mutex_unlock(&logbook.lock);
	agr_set_log_hook(keep_log, NULL);
}

static void logbook_close(void)
{
	agr_set_log_hook(NULL, NULL);
}

static bool has(const char *line, const char *part)
{
	return !part || strstr(line, part);
}

/* Lines that hold a, b and c (NULL: anything). */
static int count_lines_locked(const char *a, const char *b, const char *c)
{
	int i, n = 0;

	for (i = 0; i < logbook.n; i++)
		if (has(logbook.line[i], a) && has(logbook.line[i], b) &&
		    has(logbook.line[i], c))
			n++;
	return n;
}

/* As count_lines_locked, once there is one or `timeout_ns` passed. */
static int log_wait(const char *a, const char *b, const char *c,
		    uint64_t timeout_ns)
{
	struct timespec ts = tu_deadline_after(timeout_ns);
	int n;

	pthread_mutex_lock(&logbook.lock);
	while ((n = count_lines_locked(a, b, c)) < 1 &&
	       pthread_cond_timedwait(&logbook.grew, &logbook.lock, &ts) !=
		       ETIMEDOUT)
		;
	pthread_mutex_unlock(&logbook.lock);
	return n;
}

static void dump_logbook(void)
{
	int i;

	pthread_mutex_lock(&logbook.lock);
	for (i = 0; i < logbook.n; i++)
		fprintf(stderr, "log[%d]: %s\n", i, logbook.line[i]);
	pthread_mutex_unlock(&logbook.lock);
}

static const char *or_any(const char *s)
{
	return s ? s : "";
}

#define ASSERT_LOGGED(a, b, c)                                          \
	do {                                                            \
		if (log_wait((a), (b), (c), TU_LONG_NS) < 1)            \
			dump_logbook();                                 \
		ck_assert_msg(log_wait((a), (b), (c), 0) >= 1,          \
			      "nothing logged with \"%s\" \"%s\" \"%s\"", \
			      (a), or_any(b), or_any(c));               \
	} while (0)

/* ---- sending a message in flight ---- */

/*
 * A message is in flight from its admission until its completion
 * callback is called: sending it again meanwhile (held by its function,
 * or queued behind another) is -EBUSY and changes nothing, in a batch
 * too. Once completed it is the caller's and may be sent again.
 */
START_TEST(send_in_flight_is_refused)
{
	struct tmsg t1, t2, dirty;
	agr_message *batch[2];
	agr_dispatcher_options o;
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	size_t admitted = 99;
	struct held h;

	held_init(&h);
	logbook_open();
	o = owned_options(1, 8, &h.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_send(d, &t1.m), -EBUSY);
	ASSERT_LOGGED("agr_dispatcher_send", "still in flight", "order-1");
	batch[0] = &t2.m;
	batch[1] = &t1.m;
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 2, &admitted),
			 -EBUSY);
	ck_assert_uint_eq(admitted, 1);
	ck_assert_int_eq(agr_dispatcher_send(d, &t2.m), -EBUSY); /* queued */
	ck_assert_uint_eq(stats_of(d).refused, 0);

	agr_exchange_done(h.ex, 0);
	ck_assert(journal_wait(&h.j, 2));
	ASSERT_EVENTS(&h.j, EV_START + 1, EV_DONE + 1, EV_START + 2,
		      EV_DONE + 2);
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ck_assert_int_eq(atomic_load(&t2.completions), 1);
	ck_assert_int_eq(t1.status, 0);
	ck_assert_int_eq(t2.status, 0);

	t1.seq = 3; /* completed: the caller's again, it may go again */
	send_ok(d, &t1);
	ck_assert(journal_wait(&h.j, 3));
	ck_assert_int_eq(atomic_load(&t1.completions), 2);

	/* internal_ not zeroed looks in flight, as the header warns. */
	tmsg_init(&dirty, "order-1", 4);
	memset(&dirty.m.internal_, 0xa5, sizeof(dirty.m.internal_));
	ck_assert_int_eq(agr_dispatcher_send(d, &dirty.m), -EBUSY);

	st = stop_and_get_stats(d);
	ck_assert_uint_eq(st.admitted, 3);
	ck_assert_uint_eq(st.handled, 3);
	ck_assert_uint_eq(st.refused, 0);
	agr_dispatcher_free(d);
	ck_assert_int_eq(tu_tally_value(&h.j.completed), 3);
	ck_assert_int_eq(atomic_load(&dirty.completions), 0);
	logbook_close();
	held_destroy(&h);
}
END_TEST

#define RACE_ROUNDS 300

struct twin_senders {
	agr_dispatcher *d;
	struct tmsg *msgs;
	pthread_barrier_t go;
	int results[2][RACE_ROUNDS];
};

struct twin {
	pthread_t thread;
	struct twin_senders *s;
	int index;
};

static void *send_each_round(void *arg)
{
	struct twin *t = arg;
	int r;

	for (r = 0; r < RACE_ROUNDS; r++) {
		pthread_barrier_wait(&t->s->go);
		t->s->results[t->index][r] =
			agr_dispatcher_send(t->s->d, &t->s->msgs[r].m);
	}
	return NULL;
}

/* Two threads send the same message at once: exactly one admits it. */
START_TEST(same_message_from_two_threads_admitted_once)
{
	struct twin_senders s;
	struct twin twins[2];
	struct journal j;
	agr_dispatcher_options o;
	int r, k, zeros;

	journal_init(&j);
	logbook_open();
	o = owned_options(2, 8, &j);
	s.d = new_dispatcher(&o);
	add_fn(s.d, NULL, work_a_little, NULL);
	s.msgs = calloc(RACE_ROUNDS, sizeof(*s.msgs));
	ck_assert_ptr_nonnull(s.msgs);
	for (r = 0; r < RACE_ROUNDS; r++)
		tmsg_init(&s.msgs[r], r % 2 ? "order-1" : "order-2", r);
	ck_assert_int_eq(pthread_barrier_init(&s.go, NULL, 2), 0);
	/* Not started yet: every message admitted stays in flight. */
	for (k = 0; k < 2; k++) {
		twins[k].s = &s;
		twins[k].index = k;
		ck_assert_int_eq(pthread_create(&twins[k].thread, NULL,
						send_each_round, &twins[k]),
				 0);
	}
	for (k = 0; k < 2; k++)
		pthread_join(twins[k].thread, NULL);
	for (r = 0; r < RACE_ROUNDS; r++) {
		zeros = 0;
		for (k = 0; k < 2; k++) {
			ck_assert(s.results[k][r] == 0 ||
				  s.results[k][r] == -EBUSY);
			zeros += s.results[k][r] == 0;
		}
		ck_assert_int_eq(zeros, 1);
	}
	start(s.d);
	ck_assert(journal_wait(&j, RACE_ROUNDS));
	stop_and_free(s.d);
	for (r = 0; r < RACE_ROUNDS; r++)
		ck_assert_int_eq(atomic_load(&s.msgs[r].completions), 1);
	ck_assert_int_eq(tu_tally_value(&j.completed), RACE_ROUNDS);
	pthread_barrier_destroy(&s.go);
	free(s.msgs);
	logbook_close();
	journal_destroy(&j);
}
END_TEST

/* ---- a pending function that never finishes ---- */

#define FORCE_BOUND_NS (2000 * MS)

/*
 * Message 1's function returns AGR_PENDING and never finishes. A force
 * stop discards it (no I/O left) and the one queued behind it, within
 * the bound; a late agr_exchange_done() is logged and ignored; free
 * returns at once. _i == 0: the dispatcher owns its supplier (whose
 * workers the force tears down); 1: it does not.
 */
START_TEST(force_stop_ends_a_pending_function_that_never_finishes)
{
	agr_supplier *sup = new_supplier(1);
	struct tmsg t1, t2;
	struct held h;
	agr_dispatcher_options o = options(sup, _i == 0, 8, &h.j);
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	uint64_t before;

	held_init(&h);
	logbook_open();
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	t1.m.type = "lost-callback";
	tmsg_init(&t2, "order-1", 2);
	send_ok(d, &t1);
	send_ok(d, &t2);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));

	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	ck_assert(journal_wait(&h.j, 2));
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(t1.status, AGR_DISCARDED);
	ck_assert_int_eq(t2.status, AGR_DISCARDED);
	ck_assert_int_eq(journal_pos(&h.j, EV_START + 2), -1);

	agr_exchange_done(h.ex, 0); /* too late: ignored, and said so */
	ASSERT_LOGGED("orders: agr_exchange_done()",
		      "after its message completed", NULL);
	before = tu_now_ns();
	st = stats_of(d);
	agr_dispatcher_free(d);
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_uint_eq(st.discarded, 2);
	ck_assert_int_eq(atomic_load(&t1.completions), 1);
	ck_assert_int_eq(atomic_load(&t2.completions), 1);
	ck_assert_int_eq(tu_tally_value(&h.j.completed), 2);
	if (_i != 0)
		agr_supplier_free(sup);
	logbook_close();
	held_destroy(&h);
}
END_TEST

/* A receive whose callback loses the exchange: it never finishes. */
struct lost_recv {
	struct journal j;
	struct tu_latch started;
	int fds[2];
	char buf[8];
	atomic_int recv_res;
	int res_at_completion;
};

static void recv_lost(int res, void *arg)
{
	struct lost_recv *r = arg;

	atomic_store(&r->recv_res, res); /* and no agr_exchange_done() */
}

static int recv_then_forget(agr_exchange *ex, void *arg)
{
	struct lost_recv *r = arg;
	int ret;

	journal_add(&r->j, EV_START + current_tmsg(ex)->seq);
	ret = agr_io_recv(agr_exchange_worker(ex), r->fds[0], r->buf,
			  sizeof(r->buf), 0, recv_lost, r);
	tu_latch_count_down(&r->started);
	return ret < 0 ? ret : AGR_PENDING;
}

static void note_recv_at_completion(agr_message *msg, int status, void *arg)
{
	struct lost_recv *r = arg;

	r->res_at_completion = atomic_load(&r->recv_res);
	record_completion(msg, status, &r->j);
}

/*
 * The force cancels the receive, whose callback does not finish the
 * function: the message is discarded once the receive is gone, not
 * before (its buffer is the kernel's until then). _i as above.
 */
START_TEST(force_stop_discards_a_pending_message_once_its_io_is_gone)
{
	agr_supplier *sup = new_supplier(1);
	struct lost_recv r = { .recv_res = 1, .res_at_completion = 1 };
	agr_dispatcher_options o = options(sup, _i == 0, 8, &r);
	agr_dispatcher *d;
	uint64_t before;
	struct tmsg t;

	o.on_complete = note_recv_at_completion;
	journal_init(&r.j);
	tu_latch_init(&r.started, 1);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r.fds), 0);
	d = new_dispatcher(&o);
	add_fn(d, NULL, recv_then_forget, &r);
	start(d);
	tmsg_init(&t, "order-1", 1);
	send_ok(d, &t);
	ck_assert(tu_latch_wait(&r.started, TU_LONG_NS));
	before = tu_now_ns();
	ck_assert_int_eq(agr_dispatcher_force_stop(d), 0);
	/*
	 * Torn down with the receive in flight (_i == 0), the workers
	 * leave the message to the stop, which sweeps once they exited.
	 */
	if (_i == 0)
		stop(d);
	ck_assert(journal_wait(&r.j, 1));
	ck_assert_uint_lt(tu_now_ns() - before, FORCE_BOUND_NS);
	ck_assert_int_eq(t.status, AGR_DISCARDED);
	ck_assert_int_eq(r.res_at_completion, -ECANCELED);
	agr_dispatcher_free(d);
	ck_assert_int_eq(atomic_load(&t.completions), 1);
	if (_i != 0)
		agr_supplier_free(sup);
	close(r.fds[0]);
	close(r.fds[1]);
	tu_latch_destroy(&r.started);
	journal_destroy(&r.j);
}
END_TEST

/* Message 1's function blocks (a blocking call) until released. */
struct blocker {
	struct journal j;
	struct tu_latch started, release;
};

static int block_until_released(agr_exchange *ex, void *arg)
{
	struct blocker *b = arg;
	int seq = current_tmsg(ex)->seq;

	journal_add(&b->j, EV_START + seq);
	if (seq == 1) {
		tu_latch_count_down(&b->started);
		TU_EXPECT(tu_latch_wait(&b->release, TU_LONG_NS * 2));
	}
	return 0;
}

struct freer {
	pthread_t thread;
	agr_dispatcher *d;
	atomic_bool returned;
};

static void *free_in_thread(void *arg)
{
	struct freer *f = arg;

	agr_dispatcher_free(f->d);
	atomic_store(&f->returned, true);
	return NULL;
}

/*
 * Only a function blocked in a call can hold a forced dispatcher; then
 * free says what it waits for (dispatcher, group, type, age) every 5 s
 * rather than hang silently, and returns once the function does.
 */
START_TEST(free_names_the_function_it_waits_for)
{
	struct blocker b;
	struct freer f;
	struct tmsg t;
	char group[32];
	agr_dispatcher_options o;

	journal_init(&b.j);
	tu_latch_init(&b.started, 1);
	tu_latch_init(&b.release, 1);
	logbook_open();
	o = owned_options(1, 8, &b.j);
	f.d = new_dispatcher(&o);
	atomic_init(&f.returned, false);
	add_fn(f.d, NULL, block_until_released, &b);
	start(f.d);
	tmsg_init(&t, "order-1", 1);
	t.m.type = "blocked";
	send_ok(f.d, &t);
	ck_assert(tu_latch_wait(&b.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_force_stop(f.d), 0);
	ck_assert_int_eq(pthread_create(&f.thread, NULL, free_in_thread, &f),
			 0);
	snprintf(group, sizeof(group), "group %d ",
		 agr_group_key("order-1", 8));
	ASSERT_LOGGED("orders: agr_dispatcher_free() waits", group,
		      "type \"blocked\"");
	ck_assert(!atomic_load(&f.returned));
	tu_latch_count_down(&b.release);
	pthread_join(f.thread, NULL);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(atomic_load(&t.completions), 1);
	logbook_close();
	tu_latch_destroy(&b.started);
	tu_latch_destroy(&b.release);
	journal_destroy(&b.j);
}
END_TEST

/* A graceful stop that runs out names the group and message holding it. */
START_TEST(graceful_timeout_names_what_holds_it)
{
	agr_dispatcher_options o;
	agr_dispatcher *d;
	struct tmsg t1;
	struct held h;
	char group[32];

	held_init(&h);
	logbook_open();
	o = owned_options(1, 8, &h.j);
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	tmsg_init(&t1, "order-1", 1);
	t1.m.type = "slow";
	send_ok(d, &t1);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, 20 * MS),
			 -ETIMEDOUT);
	snprintf(group, sizeof(group), "group %d ",
		 agr_group_key("order-1", 8));
	ASSERT_LOGGED("orders: agr_dispatcher_stop_gracefully() ran out",
		      group, "type \"slow\", pending for");
	agr_exchange_done(h.ex, 0);
	stop_and_free(d);
	ck_assert_int_eq(t1.status, 0);
	logbook_close();
	held_destroy(&h);
}
END_TEST

/* ---- agr_exchange_done() from other threads ---- */

#define FAN_FNS 3
#define FAN_ROUNDS 200

struct fan_in {
	agr_exchange *ex[FAN_FNS];
	atomic_int calls;
	struct tu_latch *started;
	pthread_mutex_t lock;
};

static int pend_and_publish(agr_exchange *ex, void *arg)
{
	struct fan_in *f = arg;
	int k = atomic_fetch_add(&f->calls, 1) % FAN_FNS;

	pthread_mutex_lock(&f->lock);
	f->ex[k] = ex;
	pthread_mutex_unlock(&f->lock);
	tu_latch_count_down(f->started);
	return AGR_PENDING;
}

struct finisher {
	pthread_t thread;
	struct fan_in *f;
	pthread_barrier_t *go;
	int index;
};

static void *finish_each_round(void *arg)
{
	struct finisher *t = arg;
	agr_exchange *ex;
	int r;

	for (r = 0; r < FAN_ROUNDS; r++) {
		pthread_barrier_wait(t->go); /* the round's functions ran */
		pthread_mutex_lock(&t->f->lock);
		ex = t->f->ex[t->index];
		pthread_mutex_unlock(&t->f->lock);
		agr_exchange_done(ex, t->index == 0 ? 0 : -(10 + t->index));
		pthread_barrier_wait(t->go); /* done: the next may start */
	}
	return NULL;
}

/*
 * Three functions of each message are finished at once from three
 * threads: the calls travel in the exchange, the message completes
 * once, with one of the errors.
 */
START_TEST(dones_from_many_threads_complete_once)
{
	struct finisher th[FAN_FNS];
	struct tu_latch started;
	pthread_barrier_t go;
	struct fan_in f;
	struct journal j;
	struct tmsg *t;
	agr_dispatcher_options o;
	agr_dispatcher *d;
	int r, k;

	journal_init(&j);
	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.lock, NULL);
	atomic_init(&f.calls, 0);
	f.started = &started;
	o = owned_options(1, 4, &j);
	d = new_dispatcher(&o);
	for (k = 0; k < FAN_FNS; k++)
		add_fn(d, NULL, pend_and_publish, &f);
	start(d);
	t = calloc(FAN_ROUNDS, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(pthread_barrier_init(&go, NULL, FAN_FNS + 1), 0);
	for (k = 0; k < FAN_FNS; k++) {
		th[k].f = &f;
		th[k].go = &go;
		th[k].index = k;
		ck_assert_int_eq(pthread_create(&th[k].thread, NULL,
						finish_each_round, &th[k]),
				 0);
	}
	for (r = 0; r < FAN_ROUNDS; r++) {
		tu_latch_init(&started, FAN_FNS);
		tmsg_init(&t[r], "order-1", r % 100);
		send_ok(d, &t[r]);
		ck_assert(tu_latch_wait(&started, TU_LONG_NS));
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&go);
		ck_assert(journal_wait(&j, r + 1));
		tu_latch_destroy(&started);
	}
	for (k = 0; k < FAN_FNS; k++)
		pthread_join(th[k].thread, NULL);
	stop_and_free(d);
	for (r = 0; r < FAN_ROUNDS; r++) {
		ck_assert_int_eq(atomic_load(&t[r].completions), 1);
		ck_assert(t[r].status == -11 || t[r].status == -12);
	}
	pthread_barrier_destroy(&go);
	pthread_mutex_destroy(&f.lock);
	free(t);
	journal_destroy(&j);
}
END_TEST

/* ---- bad arguments are named ---- */

static int note_worker(agr_exchange *ex, void *arg)
{
	*(agr_worker **)arg = agr_exchange_worker(ex);
	return 0;
}

START_TEST(einval_names_the_argument)
{
	static const agr_named_aggregate empty_aggregate = { "sales", "" };
	agr_supplier *sup = new_supplier(1), *bad = NULL;
	agr_dispatcher_options good = options(sup, false, 8, NULL), o;
	agr_dispatcher *d = NULL;
	agr_worker *w = NULL;
	agr_runtime_options ro;
	agr_runtime *rt = NULL;
	agr_composite_options co = { 0 };
	agr_composite *c = NULL;
	struct tmsg no_id, t;
	struct journal j;
	char buf[8];

	logbook_open();
	o = good;
	o.on_complete = NULL;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ASSERT_LOGGED("agr_dispatcher_new(orders)", "on_complete", "EINVAL");
	o = good;
	o.named_aggregate = empty_aggregate;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ASSERT_LOGGED("agr_dispatcher_new(orders)", "aggregate_name",
		      "empty");
	o = good;
	o.name = "";
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ASSERT_LOGGED("agr_dispatcher_new", "options.name", "empty");
	o = good;
	o.parallelism = -3;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), -EINVAL);
	ASSERT_LOGGED("agr_dispatcher_new(orders)", "parallelism",
		      "negative");
	ck_assert_ptr_null(d);

	ck_assert_int_eq(agr_supplier_new("", 1, &bad), -EINVAL);
	ASSERT_LOGGED("agr_supplier_new", "name", "empty");
	ck_assert_int_eq(agr_supplier_new("s", -1, &bad), -EINVAL);
	ASSERT_LOGGED("agr_supplier_new(s)", "parallelism", "negative");
	ck_assert_ptr_null(bad);
	agr_runtime_options_init(&ro);
	ro.quiet_period_ns = ro.shutdown_timeout_ns;
	ck_assert_int_eq(agr_runtime_new(&ro, &rt), -EINVAL);
	ASSERT_LOGGED("agr_runtime_new", "quiet_period_ns", NULL);
	co.name = "c";
	ck_assert_int_eq(agr_composite_new(&co, &c), -EINVAL);
	ASSERT_LOGGED("agr_composite_new", "options.supplier is NULL", NULL);
	ck_assert_ptr_null(rt);
	ck_assert_ptr_null(c);

	journal_init(&j);
	good.complete_arg = &j;
	d = new_dispatcher(&good);
	ck_assert_int_eq(agr_dispatcher_register(d, "A", NULL, NULL), -EINVAL);
	ASSERT_LOGGED("agr_dispatcher_register", "fn is NULL", NULL);
	add_fn(d, NULL, note_worker, &w);
	start(d);
	tmsg_init(&no_id, NULL, 1);
	ck_assert_int_eq(agr_dispatcher_send(d, &no_id.m), -EINVAL);
	ASSERT_LOGGED("orders: agr_dispatcher_send", "aggregate_id", NULL);
	tmsg_init(&t, "order-1", 2);
	send_ok(d, &t);
	ck_assert(journal_wait(&j, 1));

	/* Off its worker: the test thread is none. */
	ck_assert_int_eq(agr_io_read(w, 0, buf, sizeof(buf), 0, recv_lost,
				     NULL),
			 -EINVAL);
	ASSERT_LOGGED("agr_io_read: not on worker disp-Order-0",
		      "a thread that is no worker", NULL);
	ck_assert_int_eq(agr_io_read(NULL, 0, buf, sizeof(buf), 0, recv_lost,
				     NULL),
			 -EINVAL);
	ASSERT_LOGGED("agr_io_read", "worker is NULL", NULL);
	stop_and_free(d);
	agr_supplier_free(sup);
	logbook_close();
	journal_destroy(&j);
}
END_TEST

/* ---- a batch's refusals ---- */

/*
 * A batch stops at the first message it cannot admit and counts one
 * refusal, that message's, as agr_dispatcher_send() would: on a closed
 * intake and at a full group alike. The messages not offered are
 * untouched: they may be sent later.
 */
START_TEST(batch_counts_one_refusal)
{
	struct tmsg t[4];
	agr_message *batch[3];
	agr_dispatcher_options o;
	agr_dispatcher *d;
	size_t admitted = 99;
	struct held h;
	int i;

	held_init(&h);
	logbook_open();
	o = owned_options(1, 8, &h.j);
	o.queue_limit = 2;
	d = new_dispatcher(&o);
	add_fn(d, NULL, hold_first, &h);
	start(d);
	for (i = 0; i < 4; i++)
		tmsg_init(&t[i], "order-1", i + 1);
	send_ok(d, &t[0]);
	ck_assert(tu_latch_wait(&h.started, TU_LONG_NS));
	for (i = 0; i < 3; i++)
		batch[i] = &t[i + 1].m;
	/* The held one and t[1] fill the group: t[2] is refused. */
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 3, &admitted),
			 -EAGAIN);
	ck_assert_uint_eq(admitted, 1);
	ck_assert_uint_eq(stats_of(d).refused, 1);
	agr_exchange_done(h.ex, 0);
	ck_assert(journal_wait(&h.j, 2));
	/* Neither the refused nor the one not offered is in flight. */
	ck_assert_int_eq(agr_dispatcher_send_batch(d, &batch[1], 2,
						   &admitted), 0);
	ck_assert_uint_eq(admitted, 2);
	ck_assert(journal_wait(&h.j, 4));

	ck_assert_int_eq(agr_dispatcher_quiesce(d), 0);
	for (i = 0; i < 3; i++)
		t[i + 1].seq = 10 + i; /* completed: may go again */
	ck_assert_int_eq(agr_dispatcher_send_batch(d, batch, 3, &admitted),
			 -ESHUTDOWN);
	ck_assert_uint_eq(admitted, 0);
	ck_assert_uint_eq(stats_of(d).refused, 2);
	stop_and_free(d);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(atomic_load(&t[i].completions), 1);
	logbook_close();
	held_destroy(&h);
}
END_TEST


static Suite *suite(void)
{
	Suite *s = suite_create("dispatcher");
	TCase *ref = tcase_create("reference");
	TCase *core = tcase_create("core");
	TCase *stress = tcase_create("stress");

	/* Generous even when run by hand, outside `make check`. */
	tcase_set_timeout(ref, 120);
	tcase_set_timeout(core, 120);
	tcase_set_timeout(stress, 300);

	tcase_add_test(ref, routes_to_group_and_its_worker);
	tcase_add_test(ref, graceful_stop_when_idle_completes);
	tcase_add_test(ref, graceful_stop_drains_in_order);
	tcase_add_test(ref, stop_before_start_is_final);
	tcase_add_test(ref, stop_before_start_discards_admitted);
	tcase_add_test(ref, sends_before_start_wait_for_start);
	tcase_add_test(ref, sends_after_stop_are_refused);
	tcase_add_test(ref, handler_error_is_reported);
	tcase_add_loop_test(ref, force_stop_cancels_blocked_io, 0, 2);
	tcase_add_loop_test(ref,
			    done_from_another_thread_after_force_stop_completes,
			    0, 2);

	tcase_add_test(core, groups_run_concurrently);
	tcase_add_test(core, async_function_holds_only_its_group);
	tcase_add_test(core, queue_limit_gives_eagain);
	tcase_add_test(core, matching_functions_run_together);
	tcase_add_test(core, held_group_takes_a_send_without_an_activation);
	tcase_add_test(core, idle_workers_burn_no_cpu_after_a_burst);
	tcase_add_test(core, unmatched_message_is_skipped);
	tcase_add_test(core, new_rejects_bad_options);
	tcase_add_test(core, send_and_register_reject_bad_input);
	tcase_add_test(core, custom_group_key);
	tcase_add_test(core, garbage_return_is_einval);
	tcase_add_test(core, second_done_is_ignored);
	tcase_add_test(core, watchdog_names_a_stuck_message);
	tcase_add_test(core, default_parallelism_is_64_per_cpu);
	tcase_add_test(core, parallelism_env_overrides_default);
	tcase_add_test(core, forwarding_between_dispatchers);
	tcase_add_loop_test(core, supplier_stop_under_sends_loses_nothing, 0,
			    2);
	tcase_add_test(core, send_in_flight_is_refused);
	tcase_add_test(core, same_message_from_two_threads_admitted_once);
	tcase_add_loop_test(
		core, force_stop_ends_a_pending_function_that_never_finishes,
		0, 2);
	tcase_add_loop_test(
		core, force_stop_discards_a_pending_message_once_its_io_is_gone,
		0, 2);
	tcase_add_test(core, free_names_the_function_it_waits_for);
	tcase_add_test(core, graceful_timeout_names_what_holds_it);
	tcase_add_test(core, dones_from_many_threads_complete_once);
	tcase_add_test(core, einval_names_the_argument);
	tcase_add_test(core, batch_counts_one_refusal);

	tcase_add_test(stress, per_id_order_under_load);
	tcase_add_test(stress, force_stop_with_thousands_queued);
	tcase_add_loop_test(stress, force_stop_ends_resubmitting_chains, 0,
			    2);
	tcase_add_test(stress, stop_and_free_while_groups_go_idle);

	suite_add_tcase(s, ref);
	suite_add_tcase(s, core);
	suite_add_tcase(s, stress);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	tu_cond_init_monotonic(&logbook.grew);
	return tu_run(suite());
}
