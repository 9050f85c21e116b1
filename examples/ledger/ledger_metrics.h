/* SPDX-License-Identifier: MIT */
/*
 * ledger_metrics.h - the part of ledger_server's /metrics page that
 * says whether the server is healthy: the journal's state and the
 * clients it has cut off (http_metrics.h serves the page).
 */
#ifndef LEDGER_METRICS_H
#define LEDGER_METRICS_H

#include <stddef.h>

#include "ledger_commands.h"

/*
 * Writes st's journal state and client counters as Prometheus text into
 * buf, as snprintf does (buf NULL and cap 0 to size it): the length, or
 * a negative errno.
 */
int ledger_metrics_health(const struct server_stats *st, char *buf,
			  size_t cap);

#endif /* LEDGER_METRICS_H */
