/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_done.c - check_dispatcher's dones from many threads,
 * completing each message once; EINVAL that names the argument; a
 * batch that counts one refusal.
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

START_TEST(einval_names_the_dispatcher_option)
{
	static const agr_named_aggregate empty_aggregate = { "sales", "" };
	agr_supplier *sup = new_supplier(1);
	agr_dispatcher_options good = options(sup, false, 8, NULL), o;
	agr_dispatcher *d = NULL;

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
	agr_supplier_free(sup);
	logbook_close();
}
END_TEST

START_TEST(einval_names_the_layer_option)
{
	agr_supplier *bad = NULL;
	agr_runtime_options ro;
	agr_runtime *rt = NULL;
	agr_composite_options co = { 0 };
	agr_composite *c = NULL;

	logbook_open();
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
	logbook_close();
}
END_TEST

START_TEST(einval_names_the_argument)
{
	agr_supplier *sup = new_supplier(1);
	agr_dispatcher_options good = options(sup, false, 8, NULL);
	agr_dispatcher *d;
	agr_worker *w = NULL;
	struct tmsg no_id, t;
	struct journal j;
	char buf[8];

	logbook_open();
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

void dispatcher_done_tests(TCase *core)
{
	tcase_add_test(core, dones_from_many_threads_complete_once);
	tcase_add_test(core, einval_names_the_dispatcher_option);
	tcase_add_test(core, einval_names_the_layer_option);
	tcase_add_test(core, einval_names_the_argument);
	tcase_add_test(core, batch_counts_one_refusal);
}
