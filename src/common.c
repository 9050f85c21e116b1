/* SPDX-License-Identifier: MIT */
/*
 * common.c - the version and the error strings of aggring/common.h.
 */
#include "internal.h"

AGR_API const char *agr_version(void)
{
	return PACKAGE_VERSION;
}

AGR_API const char *agr_strerror(int err)
{
	/* strerror() is not thread-safe; the common codes are spelled here. */
	switch (err) {
	case 0:
		return "success";
	case -EINVAL:
		return "invalid argument";
	case -ENOMEM:
		return "out of memory";
	case -ESHUTDOWN:
		return "shut down: no longer accepting work";
	case -ETIMEDOUT:
		return "timed out";
	case -EAGAIN:
		return "queue full, try again";
	case -ECANCELED:
		return "cancelled";
	/*
	 * No io_uring hint here: the code may be a hook's own. A failed
	 * ring setup says why in its log line (agr__ring_explain).
	 */
	case -ENOSYS:
		return "function not implemented";
	case -EPERM:
		return "operation not permitted";
	case -EINTR:
		return "interrupted (AGR_INTERRUPTED: cut short by a stop)";
	case -EBUSY:
		return "busy";
	case -EALREADY:
		return "already in progress";
	case -EEXIST:
		return "already exists";
	case -ENOENT:
		return "not found";
	case -EBADF:
		return "bad file descriptor";
	case -EOPNOTSUPP:
		return "not supported (for O_DIRECT: this file does no direct "
		       "I/O)";
	default:
		return "unknown error";
	}
}
