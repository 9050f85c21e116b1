/* SPDX-License-Identifier: MIT */
/*
 * check_dispatcher.c - the dispatcher: routing to groups, strict order
 * within a group, concurrency between groups, asynchronous functions,
 * several functions per message, queue limits, graceful and forced
 * stop, and the accounting that every admitted message completes
 * exactly once. Includes every dispatcher case of the reference's own
 * tests. The reference's cases are here; the others, by subject, in
 * dispatcher_{force,load,functions,input,forward,pending,done}.c, with
 * the log book in dispatcher_logbook.c.
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

#include "dispatcher_test.h"
#include "testutil.h"

const agr_named_aggregate order = { "sales", "Order" };

const agr_named_aggregate payment = { "sales", "Payment" };

/* ---- a count that can be waited on ---- */
/* ---- the journal: what happened, in order ---- */

void journal_init(struct journal *j)
{
	pthread_mutex_init(&j->lock, NULL);
	j->nevents = 0;
	tu_tally_init(&j->completed);
}

void journal_destroy(struct journal *j)
{
	tu_tally_destroy(&j->completed);
	pthread_mutex_destroy(&j->lock);
}

void journal_add(struct journal *j, int ev)
{
	pthread_mutex_lock(&j->lock);
	TU_EXPECT(j->nevents < MAX_EVENTS);
	if (j->nevents < MAX_EVENTS)
		j->events[j->nevents++] = ev;
	pthread_mutex_unlock(&j->lock);
}

/* Index of the first `ev`, or -1. */
int journal_pos(struct journal *j, int ev)
{
	int i, pos = -1;

	pthread_mutex_lock(&j->lock);
	for (i = 0; i < j->nevents && pos < 0; i++)
		if (j->events[i] == ev)
			pos = i;
	pthread_mutex_unlock(&j->lock);
	return pos;
}

bool journal_wait(struct journal *j, long completions)
{
	return tu_tally_wait(&j->completed, completions, TU_LONG_NS);
}

/* Every event of `evs` happened, in this order (others may interleave). */
void assert_in_order(struct journal *j, const int *evs, size_t n)
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
void assert_exactly(struct journal *j, const int *evs, size_t n)
{
	size_t i;

	pthread_mutex_lock(&j->lock);
	ck_assert_int_eq(j->nevents, (int)n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(j->events[i], evs[i]);
	pthread_mutex_unlock(&j->lock);
}

/* ---- test messages ---- */

void tmsg_init(struct tmsg *t, const char *id, int seq)
{
	memset(t, 0, sizeof(*t));
	atomic_init(&t->completions, 0);
	t->m.aggregate_id = id;
	t->m.user = t;
	t->seq = seq;
	t->status = 1; /* not completed */
	t->group = t->worker = t->current = -1;
}

struct tmsg *current_tmsg(agr_exchange *ex)
{
	return agr_exchange_message(ex)->user;
}

/* The completion callback of most tests; `arg` is a journal. */
void record_completion(agr_message *msg, int status, void *arg)
{
	struct tmsg *t = msg->user;
	struct journal *j = arg;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	journal_add(j, EV_DONE + t->seq);
	tu_tally_add(&j->completed);
}

/* Notes where it ran and that it started; done at once. Arg: journal. */
int handle(agr_exchange *ex, void *arg)
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

agr_supplier *new_supplier(int workers)
{
	agr_supplier *sup = NULL;

	ck_assert_int_eq(agr_supplier_new("disp", workers, &sup), 0);
	return sup;
}

agr_dispatcher_options options(agr_supplier *sup, bool owns,
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
agr_dispatcher_options owned_options(int workers, int groups,
				     void *complete_arg)
{
	return options(new_supplier(workers), true, groups, complete_arg);
}

agr_dispatcher *new_dispatcher(const agr_dispatcher_options *o)
{
	agr_dispatcher *d = NULL;

	ck_assert_int_eq(agr_dispatcher_new(o, &d), 0);
	ck_assert_ptr_nonnull(d);
	return d;
}

void add_fn(agr_dispatcher *d, const char *type, agr_handler_fn fn,
	    void *arg)
{
	ck_assert_int_eq(agr_dispatcher_register(d, type, fn, arg), 0);
}

void start(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
}

agr_dispatcher *started_dispatcher(int workers, int groups,
				   void *complete_arg, const char *type,
				   agr_handler_fn fn, void *arg)
{
	agr_dispatcher_options o = owned_options(workers, groups,
						 complete_arg);
	agr_dispatcher *d = new_dispatcher(&o);

	add_fn(d, type, fn, arg);
	start(d);
	return d;
}

void send_ok(agr_dispatcher *d, struct tmsg *t)
{
	ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
}

agr_dispatcher_stats stats_of(const agr_dispatcher *d)
{
	agr_dispatcher_stats st;

	ck_assert_int_eq(agr_dispatcher_stats_get(d, &st), 0);
	return st;
}

void stop(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
}

void stop_and_free(agr_dispatcher *d)
{
	stop(d);
	agr_dispatcher_free(d);
}

/* The counters are exact once stopped. */
agr_dispatcher_stats stop_and_get_stats(agr_dispatcher *d)
{
	stop(d);
	return stats_of(d);
}

/*
 * Writes "<prefix><n>" for the first n whose group (of `groups`) runs on
 * worker `worker` of `workers` and is not `not_group`; returns the group.
 */
int pick_id(char *buf, size_t len, const char *prefix, int groups,
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
bool wait_at_least(atomic_long *v, long n, uint64_t timeout_ns)
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
bool wait_until_terminated(agr_scheduler *s, uint64_t timeout_ns)
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
atomic_int logged[AGR_LOG_DEBUG + 1];

void count_log(agr_log_level level, const char *msg, void *arg)
{
	(void)msg;
	(void)arg;
	if ((unsigned)level < ARRAY_SIZE(logged))
		atomic_fetch_add(&logged[level], 1);
}

/* ---- a graceful stop on another thread ---- */

static void *stop_in_thread(void *arg)
{
	struct stopper *s = arg;

	tu_latch_count_down(&s->calling);
	s->result = agr_dispatcher_stop_gracefully(s->d, TU_LONG_NS);
	s->completed_at_return = tu_tally_value(&s->j->completed);
	return NULL;
}

void stopper_start(struct stopper *s, agr_dispatcher *d,
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

int stopper_join(struct stopper *s)
{
	pthread_join(s->thread, NULL);
	tu_latch_destroy(&s->calling);
	return s->result;
}

/* ---- a message the test holds open ---- */

void held_init(struct held *h)
{
	journal_init(&h->j);
	tu_latch_init(&h->started, 1);
	h->ex = NULL;
}

void held_destroy(struct held *h)
{
	tu_latch_destroy(&h->started);
	journal_destroy(&h->j);
}

int hold_first(agr_exchange *ex, void *arg)
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
	agr_dispatcher *d;

	journal_init(&j);
	d = started_dispatcher(2, 8, &j, NULL, handle, &j);
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
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	held_init(&h);
	d = started_dispatcher(1, 8, &h.j, NULL, hold_first, &h);
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
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	size_t admitted = 99;
	int i;

	journal_init(&j);
	d = started_dispatcher(2, 8, &j, NULL, handle, &j);
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
	agr_dispatcher_stats st;
	agr_dispatcher *d;

	journal_init(&j);
	d = started_dispatcher(1, 8, &j, NULL, fail_first, &j);
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
	dispatcher_force_tests(ref, stress);

	dispatcher_load_tests(core, stress);
	dispatcher_function_tests(core);
	dispatcher_input_tests(core);
	dispatcher_forward_tests(core);
	dispatcher_pending_tests(core);
	dispatcher_done_tests(core);

	suite_add_tcase(s, ref);
	suite_add_tcase(s, core);
	suite_add_tcase(s, stress);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	tu_logbook_init(&logbook);
	return tu_run(suite());
}
