/* SPDX-License-Identifier: MIT */
/*
 * placement.h - CPU lists and the CPUs of a disk's interrupts
 * (internal). Pure functions of the text in the files they read: no
 * logging, no state, so that tests can run them on a made-up /sys and
 * /proc.
 */
#ifndef AGR_PLACEMENT_H
#define AGR_PLACEMENT_H

#include <stddef.h>

/*
 * Parses a CPU list as Linux writes one ("3", "0,2-5"; one trailing
 * newline allowed) into `cpus`, in order, ranges expanded. Returns their
 * number, or -EINVAL if `s` is not such a list, names a CPU at or beyond
 * CPU_SETSIZE, or holds more than `max`.
 */
int agr__parse_cpu_list(const char *s, int *cpus, int max);

/*
 * agr_disk_irq_cpus() for block device `major`:`minor`, reading
 * `sys`/dev/block, `sys`/devices, `sys`/kernel/irq and `proc`/irq.
 */
int agr__disk_irq_cpus_at(const char *sys, const char *proc,
			  unsigned major, unsigned minor, int *cpus,
			  size_t cap);

#endif /* AGR_PLACEMENT_H */
