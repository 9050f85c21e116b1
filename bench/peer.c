/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the list of peers this build has (see peer.h).
 */
#include "config.h"

#include "peer.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct peer_engine *const peer_engines[] = {
	&peer_pthread,
#ifdef HAVE_GLIB
	&peer_glib,
#endif
#ifdef HAVE_LIBUV
	&peer_libuv,
#endif
	NULL,
};

/* True if `name` is one of the comma-separated words of list. */
static int listed(const char *list, const char *name)
{
	size_t len = strlen(name);
	const char *at = strstr(list, name);

	while (at && !((at == list || at[-1] == ',') &&
		       (at[len] == ',' || !at[len])))
		at = strstr(at + 1, name);
	return at != NULL;
}

int peer_select(const char *program, const char *list,
		const struct peer_engine **out, int max)
{
	const struct peer_engine *const *pe;
	int n = 0;

	for (pe = peer_engines; *pe && n < max; pe++)
		if (!list || listed(list, (*pe)->name))
			out[n++] = *pe;
	if (list && !n) {
		fprintf(stderr, "%s: -p %s: no such peer in this build; it has",
			program, list);
		for (pe = peer_engines; *pe; pe++)
			fprintf(stderr, " %s", (*pe)->name);
		fputc('\n', stderr);
		exit(2);
	}
	return n;
}
