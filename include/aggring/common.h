/* SPDX-License-Identifier: MIT */
/*
 * aggring/common.h - what every layer of aggring shares: the export
 * macro, the version, error conventions and the log hook.
 *
 * Errors: every call that can fail returns 0 on success or a negative
 * errno value (-EINVAL, -ENOMEM, ...). Nothing sets errno as its way of
 * reporting. When a call that takes a callback fails, the callback is
 * never called.
 */
#ifndef AGGRING_COMMON_H
#define AGGRING_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(AGR_BUILDING_LIBRARY)
#define AGR_API __attribute__((visibility("default")))
#else
#define AGR_API
#endif

#define AGR_VERSION_MAJOR 0
#define AGR_VERSION_MINOR 1
#define AGR_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH". */
AGR_API const char *agr_version(void);

/* Severity of a message passed to the log hook. */
typedef enum agr_log_level {
	AGR_LOG_ERROR = 0,
	AGR_LOG_WARN = 1,
	AGR_LOG_INFO = 2,
	AGR_LOG_DEBUG = 3,
} agr_log_level;

/*
 * Receives the library's diagnostics: why io_uring could not be set up,
 * a failed message delivery, a misused handle. `msg` is a NUL-terminated
 * line without a trailing newline, valid only during the call. The hook
 * may run on any thread, including worker threads, on several at once
 * (no lock is held while it runs), and must not call back into aggring.
 */
typedef void (*agr_log_fn)(agr_log_level level, const char *msg, void *arg);

/*
 * Installs `fn` (NULL restores the default, which writes errors and
 * warnings to stderr) and its `arg`. Takes effect for messages logged
 * after it returns; safe to call from any thread.
 */
AGR_API void agr_set_log_hook(agr_log_fn fn, void *arg);

/*
 * Writes one printf-style line through the hook, as the library's own
 * lines go (a supplier's hook on its workers' threads), cut at 511
 * bytes: for modules built on aggring, such as libaggring-redis, whose
 * diagnostics belong with the library's. Any thread.
 */
AGR_API void agr_log(agr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A short description of a negative errno returned by aggring. It
 * knows only the code, not where it came from (a hook's own -EPERM
 * reads as any other): the log line of the failing call says why.
 */
AGR_API const char *agr_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* AGGRING_COMMON_H */
