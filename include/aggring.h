/* SPDX-License-Identifier: MIT */
/*
 * aggring.h - per-aggregate work on io_uring. The umbrella header:
 * includes every public header of the library.
 */
#ifndef AGGRING_H
#define AGGRING_H

#include <aggring/common.h>
#include <aggring/ring.h>
#include <aggring/wait.h>
#include <aggring/worker.h>
#include <aggring/scheduler.h>
#include <aggring/supplier.h>
#include <aggring/group_key.h>
#include <aggring/dispatcher.h>
#include <aggring/composite.h>
#include <aggring/runtime.h>
#include <aggring/histogram.h>
#include <aggring/watchdog.h>
#include <aggring/metrics.h>
#include <aggring/io.h>
#include <aggring/buf_ring.h>
#include <aggring/placement.h>
#include <aggring/dio.h>

#endif /* AGGRING_H */
