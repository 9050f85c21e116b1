/* SPDX-License-Identifier: MIT */
/*
 * check_fault.c - fault injection (aggring/fault.h): ring setup that
 * fails with each error or falls back, thread creation that fails,
 * doorbells that fail from threads and from workers, a submission queue
 * that looks full (fault_doorbells.c), I/O that fails or comes back
 * short (fault_io.c). Each test checks the report seen through the log
 * hook, the recovery, and that every message completes exactly once, in
 * order per id.
 *
 * Built in every configuration; without --enable-fault-injection the
 * library has no fault points and this program exits 77 (SKIP).
 * Work on worker threads is recorded there (TU_EXPECT, counters) and
 * asserted on the test thread; every wait is a latch or a tally.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>

#ifndef AGR_FAULT_INJECTION

int main(void)
{
	fprintf(stderr, "SKIP: configure with --enable-fault-injection "
			"to build the fault points these tests arm\n");
	return 77;
}

#else /* AGR_FAULT_INJECTION */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring.h>
#include <aggring/fault.h>

#include "fault_test.h"
#include "testutil.h"

#define EXTRA_ROUNDS 20	 /* sends after it fired: the bell still works */

const agr_named_aggregate order = { "sales", "Order" };

const agr_named_aggregate payment = { "sales", "Payment" };

/* ---- what the library logged ---- */

struct tu_logbook logbook;
struct tu_tally log_errors; /* errors logged, to wait for */

static void log_hook(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == AGR_LOG_DEBUG)
		return; /* one per injected fault: not what is checked */
	tu_logbook_keep(level, msg, &logbook);
	if (level == AGR_LOG_ERROR)
		tu_tally_add(&log_errors);
}

static void setup(void)
{
	tu_reset_worker_failures();
	agr_fault_reset();
	tu_logbook_clear(&logbook);
	tu_tally_init(&log_errors);
	agr_set_log_hook(log_hook, NULL);
}

static void teardown(void)
{
	agr_set_log_hook(NULL, NULL);
	tu_tally_destroy(&log_errors);
	agr_fault_reset();
}

/* ---- resources ---- */

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

/* ---- tasks on every worker ---- */

#define MAX_WORKERS 8

struct probe {
	struct tu_latch done;
	atomic_uint flags[MAX_WORKERS];
	atomic_int runs[MAX_WORKERS];
};

static void probe_task(void *arg)
{
	struct probe *p = arg;
	agr_worker *w = agr_worker_current();
	int i = agr_worker_index(w);

	TU_EXPECT(i >= 0 && i < MAX_WORKERS);
	if (i >= 0 && i < MAX_WORKERS) {
		atomic_store(&p->flags[i], agr_worker_ring(w)->flags);
		atomic_fetch_add(&p->runs[i], 1);
	}
	tu_latch_count_down(&p->done);
}

/* Runs a task on every worker of `s`; each worker's ring flags. */
static void run_on_every_worker(agr_scheduler *s, unsigned *flags)
{
	int n = agr_scheduler_parallelism(s), i;
	struct probe p;

	ck_assert_int_le(n, MAX_WORKERS);
	memset(&p, 0, sizeof(p));
	tu_latch_init(&p.done, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(agr_scheduler_schedule(s, (unsigned)i,
							probe_task, &p), 0);
	ck_assert(tu_latch_wait(&p.done, TU_LONG_NS));
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(atomic_load(&p.runs[i]), 1);
		if (flags)
			flags[i] = atomic_load(&p.flags[i]);
	}
	tu_latch_destroy(&p.done);
}

/*
 * Runs a scheduler once so that what the process keeps for good (the
 * thread-local sender ring of old kernels) exists before fds are
 * counted.
 */
static void warm_up(void)
{
	agr_supplier *sup;
	agr_scheduler *s;

	ck_assert_int_eq(agr_supplier_new("warm", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	run_on_every_worker(s, NULL);
	agr_supplier_free(sup);
}

/* After a failed start: nothing left over, and the next one works. */
static void assert_recovers(agr_supplier *sup, int fds)
{
	agr_scheduler *s = NULL;

	ck_assert_int_eq(agr_supplier_size(sup), 0);
	/* Rings close only after their threads were joined. */
	ck_assert_int_eq(open_fds(), fds);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	ck_assert_ptr_nonnull(s);
	run_on_every_worker(s, NULL);
	agr_supplier_free(sup);
	ck_assert_int_eq(open_fds(), fds);
}

/* ---- ring setup ---- */

static const struct {
	int err;
	const char *name;
} setup_errors[] = {
	{ -ENOSYS, "ENOSYS" },
	{ -EPERM, "EPERM" },
	{ -ENOMEM, "ENOMEM" },
};

/* The second of three workers cannot set up its ring. */
START_TEST(ring_setup_fails)
{
	int err = setup_errors[_i].err;
	agr_scheduler *s = NULL;
	agr_supplier *sup;
	char needle[64];
	int fds;

	warm_up();
	fds = open_fds();
	ck_assert_int_eq(agr_supplier_new("flt", 3, &sup), 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_RING_SETUP, err, 1, 1), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), err);
	ck_assert_ptr_null(s);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_RING_SETUP), 1);
	ck_assert_uint_eq(agr_fault_reached(AGR_FAULT_RING_SETUP), 2);
	snprintf(needle, sizeof(needle), "io_uring_setup failed with %s:",
		 setup_errors[_i].name);
	ASSERT_LOGGED(AGR_LOG_ERROR, needle, NULL);
	ck_assert_int_eq(tu_logbook_count(&logbook, AGR_LOG_ERROR,
					  "io_uring_setup", NULL, NULL),
			 1);
	assert_recovers(sup, fds);
}
END_TEST

/* One refused setup steps down the flags ladder, and says so. */
START_TEST(ring_setup_einval_falls_back)
{
	const unsigned preferred =
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	unsigned base[1], flags[2];
	agr_supplier *sup;
	agr_scheduler *s;

	ck_assert_int_eq(agr_supplier_new("base", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	run_on_every_worker(s, base);
	agr_supplier_free(sup);

	ck_assert_int_eq(agr_supplier_new("flt", 2, &sup), 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_RING_SETUP, -EINVAL, 0, 1),
			 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_RING_SETUP), 1);
	ck_assert_int_eq(tu_logbook_count(&logbook, AGR_LOG_INFO,
					  "refused flags",
					  "using the fallback flags", NULL),
			 1);
	ck_assert_int_eq(tu_logbook_count(&logbook, AGR_LOG_ERROR,
					  "io_uring_setup", NULL, NULL),
			 0);
	run_on_every_worker(s, flags);
	/* One worker on the kernel's best flags, the other a rung lower. */
	ck_assert(flags[0] == base[0] || flags[1] == base[0]);
	ck_assert_uint_ne(flags[0], flags[1]);
	if ((base[0] & preferred) == preferred)
		ck_assert_uint_ne((flags[0] & flags[1]) & preferred,
				  preferred);
	agr_supplier_free(sup);
}
END_TEST

/* Every rung refused: the error and its likely cause. */
START_TEST(ring_setup_einval_exhausted)
{
	agr_scheduler *s = NULL;
	agr_supplier *sup;
	int fds;

	warm_up();
	fds = open_fds();
	ck_assert_int_eq(agr_supplier_new("flt", 1, &sup), 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_RING_SETUP, -EINVAL, 0, 4),
			 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_RING_SETUP), 4);
	ASSERT_LOGGED(AGR_LOG_ERROR, "io_uring_setup failed with EINVAL",
		      "kernel is too old");
	assert_recovers(sup, fds);
}
END_TEST

/* ---- thread creation ---- */

/* Thread `_i` of three cannot be created (0: none starts). */
START_TEST(thread_create_fails)
{
	unsigned skip = (unsigned)_i;
	agr_scheduler *s = NULL;
	agr_supplier *sup;
	char needle[64];
	int fds;

	warm_up();
	fds = open_fds();
	ck_assert_int_eq(agr_supplier_new("flt", 3, &sup), 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_THREAD_CREATE, -EAGAIN,
				       skip, 1), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), -EAGAIN);
	ck_assert_ptr_null(s);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_THREAD_CREATE), 1);
	ck_assert_uint_eq(agr_fault_reached(AGR_FAULT_THREAD_CREATE),
			  skip + 1);
	snprintf(needle, sizeof(needle), "cannot create worker thread %u:",
		 skip);
	ASSERT_LOGGED(AGR_LOG_ERROR, needle, strerror(EAGAIN));
	assert_recovers(sup, fds);
}
END_TEST

/* ---- messages: exactly once, in order per id ---- */

struct flow *flow_new(void)
{
	struct flow *f = calloc(1, sizeof(*f));
	int i;

	ck_assert_ptr_nonnull(f);
	f->msgs = calloc(MAX_MSGS, sizeof(*f->msgs));
	ck_assert_ptr_nonnull(f->msgs);
	tu_tally_init(&f->completed);
	tu_tally_init(&f->leaves);
	for (i = 0; i < NIDS; i++)
		snprintf(f->ids[i], sizeof(f->ids[0]), "id-%d", i);
	return f;
}

void flow_free(struct flow *f)
{
	tu_tally_destroy(&f->completed);
	tu_tally_destroy(&f->leaves);
	free(f->msgs);
	free(f);
}

/* A new message of `id`, next in that id's order; group for routing. */
struct tmsg *flow_msg(struct flow *f, int id, int group,
		      const char *type)
{
	struct tmsg *t;

	ck_assert_int_lt(f->nmsgs, MAX_MSGS);
	t = &f->msgs[f->nmsgs++];
	t->id = id;
	t->group = group;
	t->m.aggregate_id = f->ids[id];
	t->m.type = type;
	t->m.user = t;
	t->seq = atomic_fetch_add(&f->seqs[!strcmp(type, "fwd")][id], 1);
	return t;
}

void on_complete(agr_message *msg, int status, void *arg)
{
	struct flow *f = arg;
	struct tmsg *t = msg->user;

	t->status = status;
	atomic_fetch_add(&t->completions, 1);
	if (!t->m.type || strcmp(t->m.type, "fwd"))
		tu_tally_add(&f->leaves);
	tu_tally_add(&f->completed);
}

/* Leaves: each id's messages arrive in the order they were made. */
static int leaf_fn(agr_exchange *ex, void *arg)
{
	struct flow *f = arg;
	struct tmsg *t = agr_exchange_message(ex)->user;

	TU_EXPECT(atomic_fetch_add(&f->next_seq[t->id], 1) == t->seq);
	if (t->then)
		TU_EXPECT(agr_dispatcher_send(f->d, &t->then->m) == 0);
	return 0;
}

/* Forwarders send their leaf from the worker they run on. */
static int fwd_fn(agr_exchange *ex, void *arg)
{
	struct flow *f = arg;
	struct tmsg *t = agr_exchange_message(ex)->user;

	if (t->go)
		TU_EXPECT(tu_latch_wait(t->go, TU_LONG_NS));
	TU_EXPECT(agr_dispatcher_send(f->next, &t->leaf->m) == 0);
	return 0;
}

static int route(const agr_message *msg, int parallelism, void *arg)
{
	const struct tmsg *t = msg->user;

	(void)arg;
	return t->group % parallelism;
}

/* A started dispatcher for `f` on the workers of `sup`. */
static agr_dispatcher *flow_dispatcher_on(struct flow *f, agr_supplier *sup,
					  bool owns_supplier, const char *name,
					  const agr_named_aggregate *named,
					  int groups)
{
	agr_dispatcher_options o = { 0 };
	agr_dispatcher *d;

	o.name = name;
	o.named_aggregate = *named;
	o.parallelism = groups;
	o.supplier = sup;
	o.owns_supplier = owns_supplier;
	o.on_complete = on_complete;
	o.complete_arg = f;
	o.group_key = route;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, "fwd", fwd_fn, f), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, "leaf", leaf_fn, f), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

/* A started dispatcher for `f` with a supplier of its own. */
agr_dispatcher *flow_dispatcher(struct flow *f, const char *name,
				const agr_named_aggregate *named,
				int workers, int groups)
{
	agr_supplier *sup;

	ck_assert_int_eq(agr_supplier_new(name, workers, &sup), 0);
	return flow_dispatcher_on(f, sup, true, name, named, groups);
}

/* Every message completed exactly once, with status 0. */
void assert_exactly_once(struct flow *f)
{
	int i;

	ck_assert(tu_tally_wait(&f->completed, f->nmsgs, TU_LONG_NS));
	ck_assert_int_eq(tu_tally_value(&f->completed), f->nmsgs);
	for (i = 0; i < f->nmsgs; i++) {
		ck_assert_int_eq(atomic_load(&f->msgs[i].completions), 1);
		ck_assert_int_eq(f->msgs[i].status, 0);
	}
	tu_assert_no_worker_failure();
}

void stop_and_free(agr_dispatcher *d)
{
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	agr_dispatcher_free(d);
}

/*
 * Sends one leaf at a time from this thread, each after the last one
 * completed (so the worker is likely asleep and needs its doorbell),
 * until `point` fired `fired` times, then a few more.
 */
void send_one_by_one(struct flow *f, agr_fault_point point,
		     unsigned fired)
{
	int round, extra = 0;
	struct tmsg *t;

	for (round = 0; round < MAX_ROUNDS && extra < EXTRA_ROUNDS; round++) {
		t = flow_msg(f, round % NIDS, round, "leaf");
		ck_assert_int_eq(agr_dispatcher_send(f->d, &t->m), 0);
		ck_assert_msg(tu_tally_wait(&f->leaves, round + 1, TU_LONG_NS),
			      "message %d was lost", round);
		if (agr_fault_fired(point) >= fired)
			extra++;
	}
	ck_assert_uint_eq(agr_fault_fired(point), fired);
}

/* As send_one_by_one, through forwarders: the leaf's doorbell is rung
 * by the forwarder's worker. */
void forward_one_by_one(struct flow *f, agr_fault_point point,
			unsigned fired)
{
	int round, extra = 0;
	struct tmsg *fwd;

	for (round = 0; round < MAX_ROUNDS && extra < EXTRA_ROUNDS; round++) {
		fwd = flow_msg(f, round % NIDS, 0, "fwd");
		fwd->leaf = flow_msg(f, round % NIDS, 1, "leaf");
		ck_assert_int_eq(agr_dispatcher_send(f->d, &fwd->m), 0);
		ck_assert_msg(tu_tally_wait(&f->leaves, round + 1, TU_LONG_NS),
			      "leaf %d was lost", round);
		if (agr_fault_fired(point) >= fired)
			extra++;
	}
	ck_assert_uint_eq(agr_fault_fired(point), fired);
}

/*
 * A chain of `n` forwarders and leaves that workers send each other:
 * after the first send from this thread, every doorbell is rung by a
 * worker. `arm` runs after that first send (whose doorbell it must not
 * hit) and before the chain goes on: the first forwarder waits for it.
 * Without that wait a test thread preempted between the two (a loaded
 * machine) armed its faults after the whole chain had run, and none
 * fired.
 */
void chain(struct flow *f, int n, void (*arm)(void))
{
	struct tmsg *fwd, *leaf, *prev = NULL, *first = NULL;
	struct tu_latch go;
	int i;

	for (i = 0; i < n; i++) {
		fwd = flow_msg(f, i % NIDS, 0, "fwd");
		leaf = flow_msg(f, i % NIDS, 1, "leaf");
		fwd->leaf = leaf;
		if (prev)
			prev->then = fwd;
		else
			first = fwd;
		prev = leaf;
	}
	tu_latch_init(&go, 1);
	first->go = &go;
	ck_assert_int_eq(agr_dispatcher_send(f->d, &first->m), 0);
	arm();
	tu_latch_count_down(&go);
	ck_assert_msg(tu_tally_wait(&f->leaves, n, TU_LONG_NS),
		      "the chain stopped after %ld of %d", tu_tally_value(&f->leaves),
		      n);
	tu_latch_destroy(&go);
}

/* ---- the API itself ---- */

/* ---- the race between a stop and a group going idle ---- */

/*
 * Workers that outlive the dispatcher pause between marking a group
 * as going idle and their last look at its queue. The stop must wait
 * them out: if it returned during the pause, the free that follows
 * would leave the worker looking at freed memory (ASan and Valgrind
 * report it), and a stop that missed their wake-up would time out.
 */
START_TEST(stop_waits_for_groups_going_idle)
{
	enum { ROUNDS = 10, GROUPS = 8 };
	agr_supplier *sup;
	agr_dispatcher *d;
	struct flow *f;
	struct tmsg *t;
	int round, i;

	ck_assert_int_eq(agr_supplier_new("idle", 2, &sup), 0);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_GO_IDLE_PAUSE, 2000, 0,
				       1000000),
			 0);
	for (round = 0; round < ROUNDS; round++) {
		f = flow_new();
		d = flow_dispatcher_on(f, sup, false, "idle", &order, GROUPS);
		for (i = 0; i < GROUPS; i++) {
			t = flow_msg(f, i, i, "leaf");
			ck_assert_int_eq(agr_dispatcher_send(d, &t->m), 0);
		}
		stop_and_free(d);
		assert_exactly_once(f);
		flow_free(f);
	}
	/* Every group went idle through the pause at least once a round. */
	ck_assert_uint_ge(agr_fault_fired(AGR_FAULT_GO_IDLE_PAUSE),
			  ROUNDS * GROUPS);
	agr_fault_reset();
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
}
END_TEST

START_TEST(arm_rejects_nonsense)
{
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_POINTS, -EIO, 0, 1),
			 -EINVAL);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, -EIO, 0, 0),
			 -EINVAL);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, 5, 0, 1),
			 -EINVAL);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_SHORT, -1, 0, 1),
			 -EINVAL);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_GO_IDLE_PAUSE, 0, 0, 1),
			 -EINVAL);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_GO_IDLE_PAUSE, -EIO, 0, 1),
			 -EINVAL);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_POINTS), 0);
}
END_TEST

static Suite *fault_suite(void)
{
	Suite *s = suite_create("fault");
	TCase *tc[6];
	size_t i;

	tc[0] = tcase_create("ring_setup");
	tcase_add_loop_test(tc[0], ring_setup_fails, 0,
			    (int)ARRAY_SIZE(setup_errors));
	tcase_add_test(tc[0], ring_setup_einval_falls_back);
	tcase_add_test(tc[0], ring_setup_einval_exhausted);
	tc[1] = tcase_create("thread_create");
	tcase_add_loop_test(tc[1], thread_create_fails, 0, 3);
	tc[2] = tcase_create("doorbell");
	tc[3] = tcase_create("sq_full");
	fault_doorbell_tests(tc[2], tc[3]);
	tc[4] = tcase_create("io");
	fault_io_tests(tc[4]);
	tcase_add_test(tc[4], arm_rejects_nonsense);
	tc[5] = tcase_create("go_idle");
	tcase_add_test(tc[5], stop_waits_for_groups_going_idle);
	for (i = 0; i < ARRAY_SIZE(tc); i++) {
		tcase_add_checked_fixture(tc[i], setup, teardown);
		suite_add_tcase(s, tc[i]);
	}
	return s;
}

int main(void)
{
	/*
	 * Workers sleep as soon as they are idle, so that a message to an
	 * idle worker always rings its doorbell: the doorbell faults fire
	 * whatever the machine's load, not only when a 20 us idle spin
	 * happened to end first. (A user's setting is kept.)
	 */
	setenv("AGR_IDLE_SPIN_US", "0", 0);
	tu_require_io_uring();
	tu_logbook_init(&logbook);
	return tu_run(fault_suite());
}

#endif /* AGR_FAULT_INJECTION */
