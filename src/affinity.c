/* SPDX-License-Identifier: MIT */
/*
 * affinity.c - pinning workers to CPUs, as AGR_WORKER_CPUS says.
 */
#include "affinity.h"
#include "settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int pin_to(const char *who, int cpu, const char *from)
{
	cpu_set_t set;
	int err;

	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		agr__log(AGR_LOG_ERROR, "%s: cannot run on CPU %d (%s): %s; "
			 "not pinned", who, cpu, from, strerror(err));
		return -err;
	}
	return cpu;
}

int agr__pin_worker(const char *who, unsigned index, const int *cpus,
		    int ncpus)
{
	const char *s;
	int parsed[CPU_SETSIZE], n;
	char from[64];

	if (cpus && ncpus > 0)
		return pin_to(who, cpus[index % (unsigned)ncpus],
			      "agr_supplier_options.worker_cpus");
	/* Read by each worker as it starts. */
	n = agr__setting_worker_cpus(who, parsed, CPU_SETSIZE, &s);
	if (n <= 0)
		return n == 0 ? -ENOENT : n;
	snprintf(from, sizeof(from), "%s=\"%.40s\"",
		 agr__settings[AGR__SETTING_WORKER_CPUS].name, s);
	return pin_to(who, parsed[index % (unsigned)n], from);
}

void agr__pin_io_workers(struct io_uring *ring, const char *who, int cpu)
{
	cpu_set_t set;
	int ret;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ret = io_uring_register_iowq_aff(ring, sizeof(set), &set);
	if (ret < 0)
		agr__log(AGR_LOG_INFO, "%s: io-wq threads not pinned to CPU "
			 "%d: %s", who, cpu, strerror(-ret));
}
