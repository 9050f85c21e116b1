/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *program = "example";

void util_set_program(const char *name)
{
	program = name;
}

const char *util_program(void)
{
	return program;
}

static void vsay(const char *fmt, va_list ap)
	__attribute__((format(printf, 1, 0)));
static void vsay(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", program);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	exit(1);
}

void die_errno(const char *what, int err)
{
	die("%s: %s", what, strerror(err < 0 ? -err : err));
}

void warnf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		die("out of memory");
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t deadline_after(double seconds)
{
	return now_ns() + (uint64_t)(seconds * 1e9);
}

uint64_t left_until(uint64_t deadline)
{
	uint64_t now = now_ns();

	return deadline > now ? deadline - now : 0;
}

void block_stop_signals(sigset_t *set)
{
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}
