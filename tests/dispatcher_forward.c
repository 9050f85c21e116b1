/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_forward.c - check_dispatcher across threads and
 * dispatchers: forwarding between two, the supplier stopped under
 * sends, and a message sent again while in flight.
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
	agr_dispatcher_stats st;
	agr_dispatcher *d;
	size_t admitted = 99;
	struct held h;

	held_init(&h);
	logbook_open();
	d = started_dispatcher(1, 8, &h.j, NULL, hold_first, &h);
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

void dispatcher_forward_tests(TCase *core)
{
	tcase_add_test(core, forwarding_between_dispatchers);
	tcase_add_loop_test(core, supplier_stop_under_sends_loses_nothing, 0,
			    2);
	tcase_add_test(core, send_in_flight_is_refused);
	tcase_add_test(core, same_message_from_two_threads_admitted_once);
}
