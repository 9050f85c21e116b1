/* SPDX-License-Identifier: MIT */
/*
 * affinity.c - pinning workers to CPUs, as AGR_WORKER_CPUS says.
 */
#include "affinity.h"
#include "placement.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The setting of the variable is read by each worker as it starts. */
#define CPUS_VAR "AGR_WORKER_CPUS"

int agr__pin_worker(const char *who, unsigned index)
{
	const char *s = getenv(CPUS_VAR);
	int cpus[CPU_SETSIZE], n, cpu, err;
	cpu_set_t set;

	if (!s || !*s)
		return -ENOENT;
	n = agr__parse_cpu_list(s, cpus, CPU_SETSIZE);
	if (n <= 0) {
		agr__log(AGR_LOG_ERROR, "%s: %s=\"%s\" is not a list of CPUs "
			 "such as \"1\" or \"0,2-3\"; not pinned", who,
			 CPUS_VAR, s);
		return -EINVAL;
	}
	cpu = cpus[index % (unsigned)n];
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		agr__log(AGR_LOG_ERROR, "%s: cannot run on CPU %d (%s=\"%s\"):"
			 " %s; not pinned", who, cpu, CPUS_VAR, s,
			 strerror(err));
		return -err;
	}
	return cpu;
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
