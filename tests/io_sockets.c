/* SPDX-License-Identifier: MIT */
/*
 * io_sockets.c - check_io's loopback sockets: accept, connect, send and
 * recv; a refused connect; a peer's reset; a multishot accept until
 * cancelled.
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

/* ==== sockets ==== */

/*
 * Accept and connect in flight together, then a ping-pong, then an
 * orderly close that the other side reads as EOF.
 */
START_TEST(accept_connect_send_recv_on_loopback)
{
	struct sockaddr_in addr, caddr, peer;
	socklen_t addrlen = sizeof(addr), peerlen = sizeof(peer);
	int listener = tcp_bound(true, &addr);
	int client = tcp_bound(false, &caddr), server = -1;
	char ping[16] = "", pong[16] = "", eof[8];
	struct op plan[] = {
		with_next(op_accept(&listener, (struct sockaddr *)&peer,
				    &peerlen, &server)),
		op_connect(&client, (struct sockaddr *)&addr, &addrlen, 0),
		op_send(&client, "ping", 4),
		op_recv(&server, ping, sizeof(ping), 4),
		op_send(&server, "pong!", 5),
		op_recv(&client, pong, sizeof(pong), 5),
		op_close(&client, 0),
		op_recv(&server, eof, sizeof(eof), 0),
		op_close(&server, 0),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	/* Accept and connect went to the kernel in one batch. */
	ck_assert_uint_eq(r.queued[0], 2);
	ck_assert_int_eq(r.inflight_seen[0] + r.inflight_seen[1], 1);
	ck_assert_str_eq(ping, "ping");
	ck_assert_str_eq(pong, "pong!");
	ck_assert_uint_eq(peerlen, sizeof(peer));
	ck_assert_uint_eq(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	ck_assert_uint_eq(peer.sin_port, caddr.sin_port);
	rig_down(&g);
	close(listener);
}
END_TEST

START_TEST(connect_to_a_closed_port_is_refused)
{
	struct sockaddr_in addr;
	socklen_t addrlen = sizeof(addr);
	/* Bound but never listening: the port stays ours, and refuses. */
	int holder = tcp_bound(false, &addr), client = tcp_socket();
	struct op plan[] = {
		op_connect(&client, (struct sockaddr *)&addr, &addrlen,
			   -ECONNREFUSED),
	};
	struct run r;
	struct rig g;

	rig_up(&g, 1);
	run_plan(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	assert_plan(&r);
	rig_down(&g);
	close(client);
	close(holder);
}
END_TEST

/*
 * The peer closes with SO_LINGER 0, which sends a reset. The recv is
 * in flight or about to be: either way it sees the reset. Linux reports
 * -ECONNRESET on an established socket (tcp_reset()), -EPIPE if a FIN
 * came first, and 0 (EOF) once the error has been read; a send after
 * that fails with -EPIPE or -ECONNRESET.
 */
START_TEST(peer_reset_fails_recv_and_send)
{
	struct linger hard = { .l_onoff = 1, .l_linger = 0 };
	char buf[8];
	int fds[2];
	struct op plan[] = {
		op_recv(&fds[0], buf, sizeof(buf), WANT_ANY),
		op_send(&fds[0], "late", WANT_ANY),
		op_close(&fds[0], 0),
	};
	struct run r;
	struct rig g;
	int res;

	tcp_pair(fds);
	rig_up(&g, 1);
	run_start(g.s, 0, &r, plan, ARRAY_SIZE(plan));
	ck_assert_int_eq(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &hard,
				    sizeof(hard)), 0);
	close(fds[1]);
	run_wait(&r);
	assert_plan(&r);
	res = r.res[0];
	ck_assert_msg(res == -ECONNRESET || res == -EPIPE || res == 0,
		      "recv after a reset: %d (%s)", res, res_str(res));
	res = r.res[1];
	ck_assert_msg(res == -EPIPE || res == -ECONNRESET,
		      "send after a reset: %d (%s)", res, res_str(res));
	rig_down(&g);
}
END_TEST

/* ---- multishot accept ---- */

#define MULTI_CONNS 3

struct multi {
	int listener;
	agr_worker *w;
	int submit_ret;
	int fds[MULTI_CONNS + 1];
	int nfds, calls, extra;
	int cancel_ret, final_res, inflight_at_end;
	struct tu_latch armed, ended;
};

static void multi_accepted(int res, void *arg)
{
	struct multi *m = arg;

	TU_EXPECT(agr_worker_current() == m->w);
	m->calls++;
	if (res < 0) {
		/* The last call: the operation is no longer armed. */
		m->final_res = res;
		m->inflight_at_end = agr_io_inflight(m->w);
		tu_latch_count_down(&m->ended);
		return;
	}
	if (m->nfds == MULTI_CONNS) {
		m->extra++; /* more connections than the test made */
		close(res);
		return;
	}
	m->fds[m->nfds++] = res;
	if (m->nfds == MULTI_CONNS)
		m->cancel_ret = agr_io_cancel(m->w, m);
}

static void arm_multishot(void *arg)
{
	struct multi *m = arg;

	m->w = agr_worker_current();
	m->submit_ret = agr_io_accept_multishot(m->w, m->listener,
						SOCK_CLOEXEC, multi_accepted,
						m);
	if (m->submit_ret)
		tu_latch_count_down(&m->ended);
	tu_latch_count_down(&m->armed);
}

START_TEST(multishot_accept_until_cancelled)
{
	struct sockaddr_in addr, caddr[MULTI_CONNS];
	int clients[MULTI_CONNS], i, j, matched;
	struct multi m = { .final_res = 1, .cancel_ret = -1 };
	struct rig g;

	m.listener = tcp_bound(true, &addr);
	tu_latch_init(&m.armed, 1);
	tu_latch_init(&m.ended, 1);
	rig_up(&g, 1);
	run_on(g.s, 0, arm_multishot, &m);
	ck_assert(tu_latch_wait(&m.armed, TU_LONG_NS));
	ck_assert_int_eq(m.submit_ret, 0);
	for (i = 0; i < MULTI_CONNS; i++) {
		clients[i] = tcp_bound(false, &caddr[i]);
		ck_assert_int_eq(connect(clients[i], (struct sockaddr *)&addr,
					 sizeof(addr)), 0);
	}
	ck_assert(tu_latch_wait(&m.ended, TU_LONG_NS));
	ck_assert_int_eq(m.nfds, MULTI_CONNS);
	ck_assert_int_eq(m.extra, 0);
	ck_assert_int_eq(m.cancel_ret, 1);
	ck_assert_int_eq(m.final_res, -ECANCELED);
	ck_assert_int_eq(m.calls, MULTI_CONNS + 1);
	ck_assert_int_eq(m.inflight_at_end, 0);
	/* Each accepted socket is one of our clients, with the flags. */
	for (i = 0; i < MULTI_CONNS; i++) {
		ck_assert(fcntl(m.fds[i], F_GETFD) & FD_CLOEXEC);
		matched = 0;
		for (j = 0; j < MULTI_CONNS; j++)
			matched += port_of(m.fds[i], true) == caddr[j].sin_port;
		ck_assert_int_eq(matched, 1);
		for (j = 0; j < i; j++)
			ck_assert_int_ne(port_of(m.fds[i], true),
					 port_of(m.fds[j], true));
	}
	rig_down(&g);
	ck_assert_int_eq(m.calls, MULTI_CONNS + 1);
	tu_assert_no_worker_failure();
	for (i = 0; i < MULTI_CONNS; i++) {
		close(m.fds[i]);
		close(clients[i]);
	}
	close(m.listener);
	tu_latch_destroy(&m.armed);
	tu_latch_destroy(&m.ended);
}
END_TEST

/* ==== timers ==== */

struct timers;

static void long_fired(int res, void *arg)
{
	struct timers *t = ((struct timer_key *)arg)->t;

	TU_EXPECT(agr_worker_current() == t->w);
	t->long_res = res;
	t->long_calls++;
	tu_latch_count_down(&t->done);
}

/* The long timer is certainly in the kernel by now: cancel it. */
static void short_fired(int res, void *arg)
{
	struct timers *t = ((struct timer_key *)arg)->t;

	TU_EXPECT(agr_worker_current() == t->w);
	t->fired = tu_now_ns();
	t->short_res = res;
	t->short_calls++;
	t->cancel_none_ret = agr_io_cancel(t->w, &t->nobody);
	t->cancel_ret = agr_io_cancel(t->w, &t->long_key);
	tu_latch_count_down(&t->done);
}

void start_timers(void *arg)
{
	struct timers *t = arg;

	t->w = agr_worker_current();
	t->start = tu_now_ns();
	t->long_ret = agr_io_timeout(t->w, 60000 * MS, long_fired,
				     &t->long_key);
	t->short_ret = agr_io_timeout(t->w, 5 * MS, short_fired,
				      &t->short_key);
	if (t->long_ret)
		tu_latch_count_down(&t->done);
	if (t->short_ret)
		tu_latch_count_down(&t->done);
}

void io_socket_tests(TCase *net)
{
	tcase_add_test(net, accept_connect_send_recv_on_loopback);
	tcase_add_test(net, connect_to_a_closed_port_is_refused);
	tcase_add_test(net, peer_reset_fails_recv_and_send);
	tcase_add_test(net, multishot_accept_until_cancelled);
}
