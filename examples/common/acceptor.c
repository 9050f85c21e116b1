/* SPDX-License-Identifier: MIT */
#include "acceptor.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <liburing.h>

#include "util.h"

#define ACCEPT_BACKOFF_NS 100000000ull /* out of descriptors: retry in */

struct acceptor {
	agr_scheduler *sched;
	unsigned worker;
	int fd;
	acceptor_take_fn *take;
	void *arg;
	struct drain *drain;
	atomic_bool stopping;
	bool multishot;
	bool accepted; /* multishot worked at least once */
};

static void acceptor_arm(struct acceptor *a);

static void acceptor_close(struct acceptor *a)
{
	close(a->fd);
	a->fd = -1;
	drain_done(a->drain);
}

static void acceptor_retry(int res, void *arg)
{
	struct acceptor *a = arg;

	if (res == -ECANCELED || atomic_load(&a->stopping))
		acceptor_close(a);
	else
		acceptor_arm(a);
}

/* The accept ended: a single one, or the multishot's last call. */
static void accept_ended(struct acceptor *a, int res, bool stopping)
{
	if (res == -ECANCELED || stopping) {
		acceptor_close(a);
	} else if (res == -EINVAL && a->multishot && !a->accepted) {
		a->multishot = false; /* a kernel before 5.19 */
		acceptor_arm(a);
	} else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS ||
		   res == -ENOMEM) {
		/* Out of descriptors: wait a little rather than spin. */
		if (agr_io_timeout(agr_worker_current(), ACCEPT_BACKOFF_NS,
				   acceptor_retry, a) < 0)
			acceptor_close(a);
	} else {
		acceptor_arm(a); /* ECONNABORTED and friends: go on */
	}
}

/* A socket, or the end of an accept: a single one's, or a multishot's. */
static void accepted_more(int res, bool more, struct acceptor *a)
{
	bool stopping = atomic_load(&a->stopping);

	if (res < 0) {
		accept_ended(a, res, stopping);
		return;
	}
	a->accepted = true;
	if (stopping)
		close(res);
	else
		a->take(a->arg, res);
	/*
	 * A multishot accept also ends with a success: the kernel could not
	 * post the next CQE (the CQ was full). Not armed any more: arm again.
	 */
	if (!more && !stopping)
		acceptor_arm(a);
	else if (!more)
		acceptor_close(a);
}

static void accepted(int res, void *arg)
{
	accepted_more(res, false, arg);
}

static void accepted_multishot(int res, unsigned flags, void *arg)
{
	accepted_more(res, flags & IORING_CQE_F_MORE, arg);
}

static void acceptor_arm(struct acceptor *a)
{
	agr_worker *w = agr_worker_current();
	int ret;

	if (a->multishot)
		ret = agr_io_accept_multishot_cqe(w, a->fd, SOCK_CLOEXEC,
						  accepted_multishot, a);
	else
		ret = agr_io_accept(w, a->fd, NULL, NULL, SOCK_CLOEXEC,
				    accepted, a);
	if (ret < 0) {
		warnf("accept: %s", strerror(-ret));
		acceptor_close(a);
	}
}

static void acceptor_begin(void *arg)
{
	acceptor_arm(arg);
}

int acceptor_start(agr_scheduler *sched, unsigned worker, int fd,
		   acceptor_take_fn *take, void *arg, struct drain *drain,
		   struct acceptor **out)
{
	struct acceptor *a = xcalloc(1, sizeof(*a));
	int ret;

	a->sched = sched;
	a->worker = worker;
	a->fd = fd;
	a->take = take;
	a->arg = arg;
	a->drain = drain;
	a->multishot = true;
	drain_add(drain);
	ret = agr_scheduler_schedule(sched, worker, acceptor_begin, a);
	if (ret < 0) {
		drain_done(drain);
		free(a);
		return ret;
	}
	*out = a;
	return 0;
}

static void acceptor_cancel(void *arg)
{
	/* Its callback (or the back-off timer's) sees -ECANCELED. */
	agr_io_cancel(agr_worker_current(), arg);
}

void acceptor_stop(struct acceptor *a)
{
	atomic_store(&a->stopping, true);
	agr_scheduler_schedule(a->sched, a->worker, acceptor_cancel, a);
}

void acceptor_free(struct acceptor *a)
{
	free(a);
}
