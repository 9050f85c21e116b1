/* SPDX-License-Identifier: MIT */
/*
 * util.c - the CPU count and condition variables on the monotonic
 * clock.
 */
#include "util.h"

#include <limits.h>
#include <unistd.h>

int agr__online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (n > INT_MAX ? INT_MAX : (int)n);
}

void agr__cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
}
