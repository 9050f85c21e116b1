/* SPDX-License-Identifier: MIT */
/*
 * bench/stalls - how often this machine takes the CPU away from a
 * running thread, and for how long: the noise every other figure of a
 * run carries. No engine runs here.
 *
 *   stalls [-s SECONDS]
 *
 * One thread per CPU it may use, pinned there, reads CLOCK_MONOTONIC in
 * a loop for SECONDS (default 5). A gap between two reads longer than
 * 100 us is a stall: an interrupt storm, another task, or the host
 * running something else on this virtual CPU (then /proc/stat counts it
 * as steal, if the host tells). Per CPU it prints the stalls over 0.1
 * ms and over 1 ms, the longest, the share of the time lost to them and
 * how many times another task of this machine preempted the thread:
 *
 *   stalls: cpu 1: 12 over 0.1 ms, 7 over 1 ms, longest 3.17 ms, 0.4%
 *   lost; 2 preemptions by other tasks
 *
 * (one line), then the totals and the steal time /proc/stat counted.
 * A 1 s latency run at 2.5 M msg/s queues 12,500 messages behind a 5 ms
 * stall, 0.5% of its messages: two such stalls and its p99 measures the
 * machine. bench/run.sh runs this before and after the workloads.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"

#define STALL_NS 100000ull   /* a gap longer than this is a stall */
#define LONG_NS 1000000ull   /* and one longer than this a long one */

struct probe {
	int cpu;
	uint64_t run_ns;
	pthread_barrier_t *start;
	pthread_t thread;
	uint64_t stalls, long_stalls, longest_ns, lost_ns;
	long switches; /* involuntary: another task of ours ran instead */
};

static void *watch(void *arg)
{
	struct probe *p = arg;
	cpu_set_t set;
	uint64_t last, end, now;
	struct rusage usage;

	CPU_ZERO(&set);
	CPU_SET(p->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
		fprintf(stderr, "stalls: cpu %d: not pinned\n", p->cpu);
	pthread_barrier_wait(p->start);
	last = bench_now_ns();
	end = last + p->run_ns;
	do {
		uint64_t gap;

		now = bench_now_ns();
		gap = now - last;
		last = now;
		if (gap <= STALL_NS)
			continue;
		p->stalls++;
		p->lost_ns += gap;
		if (gap > LONG_NS)
			p->long_stalls++;
		if (gap > p->longest_ns)
			p->longest_ns = gap;
	} while (now < end);
	if (getrusage(RUSAGE_THREAD, &usage) == 0)
		p->switches = usage.ru_nivcsw;
	return NULL;
}

/* Steal time of all CPUs so far, in clock ticks; -1 if unknown. */
static long long steal_ticks(void)
{
	long long user, nice, sys, idle, iowait, irq, softirq, steal;
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &user,
		   &nice, &sys, &idle, &iowait, &irq, &softirq, &steal);
	fclose(f);
	return n == 8 ? steal : -1;
}

static void report(const struct probe *p, int n, double seconds,
		   long long steal)
{
	uint64_t stalls = 0, long_stalls = 0, longest = 0;
	long ticks = sysconf(_SC_CLK_TCK);
	int online = bench_cpus();
	int i;

	for (i = 0; i < n; i++) {
		printf("stalls: cpu %d: %" PRIu64 " over 0.1 ms, %" PRIu64
		       " over 1 ms, longest %.2f ms, %.1f%% lost; %ld "
		       "preemptions by other tasks\n",
		       p[i].cpu, p[i].stalls, p[i].long_stalls,
		       (double)p[i].longest_ns / 1e6,
		       100.0 * (double)p[i].lost_ns / (seconds * 1e9),
		       p[i].switches);
		stalls += p[i].stalls;
		long_stalls += p[i].long_stalls;
		if (p[i].longest_ns > longest)
			longest = p[i].longest_ns;
	}
	printf("stalls: %d CPUs x %.0f s: %" PRIu64 " stalls over 0.1 ms, %"
	       PRIu64 " over 1 ms, the longest %.2f ms",
	       n, seconds, stalls, long_stalls, (double)longest / 1e6);
	/* /proc/stat's first line adds up every online CPU. */
	if (steal >= 0 && ticks > 0)
		printf("; steal %.1f%% of the CPUs' time",
		       100.0 * (double)steal / (double)ticks /
			       (seconds * (double)online));
	printf("\n");
}

int main(int argc, char **argv)
{
	double seconds = 5;
	const struct bench_opt opts[] = {
		BENCH_OPT_DOUBLE('s', "SECONDS", seconds, 1, 600,
				 "how long to watch (default 5)"),
		BENCH_OPT_END,
	};
	struct probe *p;
	pthread_barrier_t start;
	long long steal_before, steal_after;
	cpu_set_t allowed;
	int n = 0, cpu, i;

	bench_options(argc, argv, "stalls", opts);
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		perror("stalls: sched_getaffinity");
		return 1;
	}
	p = calloc((size_t)CPU_COUNT(&allowed), sizeof(*p));
	if (!p ||
	    pthread_barrier_init(&start, NULL,
				 (unsigned)CPU_COUNT(&allowed) + 1)) {
		fputs("stalls: out of memory\n", stderr);
		return 1;
	}
	for (cpu = 0; cpu < CPU_SETSIZE && n < CPU_COUNT(&allowed); cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		p[n] = (struct probe){ .cpu = cpu, .start = &start,
				       .run_ns = (uint64_t)(seconds * 1e9) };
		if (pthread_create(&p[n].thread, NULL, watch, &p[n])) {
			perror("stalls: pthread_create");
			return 1;
		}
		n++;
	}
	steal_before = steal_ticks();
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++)
		pthread_join(p[i].thread, NULL);
	steal_after = steal_ticks();
	report(p, n, seconds,
	       steal_before >= 0 && steal_after >= 0 ?
		       steal_after - steal_before :
		       -1);
	pthread_barrier_destroy(&start);
	free(p);
	return 0;
}
