/* SPDX-License-Identifier: MIT */
/*
 * options.h - checking agr_supplier_options (internal).
 */
#ifndef AGR_OPTIONS_H
#define AGR_OPTIONS_H

#include "worker.h"

#include <aggring/supplier.h>

/*
 * Checks `opts` (`who` names the supplier in log lines) and fills `st`
 * and `*parallelism` from it; `st->cpus` points into `opts`. Returns 0,
 * or -EINVAL with a log line naming the first bad field.
 */
int agr__supplier_settings(const char *who, const agr_supplier_options *opts,
			   struct agr__worker_settings *st, int *parallelism);

#endif /* AGR_OPTIONS_H */
