/* SPDX-License-Identifier: MIT */
/*
 * fault.h - fault-injection points (internal; see aggring/fault.h).
 *
 * Built with --enable-fault-injection (AGR_FAULT_INJECTION) the hooks
 * consult the armed plan; otherwise every hook expands to its plain
 * expression or to nothing, and its arguments are not even compiled.
 */
#ifndef AGR_FAULT_INTERNAL_H
#define AGR_FAULT_INTERNAL_H

#include "internal.h"

#include <liburing.h>

#ifdef AGR_FAULT_INJECTION

#include <aggring/fault.h>

/* True (and `*value` set, if not NULL) when `point` fails this time. */
bool agr__fault(agr_fault_point point, int *value);

/* `expr`, unless `point` fails: then its value, and `expr` never runs. */
#define AGR__FAULT_OR(point, expr)                                     \
	__extension__({                                                \
		int agr__fault_value_;                                 \
		agr__fault((point), &agr__fault_value_) ?              \
			agr__fault_value_ : (expr);                    \
	})

/* Applies AGR_FAULT_IO_RESULT and AGR_FAULT_IO_SHORT to `*res`. */
void agr__fault_io(int *res);

/* Turns a prepared doorbell SQE into one that fails (DOORBELL_SQE). */
void agr__fault_doorbell_sqe(struct io_uring_sqe *sqe);

/* Sleeps the armed microseconds when `point` fires (a pause point). */
void agr__fault_pause(agr_fault_point point);

#else

#define agr__fault(point, value) false
#define AGR__FAULT_OR(point, expr) (expr)
#define agr__fault_io(res) ((void)0)
#define agr__fault_doorbell_sqe(sqe) ((void)0)
#define agr__fault_pause(point) ((void)0)

#endif /* AGR_FAULT_INJECTION */

/* io_uring_get_sqe(), or NULL while AGR_FAULT_SQ_FULL fails. */
#define agr__get_sqe(ring) \
	(agr__fault(AGR_FAULT_SQ_FULL, NULL) ? NULL : io_uring_get_sqe(ring))

#endif /* AGR_FAULT_INTERNAL_H */
