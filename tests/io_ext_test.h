/* SPDX-License-Identifier: MIT */
/*
 * io_ext_test.h - what the files of check_io_ext share: a supplier
 * with one worker and small rings, and the helpers to run on it.
 */
#ifndef TESTS_IO_EXT_TEST_H
#define TESTS_IO_EXT_TEST_H

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
};

void rig_up(struct rig *g, unsigned sq_entries);
void rig_down(struct rig *g);
void run_on(struct rig *g, agr_task_fn fn, void *arg);

/* io_ext_sockets.c */
void io_ext_socket_tests(TCase *c);

#endif /* TESTS_IO_EXT_TEST_H */
