/* SPDX-License-Identifier: MIT */
/*
 * load_options.h - ledger_load's settings, from its command line.
 */
#ifndef EXAMPLES_LOAD_OPTIONS_H
#define EXAMPLES_LOAD_OPTIONS_H

#include <stdint.h>

#define NAME_MAX_LEN 128 /* an account's name, the prefix's included */

/* What ledger_load was asked to do. */
struct config {
	int port;
	int metrics_port; /* 0: do not fetch /metrics */
	int connections;
	long requests;
	long accounts;
	int pipeline;
	uint64_t seed;
	const char *prefix;
	const char *expect_out;
	const char *check;
	long transfers;
};

/*
 * Reads argv into *c (defaults for what is not given); --help prints
 * the usage and exits 0, a bad option prints it on stderr and exits 2.
 */
void load_options(int argc, char **argv, struct config *c);

#endif /* EXAMPLES_LOAD_OPTIONS_H */
