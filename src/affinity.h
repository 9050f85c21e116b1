/* SPDX-License-Identifier: MIT */
/*
 * affinity.h - pinning workers to CPUs (internal).
 *
 * agr_supplier_options.worker_cpus, or else AGR_WORKER_CPUS, lists CPUs ("1", "0,2", "0-3,6"): worker i of every
 * scheduler runs on the i-th of them, modulo their number, and so do the
 * kernel's io-wq threads of its ring. Unset or empty: nothing is pinned.
 * Where a storage service's disk raises its interrupts on one CPU, a
 * worker placed there gets its completions without a cross-CPU wake-up.
 */
#ifndef AGR_AFFINITY_H
#define AGR_AFFINITY_H

#include "internal.h"

#include <liburing.h>
#include <sched.h>

/*
 * Pins the calling thread, worker `index`, to cpus[index % ncpus] when
 * a list is given, else as AGR_WORKER_CPUS says (read now). Returns the
 * CPU; -ENOENT when nothing was asked; -EINVAL when the variable is not
 * a CPU list, or the error of pthread_setaffinity_np() when the CPU was
 * refused (both logged as errors, with `who`).
 */
int agr__pin_worker(const char *who, unsigned index, const int *cpus,
		    int ncpus);

/* Runs the io-wq threads of `ring` on `cpu` too; best effort. */
void agr__pin_io_workers(struct io_uring *ring, const char *who, int cpu);

#endif /* AGR_AFFINITY_H */
