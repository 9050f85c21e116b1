/* SPDX-License-Identifier: MIT */
/*
 * versioned.c - reading a caller's options struct of any version: the
 * size field says how much of it the caller knew (see versioned.h).
 */
#include "versioned.h"

#include <string.h>

static int refuse_size(const char *who, const struct agr__layout *l,
		  size_t size, const char *why)
{
	agr__log(AGR_LOG_ERROR, "%s: %s.size=%zu %s (initialise with %s); "
		 "-EINVAL", who, l->type, size, why, l->init);
	return -EINVAL;
}

/* A newer caller's fields, beyond what this version knows, unset? */
static bool tail_is_zero(const unsigned char *in, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (in[i])
			return false;
	return true;
}

int agr__read_versioned(void *out, const void *in,
			const struct agr__layout *l, const char *who)
{
	const unsigned char *bytes = in;
	size_t size;

	memcpy(&size, in, sizeof(size));
	if (size == 0)
		size = l->first_size;
	else if (size < l->first_size)
		return refuse_size(who, l, size,
			      "is smaller than any version of the struct");
	if (!tail_is_zero(bytes, l->size, size))
		return refuse_size(who, l, size,
			      "holds fields this version of aggring does "
			      "not know, and they are set");
	memcpy(out, in, size < l->size ? size : l->size);
	if (!tail_is_zero(out, l->reserved_off,
			  l->reserved_off + l->reserved_len)) {
		agr__log(AGR_LOG_ERROR, "%s: %s.reserved is set: reserved "
			 "words must be zero; -EINVAL", who, l->type);
		return -EINVAL;
	}
	size = l->size;
	memcpy(out, &size, sizeof(size));
	return 0;
}
