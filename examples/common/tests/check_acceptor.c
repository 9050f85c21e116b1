/* SPDX-License-Identifier: MIT */
/*
 * check_acceptor.c - the examples' acceptor (echo_server, append_store,
 * ledger_server and /metrics share it) keeps accepting when the kernel
 * ends its multishot accept with a success because the completion queue
 * was full, and ends with its stop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>

#include "acceptor.h"
#include "drain.h"
#include "testutil.h"

#define FIRST 200 /* waiting before the acceptor starts */
#define LATER 50  /* arriving once it runs */
#define ALL (FIRST + LATER)

static const agr_named_aggregate conn = { "net", "Conn" };

struct taker {
	int fds[ALL];
	int n, extra;
	struct tu_tally taken;
};

/* Runs on the acceptor's worker, one call at a time. */
static void take(void *arg, int fd)
{
	struct taker *t = arg;

	if (t->n < ALL) {
		t->fds[t->n++] = fd;
	} else {
		t->extra++;
		close(fd);
	}
	tu_tally_add(&t->taken);
}

static int listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	*addr = (struct sockaddr_in){ .sin_family = AF_INET };
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	ck_assert_int_eq(listen(fd, 2 * ALL), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)addr, &len), 0);
	return fd;
}

static void connect_clients(const struct sockaddr_in *addr, int *fds,
			    int n)
{
	int i;

	for (i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(connect(fds[i], (const struct sockaddr *)addr,
					 sizeof(*addr)), 0);
	}
}

/*
 * A CQ of 4 entries and 200 connections waiting: the kernel ends the
 * multishot accept after a handful with a successful last CQE. Before
 * the fix the acceptor took that socket and never armed again: the
 * rest waited in the backlog for ever.
 */
START_TEST(acceptor_survives_a_full_completion_queue)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;
	struct taker *t = calloc(1, sizeof(*t));
	int *clients = calloc(ALL, sizeof(int));
	struct sockaddr_in addr;
	struct acceptor *a = NULL;
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;
	struct drain drain;
	int fd = listener(&addr), i;

	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(clients);
	tu_tally_init(&t->taken);
	drain_init(&drain);
	o.parallelism = 1;
	o.sq_entries = 2;
	o.cq_entries = 4;
	ck_assert_int_eq(agr_supplier_new_opts("acc", &o, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &conn, &s), 0);
	connect_clients(&addr, clients, FIRST);
	ck_assert_int_eq(acceptor_start(s, 0, fd, take, t, &drain, &a), 0);
	ck_assert_msg(tu_tally_wait(&t->taken, FIRST, TU_LONG_NS),
		      "took %ld of the %d waiting connections",
		      tu_tally_value(&t->taken), FIRST);
	connect_clients(&addr, clients + FIRST, LATER);
	ck_assert_msg(tu_tally_wait(&t->taken, ALL, TU_LONG_NS),
		      "took %ld of %d connections", tu_tally_value(&t->taken),
		      ALL);
	acceptor_stop(a);
	ck_assert(drain_wait(&drain, TU_LONG_NS)); /* it closed the listener */
	ck_assert_int_eq(t->extra, 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	acceptor_free(a);
	for (i = 0; i < ALL; i++) {
		close(t->fds[i]);
		close(clients[i]);
	}
	drain_destroy(&drain);
	tu_tally_destroy(&t->taken);
	free(clients);
	free(t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("acceptor");
	TCase *c = tcase_create("core");

	tcase_set_timeout(c, 120);
	tcase_add_test(c, acceptor_survives_a_full_completion_queue);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
