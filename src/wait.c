/* SPDX-License-Identifier: MIT */
/*
 * wait.c - sleeping until a worker's ring has completions: in
 * io_uring_enter(), or on an eventfd when running under Valgrind.
 *
 * The eventfd wait is correct because the kernel signals a registered
 * eventfd for every completion posted and, with DEFER_TASKRUN, whenever
 * deferred task work is queued to an empty list; an eventfd is a
 * counter, so a signal between our last look and poll() is not lost.
 * The one case it cannot see is deferred task work left over when the
 * kernel ran only part of the list (it runs a bounded batch per enter)
 * and that part posted no completion: a long poll timeout covers it,
 * and is logged if it ever finds work, as that would be a missed
 * wake-up rather than an idle worker.
 */
#include "wait.h"

#include "settings.h"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define AGR__HAVE_VALGRIND 1
#endif
#endif

#define BACKSTOP_MS 1000

static bool use_eventfd;
static pthread_once_t mode_once = PTHREAD_ONCE_INIT;

static void choose_mode(void)
{
	enum agr__wait_setting mode = agr__setting_wait_mode();

	use_eventfd = mode == AGR__WAIT_SET_EVENTFD;
#ifdef AGR__HAVE_VALGRIND
	if (mode == AGR__WAIT_UNSET && RUNNING_ON_VALGRIND)
		use_eventfd = true;
#endif
	if (use_eventfd)
		agr__log(AGR_LOG_INFO, "workers wait on an eventfd, not in "
			 "io_uring_enter");
}

/* The calling worker's eventfd and the ring it is registered with. */
static _Thread_local int wait_fd = -1;
static _Thread_local struct io_uring *wait_ring;

static int eventfd_setup(struct io_uring *ring)
{
	int fd, ret;

	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	ret = io_uring_register_eventfd(ring, fd);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	wait_fd = fd;
	wait_ring = ring;
	return 0;
}

static int eventfd_wait(struct io_uring *ring)
{
	struct pollfd pfd;
	uint64_t count;
	bool signalled;
	int ret;

	if (wait_ring != ring) {
		agr__ring_wait_exit();
		ret = eventfd_setup(ring);
		if (ret < 0) {
			agr__log(AGR_LOG_ERROR, "cannot wait on an eventfd "
				 "(%s); waiting in io_uring_enter",
				 strerror(-ret));
			return io_uring_submit_and_wait(ring, 1);
		}
	}
	/* Submits, runs deferred task work, and shows what is ready. */
	ret = io_uring_submit_and_get_events(ring);
	if (ret < 0 || io_uring_cq_ready(ring))
		return ret;
	pfd.fd = wait_fd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (poll(&pfd, 1, BACKSTOP_MS) < 0 && errno != EINTR)
		return -errno;
	/* Resets the count; a stale count is only a spurious wake-up. */
	signalled = read(wait_fd, &count, sizeof(count)) == sizeof(count);
	ret = io_uring_get_events(ring);
	if (!signalled && io_uring_cq_ready(ring))
		agr__log(AGR_LOG_WARN, "eventfd wait: completions came "
			 "without a wake-up");
	return ret;
}

/* The calling worker's agr_wait_mode; AGR_WAIT_DEFAULT: the process's. */
static _Thread_local agr_wait_mode thread_mode;

void agr__ring_wait_set_mode(agr_wait_mode mode)
{
	thread_mode = mode;
}

static bool waits_on_eventfd(void)
{
	if (thread_mode != AGR_WAIT_DEFAULT)
		return thread_mode == AGR_WAIT_EVENTFD;
	pthread_once(&mode_once, choose_mode);
	return use_eventfd;
}

int agr__ring_wait(struct io_uring *ring)
{
	if (!waits_on_eventfd())
		return io_uring_submit_and_wait(ring, 1);
	return eventfd_wait(ring);
}

void agr__ring_wait_exit(void)
{
	if (wait_fd < 0)
		return;
	/* The ring keeps its own reference until it is closed. */
	close(wait_fd);
	wait_fd = -1;
	wait_ring = NULL;
}
