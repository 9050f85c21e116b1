/* SPDX-License-Identifier: MIT */
/*
 * ledger_metrics.c - /metrics: whether the journal still takes changes
 * and how many clients the server cut off, so that an alert can fire
 * on a failed journal (which refuses every change until a restart)
 * without parsing the log or INFO.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

int ledger_metrics_health(const struct server_stats *st, char *buf,
			  size_t cap)
{
	int n = snprintf(buf, cap,
		"# HELP ledger_journal_failed 1 once a journal write has "
		"failed (a full disk, the file removed or replaced): every "
		"change is refused until a restart; INFO's journal_error "
		"says why.\n"
		"# TYPE ledger_journal_failed gauge\n"
		"ledger_journal_failed %d\n"
		"# HELP ledger_journal_changes_total Changes durable in the "
		"journal (INFO's journal_changes).\n"
		"# TYPE ledger_journal_changes_total counter\n"
		"ledger_journal_changes_total %" PRIu64 "\n"
		"# HELP ledger_client_output_buffer_limit_disconnections_total "
		"Clients closed for leaving replies unread "
		"(--client-output-buffer-limit).\n"
		"# TYPE ledger_client_output_buffer_limit_disconnections_total "
		"counter\n"
		"ledger_client_output_buffer_limit_disconnections_total %"
		PRIu64 "\n"
		"# HELP ledger_rejected_connections_total Connections refused "
		"over --maxclients.\n"
		"# TYPE ledger_rejected_connections_total counter\n"
		"ledger_rejected_connections_total %" PRIu64 "\n"
		"# HELP ledger_protocol_errors_total Protocol errors and "
		"cross-protocol requests, each closing its connection.\n"
		"# TYPE ledger_protocol_errors_total counter\n"
		"ledger_protocol_errors_total %" PRIu64 "\n"
		"# HELP ledger_connected_clients Open client connections.\n"
		"# TYPE ledger_connected_clients gauge\n"
		"ledger_connected_clients %" PRIu64 "\n",
		st->journal_error != NULL, st->changes,
		st->output_limit_closed, st->rejected, st->protocol_errors,
		st->connected);

	return n < 0 ? -EINVAL : n;
}
