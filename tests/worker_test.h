/* SPDX-License-Identifier: MIT */
/*
 * worker_test.h - what the files of check_worker share (check_worker.c,
 * worker_settings.c).
 */
#ifndef TESTS_WORKER_TEST_H
#define TESTS_WORKER_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "testutil.h"

struct probe {
	agr_worker *w;
	agr_scheduler *sched;
	int index;
	bool interrupted;
	bool has_ring;
	char name[16];
	struct tu_latch done;
};

agr_supplier *new_supplier(int parallelism);
agr_scheduler *lookup(agr_supplier *sup, const char *aggregate);
void run_on(agr_scheduler *s, unsigned hint, agr_task_fn fn,
	    void *arg);
/* Runs probe_task on worker `hint` and waits for it. */
void probe(agr_scheduler *s, unsigned hint, struct probe *p);

/* worker_settings.c */
void worker_settings_tests(TCase *tc);

#endif /* TESTS_WORKER_TEST_H */
