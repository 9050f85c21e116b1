/* SPDX-License-Identifier: MIT */
/*
 * aggring/dispatcher_stats.h - kept so that code that includes it still
 * builds: agr_dispatcher and agr_dispatcher_stats are declared in
 * aggring/dispatcher.h, the header of the dispatcher that owns them.
 */
#ifndef AGGRING_DISPATCHER_STATS_H
#define AGGRING_DISPATCHER_STATS_H

#include <aggring/dispatcher.h>

#endif /* AGGRING_DISPATCHER_STATS_H */
