/* SPDX-License-Identifier: MIT */
/*
 * wow_common.h - what the wow_* examples share: the command line's
 * Redis settings, the bank.Account names, one Redis client and event
 * store per worker, and waiting for a signal.
 */
#ifndef EXAMPLES_WOW_COMMON_H
#define EXAMPLES_WOW_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <aggring.h>
#include <aggring/redis_client.h>
#include <aggring/wow_codec.h>

#define WOW_CONTEXT "bank"
#define WOW_AGGREGATE "Account"
#define WOW_DEPOSIT "Deposit"
#define WOW_DEPOSITED "Deposited"
#define WOW_DEPOSIT_TYPE "bank.account.Deposit"
#define WOW_DEPOSITED_TYPE "bank.account.Deposited"
/*
 * wow_project's group: its own, never the JVM projection's
 * "<context>.ProjectionDispatcher", which would split the entries
 * between the two.
 */
#define WOW_PROJECT_GROUP WOW_CONTEXT ".wow_project"

struct wow_redis_opts {
	const char *host;
	int port;
	bool cluster;
};

/* -h HOST -p PORT -c (cluster); returns true if the option was one. */
bool wow_redis_opt(struct wow_redis_opts *o, int opt, const char *arg);
void wow_redis_options(const struct wow_redis_opts *o, const char *name,
		       agr_redis_options *out);
const agr_wow_named *wow_named(void);

/* One client (and what state_init adds) on each worker of a supplier. */
struct wow_worker_state {
	agr_redis *redis;
	struct agr_wow_event_store *store; /* wow_ledger's */
	void *user;
};

struct wow_workers {
	agr_redis_options redis;
	/* Optional: more per-worker state once the client exists. */
	int (*state_init)(struct wow_worker_state *st);
	void (*state_exit)(struct wow_worker_state *st);
	int n;
	struct wow_worker_state *state; /* n entries, by worker index */
	void *(*user_new)(void);	/* NULL: no user state */
	void (*user_free)(void *user);
	atomic_int closing; /* wow_workers_close's clients not yet closed */
};

/* Hooks for agr_supplier_options: worker_init/worker_exit, hook_arg. */
int wow_workers_init(agr_worker *w, void *arg);
void wow_workers_exit(agr_worker *w, void *arg);
struct wow_worker_state *wow_worker_state(struct wow_workers *ws,
					  agr_worker *w);

/*
 * Closes every worker's client (and what state_exit frees) on its
 * worker and waits up to timeout_ns: a graceful stop of the workers
 * waits for their I/O, and an open connection always has a read out.
 * Returns 0 or -ETIMEDOUT.
 */
int wow_workers_close(struct wow_workers *ws, agr_scheduler *sched,
		      uint64_t timeout_ns);

/* Blocks SIGINT and SIGTERM (call first, before threads start). */
void wow_block_signals(void);
/* Waits for SIGINT or SIGTERM, or until *done; looks at done each 50 ms. */
int wow_wait_signal(atomic_bool *done);

uint64_t wow_now_ms(void);

#endif
