/* SPDX-License-Identifier: MIT */
/*
 * crash_replay.c - ledger_server's own record encoding and replay
 * (examples/ledger_record.c, ledger_replay.c) for the crash-state
 * checker: it runs the very code a restart runs, not a copy of it.
 */
#include "crash_replay.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../ledger_accounts.h"
#include "../ledger_record.h"
#include "../ledger_replay.h"

_Static_assert(CRASH_RECORD_MAX == RECORD_MAX, "RECORD_MAX changed");

#define REPLAY_GROUPS 16

static pthread_once_t record_once = PTHREAD_ONCE_INIT;

size_t crash_record_encode(char *dst, const char *key, long long delta)
{
	struct record rec = { .kind = RECORD_DELTA, .delta = delta };

	pthread_once(&record_once, record_init);
	snprintf(rec.key, sizeof(rec.key), "%s", key);
	return record_encode(dst, &rec);
}

void crash_replay(const char *dir, bool repair, crash_account_fn *fn,
		  void *arg, struct crash_replayed *out)
{
	struct accounts *accounts;
	struct replay_result r = { 0 };

	pthread_once(&record_once, record_init);
	accounts = accounts_new(REPLAY_GROUPS);
	replay_journals(dir, accounts, repair, &r);
	out->end = r.nends > 0 ? r.ends[0] : 0;
	out->events = r.events;
	out->torn_bytes = r.torn_bytes;
	accounts_each(accounts, fn, arg);
	accounts_free(accounts);
	free(r.ends);
	free(r.open);
}
