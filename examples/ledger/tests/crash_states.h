/* SPDX-License-Identifier: MIT */
/*
 * crash_states.h - what the files of check_crash_states share: the
 * recorded run (crash_run.c), the explorer of its crash states
 * (crash_explore.c), their scratch files (crash_files.c) and the
 * recovery they check (check_crash_states.c, which says how it all
 * works).
 */
#ifndef LEDGER_TESTS_CRASH_STATES_H
#define LEDGER_TESTS_CRASH_STATES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ledger_journal.h"
#include "crash_replay.h"

#define SECTOR 512u
#define MAX_SECTORS 64	  /* of one write in the workload */
#define TEAR_ALL 10	  /* up to this many sectors: every subset */
#define MAX_OPS 4096	  /* writes and fdatasyncs of one run */
#define MAX_RECORDS 2048  /* of one run, restarts included */
#define PHASE1_RECORDS 700
#define PHASE2_RECORDS 80
#define BURST_MAX 150	  /* records appended in one task */
#define RESTARTS 3	  /* crash states restarted from, per mode */
#define REPORT_MAX 5	  /* violations printed in full */

/* ---- records: one account each, so a balance tells which and how often */

struct record {
	char key[16];
	long long amount;
	long ack_at; /* clock when acknowledged; LONG_MAX never */
};

/* A write or an fdatasync the journal issued, on the run's clock. */
struct op {
	enum journal_stream stream;
	bool sync, dsync;
	uint64_t at;
	size_t len;
	char *data;
	long issued, completed; /* clock; completed -1 while in flight */
	long durable;		/* from this clock on; LONG_MAX never */
	int res;
};

/* One recorded run: what the journal did, and the records it took. */
struct run {
	long clock;
	struct op ops[MAX_OPS];
	unsigned nops;
	long inflight[2]; /* per stream: the op in flight, or -1 */
	char *base;	  /* the file when the run began */
	size_t base_len;
	struct record recs[MAX_RECORDS];
	unsigned nrecs;	   /* in the file's order */
	unsigned first;	   /* recs[first..] are this run's */
	bool overflow;	   /* more ops than MAX_OPS: the run is void */
};

/* What one replay of a crash state brought back. */
struct recovered {
	const struct run *run;
	unsigned short count[MAX_RECORDS]; /* times each record came back */
	unsigned invented, duplicated;
	char bad_key[CRASH_RECORD_MAX];
	struct crash_replayed out;
};

typedef void recover_fn(const char *dir, bool repair, struct recovered *rc);

/* What the explorer counts and reports. */
enum violation {
	V_LOST_ACKED,	/* acknowledged, not recovered */
	V_DUPLICATED,	/* recovered more than once */
	V_INVENTED,	/* an account or amount never appended */
	V_OUT_OF_ORDER, /* recovered after a record that was not */
	V_NOT_IDEMPOTENT, /* a second replay cut more or found otherwise */
	V_KINDS
};

/* A crash state the restart test goes on from. */
struct restart {
	char *image; /* the journal as replay left it */
	size_t len;
	uint64_t end;
	unsigned recovered; /* records */
};

/* The crash states of one run, explored within a budget. */
struct explorer {
	const char *mode;
	const struct run *run;
	recover_fn *recover;
	char *dir;	  /* the crash state's directory */
	char path[PATH_MAX + 16];
	char *img;	  /* the state being built */
	size_t img_len, img_cap;
	uint64_t budget;  /* states for this run */
	uint64_t states, groups, reordered, torn_states, cut, unacked_kept;
	unsigned max_inflight; /* writes in flight at once, at most */
	uint64_t found[V_KINDS];
	unsigned reported;
	struct restart restarts[RESTARTS];
	unsigned restart_seen; /* candidates seen, for reservoir sampling */
	bool want_restarts;
};

/* The one seeded PRNG of a run (CRASH_SEED), check_crash_states.c. */
uint64_t rng_next(void);
unsigned rng_below(unsigned n);

/* ---- the recorded run: crash_run.c ---- */
void record_make(struct record *r, char prefix, unsigned i);
/*
 * Runs a journal on `path` (holding `end` bytes of whole records) with
 * records r->recs[r->first..r->nrecs-1] and records what it does.
 * Returns whether the journal went direct.
 */
bool record_run(struct run *r, const char *path, uint64_t end,
		enum journal_io io, enum journal_sync sync);
/* When write o is durable (its bytes count), or LONG_MAX never. */
long durable_at(const struct run *r, const struct op *o);
void run_free(struct run *r);

/* ---- scratch files: crash_files.c ---- */
const char *disk_root(void);
const char *state_root(void);
char *make_dir(const char *root, const char *what);
void remove_dir(char *dir);
char *read_file(const char *path, size_t *len);
void write_file(const char *path, const char *p, size_t len);

/* ---- the explorer: crash_explore.c ---- */
extern const char *const violation_name[V_KINDS];
/* "VIOLATION", or what the planted tests call what they expect. */
extern const char *violation_word;
/* For the crash handler and the reports: the state being replayed. */
extern char current_state[512];
/* Every crash point of the run, one group at a time, within budget. */
void explore_run(struct explorer *x);

#endif /* LEDGER_TESTS_CRASH_STATES_H */
