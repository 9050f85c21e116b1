/* SPDX-License-Identifier: MIT */
/*
 * consumer.c - a program outside the tree, as a user writes one:
 * tests/consumer.sh builds it against an installed aggring with nothing
 * but `pkg-config --cflags --libs aggring` (and with --static). On a
 * worker it takes the ring from agr_worker_ring() and calls liburing on
 * it, an inline function (io_uring_sq_space_left) and one that lives in
 * liburing.so (io_uring_get_probe_ring): the link needs liburing, which
 * aggring.pc must bring along since the public headers expose its ring.
 *
 * Exit 0 pass, 1 fail, 77 skip (no io_uring here).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <aggring.h>
#include <liburing.h>

struct ring_facts {
	pthread_mutex_t lock;
	int seen;
	unsigned sq_space;
	int msg_ring;
};

static void look_at_ring(void *arg)
{
	struct ring_facts *facts = arg;
	struct io_uring *ring = agr_worker_ring(agr_worker_current());
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);

	pthread_mutex_lock(&facts->lock);
	facts->seen = 1;
	facts->sq_space = io_uring_sq_space_left(ring);
	facts->msg_ring = probe &&
		io_uring_opcode_supported(probe, IORING_OP_MSG_RING);
	pthread_mutex_unlock(&facts->lock);
	io_uring_free_probe(probe);
}

static int run_on_worker(agr_supplier *sup, struct ring_facts *facts)
{
	agr_named_aggregate named = { "consumer", "ring" };
	agr_scheduler *sched;
	int err;

	err = agr_supplier_get_or_init(sup, &named, &sched);
	if (err == -ENOSYS || err == -EPERM) {
		printf("SKIP: no io_uring here (%s)\n", agr_strerror(err));
		return 77;
	}
	if (err == 0)
		err = agr_scheduler_schedule(sched, 0, look_at_ring, facts);
	if (err == 0)
		/* A graceful stop runs the task first. */
		err = agr_supplier_stop_gracefully(sup, 10ULL * 1000000000);
	if (err) {
		fprintf(stderr, "consumer: %s\n", agr_strerror(err));
		return 1;
	}
	return 0;
}

int main(void)
{
	struct ring_facts facts = { .lock = PTHREAD_MUTEX_INITIALIZER };
	agr_supplier *sup;
	int rc;

	rc = agr_supplier_new("consumer", 1, &sup);
	if (rc) {
		fprintf(stderr, "agr_supplier_new: %s\n", agr_strerror(rc));
		return 1;
	}
	rc = run_on_worker(sup, &facts);
	agr_supplier_free(sup);
	if (rc)
		return rc;
	pthread_mutex_lock(&facts.lock);
	if (!facts.seen || facts.sq_space == 0) {
		fprintf(stderr, "consumer: the task did not see its ring\n");
		rc = 1;
	} else {
		printf("consumer: worker ring with %u free SQEs, MSG_RING %s\n",
		       facts.sq_space,
		       facts.msg_ring ? "supported" : "not probed");
	}
	pthread_mutex_unlock(&facts.lock);
	return rc;
}
