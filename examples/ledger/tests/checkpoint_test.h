/* SPDX-License-Identifier: MIT */
/*
 * checkpoint_test.h - what the files of check_ledger_checkpoint share:
 * checks that stop the program, scratch directories, two journals'
 * workload and the state a restart builds from them, as text.
 */
#ifndef EXAMPLES_LEDGER_TESTS_CHECKPOINT_TEST_H
#define EXAMPLES_LEDGER_TESTS_CHECKPOINT_TEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ledger_checkpoint.h"

#define FAIL(...)                                                        \
	do {                                                             \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);          \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		exit(1);                                                 \
	} while (0)

#define CHECK(c)                                                         \
	do {                                                             \
		if (!(c))                                                \
			FAIL("%s (%s)", #c, strerror(errno));            \
	} while (0)

#define NJ 2	      /* journals */

#define SECTOR 512u

#define NRANDOM 4     /* random tears per data choice */

int rm_rf(const char *dir);
/* dir/name into p[cap], or FAIL. */
void path_of(char *p, size_t cap, const char *dir, const char *name);
/*
 * Replays dir as a restart does (repairing), into one string: every
 * account's records in order (its balance or string, and the request
 * ids with their replies), then the open transfers. The caller's.
 */
char *restart_state(const char *dir, uint64_t *seq, unsigned *skipped);
void copy_file(const char *from, const char *to);
/* A copy of dir's journals only: what a replay without checkpoints sees. */
char *full_replay_state(const char *dir);
/* A cycle: with builder b (kept from cycle to cycle, as the server's), else
 * from the disk alone. */
uint64_t take(struct checkpoint_builder *b, const char *dir,
	      const uint64_t *ends, const struct checkpoint_options *o);
/* Records [from, to) of journal j into dir and ref (never checkpointed). */
uint64_t append_both(const char *dir, const char *ref, unsigned j,
		     unsigned from, unsigned to);

/* 3: crash states of checkpoint cycles (checkpoint_crash_states.c). */
void test_crash_states(void);

#endif /* EXAMPLES_LEDGER_TESTS_CHECKPOINT_TEST_H */
