/* SPDX-License-Identifier: MIT */
/*
 * buf_ring.c - provided buffer rings on a worker's ring, one block of
 * memory for all the buffers. The ring itself is mapped and registered
 * here (io_uring_register_buf_ring): io_uring_setup_buf_ring() is only
 * in liburing 2.4 and later, and Debian 12 ships 2.3.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring/buf_ring.h>

#define MAX_BUFS 32768u

struct agr_buf_ring {
	struct io_uring_buf_ring *ring;
	size_t ring_bytes;
	agr_worker *w;
	unsigned char *mem;
	size_t buf_size;
	unsigned nbufs, mask;
	unsigned short bgid;
};

static bool on_owner(const agr_worker *w, const char *call)
{
	if (w && w == agr_worker_current())
		return true;
	agr__log(AGR_LOG_ERROR, "%s: not called on the buffer ring's worker",
		 call);
	return false;
}

static int check_shape(unsigned nbufs, size_t buf_size)
{
	if (!nbufs || (nbufs & (nbufs - 1)) || nbufs > MAX_BUFS) {
		agr__log(AGR_LOG_ERROR, "agr_buf_ring_new: nbufs=%u is not a "
			 "power of two in 1..32768", nbufs);
		return -EINVAL;
	}
	if (!buf_size || buf_size > UINT32_MAX ||
	    buf_size > SIZE_MAX / nbufs) {
		agr__log(AGR_LOG_ERROR, "agr_buf_ring_new: buf_size=%zu is 0 "
			 "or too large", buf_size);
		return -EINVAL;
	}
	return 0;
}

/* Maps the ring's entries and registers them as group `bgid`. */
static int map_ring(agr_worker *w, struct agr_buf_ring *br, unsigned nbufs,
		    unsigned short bgid)
{
	struct io_uring_buf_reg reg;
	void *p;
	int ret;

	br->ring_bytes = nbufs * sizeof(struct io_uring_buf);
	p = mmap(NULL, br->ring_bytes, PROT_READ | PROT_WRITE,
		 MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)p;
	reg.ring_entries = nbufs;
	reg.bgid = bgid;
	ret = io_uring_register_buf_ring(agr_worker_ring(w), &reg, 0);
	if (ret) {
		munmap(p, br->ring_bytes);
		return ret;
	}
	br->ring = p;
	io_uring_buf_ring_init(br->ring);
	return 0;
}

AGR_API int agr_buf_ring_new(agr_worker *w, unsigned short bgid,
			     unsigned nbufs, size_t buf_size,
			     agr_buf_ring **out)
{
	struct agr_buf_ring *br;
	unsigned i;
	int ret;

	if (!on_owner(w, "agr_buf_ring_new") || !out)
		return -EINVAL;
	if ((ret = check_shape(nbufs, buf_size)))
		return ret;
	br = calloc(1, sizeof(*br));
	if (!br)
		return -ENOMEM;
	if (posix_memalign((void **)&br->mem, (size_t)sysconf(_SC_PAGESIZE),
			   nbufs * buf_size)) {
		free(br);
		return -ENOMEM;
	}
	/*
	 * The kernel fills these buffers behind every checker's back:
	 * zeroed once, Valgrind takes what the handler reads as defined.
	 */
	memset(br->mem, 0, nbufs * buf_size);
	ret = map_ring(w, br, nbufs, bgid);
	if (ret) {
		agr__log(AGR_LOG_ERROR, "agr_buf_ring_new: group %u: %s",
			 bgid, strerror(-ret));
		free(br->mem);
		free(br);
		return ret;
	}
	br->w = w;
	br->bgid = bgid;
	br->nbufs = nbufs;
	br->mask = (unsigned)io_uring_buf_ring_mask(nbufs);
	br->buf_size = buf_size;
	for (i = 0; i < nbufs; i++)
		io_uring_buf_ring_add(br->ring, br->mem + i * buf_size,
				      (unsigned)buf_size, (unsigned short)i,
				      (int)br->mask, (int)i);
	io_uring_buf_ring_advance(br->ring, (int)nbufs);
	*out = br;
	return 0;
}

AGR_API int agr_buf_ring_bid(unsigned cqe_flags)
{
	if (!(cqe_flags & IORING_CQE_F_BUFFER))
		return -ENOENT;
	return (int)(cqe_flags >> IORING_CQE_BUFFER_SHIFT);
}

AGR_API void *agr_buf_ring_buf(agr_buf_ring *br, unsigned bid)
{
	if (!br || bid >= br->nbufs)
		return NULL;
	return br->mem + (size_t)bid * br->buf_size;
}

AGR_API size_t agr_buf_ring_buf_size(const agr_buf_ring *br)
{
	return br ? br->buf_size : 0;
}

AGR_API int agr_buf_ring_recycle(agr_buf_ring *br, unsigned bid)
{
	if (!br || bid >= br->nbufs) {
		agr__log(AGR_LOG_ERROR, "agr_buf_ring_recycle: %s",
			 !br ? "br is NULL" : "bid is out of range");
		return -EINVAL;
	}
	if (!on_owner(br->w, "agr_buf_ring_recycle"))
		return -EINVAL;
	io_uring_buf_ring_add(br->ring, agr_buf_ring_buf(br, bid),
			      (unsigned)br->buf_size, (unsigned short)bid,
			      (int)br->mask, 0);
	io_uring_buf_ring_advance(br->ring, 1);
	return 0;
}

AGR_API unsigned short agr_buf_ring_group(const agr_buf_ring *br)
{
	return br ? br->bgid : 0;
}

AGR_API agr_worker *agr_buf_ring_worker(const agr_buf_ring *br)
{
	return br ? br->w : NULL;
}

AGR_API void agr_buf_ring_free(agr_buf_ring *br)
{
	if (!br)
		return;
	if (!on_owner(br->w, "agr_buf_ring_free")) {
		/* Still registered: its memory must outlive the ring. */
		agr__log(AGR_LOG_ERROR, "agr_buf_ring_free: group %u is left "
			 "registered and its memory leaked", br->bgid);
		return;
	}
	io_uring_unregister_buf_ring(agr_worker_ring(br->w), br->bgid);
	munmap(br->ring, br->ring_bytes);
	free(br->mem);
	free(br);
}
