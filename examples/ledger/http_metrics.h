/* SPDX-License-Identifier: MIT */
/*
 * http_metrics.h - GET /metrics over HTTP, served on a worker's ring:
 * the dispatcher's latency metrics in the Prometheus text format
 * (agr_metrics_write_prometheus). Accept, recv, send, one request per
 * connection ("Connection: close"); any other path is 404, another
 * method 405, a broken request 400.
 *
 * Everything runs on worker 0 of the dispatcher's scheduler, like the
 * acceptor it uses (acceptor.h), so its connections need no lock. The
 * acceptor and every open scrape count in the server's drain.
 */
#ifndef EXAMPLES_HTTP_METRICS_H
#define EXAMPLES_HTTP_METRICS_H

#include <aggring.h>

#include "drain.h"

struct http_metrics;

/*
 * Listens on 127.0.0.1:port (the port bound in *bound) for scrapes of
 * disp's metrics. A failure ends the program.
 */
struct http_metrics *http_metrics_start(agr_dispatcher *disp, int port,
					struct drain *drain, int *bound);

/*
 * Any thread: stop accepting and drop every scrape in progress; their
 * connections close (the drain tells when all have).
 */
void http_metrics_stop(struct http_metrics *m);

/* Once the workers have ended. */
void http_metrics_free(struct http_metrics *m);

#endif /* EXAMPLES_HTTP_METRICS_H */
