/* SPDX-License-Identifier: MIT */
/*
 * aggring/placement.h - where to run workers that wait on a disk.
 *
 * A durable write comes back through the disk's interrupt. A worker on
 * the CPU that takes it is woken where the completion lands; a worker
 * on another CPU waits for a cross-CPU wake-up on every write. Disks
 * with one interrupt per CPU (most NVMe drives, multi-queue virtio)
 * complete on the submitting CPU and need no placement; disks with one
 * request interrupt (single-queue virtio, AHCI) deliver every
 * completion to the CPU that interrupt is routed to. Find it here, then
 * list it first in AGR_WORKER_CPUS (see README) before the first
 * scheduler starts.
 */
#ifndef AGGRING_PLACEMENT_H
#define AGGRING_PLACEMENT_H

#include <stddef.h>

#include <aggring/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The CPUs that take the interrupts of the disk that holds `path` (a
 * file or directory, or a block device node): the current routing
 * (effective affinity) of the disk controller's interrupt lines,
 * leaving out lines that took under 1/64 of the busiest one's
 * interrupts (configuration and admin vectors). For a device mapper or
 * md device, those of the disks under it. Writes the first `cap` of
 * them, ascending, to `cpus` and returns how many there are, which may
 * exceed `cap`.
 *
 * Errors: -EINVAL (NULL path, or NULL cpus with a cap), -ENODEV (the
 * path is not on a block device whose interrupts can be told from
 * /sys and /proc: tmpfs, loop, zram, a network file system, or /sys
 * not mounted), -ENOMEM, or the negative errno of stat(path).
 */
AGR_API int agr_disk_irq_cpus(const char *path, int *cpus, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_PLACEMENT_H */
