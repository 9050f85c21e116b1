/* SPDX-License-Identifier: MIT */
/*
 * dio_align.h - the O_DIRECT alignment of a file from what the kernel said
 * about it (internal). A pure function of those answers and of the text
 * under a /sys root: no logging, no system call on the file, so that
 * tests can run it on made-up answers and a made-up /sys.
 */
#ifndef AGR_DIO_ALIGN_H
#define AGR_DIO_ALIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* When nothing better is known (aggring/dio.h, step 3). */
#define AGR__DIO_DEFAULT_ALIGN 4096u

/* Which of the steps of aggring/dio.h answered. */
enum agr__dio_source {
	AGR__DIO_STATX,		/* statx(STATX_DIOALIGN) */
	AGR__DIO_BLOCK_SIZE,	/* the device's logical block size */
	AGR__DIO_DEFAULT,	/* neither: AGR__DIO_DEFAULT_ALIGN */
};

/* What agr_io_dio_alignment() learnt about a descriptor. */
struct agr__dio_facts {
	bool dioalign;		 /* statx's mask had STATX_DIOALIGN */
	uint32_t mem_align;	 /* ... and its two fields */
	uint32_t offset_align;
	uint32_t blkssz;	 /* BLKSSZGET of a block device; 0: none */
	unsigned major, minor;	 /* st_rdev of a block device, else st_dev */
};

/*
 * The alignments for `f`, looking up the device's logical block size
 * under `sys` ("/sys") when statx did not answer. Returns the source, or
 * -EOPNOTSUPP (both set to 0) when statx says the file does no direct
 * I/O.
 */
int agr__dio_alignment_of(const struct agr__dio_facts *f, const char *sys,
			  size_t *mem_align, size_t *offset_align);

/* The name of a source, for the log line. */
const char *agr__dio_source_name(enum agr__dio_source source);

#endif /* AGR_DIO_ALIGN_H */
