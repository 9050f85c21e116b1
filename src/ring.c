/* SPDX-License-Identifier: MIT */
/*
 * ring.c - setting up a worker's ring, with a fallback ladder of setup
 * flags, and explaining in words why a setup failed. Doorbells, which
 * other threads send to a ring, are doorbell.c's.
 */
#include "ring.h"

#include "fault.h"

#include <stdio.h>
#include <string.h>

/*
 * TASKRUN_FLAG: the kernel raises IORING_SQ_TASKRUN when completions wait
 * for a trip into it, so a spinning worker knows when to make one.
 */
static const unsigned setup_ladder[] = {
	IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
	IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
		IORING_SETUP_SUBMIT_ALL,
	IORING_SETUP_SUBMIT_ALL,
	0,
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* kernel.io_uring_disabled (0, 1 or 2), or a negative errno. */
static int read_io_uring_disabled(void)
{
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
	int v = -EINVAL;

	if (!f)
		return -errno;
	if (fscanf(f, "%d", &v) != 1 || v < 0)
		v = -EINVAL;
	fclose(f);
	return v;
}

void agr__ring_explain(int err, const char *who)
{
	int disabled;

	switch (err) {
	case -ENOSYS:
		agr__log(AGR_LOG_ERROR,
			 "%s: io_uring_setup failed with ENOSYS: io_uring is "
			 "not built into this kernel, or a seccomp filter "
			 "(such as a container's default profile) blocks it",
			 who);
		break;
	case -EPERM:
		disabled = read_io_uring_disabled();
		if (disabled == 2)
			agr__log(AGR_LOG_ERROR,
				 "%s: io_uring_setup failed with EPERM: "
				 "sysctl kernel.io_uring_disabled=2 disables "
				 "io_uring for every process", who);
		else if (disabled == 1)
			agr__log(AGR_LOG_ERROR,
				 "%s: io_uring_setup failed with EPERM: "
				 "sysctl kernel.io_uring_disabled=1 allows only "
				 "members of kernel.io_uring_group or "
				 "CAP_SYS_ADMIN", who);
		else
			agr__log(AGR_LOG_ERROR,
				 "%s: io_uring_setup failed with EPERM: "
				 "denied by a security policy (seccomp or an "
				 "LSM)", who);
		break;
	case -ENOMEM:
		agr__log(AGR_LOG_ERROR,
			 "%s: io_uring_setup failed with ENOMEM: RLIMIT_MEMLOCK "
			 "is too low (kernels up to 5.11 charge rings to it: "
			 "raise `ulimit -l`) or memory is exhausted", who);
		break;
	case -EINVAL:
		agr__log(AGR_LOG_ERROR,
			 "%s: io_uring_setup failed with EINVAL: the kernel is "
			 "too old for aggring (it needs IORING_OP_MSG_RING, "
			 "Linux 5.18; 6.1 or later is recommended)", who);
		break;
	default:
		agr__log(AGR_LOG_ERROR, "%s: io_uring_setup failed: %s", who,
			 strerror(-err));
		break;
	}
}

static bool msg_ring_supported(struct io_uring *ring)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
	bool ok;

	if (!probe)
		return false;
	ok = io_uring_opcode_supported(probe, IORING_OP_MSG_RING);
	io_uring_free_probe(probe);
	return ok;
}

/* The first rung of the ladder that `setup` allows. */
static size_t first_rung(const struct agr__ring_setup *setup)
{
	if (setup->ring_flags & (AGR_RING_COOP_TASKRUN | AGR_RING_SQPOLL))
		return 1; /* SQPOLL excludes DEFER_TASKRUN */
	return 0;
}

static unsigned rung_flags(const struct agr__ring_setup *setup, size_t i)
{
	unsigned flags = setup_ladder[i] | IORING_SETUP_CQSIZE;

	if (setup->ring_flags & AGR_RING_SQPOLL) {
		flags |= IORING_SETUP_SQPOLL;
		if (setup->sqpoll_cpu >= 0)
			flags |= IORING_SETUP_SQ_AFF;
	}
	return flags;
}

/* Settings beyond the defaults: their refusal is not the kernel's age. */
static bool asked_for_more(const struct agr__ring_setup *setup)
{
	return setup->ring_flags || setup->sqpoll_cpu >= 0 ||
	       setup->sq_entries != AGR__RING_SQ_ENTRIES ||
	       setup->cq_entries != AGR__RING_CQ_ENTRIES;
}

static void log_fallback(const char *who, unsigned asked, unsigned got)
{
	agr__log(AGR_LOG_INFO, "%s: io_uring_setup refused flags 0x%x "
		 "(EINVAL); using the fallback flags 0x%x", who,
		 asked & ~IORING_SETUP_CQSIZE, got & ~IORING_SETUP_CQSIZE);
}

int agr__ring_init(struct io_uring *ring, const struct agr__ring_setup *setup,
		   const char *who, unsigned *flags_out)
{
	size_t i, first = first_rung(setup), n = ARRAY_LEN(setup_ladder);
	struct io_uring_params p;
	int ret = -EINVAL;

	if (setup->ring_flags & AGR_RING_NO_FALLBACK)
		n = first + 1;
	for (i = first; i < n; i++) {
		memset(&p, 0, sizeof(p));
		p.flags = rung_flags(setup, i);
		p.cq_entries = setup->cq_entries;
		p.sq_thread_idle = setup->sqpoll_idle_ms;
		p.sq_thread_cpu = setup->sqpoll_cpu >= 0 ?
					  (unsigned)setup->sqpoll_cpu : 0;
		ret = AGR__FAULT_OR(AGR_FAULT_RING_SETUP,
				    io_uring_queue_init_params(
					    setup->sq_entries, ring, &p));
		if (ret != -EINVAL)
			break;
	}
	if (ret == -EINVAL && asked_for_more(setup)) {
		agr__log(AGR_LOG_ERROR, "%s: io_uring_setup refused these "
			 "settings with EINVAL: sq_entries %u, cq_entries %u, "
			 "ring_flags 0x%x, sqpoll_cpu %d (the kernel does not "
			 "take one of them, or it is older than Linux 5.18)",
			 who, setup->sq_entries, setup->cq_entries,
			 setup->ring_flags, setup->sqpoll_cpu);
		return ret;
	}
	if (ret < 0) {
		agr__ring_explain(ret, who);
		return ret;
	}
	if (i > first)
		log_fallback(who, rung_flags(setup, first), p.flags);
	if (!msg_ring_supported(ring)) {
		io_uring_queue_exit(ring);
		agr__ring_explain(-EINVAL, who);
		return -EINVAL;
	}
	if (flags_out)
		*flags_out = p.flags;
	return 0;
}
