/* SPDX-License-Identifier: MIT */
/*
 * dio_align.c - the O_DIRECT alignment of a file from statx's answer,
 * else from its device's logical block size, else a default (the
 * steps of aggring/dio.h). /sys/dev/block/MAJ:MIN links to the device's
 * node; a whole disk (or dm, md, loop device) has queue/ there, a
 * partition has a `partition` file instead and its disk one level up.
 */
#include "internal.h"
#include "dio_align.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The logical block sizes believed: 512 bytes to 1 MiB. */
#define BLOCK_MIN 512u
#define BLOCK_MAX (1u << 20)

static bool is_power_of_two(uint32_t n)
{
	return n && (n & (n - 1)) == 0;
}

static bool is_block_size(uint32_t n)
{
	return is_power_of_two(n) && n >= BLOCK_MIN && n <= BLOCK_MAX;
}

/* The number in a small sysfs file, or 0 if it holds none. */
static uint32_t read_number(const char *path)
{
	char text[32], *end;
	unsigned long n;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (got <= 0)
		return 0;
	text[got] = '\0';
	errno = 0;
	n = strtoul(text, &end, 10);
	if (errno || end == text || (*end && *end != '\n') || n > UINT32_MAX)
		return 0;
	return (uint32_t)n;
}

/* SYS/dev/block/MAJ:MIN/`rel`, or false if the path does not fit. */
static bool device_path(char *path, const char *sys,
			const struct agr__dio_facts *f, const char *rel)
{
	int n = snprintf(path, PATH_MAX, "%s/dev/block/%u:%u/%s", sys,
			 f->major, f->minor, rel);

	return n > 0 && n < PATH_MAX;
}

/* The device's logical block size from SYS, or 0 if unknown. */
static uint32_t sysfs_block_size(const char *sys,
				 const struct agr__dio_facts *f)
{
	char path[PATH_MAX];

	if (f->major == 0) /* tmpfs, btrfs, overlayfs, NFS...: no disk */
		return 0;
	if (!device_path(path, sys, f, "queue/logical_block_size"))
		return 0;
	if (access(path, F_OK) == 0)
		return read_number(path);
	if (!device_path(path, sys, f, "partition") || access(path, F_OK))
		return 0;
	/* ".." of the link's target: the disk that holds the partition. */
	if (!device_path(path, sys, f, "../queue/logical_block_size"))
		return 0;
	return read_number(path);
}

static int answer(size_t *mem_align, size_t *offset_align, uint32_t mem,
		  uint32_t offset, int source)
{
	*mem_align = mem;
	*offset_align = offset;
	return source;
}

int agr__dio_alignment_of(const struct agr__dio_facts *f, const char *sys,
			  size_t *mem_align, size_t *offset_align)
{
	uint32_t size;

	if (f->dioalign && !f->mem_align && !f->offset_align)
		return answer(mem_align, offset_align, 0, 0, -EOPNOTSUPP);
	/* Half an answer or not a power of two: not trusted. */
	if (f->dioalign && is_power_of_two(f->mem_align) &&
	    is_power_of_two(f->offset_align))
		return answer(mem_align, offset_align, f->mem_align,
			      f->offset_align, AGR__DIO_STATX);
	size = is_block_size(f->blkssz) ? f->blkssz : sysfs_block_size(sys, f);
	if (is_block_size(size))
		return answer(mem_align, offset_align, size, size,
			      AGR__DIO_BLOCK_SIZE);
	return answer(mem_align, offset_align, AGR__DIO_DEFAULT_ALIGN,
		      AGR__DIO_DEFAULT_ALIGN, AGR__DIO_DEFAULT);
}

const char *agr__dio_source_name(enum agr__dio_source source)
{
	switch (source) {
	case AGR__DIO_STATX:
		return "statx(STATX_DIOALIGN)";
	case AGR__DIO_BLOCK_SIZE:
		return "the device's logical block size";
	case AGR__DIO_DEFAULT:
		break;
	}
	return "a default: neither statx nor the device told";
}
