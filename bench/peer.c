/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the list of peers this build has (see peer.h).
 */
#include "config.h"

#include "peer.h"

#include <stddef.h>

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
