/* SPDX-License-Identifier: MIT */
/*
 * aggring/ring.h - how a worker's io_uring ring is set up: the flags of
 * agr_supplier_options.ring_flags. Apart from aggring/worker.h, which
 * includes it, so that the code that sets rings up needs nothing above
 * it.
 */
#ifndef AGGRING_RING_H
#define AGGRING_RING_H

/* Ring setup flags (agr_supplier_options.ring_flags). */
#define AGR_RING_SQPOLL 0x1u	    /* a kernel thread polls the SQ
				     * (IORING_SETUP_SQPOLL, Linux 5.11+
				     * unprivileged) */
#define AGR_RING_COOP_TASKRUN 0x2u  /* COOP_TASKRUN instead of the default
				     * SINGLE_ISSUER|DEFER_TASKRUN */
#define AGR_RING_NO_FALLBACK 0x4u   /* fail with the kernel's error rather
				     * than retry with fewer flags */
#define AGR_RING_FLAGS_ALL 0x7u
/*
 * There is no IOPOLL flag, on purpose. A ring set up with
 * IORING_SETUP_IOPOLL gets no completion interrupts: its CQEs appear
 * only while someone polls the driver, so a worker would have to spin
 * whenever polled I/O is in flight and could no longer sleep in the
 * kernel on its ring, where its doorbells and socket completions
 * arrive; and such a ring takes only O_DIRECT reads and writes on a
 * block device with poll queues (NVMe with poll_queues set,
 * /sys/block/DEV/queue/io_poll = 1), refusing sockets, timers, fsync
 * and MSG_RING. A service that has such a device can create its own
 * IOPOLL ring in a worker_init hook and reap it from a task that it
 * reschedules while its I/O is in flight.
 */

#endif /* AGGRING_RING_H */
