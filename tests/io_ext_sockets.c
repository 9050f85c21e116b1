/* SPDX-License-Identifier: MIT */
/*
 * io_ext_sockets.c - check_io_ext's socket cases: a multishot receive
 * into a provided buffer ring (intact, and ended by a force stop), and a
 * zero-copy send (its completion and notification, and a force stop,
 * or a dispatcher's free, that gives up on a notification from a peer
 * that never reads).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "io_ext_test.h"
#include "testutil.h"

/* ---- multishot receive into a provided buffer ring ---- */

#define MESSAGES 100000

#define MAX_MESSAGE 512

#define RECV_BUFS 8

#define RECV_BUF_SIZE 2048

#define HOARD_CQES 200 /* buffers kept, not recycled, at first: ENOBUFS */

static uint32_t next_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

struct stream {
	int sv[2];
	uint64_t sent, received;
	uint32_t check_state; /* the byte stream's generator, receiver side */
	agr_buf_ring *br;
	int hoarded[RECV_BUFS];
	int nhoarded;
	long cqes, rearms, enobufs;
	bool mismatch;
	int end_res;
	struct tu_latch armed, done;
};

static void *send_messages(void *arg)
{
	struct stream *st = arg;
	uint32_t bytes = 0x12345u, sizes = 0x9e3779b9u;
	unsigned char msg[MAX_MESSAGE];
	int i, n, k, off, w;

	for (i = 0; i < MESSAGES; i++) {
		n = 1 + (int)(next_rand(&sizes) % MAX_MESSAGE);
		for (k = 0; k < n; k++)
			msg[k] = (unsigned char)next_rand(&bytes);
		for (off = 0; off < n; off += w) {
			w = (int)write(st->sv[1], msg + off, (size_t)(n - off));
			if (w <= 0)
				return NULL;
		}
		st->sent += (uint64_t)n;
	}
	shutdown(st->sv[1], SHUT_WR);
	return NULL;
}

static void on_recv(int res, unsigned flags, void *arg);

static void arm_recv(struct stream *st)
{
	agr_worker *w = agr_buf_ring_worker(st->br);

	TU_EXPECT(agr_io_recv_multishot(w, st->sv[0], st->br, 0, on_recv,
					st) == 0);
}

static void check_bytes(struct stream *st, const unsigned char *p, int n)
{
	int k;

	for (k = 0; k < n; k++)
		if (p[k] != (unsigned char)next_rand(&st->check_state))
			st->mismatch = true;
	st->received += (uint64_t)n;
}

static void give_back_hoard(struct stream *st)
{
	while (st->nhoarded > 0)
		TU_EXPECT(agr_buf_ring_recycle(
				  st->br,
				  (unsigned)st->hoarded[--st->nhoarded]) == 0);
}

static void on_recv(int res, unsigned flags, void *arg)
{
	struct stream *st = arg;
	int bid = agr_buf_ring_bid(flags);

	st->cqes++;
	if (res > 0) {
		TU_EXPECT(bid >= 0);
		check_bytes(st, agr_buf_ring_buf(st->br, (unsigned)bid), res);
		if (st->cqes <= HOARD_CQES && st->nhoarded < RECV_BUFS)
			st->hoarded[st->nhoarded++] = bid;
		else
			TU_EXPECT(agr_buf_ring_recycle(st->br,
						       (unsigned)bid) == 0);
	}
	if (flags & IORING_CQE_F_MORE)
		return;
	if (res == -ENOBUFS) { /* the ring ran dry: give back, arm again */
		st->enobufs++;
		give_back_hoard(st);
		st->rearms++;
		arm_recv(st);
		return;
	}
	if (res > 0) { /* the kernel may end a multishot at any time */
		st->rearms++;
		arm_recv(st);
		return;
	}
	give_back_hoard(st);
	st->end_res = res;
	agr_buf_ring_free(st->br);
	st->br = NULL;
	tu_latch_count_down(&st->done);
}

static void start_stream(void *arg)
{
	struct stream *st = arg;

	TU_EXPECT(agr_buf_ring_new(agr_worker_current(), 7, RECV_BUFS,
				   RECV_BUF_SIZE, &st->br) == 0);
	arm_recv(st);
	tu_latch_count_down(&st->armed);
}

/* A stream on a socketpair of its own, not armed yet. */
static struct stream *stream_new(void)
{
	struct stream *st = calloc(1, sizeof(*st));

	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, st->sv), 0);
	st->end_res = 1;
	tu_latch_init(&st->armed, 1);
	tu_latch_init(&st->done, 1);
	return st;
}

static void stream_free(struct stream *st)
{
	close(st->sv[0]);
	close(st->sv[1]);
	tu_latch_destroy(&st->armed);
	tu_latch_destroy(&st->done);
	free(st);
}

START_TEST(multishot_recv_with_buffer_ring_is_intact)
{
	struct stream *st = stream_new();
	pthread_t sender;
	struct rig g;

	st->check_state = 0x12345u;
	rig_up(&g, 0);
	run_on(&g, start_stream, st);
	ck_assert_int_eq(pthread_create(&sender, NULL, send_messages, st), 0);
	ck_assert(tu_latch_wait(&st->done, TU_LONG_NS));
	pthread_join(sender, NULL);
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(st->end_res, 0); /* the peer's shutdown */
	ck_assert(!st->mismatch);
	ck_assert_uint_eq(st->received, st->sent);
	ck_assert_uint_gt(st->sent, MESSAGES);
	ck_assert_int_ge(st->enobufs, 1);
	stream_free(st);
}
END_TEST

/* A force stop ends an armed multishot receive, once, with -ECANCELED. */
START_TEST(multishot_recv_ends_on_force_stop)
{
	struct stream *st = stream_new();
	struct rig g;

	rig_up(&g, 0);
	run_on(&g, start_stream, st);
	ck_assert(tu_latch_wait(&st->armed, TU_LONG_NS));
	ck_assert_int_eq(agr_supplier_force_stop(g.sup), 0);
	ck_assert(tu_latch_wait(&st->done, TU_LONG_NS));
	ck_assert_int_eq(st->end_res, -ECANCELED);
	ck_assert_int_eq(st->cqes, 1);
	ck_assert_int_eq(agr_supplier_stop_gracefully(g.sup, TU_LONG_NS), 0);
	agr_supplier_free(g.sup);
	tu_assert_no_worker_failure();
	stream_free(st);
}
END_TEST

/* ---- zero-copy send ---- */

#define ZC_LEN 65536

struct zc_run {
	int fd;
	unsigned char *buf;
	int first_res;
	unsigned first_flags;
	int completions, notifications, order_ok;
	struct tu_latch notified;
};

static void on_zc(int res, unsigned flags, void *arg)
{
	struct zc_run *z = arg;

	if (flags & IORING_CQE_F_NOTIF) {
		z->notifications++;
		z->order_ok = z->completions == 1;
		TU_EXPECT(!(flags & IORING_CQE_F_MORE));
		tu_latch_count_down(&z->notified);
		return;
	}
	z->completions++;
	z->first_res = res;
	z->first_flags = flags;
}

static void send_zero_copy(void *arg)
{
	struct zc_run *z = arg;

	TU_EXPECT(agr_io_send_zc(agr_worker_current(), z->fd, z->buf, ZC_LEN,
				 MSG_NOSIGNAL, on_zc, z) == 0);
}

static void tcp_pair(int *client, int *server)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	*client = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(*client, (struct sockaddr *)&a, sizeof(a)),
			 0);
	*server = accept(l, NULL, NULL);
	ck_assert_int_ge(*server, 0);
	close(l);
}

START_TEST(zero_copy_send_reports_completion_and_notification)
{
	struct zc_run z = { .first_res = 1 };
	unsigned char *back = malloc(ZC_LEN);
	int client, server, i;
	ssize_t got, total = 0;
	struct rig g;

	ck_assert_ptr_nonnull(back);
	z.buf = malloc(ZC_LEN);
	ck_assert_ptr_nonnull(z.buf);
	for (i = 0; i < ZC_LEN; i++)
		z.buf[i] = (unsigned char)(i * 7);
	tcp_pair(&client, &server);
	z.fd = client;
	tu_latch_init(&z.notified, 1);
	rig_up(&g, 0);
	run_on(&g, send_zero_copy, &z);
	while (total < ZC_LEN) {
		got = read(server, back + total, (size_t)(ZC_LEN - total));
		ck_assert_int_gt(got, 0);
		total += got;
	}
	ck_assert(tu_latch_wait(&z.notified, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(z.first_res, ZC_LEN);
	ck_assert(z.first_flags & IORING_CQE_F_MORE);
	ck_assert_int_eq(z.completions, 1);
	ck_assert_int_eq(z.notifications, 1);
	ck_assert(z.order_ok);
	ck_assert(memcmp(back, z.buf, ZC_LEN) == 0);
	close(client);
	close(server);
	free(z.buf);
	free(back);
	tu_latch_destroy(&z.notified);
}
END_TEST

/* ---- zero-copy send to a peer that never reads ---- */

#define ZC_BIG (8 << 20)

struct zc_stall {
	int fd;
	unsigned char *buf;
	atomic_int submit_ret, calls, last_res;
	atomic_uint last_flags;
	struct tu_latch submitted;
};

static struct tu_tally zc_reports; /* the worker's 5 s reports */
/* How long the first of them says the stop has waited, in ms; -1: none. */
static atomic_int zc_first_report_ms = -1;

static void zc_log_hook(agr_log_level level, const char *msg, void *arg)
{
	const char *waited = strstr(msg, "has waited ");
	double secs;
	int none = -1;

	(void)arg;
	if (level != AGR_LOG_WARN || !strstr(msg, "ioext-Order-0") ||
	    !strstr(msg, "zero-copy send notification"))
		return;
	if (waited && sscanf(waited, "has waited %lf s", &secs) == 1)
		atomic_compare_exchange_strong(&zc_first_report_ms, &none,
					       (int)(secs * 1000));
	tu_tally_add(&zc_reports);
}

/*
 * The first report came 5 s into the stop, by the worker's own clock
 * (a tick is 250 ms): this test thread may run much later under
 * Valgrind, which lets a worker waiting in the kernel hold its lock.
 */
static void assert_first_report_at_5_s(void)
{
	int ms = atomic_load(&zc_first_report_ms);

	ck_assert_msg(ms >= 5000 && ms < 6000,
		      "the first report came %d ms into the stop", ms);
}

static void on_zc_stall(int res, unsigned flags, void *arg)
{
	struct zc_stall *z = arg;

	atomic_store(&z->last_res, res);
	atomic_store(&z->last_flags, flags);
	atomic_fetch_add(&z->calls, 1);
}

static void send_big(void *arg)
{
	struct zc_stall *z = arg;

	atomic_store(&z->submit_ret,
		     agr_io_send_zc(agr_worker_current(), z->fd, z->buf, ZC_BIG,
				    MSG_NOSIGNAL, on_zc_stall, z));
	tu_latch_count_down(&z->submitted);
}

static void free_supplier(void *sup)
{
	agr_supplier_free(sup);
}

/*
 * A client socket of a loopback pair (the peer's end in *server, which
 * never reads), an 8 MiB buffer to send, and the log hook that counts
 * the worker's reports.
 */
static void zc_open(struct zc_stall *z, int *server)
{
	z->buf = calloc(1, ZC_BIG);
	ck_assert_ptr_nonnull(z->buf);
	tcp_pair(&z->fd, server);
	tu_tally_init(&zc_reports);
	atomic_store(&zc_first_report_ms, -1);
	agr_set_log_hook(zc_log_hook, NULL);
}

/*
 * A free that gave up on the notification: reported first 5 s into the
 * stop, and the callback ran a last time with -ETIMEDOUT and F_NOTIF.
 */
static void assert_given_up(struct zc_stall *z)
{
	assert_first_report_at_5_s();
	ck_assert_int_eq(atomic_load(&z->calls), 2);
	ck_assert_int_eq(atomic_load(&z->last_res), -ETIMEDOUT);
	ck_assert(atomic_load(&z->last_flags) & IORING_CQE_F_NOTIF);
}

/* The peer's close releases the pages; then the buffer is ours. */
static void zc_close(struct zc_stall *z, int server)
{
	agr_set_log_hook(NULL, NULL);
	close(server);
	close(z->fd);
	free(z->buf);
	tu_tally_destroy(&zc_reports);
}

/* Bytes the peer has not read; waits (bounded) until there are some. */
static int wait_unread(int fd)
{
	uint64_t deadline = tu_now_ns() + TU_LONG_NS;
	struct timespec pause = { 0, 1000000 };
	int n = 0;

	while (ioctl(fd, FIONREAD, &n) == 0 && n == 0 &&
	       tu_now_ns() < deadline)
		nanosleep(&pause, NULL);
	return n;
}

/*
 * 8 MiB sent zero-copy to a loopback peer that never reads: the kernel
 * holds the pages of the bytes queued at the peer, and the notification
 * comes only when it reads or closes. A force stop cancels the send,
 * names the notification it waits for every 5 s, and gives up on it
 * 10 s in: the callback runs one last time (-ETIMEDOUT, F_NOTIF) and
 * the free returns. Before, the free waited silently until the peer
 * closed its socket.
 */
START_TEST(force_stop_gives_up_on_a_zero_copy_notification)
{
	struct zc_stall z = { .fd = -1 };
	struct tu_aside f;
	uint64_t before, took;
	struct rig g;
	int server;

	zc_open(&z, &server);
	atomic_init(&z.submit_ret, 1);
	tu_latch_init(&z.submitted, 1);
	rig_up(&g, 0);
	run_on(&g, send_big, &z);
	ck_assert(tu_latch_wait(&z.submitted, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&z.submit_ret), 0);
	ck_assert_int_gt(wait_unread(server), 0);

	before = tu_now_ns();
	ck_assert_int_eq(agr_supplier_force_stop(g.sup), 0);
	tu_aside_start(&f, free_supplier, g.sup);
	ck_assert_msg(tu_tally_wait(&zc_reports, 1, TU_LONG_NS),
		      "nothing said what holds the stop");
	ck_assert_msg(tu_aside_wait(&f, TU_LONG_NS),
		      "agr_supplier_free() still waits for the peer");
	took = tu_now_ns() - before;
	tu_aside_join(&f);
	ck_assert_uint_ge(took, 4000 * MS);
	assert_given_up(&z);
	zc_close(&z, server);
	tu_latch_destroy(&z.submitted);
}
END_TEST

/* ---- the same through a dispatcher ---- */

static const agr_named_aggregate zc_order = { "sales", "Order" };

struct zc_msg {
	struct zc_stall z;
	agr_message m;
	agr_exchange *ex;
	atomic_int status, completions;
	struct tu_latch completed;
};

/* The send's result completes the exchange; the notification may not. */
static void on_zc_result(int res, unsigned flags, void *arg)
{
	struct zc_msg *zm = arg;

	on_zc_stall(res, flags, &zm->z);
	if (!(flags & IORING_CQE_F_NOTIF))
		agr_exchange_done(zm->ex, res < 0 ? res : 0);
}

static int send_big_fn(agr_exchange *ex, void *arg)
{
	struct zc_msg *zm = arg;
	int ret;

	zm->ex = ex;
	ret = agr_io_send_zc(agr_exchange_worker(ex), zm->z.fd, zm->z.buf,
			     ZC_BIG, MSG_NOSIGNAL, on_zc_result, zm);
	return ret < 0 ? ret : AGR_PENDING;
}

static void zc_completed(agr_message *msg, int status, void *arg)
{
	struct zc_msg *zm = arg;

	(void)msg;
	atomic_store(&zm->status, status);
	atomic_fetch_add(&zm->completions, 1);
	tu_latch_count_down(&zm->completed);
}

/* A started dispatcher on g's supplier, owning it, with zm's function. */
static agr_dispatcher *zc_dispatcher(struct rig *g, struct zc_msg *zm)
{
	agr_dispatcher_options o = AGR_DISPATCHER_OPTIONS_INIT;
	agr_dispatcher *d = NULL;

	o.name = "zcd";
	o.named_aggregate = zc_order;
	o.parallelism = 1;
	o.supplier = g->sup;
	o.owns_supplier = true;
	o.on_complete = zc_completed;
	o.complete_arg = zm;
	ck_assert_int_eq(agr_dispatcher_new(&o, &d), 0);
	ck_assert_int_eq(agr_dispatcher_register(d, "send", send_big_fn, zm),
			 0);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

static void free_dispatcher(void *d)
{
	agr_dispatcher_free(d);
}

/*
 * Issue 29's second try: the function completes its message on the
 * send's result, and the notification never comes (the peer does not
 * read). agr_dispatcher_free() used to wait silently for the peer, and
 * say only that a group had messages queued; now the worker names the
 * notification within 5 s and the free returns once it is given up on.
 */
START_TEST(dispatcher_free_gives_up_on_a_zero_copy_notification)
{
	struct zc_msg zm = { .z = { .fd = -1 } };
	agr_dispatcher *d;
	struct tu_aside f;
	uint64_t before;
	struct rig g;
	int server;

	zc_open(&zm.z, &server);
	tu_latch_init(&zm.completed, 1);
	rig_up(&g, 0);
	d = zc_dispatcher(&g, &zm);
	zm.m = (agr_message){ .aggregate_id = "order-1", .type = "send" };
	ck_assert_int_eq(agr_dispatcher_send(d, &zm.m), 0);
	ck_assert(tu_latch_wait(&zm.completed, TU_LONG_NS));
	ck_assert_int_eq(atomic_load(&zm.status), 0);
	ck_assert_int_gt(wait_unread(server), 0);

	before = tu_now_ns();
	tu_aside_start(&f, free_dispatcher, d);
	ck_assert_msg(tu_tally_wait(&zc_reports, 1, TU_LONG_NS),
		      "nothing named the notification");
	ck_assert_msg(tu_aside_wait(&f, TU_LONG_NS),
		      "agr_dispatcher_free() still waits for the peer");
	tu_aside_join(&f);
	ck_assert_uint_ge(tu_now_ns() - before, 4000 * MS);
	ck_assert_int_eq(atomic_load(&zm.completions), 1);
	assert_given_up(&zm.z);
	zc_close(&zm.z, server);
	tu_latch_destroy(&zm.completed);
}
END_TEST

void io_ext_socket_tests(TCase *c)
{
	tcase_add_test(c, multishot_recv_with_buffer_ring_is_intact);
	tcase_add_test(c, multishot_recv_ends_on_force_stop);
	tcase_add_test(c, zero_copy_send_reports_completion_and_notification);
	tcase_add_test(c, force_stop_gives_up_on_a_zero_copy_notification);
	tcase_add_test(c, dispatcher_free_gives_up_on_a_zero_copy_notification);
}
