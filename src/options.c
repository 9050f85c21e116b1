/* SPDX-License-Identifier: MIT */
/*
 * options.c - checking agr_supplier_options field by field, so that a
 * bad value is refused before any thread or ring exists, with a log
 * line that names it.
 */
#include "options.h"

#include "ring.h"

#include <sched.h>
#include <stddef.h>
#include <string.h>

#define MAX_SQ_ENTRIES 32768u /* the kernel's IORING_MAX_ENTRIES */
#define MAX_CQ_ENTRIES 65536u /* its IORING_MAX_CQ_ENTRIES */
#define MAX_SPIN_US 1000000
/* The first version ends with the log hook's argument. */
#define FIRST_SIZE \
	(offsetof(agr_supplier_options, log_arg) + sizeof(void *))

static int refuse(const char *who, const char *what, long long value,
		  const char *why)
{
	agr__log(AGR_LOG_ERROR, "supplier %s: options.%s=%lld %s", who, what,
		 value, why);
	return -EINVAL;
}

static bool power_of_two(unsigned v)
{
	return v && !(v & (v - 1));
}

static int check_size(const char *who, const agr_supplier_options *o)
{
	const unsigned char *tail;
	size_t i;

	if (o->size < FIRST_SIZE)
		return refuse(who, "size", (long long)o->size,
			      "is smaller than any version of the struct: "
			      "initialise with AGR_SUPPLIER_OPTIONS_INIT");
	/* A newer caller's fields that this version does not know. */
	tail = (const unsigned char *)o;
	for (i = sizeof(*o); i < o->size; i++)
		if (tail[i])
			return refuse(who, "size", (long long)o->size,
				      "holds fields this version of aggring "
				      "does not know, and they are set");
	return 0;
}

static int check_reserved(const char *who, const agr_supplier_options *o)
{
	size_t i;

	for (i = 0; i < sizeof(o->reserved) / sizeof(o->reserved[0]); i++)
		if (o->reserved[i])
			return refuse(who, "reserved", (long long)i,
				      "is set: reserved words must be zero");
	return 0;
}

static int check_entries(const char *who, const agr_supplier_options *o)
{
	unsigned sq = o->sq_entries ? o->sq_entries : AGR__RING_SQ_ENTRIES;

	if (o->sq_entries &&
	    (!power_of_two(o->sq_entries) || o->sq_entries > MAX_SQ_ENTRIES))
		return refuse(who, "sq_entries", o->sq_entries,
			      "is not a power of two in 1..32768");
	if (o->cq_entries &&
	    (!power_of_two(o->cq_entries) || o->cq_entries > MAX_CQ_ENTRIES))
		return refuse(who, "cq_entries", o->cq_entries,
			      "is not a power of two in 1..65536");
	if (o->cq_entries && o->cq_entries < sq)
		return refuse(who, "cq_entries", o->cq_entries,
			      "is smaller than sq_entries");
	return 0;
}

static int check_ring(const char *who, const agr_supplier_options *o)
{
	if (o->ring_flags & ~AGR_RING_FLAGS_ALL)
		return refuse(who, "ring_flags", o->ring_flags,
			      "has a flag aggring does not know");
	if (o->sqpoll_cpu < -1 || o->sqpoll_cpu >= CPU_SETSIZE)
		return refuse(who, "sqpoll_cpu", o->sqpoll_cpu,
			      "is not -1 or a CPU number");
	if (!(o->ring_flags & AGR_RING_SQPOLL) &&
	    (o->sqpoll_cpu >= 0 || o->sqpoll_idle_ms))
		return o->sqpoll_cpu >= 0 ?
			       refuse(who, "sqpoll_cpu", o->sqpoll_cpu,
				      "is set without AGR_RING_SQPOLL") :
			       refuse(who, "sqpoll_idle_ms", o->sqpoll_idle_ms,
				      "is set without AGR_RING_SQPOLL");
	return 0;
}

static int check_cpus(const char *who, const agr_supplier_options *o)
{
	int i;

	if (o->nworker_cpus < 0 || (o->nworker_cpus > 0) != !!o->worker_cpus)
		return refuse(who, "nworker_cpus", o->nworker_cpus,
			      "does not match worker_cpus (a list needs its "
			      "length, NULL needs 0)");
	for (i = 0; i < o->nworker_cpus; i++)
		if (o->worker_cpus[i] < 0 || o->worker_cpus[i] >= CPU_SETSIZE)
			return refuse(who, "worker_cpus[i]", o->worker_cpus[i],
				      "is not a CPU number");
	return 0;
}

static int check_loop(const char *who, const agr_supplier_options *o)
{
	unsigned sq = o->sq_entries ? o->sq_entries : AGR__RING_SQ_ENTRIES;

	if (o->parallelism < 0)
		return refuse(who, "parallelism", o->parallelism,
			      "is negative");
	if (o->idle_spin_us < -1 || o->idle_spin_us > MAX_SPIN_US)
		return refuse(who, "idle_spin_us", o->idle_spin_us,
			      "is not -1 (the default) or 0..1000000");
	if (o->submit_batch < -1 || o->submit_batch > (long long)sq)
		return refuse(who, "submit_batch", o->submit_batch,
			      "is not -1 (the default) or 0..sq_entries");
	if (o->wait_mode != AGR_WAIT_DEFAULT &&
	    o->wait_mode != AGR_WAIT_ENTER && o->wait_mode != AGR_WAIT_EVENTFD)
		return refuse(who, "wait_mode", o->wait_mode,
			      "is not an agr_wait_mode");
	return 0;
}

int agr__supplier_settings(const char *who, const agr_supplier_options *opts,
			   struct agr__worker_settings *st, int *parallelism)
{
	agr_supplier_options local = AGR_SUPPLIER_OPTIONS_INIT;
	const agr_supplier_options *o = &local;
	int ret = check_size(who, opts);

	if (ret)
		return ret;
	/* An older caller's struct ends early: the rest keeps defaults. */
	memcpy(&local, opts,
	       opts->size < sizeof(local) ? opts->size : sizeof(local));
	if ((ret = check_reserved(who, o)) || (ret = check_entries(who, o)) ||
	    (ret = check_ring(who, o)) || (ret = check_cpus(who, o)) ||
	    (ret = check_loop(who, o)))
		return ret;
	*st = (struct agr__worker_settings){
		.sq_entries = o->sq_entries,
		.cq_entries = o->cq_entries,
		.ring_flags = o->ring_flags,
		.sqpoll_idle_ms = o->sqpoll_idle_ms,
		.sqpoll_cpu = o->sqpoll_cpu,
		.cpus = o->worker_cpus,
		.ncpus = o->nworker_cpus,
		.idle_spin_us = o->idle_spin_us,
		.submit_batch = o->submit_batch,
		.wait_mode = o->wait_mode,
		.init = o->worker_init,
		.exit = o->worker_exit,
		.hook_arg = o->hook_arg,
		.log_fn = o->log_fn,
		.log_arg = o->log_arg,
		.watchdog_ns = o->watchdog_threshold_ns,
	};
	*parallelism = o->parallelism;
	return 0;
}
