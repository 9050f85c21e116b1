/* SPDX-License-Identifier: MIT */
/*
 * settings.h - the library's environment variables: one table that says
 * what each is, and the one place that reads them (internal).
 *
 * A variable is a default for what the caller did not set: the option
 * field of its row, when given, wins. Each is read when its user needs
 * it (a supplier or dispatcher as it is created, a worker as it starts,
 * the wait mode and the doorbell once per process: see `when`), so the
 * accessors below only read and check; callers that read once do so
 * under their own pthread_once. man/man7/aggring-environment.7 lists
 * the same rows, and tests/check-settings.sh keeps the two, and every
 * AGR_ name in src/, in step.
 */
#ifndef AGR_SETTINGS_H
#define AGR_SETTINGS_H

#include "internal.h"

enum agr__setting_id {
	AGR__SETTING_SCHEDULER_POOL_SIZE,
	AGR__SETTING_PARALLELISM,
	AGR__SETTING_IDLE_SPIN_US,
	AGR__SETTING_SUBMIT_BATCH,
	AGR__SETTING_WORKER_CPUS,
	AGR__SETTING_WAIT_MODE,
	AGR__SETTING_NO_SYNC_MSG,
	AGR__SETTINGS /* how many */
};

/* What a bad value does. */
enum agr__setting_bad {
	AGR__BAD_FALLS_BACK, /* logged; the default applies */
	AGR__BAD_REFUSED,    /* logged; the call that read it fails */
};

struct agr__setting {
	const char *name;    /* the variable */
	const char *dflt;    /* the default when unset, in words */
	const char *range;   /* the values it takes, in words */
	const char *option;  /* the field that overrides it; NULL: none */
	const char *when;    /* when it is read */
	const char *meaning; /* one line */
	long min, max;	     /* an integer's bounds; 0, 0: not one */
	enum agr__setting_bad bad;
};

extern const struct agr__setting agr__settings[AGR__SETTINGS];

/*
 * A count from the caller (a supplier's workers, a dispatcher's groups;
 * `id` names its variable): > 0 as given, 0 for the variable when set,
 * else `fallback`. A negative count, or a variable that is not an
 * integer in its row's range, is -EINVAL (the variable is logged).
 */
int agr__setting_count(enum agr__setting_id id, int given, int fallback);

/*
 * The idle spin in microseconds: `option` when >= 0, else
 * AGR_IDLE_SPIN_US. Returns true with `*us` set, false when neither is
 * (a bad variable is logged): the worker then picks its own.
 */
bool agr__setting_idle_spin_us(int option, long *us);

/*
 * The submit batch: `option` when >= 0, else AGR_SUBMIT_BATCH in
 * 0..sq_entries, else (unset, or bad and logged) `dflt`.
 */
unsigned agr__setting_submit_batch(int option, unsigned sq_entries,
				   unsigned dflt);

/*
 * AGR_WORKER_CPUS parsed into `cpus` (at most `max`). Returns their
 * number, 0 when unset or empty, or -EINVAL when it is not a CPU list
 * (logged with `who`); `*text` gets the variable's value.
 */
int agr__setting_worker_cpus(const char *who, int *cpus, int max,
			     const char **text);

/* AGR_WAIT_MODE: unset, enter or eventfd. */
enum agr__wait_setting {
	AGR__WAIT_UNSET,
	AGR__WAIT_SET_ENTER,
	AGR__WAIT_SET_EVENTFD,
};

/*
 * AGR_WAIT_MODE: "eventfd", "enter" (or empty), or unset; anything
 * else is logged and is "enter".
 */
enum agr__wait_setting agr__setting_wait_mode(void);

/* AGR_NO_SYNC_MSG: true when set, to anything. */
bool agr__setting_no_sync_msg(void);

#endif /* AGR_SETTINGS_H */
