/* SPDX-License-Identifier: MIT */
/*
 * crash_replay.h - ledger_server's own record encoding and replay, for
 * the crash-state checker (tests/check_crash_states.c).
 */
#ifndef CRASH_REPLAY_H
#define CRASH_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRASH_RECORD_MAX 1920 /* ledger_server's RECORD_MAX */

struct crash_replayed {
	uint64_t end;	     /* journal-0.log's whole records end here */
	uint64_t events;     /* records applied */
	uint64_t torn_bytes; /* found after them, neither zeros nor nothing */
};

typedef void crash_account_fn(void *arg, const char *key, long long balance);

/* ledger_server's record for an event; dst holds CRASH_RECORD_MAX. */
size_t crash_record_encode(char *dst, const char *key, long long delta);

/*
 * Replays the journals in `dir` as a restarting ledger_server does
 * (cutting a torn tail off when `repair`, as the server does before it
 * writes again), or as --verify does; then calls fn for every account
 * with its balance. Replay ends the process on an error it cannot go
 * past (as the server does), so the checker sees that too.
 */
void crash_replay(const char *dir, bool repair, crash_account_fn *fn,
		  void *arg, struct crash_replayed *out);

#endif /* CRASH_REPLAY_H */
