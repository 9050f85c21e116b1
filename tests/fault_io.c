/* SPDX-License-Identifier: MIT */
/*
 * fault_io.c - check_fault's I/O results that fail or come back short,
 * and agr_exchange_done() from a thread that cannot allocate.
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

/* ---- I/O results ---- */

static const int io_errors[] = { -EIO, -ECONNRESET };

struct recv_msg {
	struct tmsg t;
	agr_exchange *ex;
	int sock;
	char buf[64];
	atomic_int calls;
	int res;
};

static void recv_cb(int res, void *arg)
{
	struct recv_msg *r = arg;

	atomic_fetch_add(&r->calls, 1);
	r->res = res;
	agr_exchange_done(r->ex, res < 0 ? res : 0);
}

static int recv_fn(agr_exchange *ex, void *arg)
{
	struct recv_msg *r = agr_exchange_message(ex)->user;
	int ret;

	(void)arg;
	r->ex = ex;
	ret = agr_io_recv(agr_exchange_worker(ex), r->sock, r->buf,
			  sizeof(r->buf), 0, recv_cb, r);
	return ret ? ret : AGR_PENDING;
}

struct io_flow {
	struct tu_tally completed;
};

static void io_complete(agr_message *msg, int status, void *arg)
{
	struct io_flow *f = arg;
	struct recv_msg *r = msg->user;

	r->t.status = status;
	atomic_fetch_add(&r->t.completions, 1);
	tu_tally_add(&f->completed);
}

/*
 * The dispatcher "flt": one worker and one group, its supplier its own,
 * `fn` for every message; started.
 */
static agr_dispatcher *flt_started(agr_complete_fn complete, void *arg,
				   agr_handler_fn fn)
{
	agr_dispatcher_options o = { 0 };
	agr_dispatcher *d;

	o.name = "flt";
	o.named_aggregate = order;
	o.parallelism = 1;
	ck_assert_int_eq(agr_supplier_new("flt", 1, &o.supplier), 0);
	o.owns_supplier = true;
	o.on_complete = complete;
	o.complete_arg = arg;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, NULL, fn, NULL), 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

/* The callback, and so the message, see the injected error once. */
START_TEST(io_error_reaches_callback)
{
	int err = io_errors[_i];
	struct recv_msg r[3];
	struct io_flow f;
	agr_dispatcher *d;
	int sv[2], i;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv), 0);
	tu_tally_init(&f.completed);
	d = flt_started(io_complete, &f, recv_fn);
	memset(r, 0, sizeof(r));
	for (i = 0; i < 3; i++) {
		r[i].t.m.aggregate_id = "acct";
		r[i].t.m.user = &r[i];
		r[i].sock = sv[0];
	}
	/* The first recv has data, yet its callback sees the error. */
	ck_assert_int_eq(write(sv[1], "abcdefghi", 9), 9);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_RESULT, err, 0, 1), 0);
	ck_assert_int_eq(agr_dispatcher_send(d, &r[0].t.m), 0);
	ck_assert(tu_tally_wait(&f.completed, 1, TU_LONG_NS));
	ck_assert_int_eq(r[0].res, err);
	ck_assert_int_eq(r[0].t.status, err);
	/* The next one gets what the kernel really has. */
	ck_assert_int_eq(write(sv[1], "jklmnopq", 8), 8);
	ck_assert_int_eq(agr_dispatcher_send(d, &r[1].t.m), 0);
	ck_assert(tu_tally_wait(&f.completed, 2, TU_LONG_NS));
	ck_assert_int_eq(r[1].res, 8);
	ck_assert_int_eq(r[1].t.status, 0);
	ck_assert(memcmp(r[1].buf, "jklmnopq", 8) == 0);
	/* And the end of the stream, unchanged. */
	ck_assert_int_eq(close(sv[1]), 0);
	ck_assert_int_eq(agr_dispatcher_send(d, &r[2].t.m), 0);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	ck_assert_int_eq(r[2].res, 0); /* end of stream */
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(atomic_load(&r[i].calls), 1);
		ck_assert_int_eq(atomic_load(&r[i].t.completions), 1);
	}
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_RESULT), 1);
	agr_dispatcher_free(d);
	tu_tally_destroy(&f.completed);
	close(sv[0]);
}
END_TEST

/* Short counts reach the callback as they are; the caller loops. */
START_TEST(io_short_counts)
{
	char *buf = pattern(), back[IO_LEN];
	agr_supplier *sup;
	agr_scheduler *s;
	struct xfer x;
	int fd = tmp_file();

	ck_assert_int_eq(agr_supplier_new("flt", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &order, &s), 0);

	xfer_init(&x, fd, true, buf);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_SHORT, 100, 0, 1), 0);
	xfer_run(s, &x);
	ck_assert_int_eq(x.submit_ret, 0);
	ck_assert_int_eq(atomic_load(&x.calls), 2);
	ck_assert_int_eq(x.results[0], 100);
	ck_assert_int_eq(x.results[1], IO_LEN - 100);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_SHORT), 1);
	ck_assert_int_eq(pread(fd, back, IO_LEN, 0), IO_LEN);
	ck_assert(memcmp(back, buf, IO_LEN) == 0);

	memset(back, 0, sizeof(back));
	xfer_init(&x, fd, false, back);
	ck_assert_int_eq(agr_fault_arm(AGR_FAULT_IO_SHORT, 7, 0, 2), 0);
	xfer_run(s, &x);
	ck_assert_int_eq(atomic_load(&x.calls), 3);
	ck_assert_int_eq(x.results[0], 7);
	ck_assert_int_eq(x.results[1], 7);
	ck_assert_int_eq(x.results[2], IO_LEN - 14);
	ck_assert_uint_eq(agr_fault_fired(AGR_FAULT_IO_SHORT), 2);
	ck_assert(memcmp(back, buf, IO_LEN) == 0);

	agr_supplier_free(sup);
	close(fd);
	free(buf);
}
END_TEST

/* ---- agr_exchange_done() from a thread that cannot allocate ---- */

/*
 * malloc() fails on a thread that asks for it, so that a call made there
 * shows whether it allocates. Not under a sanitizer, whose allocator
 * this would bypass.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)

#define NO_MALLOC_HOOK 1

#elif defined(__has_feature)

#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)

#define NO_MALLOC_HOOK 1

#endif

#endif

static _Thread_local bool refuse_malloc;

#ifndef NO_MALLOC_HOOK

#ifdef __clang__

#pragma clang diagnostic push

#pragma clang diagnostic ignored "-Wreserved-identifier"

#endif

extern void *__libc_malloc(size_t size);

#ifdef __clang__

#pragma clang diagnostic pop

#endif

void *malloc(size_t size)
{
	if (refuse_malloc) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_malloc(size);
}

#endif

struct held_msg {
	struct tmsg t;
	agr_exchange *ex;
	struct tu_latch started;
};

static int hold(agr_exchange *ex, void *arg)
{
	struct held_msg *h = agr_exchange_message(ex)->user;

	(void)arg;
	h->ex = ex;
	tu_latch_count_down(&h->started);
	return AGR_PENDING;
}

static void held_complete(agr_message *msg, int status, void *arg)
{
	struct held_msg *h = msg->user;

	h->t.status = status;
	atomic_fetch_add(&h->t.completions, 1);
	tu_tally_add(arg);
}

struct finisher {
	agr_exchange *ex;
	int status;
	bool refuse;
};

static void *finish_from_thread(void *arg)
{
	struct finisher *f = arg;

	refuse_malloc = f->refuse;
	agr_exchange_done(f->ex, f->status);
	refuse_malloc = false;
	return NULL;
}

/*
 * The call is carried to the worker inside the message: with malloc
 * failing on the calling thread it still completes the message (the
 * first round sets up what the thread keeps, a sender ring say).
 */
START_TEST(done_from_thread_needs_no_memory)
{
	struct tu_tally completed;
	struct held_msg h[2];
	struct finisher f;
	agr_dispatcher *d;
	pthread_t th;
	int r;

#ifdef NO_MALLOC_HOOK
	fprintf(stderr, "note: under a sanitizer malloc is not refused\n");
#endif
	tu_tally_init(&completed);
	d = flt_started(held_complete, &completed, hold);
	memset(h, 0, sizeof(h));
	for (r = 0; r < 2; r++) {
		h[r].t.m.aggregate_id = "acct";
		h[r].t.m.user = &h[r];
		tu_latch_init(&h[r].started, 1);
		ck_assert_int_eq(agr_dispatcher_send(d, &h[r].t.m), 0);
		ck_assert(tu_latch_wait(&h[r].started, TU_LONG_NS));
		f.ex = h[r].ex;
		f.status = r == 0 ? 0 : -EIO;
		f.refuse = r == 1;
		ck_assert_int_eq(pthread_create(&th, NULL, finish_from_thread,
						&f), 0);
		pthread_join(th, NULL);
		ck_assert_msg(tu_tally_wait(&completed, r + 1, TU_LONG_NS),
			      "round %d: the message stayed pending", r);
		ck_assert_int_eq(h[r].t.status, f.status);
		tu_latch_destroy(&h[r].started);
	}
	ck_assert_int_eq(tu_logbook_count(&logbook, AGR_LOG_ERROR,
					  "agr_exchange_done", NULL, NULL),
			 0);
	ck_assert_int_eq(agr_dispatcher_stop_gracefully(d, TU_LONG_NS), 0);
	agr_dispatcher_free(d);
	for (r = 0; r < 2; r++)
		ck_assert_int_eq(atomic_load(&h[r].t.completions), 1);
	tu_tally_destroy(&completed);
}
END_TEST

void fault_io_tests(TCase *io)
{
	tcase_add_loop_test(io, io_error_reaches_callback, 0,
			    (int)ARRAY_SIZE(io_errors));
	tcase_add_test(io, io_short_counts);
	tcase_add_test(io, done_from_thread_needs_no_memory);
}
