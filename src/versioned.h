/* SPDX-License-Identifier: MIT */
/*
 * versioned.h - reading a caller's options struct of any version
 * (internal): one rule for every public struct that opens with a
 * `size_t size` and keeps reserved words, so that later versions can
 * add fields without breaking callers built against this one.
 */
#ifndef AGR_VERSIONED_H
#define AGR_VERSIONED_H

#include "internal.h"

#include <stddef.h>

/* Where a versioned struct keeps its parts; its first member is size. */
struct agr__layout {
	const char *type;    /* "agr_dispatcher_options", for log lines */
	const char *init;    /* "AGR_DISPATCHER_OPTIONS_INIT", likewise */
	size_t size;	     /* sizeof, in this version */
	size_t first_size;   /* the first version's: what size 0 means */
	size_t reserved_off; /* its reserved words, which must be zero */
	size_t reserved_len;
};

/* The layout of TYPE, whose first version ends where `reserved` starts. */
#define AGR__LAYOUT(type_, init_)                                        \
	{                                                                \
		.type = #type_, .init = #init_, .size = sizeof(type_),   \
		.first_size = offsetof(type_, reserved),                 \
		.reserved_off = offsetof(type_, reserved),               \
		.reserved_len = sizeof(((type_ *)0)->reserved),          \
	}

/*
 * Copies the caller's `in` into `out`, which holds this version's
 * defaults, as the public headers promise: a size of 0 (a struct that
 * was zero-initialised, or built with designated initialisers that
 * leave size out) reads the fields of the first version; a smaller
 * size than the first version's is refused; a size up to this
 * version's reads that many bytes, the fields beyond keep their
 * defaults; a larger one (a newer caller) is accepted when the bytes
 * this version does not know are zero. Reserved words must be zero.
 * `out`'s size becomes this version's. Returns 0, or -EINVAL with a
 * log line naming `who`, the type and what was wrong.
 */
int agr__read_versioned(void *out, const void *in,
			const struct agr__layout *l, const char *who);

#endif /* AGR_VERSIONED_H */
