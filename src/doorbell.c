/* SPDX-License-Identifier: MIT */
/*
 * doorbell.c - doorbells sent from threads that own no worker ring:
 * through the kernel's ring-less send (Linux 6.13) where it has one,
 * else through a small sender ring of the thread's own, retried until
 * the kernel takes them. doorbell.h has the bell itself and the
 * doorbell a worker sends from its own ring.
 */
#include "doorbell.h"

#include "ring.h"
#include "settings.h"
#include "util.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef IORING_REGISTER_SEND_MSG_RING
#define IORING_REGISTER_SEND_MSG_RING 31 /* Linux 6.13 */
#endif

#ifndef IORING_MSG_DATA
#define IORING_MSG_DATA 0
#endif

enum { SYNC_MSG_UNKNOWN = 0, SYNC_MSG_YES = 1, SYNC_MSG_NO = 2 };
static atomic_int sync_msg_state = SYNC_MSG_UNKNOWN;

struct sender_ring {
	struct io_uring ring;
	struct sender_ring *next_idle;
};

/*
 * Sender rings of exited threads wait here for the next thread instead
 * of being unmapped: threads come and go more often than rings need to,
 * and liburing unmaps with raw system calls that ThreadSanitizer cannot
 * see, so a reused address would look like a race.
 */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sender_ring *idle_senders;

static pthread_key_t sender_key;
static pthread_once_t sender_key_once = PTHREAD_ONCE_INIT;
static _Thread_local struct sender_ring *thread_sender;

static void sender_ring_release(void *p)
{
	struct sender_ring *s = p;

	pthread_mutex_lock(&idle_lock);
	s->next_idle = idle_senders;
	idle_senders = s;
	pthread_mutex_unlock(&idle_lock);
}

static struct sender_ring *sender_ring_reuse(void)
{
	struct sender_ring *s;

	pthread_mutex_lock(&idle_lock);
	s = idle_senders;
	if (s)
		idle_senders = s->next_idle;
	pthread_mutex_unlock(&idle_lock);
	return s;
}

static void sender_key_create(void)
{
	if (pthread_key_create(&sender_key, sender_ring_release) != 0)
		abort(); /* only when the process is out of TLS keys */
	if (agr__setting_no_sync_msg())
		atomic_store(&sync_msg_state, SYNC_MSG_NO);
}

static void prep_doorbell(struct io_uring_sqe *sqe, int target_fd,
			  uint64_t ud)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_MSG_RING;
	sqe->fd = target_fd;
	sqe->addr = IORING_MSG_DATA;
	sqe->off = ud; /* the user_data of the target's CQE */
}

/* 1 = sent (result in *res), 0 = the kernel has no ring-less send. */
static int try_sync_msg(int target_fd, uint64_t ud, int *res)
{
	struct io_uring_sqe sqe;
	long ret;

	if (atomic_load_explicit(&sync_msg_state, memory_order_relaxed) ==
	    SYNC_MSG_NO)
		return 0;
	prep_doorbell(&sqe, target_fd, ud);
	ret = syscall(__NR_io_uring_register, -1,
		      IORING_REGISTER_SEND_MSG_RING, &sqe, 1);
	if (ret < 0 && (errno == EBADF || errno == EINVAL) &&
	    atomic_load(&sync_msg_state) == SYNC_MSG_UNKNOWN) {
		/* Before 6.13 a ring-less register call is EBADF. */
		atomic_store(&sync_msg_state, SYNC_MSG_NO);
		return 0;
	}
	atomic_store_explicit(&sync_msg_state, SYNC_MSG_YES,
			      memory_order_relaxed);
	*res = ret < 0 ? -errno : 0;
	return 1;
}

static struct sender_ring *sender_ring_new(int *err)
{
	struct sender_ring *s = calloc(1, sizeof(*s));
	int ret;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	/* No SINGLE_ISSUER: the ring may serve another thread later. */
	ret = io_uring_queue_init(8, &s->ring, 0);
	if (ret < 0) {
		agr__ring_explain(ret, "sender ring");
		free(s);
		*err = ret;
		return NULL;
	}
	return s;
}

static struct sender_ring *sender_ring_get(int *err)
{
	struct sender_ring *s = thread_sender;

	if (s)
		return s;
	s = sender_ring_reuse();
	if (!s)
		s = sender_ring_new(err);
	if (!s)
		return NULL;
	if (pthread_setspecific(sender_key, s) != 0) {
		sender_ring_release(s);
		*err = -ENOMEM;
		return NULL;
	}
	thread_sender = s;
	return s;
}

/* Sends through the thread-local ring and waits for the send's own CQE. */
static int ring_msg(int target_fd, uint64_t ud)
{
	struct io_uring_cqe *cqe;
	struct io_uring_sqe *sqe;
	struct sender_ring *s;
	int err = 0, ret;

	s = sender_ring_get(&err);
	if (!s)
		return err;
	sqe = io_uring_get_sqe(&s->ring);
	io_uring_prep_msg_ring(sqe, target_fd, 0, ud, 0);
	/*
	 * Waiting for our own CQE means the target's completion has been
	 * posted (or queued to its owner) before we return, even when the
	 * kernel punted the send to a worker thread.
	 */
	ret = io_uring_submit_and_wait(&s->ring, 1);
	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe(&s->ring, &cqe);
	if (ret < 0)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(&s->ring, cqe);
	return ret < 0 ? ret : 0;
}

/*
 * A failed doorbell is a lost wake-up: the worker may sleep with work
 * queued, and its groups would wait for good. So a full target CQ, a
 * transient allocation failure, a busy kernel, and a ring that is not
 * enabled yet are retried until the kernel takes the doorbell; errors
 * that say the target is gone are not.
 */
#define DOORBELL_REPORT_NS (2ull * 1000000000u)
#define DOORBELL_REPORT_MAX_NS (64ull * 1000000000u)

static bool doorbell_retryable(int err)
{
	return err == -EOVERFLOW || err == -ENOMEM || err == -EAGAIN ||
	       err == -EBUSY || err == -EBADFD || err == -EINTR;
}

/* Yields first, then sleeps 1 us, 2 us, ... up to about 1 ms. */
static void doorbell_backoff(unsigned attempt)
{
	struct timespec ts = { 0, 0 };

	if (attempt < 16) {
		sched_yield();
		return;
	}
	ts.tv_nsec = 1000L << (attempt - 16 < 10 ? attempt - 16 : 10);
	nanosleep(&ts, NULL);
}

static int send_once(int target_fd, uint64_t ud)
{
	int res = 0;

	if (!agr__fault(AGR_FAULT_DOORBELL, &res) &&
	    !try_sync_msg(target_fd, ud, &res))
		res = ring_msg(target_fd, ud);
	return res;
}

int agr__doorbell_from_thread(int target_fd, uint64_t ud)
{
	uint64_t start = 0, report = 0, every = DOORBELL_REPORT_NS;
	unsigned attempt;
	int res, first = 0;

	pthread_once(&sender_key_once, sender_key_create);
	for (attempt = 1;; attempt++) {
		res = send_once(target_fd, ud);
		if (res == 0 || !doorbell_retryable(res))
			break;
		if (!first) {
			first = res;
			start = agr__now_ns();
			report = start + every;
			agr__log(AGR_LOG_WARN,
				 "doorbell to ring fd %d failed: %s; retrying",
				 target_fd, strerror(-res));
		} else if (agr__now_ns() >= report) {
			agr__log(AGR_LOG_ERROR,
				 "doorbell to ring fd %d still failing after "
				 "%u attempts in %llu ms: %s; its worker cannot "
				 "run new work until it is heard",
				 target_fd, attempt,
				 (unsigned long long)((agr__now_ns() - start) /
						      1000000u),
				 strerror(-res));
			every = every * 2 < DOORBELL_REPORT_MAX_NS ?
					every * 2 : DOORBELL_REPORT_MAX_NS;
			report = agr__now_ns() + every;
		}
		doorbell_backoff(attempt);
	}
	if (res < 0)
		agr__log(AGR_LOG_ERROR, "doorbell to ring fd %d failed: %s",
			 target_fd, strerror(-res));
	else if (first)
		agr__log(AGR_LOG_INFO,
			 "doorbell to ring fd %d delivered after %u attempts "
			 "(first error: %s)", target_fd, attempt,
			 strerror(-first));
	return res;
}
