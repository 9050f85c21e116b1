/* SPDX-License-Identifier: MIT */
/*
 * ledger_options.h - ledger_server's settings, from its command line.
 */
#ifndef EXAMPLES_LEDGER_OPTIONS_H
#define EXAMPLES_LEDGER_OPTIONS_H

#include <stdbool.h>

#include "ledger_accounts.h"
#include "ledger_checkpointer.h"
#include "ledger_conn.h"
#include "ledger_journal.h"

/* What ledger_server was asked to do. */
struct config {
	int port;
	int metrics_port; /* -1: no metrics */
	long watchdog_ms; /* 0: no watchdog */
	const char *dir;
	int workers;
	int groups;
	double shutdown_timeout;
	bool verify;
	const char *dump;
	enum journal_io journal_io;
	enum journal_sync journal_sync;
	const char *worker_cpus; /* "auto", "none" or a CPU list */
	struct front_options front; /* --recv, --recv-buffers */
	const char *requirepass; /* NULL: none */
	long long maxclients, max_bulk, query_buf_max;
	long long out_hard, out_soft, out_soft_secs; /* output limit */
	enum crash_point crash_after; /* tests: die there (SIGKILL) */
	struct checkpointer_options ckpt; /* --checkpoint-bytes, -events */
	bool no_checkpoints;		  /* --no-checkpoints */
};

/*
 * Reads argv into *c (defaults for what is not given); --help prints
 * the usage and exits 0, a bad option prints it on stderr and exits 2.
 */
void ledger_options(int argc, char **argv, struct config *c);

#endif /* EXAMPLES_LEDGER_OPTIONS_H */
