/* SPDX-License-Identifier: MIT */
/*
 * ledger_cpus.h - where ledger_server's workers run (--worker-cpus),
 * told to the library through AGR_WORKER_CPUS before the first worker
 * starts.
 *
 * auto: with fewer workers than CPUs, first on the CPUs that take the
 * journal disk's interrupts (agr_disk_irq_cpus()), where a durable
 * write comes back without a cross-CPU wake-up; unpinned if that cannot
 * be told, and when there is a worker per CPU (pinning measured no
 * faster then: bench/RESULTS.md, network). An AGR_WORKER_CPUS already
 * set wins over auto. none: unpinned. A CPU list ("1", "0,2-3"): worker
 * i on the i-th CPU of it. The choice is printed on stdout.
 */
#ifndef LEDGER_CPUS_H
#define LEDGER_CPUS_H

#include <stdbool.h>

/*
 * ledger_server's default worker count: half the CPUs it may run on, at
 * least one. Each worker writes a journal of its own, and where every
 * durable write flushes the device, fewer journals make bigger batches;
 * the other CPUs take the network's and the disk's interrupts and the
 * clients. On the benchmark machine (2 CPUs) one worker served 1.3x
 * (P1) to 1.4x (P16) the durable INCRBYs/s of two (bench/RESULTS.md).
 */
unsigned default_workers(void);

/* Whether s is "auto", "none" or looks like a CPU list. */
bool worker_cpus_valid(const char *s);

/*
 * Sets AGR_WORKER_CPUS for `nworkers` workers journaling in `dir`, as
 * `mode` says. Before any thread but main runs: setenv is not safe
 * later.
 */
void place_workers(const char *mode, const char *dir, unsigned nworkers);

#endif /* LEDGER_CPUS_H */
