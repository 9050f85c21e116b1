/* SPDX-License-Identifier: MIT */
/*
 * dio.c - aggring/dio.h: asks the kernel what it knows of a
 * descriptor's direct I/O (statx, fstat, BLKSSZGET) and lets
 * dio_align.c decide; aligned buffers.
 */
#include "internal.h"
#include "dio_align.h"

#include <aggring/dio.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/*
 * Headers older than Linux 6.1 have neither the flag nor the fields;
 * the kernel's layout of struct statx is fixed, and glibc's struct has
 * its padding where the fields are.
 */
#ifdef STATX_DIOALIGN
_Static_assert(offsetof(struct statx, stx_dio_mem_align) == 0x98 &&
		       offsetof(struct statx, stx_dio_offset_align) == 0x9c,
	       "struct statx is laid out as linux/stat.h says");
#else
#define STATX_DIOALIGN 0x00002000U
#endif
#define STX_DIO_MEM_ALIGN_AT 0x98
#define STX_DIO_OFFSET_ALIGN_AT 0x9c

/* statx's answer about direct I/O, if the kernel gave one. */
static void ask_statx(int fd, struct agr__dio_facts *f)
{
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0 ||
	    !(stx.stx_mask & STATX_DIOALIGN))
		return; /* older than 6.1, or not this file system */
	f->dioalign = true;
	memcpy(&f->mem_align, (const char *)&stx + STX_DIO_MEM_ALIGN_AT,
	       sizeof(f->mem_align));
	memcpy(&f->offset_align, (const char *)&stx + STX_DIO_OFFSET_ALIGN_AT,
	       sizeof(f->offset_align));
}

/* The facts about `fd`; -EBADF or -EINVAL (logged) if it has none. */
static int gather_facts(int fd, struct agr__dio_facts *f)
{
	struct stat st;
	int size;
	dev_t dev;

	if (fstat(fd, &st) < 0) {
		int err = -errno;

		agr__log(AGR_LOG_ERROR, "agr_io_dio_alignment: fd %d: %s", fd,
			 err == -EBADF ? "not an open descriptor" :
					 "fstat failed");
		return err;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		agr__log(AGR_LOG_ERROR, "agr_io_dio_alignment: fd %d is neither "
			 "a regular file nor a block device", fd);
		return -EINVAL;
	}
	dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	f->major = major(dev);
	f->minor = minor(dev);
	if (S_ISBLK(st.st_mode) && ioctl(fd, BLKSSZGET, &size) == 0 &&
	    size > 0)
		f->blkssz = (uint32_t)size;
	ask_statx(fd, f);
	return 0;
}

static int dio_alignment(int fd, size_t *mem_align, size_t *offset_align)
{
	struct agr__dio_facts f = { .dioalign = false };
	int ret;

	if (fd < 0) {
		agr__log(AGR_LOG_ERROR, "agr_io_dio_alignment: fd %d is "
			 "negative", fd);
		return -EBADF;
	}
	if (!mem_align || !offset_align) {
		agr__log(AGR_LOG_ERROR, "agr_io_dio_alignment: %s is NULL",
			 mem_align ? "offset_align" : "mem_align");
		return -EINVAL;
	}
	ret = gather_facts(fd, &f);
	if (ret < 0)
		return ret;
	ret = agr__dio_alignment_of(&f, "/sys", mem_align, offset_align);
	if (ret == -EOPNOTSUPP) {
		agr__log(AGR_LOG_INFO, "fd %d: statx(STATX_DIOALIGN) says "
			 "this file does no direct I/O", fd);
		return ret;
	}
	agr__log(AGR_LOG_INFO, "fd %d (device %u:%u): O_DIRECT alignment "
		 "%zu for memory, %zu for offsets and lengths, from %s", fd,
		 f.major, f.minor, *mem_align, *offset_align,
		 agr__dio_source_name((enum agr__dio_source)ret));
	return 0;
}

AGR_API int agr_io_dio_alignment(int fd, size_t *mem_align,
				 size_t *offset_align)
{
	int ret = dio_alignment(fd, mem_align, offset_align);

	if (ret < 0) {
		if (mem_align)
			*mem_align = 0;
		if (offset_align)
			*offset_align = 0;
	}
	return ret;
}

AGR_API int agr_dio_alloc(size_t size, size_t align, void **out)
{
	size_t rounded;
	void *p;

	if (!out) {
		agr__log(AGR_LOG_ERROR, "agr_dio_alloc: out is NULL");
		return -EINVAL;
	}
	*out = NULL;
	if (align == 0)
		align = (size_t)sysconf(_SC_PAGESIZE);
	if (size == 0 || (align & (align - 1)) != 0) {
		agr__log(AGR_LOG_ERROR, "agr_dio_alloc: %s (size %zu, align "
			 "%zu)", size ? "align is not a power of two" :
					"size is 0", size, align);
		return -EINVAL;
	}
	if (size > SIZE_MAX - (align - 1))
		return -ENOMEM;
	rounded = (size + align - 1) & ~(align - 1);
	/* posix_memalign wants a multiple of sizeof(void *). */
	if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
			   rounded) != 0)
		return -ENOMEM;
	memset((char *)p + size, 0, rounded - size);
	*out = p;
	return 0;
}

AGR_API void agr_dio_free(void *p)
{
	free(p);
}
