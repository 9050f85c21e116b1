/* SPDX-License-Identifier: MIT */
/*
 * aggring/dio.h - what O_DIRECT needs: the alignment of a file's direct
 * I/O, and buffers that meet it.
 *
 * A read or write on a descriptor opened with O_DIRECT bypasses the page
 * cache only if its buffer address, its file offset and its length are
 * multiples of what the file system and the device require; otherwise
 * the kernel refuses it with -EINVAL (some file systems quietly go
 * through the page cache instead). Ask once per file, after the open,
 * then allocate buffers with agr_dio_alloc() and keep offsets and
 * lengths multiples of the offset alignment. The same buffers serve
 * agr_io_read()/agr_io_write() on a worker's ring and plain pread(2)/
 * pwrite(2).
 *
 * None of these calls touches a ring: call them from any thread.
 */
#ifndef AGGRING_DIO_H
#define AGGRING_DIO_H

#include <stddef.h>

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The alignment direct I/O on `fd` needs: `*mem_align` for buffer
 * addresses, `*offset_align` for file offsets and lengths. Both are
 * powers of two. Works on any descriptor of a regular file or a block
 * device, whether or not it was opened with O_DIRECT.
 *
 * Where the answer comes from, in order:
 * 1. statx(2) with STATX_DIOALIGN (Linux 6.1+, on the file systems that
 *    report it: ext4, xfs, f2fs, block devices, ...): the kernel's own
 *    stx_dio_mem_align and stx_dio_offset_align for this very file.
 *    This is the only source that knows a smaller memory alignment (an
 *    NVMe drive takes 4-byte aligned buffers).
 * 2. Older kernels and file systems that do not report it: the logical
 *    block size of the device, for both: BLKSSZGET on a block device,
 *    or for a regular file /sys/dev/block/MAJ:MIN/queue/
 *    logical_block_size of the device that holds it (st_dev; for a
 *    partition, its disk's). Before Linux 6.0 the kernel itself
 *    required this of memory, offset and length alike.
 * 3. Neither known (a file system with no block device of its own:
 *    tmpfs, btrfs, overlayfs, NFS, FUSE; or no /sys): 4096 for both,
 *    the logical block size of nearly every disk and more than most
 *    need. A guess: a device with larger logical blocks refuses it.
 * Which one answered is logged at AGR_LOG_INFO (agr_set_log_hook()),
 * with the two values. The answer is for this file, not its file
 * system: files of one file system may differ (an encrypted ext4 file,
 * an xfs realtime file), so ask for each file.
 *
 * Errors (both outputs are 0 after any of them, when not NULL):
 * -EBADF (`fd` is negative or not open), -EINVAL (`mem_align` or
 * `offset_align` NULL, or `fd` is neither a regular file nor a block
 * device: a pipe, a socket, a directory), -EOPNOTSUPP (statx reports
 * STATX_DIOALIGN with both alignments 0, the kernel's way of saying
 * that this file does no direct I/O: open it without O_DIRECT). Bad
 * arguments are logged, naming which.
 */
AGR_API int agr_io_dio_alignment(int fd, size_t *mem_align,
				 size_t *offset_align);

/*
 * A buffer for direct I/O: `align`-aligned (0: the page size, which
 * meets any memory alignment agr_io_dio_alignment() reports on common
 * hardware), `size` rounded up to a multiple of `align`. The rounding's
 * bytes are zeroed, so a whole-block write of a short record sends no
 * stale heap bytes to the disk; the first `size` bytes are not
 * initialised. Free it with agr_dio_free(). Sets `*out` to the buffer,
 * or to NULL on error.
 *
 * Errors: -EINVAL (`out` NULL, `size` 0, or `align` not a power of
 * two; logged), -ENOMEM (no memory, or `size` rounded up overflows).
 */
AGR_API int agr_dio_alloc(size_t size, size_t align, void **out);

/* Frees a buffer from agr_dio_alloc(); NULL is a no-op. */
AGR_API void agr_dio_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_DIO_H */
