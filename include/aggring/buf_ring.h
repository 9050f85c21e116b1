/* SPDX-License-Identifier: MIT */
/*
 * aggring/buf_ring.h - provided buffer rings (Linux 5.19) on a worker's
 * ring, for agr_io_recv_multishot(): the kernel picks a free buffer for
 * each receive and says which in the CQE; the handler reads it and
 * gives it back with agr_buf_ring_recycle().
 *
 * Threads: every call is made on the worker that owns the buffer ring
 * (in a worker init hook, a task or a handler), except agr_buf_ring_bid(),
 * which is pure.
 */
#ifndef AGGRING_BUF_RING_H
#define AGGRING_BUF_RING_H

#include <stddef.h>

#include <aggring/common.h>
#include <aggring/worker.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct agr_buf_ring agr_buf_ring;

/*
 * Registers a ring of `nbufs` buffers (a power of two up to 32768) of
 * `buf_size` bytes each as buffer group `bgid` of worker `w`'s ring,
 * with every buffer free. Returns 0, -EINVAL (not on `w`, a bad count
 * or size; logged), -ENOMEM, -EEXIST (`bgid` is taken on this ring), or
 * the kernel's error (-EINVAL before Linux 5.19).
 */
AGR_API int agr_buf_ring_new(agr_worker *w, unsigned short bgid,
			     unsigned nbufs, size_t buf_size,
			     agr_buf_ring **out);

/*
 * The buffer id in a CQE's flags (the kernel's IORING_CQE_F_BUFFER and
 * IORING_CQE_BUFFER_SHIFT), or -ENOENT when the CQE used no buffer.
 */
AGR_API int agr_buf_ring_bid(unsigned cqe_flags);

/* Buffer `bid`'s memory; NULL if `bid` is out of range. */
AGR_API void *agr_buf_ring_buf(agr_buf_ring *br, unsigned bid);

/* Bytes per buffer. */
AGR_API size_t agr_buf_ring_buf_size(const agr_buf_ring *br);

/*
 * Gives buffer `bid` back to the kernel; read it first. Returns 0 or
 * -EINVAL (out of range, or not on the owning worker).
 */
AGR_API int agr_buf_ring_recycle(agr_buf_ring *br, unsigned bid);

/* The buffer group id, and the worker the ring belongs to. */
AGR_API unsigned short agr_buf_ring_group(const agr_buf_ring *br);
AGR_API agr_worker *agr_buf_ring_worker(const agr_buf_ring *br);

/*
 * Unregisters the group and frees the buffers. No receive may still be
 * armed on it (end it first: agr_io_cancel_op(), then wait for its last
 * CQE). On the owning worker, or in its exit hook. NULL is a no-op.
 */
AGR_API void agr_buf_ring_free(agr_buf_ring *br);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_BUF_RING_H */
