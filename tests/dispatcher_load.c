/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_load.c - check_dispatcher under load: per-id order and
 * per-group exclusion, groups that overlap, an asynchronous function
 * that holds its group and not its worker, a force stop with thousands
 * queued, and the queue limit.
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
	agr_dispatcher *d;

	journal_init(&j);
	tu_latch_init(&rv.both, 2);
	pick_id(id_a, sizeof(id_a), "left-", 64, 2, 0, -1);
	pick_id(id_b, sizeof(id_b), "right-", 64, 2, 1, -1);
	d = started_dispatcher(2, 64, &j, NULL, meet, &rv);
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

int work_a_little(agr_exchange *ex, void *arg)
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

void dispatcher_load_tests(TCase *core, TCase *stress)
{
	tcase_add_test(core, groups_run_concurrently);
	tcase_add_test(core, async_function_holds_only_its_group);
	tcase_add_test(core, queue_limit_gives_eagain);
	tcase_add_test(stress, per_id_order_under_load);
	tcase_add_test(stress, force_stop_with_thousands_queued);
	tcase_add_test(stress, stop_and_free_while_groups_go_idle);
}
