/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_cpus.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring.h>

#include "util.h"

bool worker_cpus_valid(const char *s)
{
	/* "1", "0,2-3": the library parses it when the workers start. */
	return strcmp(s, "auto") == 0 || strcmp(s, "none") == 0 ||
	       (*s && strspn(s, "0123456789,-") == strlen(s));
}

/* Appends ",cpu" (or "cpu" first) to `list`, of `size` bytes. */
static void list_add(char *list, size_t size, int cpu)
{
	size_t len = strlen(list);

	snprintf(list + len, size - len, "%s%d", len ? "," : "", cpu);
}

/* `list`: the CPUs of `first`, then the other CPUs of `allowed`. */
static void list_first(const cpu_set_t *first, const cpu_set_t *allowed,
		       char *list, char *near, size_t size)
{
	list[0] = near[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET((size_t)cpu, first)) {
			list_add(list, size, cpu);
			list_add(near, size, cpu);
		}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET((size_t)cpu, allowed) &&
		    !CPU_ISSET((size_t)cpu, first))
			list_add(list, size, cpu);
}

/*
 * Why --worker-cpus auto leaves `nworkers` workers unpinned, or NULL if
 * it pins them: then `list` holds the CPUs we may run on, those that
 * take the journal disk's interrupts first, and `near` those.
 */
unsigned default_workers(void)
{
	cpu_set_t allowed;
	int n;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return 1;
	n = CPU_COUNT(&allowed) / 2;
	return n > 0 ? (unsigned)n : 1;
}

static const char *near_disk(const char *dir, unsigned nworkers, char *list,
			     char *near, size_t size)
{
	static int disk[CPU_SETSIZE];
	static char why[128];
	cpu_set_t allowed, first;
	int n;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return "cannot read the CPUs we may run on";
	if (nworkers >= (unsigned)CPU_COUNT(&allowed))
		return "as many workers as CPUs";
	n = agr_disk_irq_cpus(dir, disk, CPU_SETSIZE);
	if (n < 0) {
		snprintf(why, sizeof(why), "the journal disk's interrupts: %s",
			 agr_strerror(n));
		return why;
	}
	CPU_ZERO(&first);
	for (int i = 0; i < n && i < CPU_SETSIZE; i++)
		if (CPU_ISSET((size_t)disk[i], &allowed))
			CPU_SET((size_t)disk[i], &first);
	if (CPU_COUNT(&first) == 0)
		return "the journal disk's interrupts go to CPUs we may not use";
	if (CPU_EQUAL(&first, &allowed))
		return "every CPU takes the journal disk's interrupts";
	list_first(&first, &allowed, list, near, size);
	return NULL;
}

static void place_near_disk(const char *dir, unsigned nworkers)
{
	static char list[CPU_SETSIZE * 6], near[CPU_SETSIZE * 6];
	const char *env = getenv("AGR_WORKER_CPUS"), *why;

	if (env && *env) {
		printf("ledger_server: workers pinned to CPUs %s "
		       "(AGR_WORKER_CPUS)\n", env);
		return;
	}
	why = near_disk(dir, nworkers, list, near, sizeof(list));
	if (why) {
		printf("ledger_server: workers not pinned (%s)\n", why);
		return;
	}
	if (setenv("AGR_WORKER_CPUS", list, 1) < 0)
		die("setenv: %s", strerror(errno));
	printf("ledger_server: workers pinned to CPUs %s (the journal "
	       "disk's interrupts go to CPU %s)\n", list, near);
}

void place_workers(const char *mode, const char *dir, unsigned nworkers)
{
	if (strcmp(mode, "none") == 0) {
		unsetenv("AGR_WORKER_CPUS");
		printf("ledger_server: workers not pinned (--worker-cpus "
		       "none)\n");
	} else if (strcmp(mode, "auto") != 0) {
		if (setenv("AGR_WORKER_CPUS", mode, 1) < 0)
			die("setenv: %s", strerror(errno));
		printf("ledger_server: workers pinned to CPUs %s "
		       "(--worker-cpus)\n", mode);
	} else {
		place_near_disk(dir, nworkers);
	}
}
