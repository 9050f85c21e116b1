/* SPDX-License-Identifier: MIT */
/*
 * load_metrics.h - ledger_load's look at the server's side: GET
 * /metrics (ledger_server --metrics-port), and its latency split into
 * queueing (sent to the dispatcher until the handler starts) and
 * processing (handler start to completion, the fdatasync included),
 * estimated from the histogram buckets, with the dispatcher's handled
 * and failed counts.
 */
#ifndef LOAD_METRICS_H
#define LOAD_METRICS_H

/* Fetches the page on 127.0.0.1:port and prints it; 0, or 1 if not. */
int report_server(int port);

#endif /* LOAD_METRICS_H */
