/* SPDX-License-Identifier: MIT */
/*
 * ledger_accounts.h - the account aggregate of ledger_server: the
 * balances, the messages that read and change them, and the bank that
 * handles those messages on the dispatcher's groups.
 *
 * Each account is an aggregate, routed by name to a group; a group
 * reads and writes only its own table of balances, serially, so no lock
 * is needed.
 *
 * Durability. A change is journaled (ledger_journal.h) in the journal
 * of the group's worker as one record and applied in memory at once;
 * the message completes then, so that the group runs the account's next
 * message without waiting for the disk, and many changes of one hot
 * account share one durable write (group commit). No reply says more
 * than the disk holds:
 * - the reply of a change goes out only once its record is durable
 *   (bank_completed holds it until then); batches become durable in
 *   order, so the records before it are too;
 * - a message that journals nothing (GET, EXISTS, WATCH, a refusal, a
 *   retry answered again, EXEC aborted by a watched change) waits
 *   likewise for the batch of the account's last change (or of its
 *   group's last close, for an account not there); SCAN waits for its
 *   group's last change;
 * - if a batch fails, the journal fails for good: every reply waiting
 *   on it or later says so, no change is accepted any more, and every
 *   message on an account that batch or a later one touched fails too
 *   (it would wait for a batch that never becomes durable). The memory
 *   keeps those changes, but no acknowledged reply ever shows them: a
 *   restart replays only what is durable. (Rolling them back instead
 *   would need an undo per change; refusing is simpler, and a failed
 *   journal stops the service anyway.)
 * DBSIZE and INFO count accounts in memory, so they may include one
 * whose creation is not durable yet. WATCH compares changes as they are
 * applied, durable or not, as Redis's WATCH sees a change when it is
 * made: a transaction aborted by one waits for it like a read.
 * Transfers' messages are the exception: each holds its group until
 * its record is durable, because its handler sends the saga's next step.
 *
 * Request ids. A change may carry a request id (a client's name for the
 * request, ledger_record.h). The id is journaled with the change, and
 * each account remembers the ids of its last REQID_WINDOW changes with
 * their replies, across restarts: a request whose id is among them is a
 * retry, answered with the first reply, and applies nothing. A refused
 * request (an overdraft) changed nothing and is not remembered: its
 * retry is evaluated afresh. Closing an account forgets its ids.
 * A transaction with an id is remembered with the results of all its
 * commands (what EXEC answered), and a transfer with an id on its
 * source account, with the source's balance after the debit (or the
 * refund that followed it).
 *
 * Strings. A key holds either a balance (an account) or a string of at
 * most VALUE_MAX bytes (SET with a value that is not a balance); a
 * deposit, a withdrawal or a transfer on a string is refused
 * (ACCOUNT_NOT_INTEGER); SET of a balance makes it an account again.
 */
#ifndef LEDGER_ACCOUNTS_H
#define LEDGER_ACCOUNTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring.h>

#include "ledger_journal.h"
#include "ledger_record.h"

#define REQID_WINDOW 32 /* request ids remembered per account */

/* ---- balances: one table per group ---- */

struct accounts;

struct accounts *accounts_new(int ngroups);
void accounts_free(struct accounts *a);

/*
 * Replay: applies a journal record to the account in its group's table
 * (agr_group_key); false if the balance would overflow.
 */
bool accounts_apply(struct accounts *a, const struct record *rec);

/* The number of accounts; any thread (a relaxed count). */
uint64_t accounts_count(const struct accounts *a);

/*
 * Calls fn for every account, group by group (a string's balance is
 * 0).
 */
void accounts_each(const struct accounts *a,
		   void (*fn)(void *arg, const char *key, long long balance),
		   void *arg);

/*
 * Calls fn with records that, applied in that order with
 * accounts_apply() to an empty table, rebuild every account as it is:
 * its balance or string, and the request ids it remembers with their
 * replies (a checkpoint, ledger_checkpoint.h). rec is valid only during
 * the call.
 */
void accounts_dump(const struct accounts *a,
		   void (*fn)(void *arg, const struct record *rec), void *arg);

/*
 * The same for groups first, first + step, ...: the groups of worker
 * `first` of `step` (group g runs on worker g % parallelism).
 */
void accounts_dump_groups(const struct accounts *a, int first, int step,
			  void (*fn)(void *arg, const struct record *rec),
			  void *arg);

/* ---- messages ---- */

enum account_op {
	OP_GET,	     /* GET: the balance, or nil */
	OP_EXISTS,   /* EXISTS: whether the account is open */
	OP_DEPOSIT,  /* INCRBY, INCR */
	OP_WITHDRAW, /* DECRBY, DECR: never below zero */
	OP_SET,	     /* SET: the balance becomes amount (>= 0) */
	OP_CLOSE,    /* DEL: the account is closed */
	OP_XFER_DEBIT,	/* TRANSFER, on the source: a withdrawal */
	OP_XFER_CREDIT, /* TRANSFER, on the destination: a deposit */
	OP_XFER_REFUND, /* TRANSFER, the credit refused: back to the source */
	OP_TYPE,	/* TYPE: whether the key exists */
	OP_STRLEN,	/* STRLEN: the length of the value */
	OP_WATCH,	/* WATCH: the key's state now, into the message's watch */
	OP_SCAN,	/* SCAN: the keys of one group (the message's scan) */
};

/* What became of one step; set by the bank before it completes. */
enum account_result {
	ACCOUNT_NONE,	   /* not run (discarded, or the journal failed) */
	ACCOUNT_CHANGED,   /* a deposit or withdrawal: now `balance` */
	ACCOUNT_SET,	   /* a SET */
	ACCOUNT_FOUND,	   /* a GET, EXISTS: the account holds `balance` */
	ACCOUNT_MISSING,   /* GET, EXISTS, DEL: no such account */
	ACCOUNT_CLOSED,	   /* a DEL: the account was open, now is not */
	ACCOUNT_OVERDRAFT, /* a withdrawal larger than the balance */
	ACCOUNT_OVERFLOW,  /* the balance would overflow */
	ACCOUNT_NOT_INTEGER, /* a deposit or withdrawal on a string */
};

/* One command on an account: a message holds one, or a transaction's. */
struct account_step {
	enum account_op op;
	enum account_result result;
	long long amount; /* > 0; SET: >= 0 */
	long long balance;
	/*
	 * SET of a string: its value; FOUND: the key's string, else NULL.
	 * The step's own (xmalloc), freed by account_steps_free().
	 */
	char *str;
	unsigned str_len;
};

/* Frees what steps[0, n) hold (not the array). */
void account_steps_free(struct account_step *steps, unsigned n);

/* Makes a SET step's value a copy of [p, p + len) (len <= VALUE_MAX). */
void account_step_set_str(struct account_step *st, const char *p,
			  size_t len);

/*
 * WATCH: the state of a key when its OP_WATCH message ran, for EXEC to
 * compare. Shared by the session and the messages that fill and read
 * it; reference counted, any thread.
 */
struct watch {
	atomic_uint refs;
	bool set;     /* its OP_WATCH has run */
	bool existed; /* the key existed then */
	uint64_t seq; /* the group's count of changes then */
	char key[KEY_MAX + 1];
};

/* A watch of key[0, len), one reference (the caller's). */
struct watch *watch_new(const char *key, size_t len);
struct watch *watch_get(struct watch *w);
void watch_put(struct watch *w);

/*
 * SCAN: the keys of one group, each passed to found() on the group's
 * worker; the sender's.
 */
struct account_scan {
	int group;
	void (*found)(void *arg, const char *key);
	void *arg;
};

/* How a transaction ended, when it did not simply run. */
enum txn_outcome {
	TXN_RAN,
	TXN_WATCH_CHANGED,    /* a watched key changed: nothing applied */
	TXN_RESULTS_TOO_LONG, /* with REQID, results over RESULTS_MAX */
	TXN_REQID_REUSED,     /* REQID of another transaction's */
};

/*
 * A message to an account: steps[0, nsteps) run in order, as one
 * atomic change journaled as one record (ledger_record.h). The sender
 * fills it with account_msg_init() or account_msg_init_steps() and
 * keeps it alive until the dispatcher's completion; then it reads the
 * steps' results, and `journal_failed` (nothing was applied). The other
 * fields are the bank's while the message runs.
 */
struct transfer;
struct bank_completion;

struct account_msg {
	agr_message msg; /* aggregate_id: key; type: op's; user: sender's */
	struct transfer *xfer; /* one of a transfer's messages, or NULL */
	struct account_step *steps;
	unsigned nsteps;
	bool journal_failed;
	struct account_step one; /* steps for a single command */
	bool txn;		 /* a transaction (account_msg_init_steps) */
	enum txn_outcome txn_outcome;
	struct watch *watch;	  /* OP_WATCH: filled in when it runs */
	struct watch **watches;	  /* a transaction's (the sender's) */
	unsigned nwatches;
	struct account_scan *scan; /* OP_SCAN */
	char *results;		  /* the bank's: a transaction's, encoded */
	/*
	 * The bank's, only while the message runs: the string after the
	 * steps, a step's or the account's own (gone with its next change).
	 */
	const char *after_str;
	unsigned after_str_len;
	bool after_exists;	 /* the account after the steps */
	long long after_balance;
	struct bank *bank;
	agr_exchange *ex; /* a transfer's, until it completes */
	int group;
	unsigned worker;
	bool journaled;	  /* a record of it is in the journal */
	bool answered;	  /* a retry, answered with the first reply */
	bool awaiting;	  /* its reply waits for the journal */
	const struct bank_completion *completed; /* while awaiting */
	int completed_status;
	struct commit_wait wait;
	char key[KEY_MAX + 1];
	char reqid[REQID_MAX + 1]; /* "" or the request id */
};

/* key[0, len) a valid account name (key_valid). */
void account_msg_init(struct account_msg *m, enum account_op op,
		      const char *key, size_t len, long long amount,
		      void *user);

/*
 * A request id for a change or a transaction (reqid_valid); for a
 * transfer, use transfer_set_reqid().
 */
void account_msg_set_reqid(struct account_msg *m, const char *id, size_t len);

/* A transaction: steps[0, n) (the caller's, alive as long as m). */
void account_msg_init_steps(struct account_msg *m, const char *key,
			    size_t len, struct account_step *steps,
			    unsigned n, void *user);

/*
 * The dispatcher's group_key option: a SCAN message goes to the group
 * it lists, every other message to its key's (agr_group_key).
 */
int bank_group_key(const agr_message *msg, int parallelism, void *arg);

/* ---- transfers: a saga across two accounts ----
 *
 * TRANSFER from to amount: the debit runs on the source's group and is
 * journaled (" #d:XID:TO"); once it is durable, that handler sends the
 * credit to the destination's group (agr_dispatcher_send from a
 * handler), journaled there (" #t:XID:FROM"). If the credit is refused
 * (the balance would overflow), its handler sends a refund back to the
 * source (" #r:XID"). The transfer has ended when the last of its
 * messages completes; until then the money is in flight, and the sum of
 * the balances plus what is in flight never changes. A crash leaves a
 * debit without its credit or refund: replay finds it (ledger_replay.h)
 * and bank_resume_transfers() sends its credit again, which settles or
 * refunds it.
 */
enum transfer_outcome {
	TRANSFER_PENDING,    /* not ended (or a journal failed on the way) */
	TRANSFER_SETTLED,    /* debited and credited */
	TRANSFER_REFUSED,    /* the debit was refused: nothing changed */
	TRANSFER_REFUNDED,   /* the credit was refused: money returned */
	TRANSFER_UNFINISHED, /* stopped midway: replay finishes it */
};

#define XFER_ID_MAX REQID_MAX

struct transfer {
	struct account_msg debit, credit, refund;
	atomic_uint inflight; /* messages sent and not completed */
	enum transfer_outcome outcome;
	enum account_result refusal; /* REFUSED, REFUNDED: why */
	long long from_balance;	     /* SETTLED: the source's, after */
	bool recovery;		     /* resumed at startup: no client */
	char id[XFER_ID_MAX + 1];
};

/* Starts this process's transfer ids (bank_new() calls it). */
void transfer_ids_init(void);

/*
 * A transfer from `from` to `to` (valid, different account names) of
 * amount > 0, with a new id; `user` goes to its messages. The sender
 * sends x->debit and keeps x alive until transfer_message_done() says
 * the transfer has ended.
 */
void transfer_init(struct transfer *x, const char *from, size_t flen,
		   const char *to, size_t tlen, long long amount, void *user);

/*
 * A client's request id for x (reqid_valid, no ':', under REQID_MAX
 * bytes): x's id becomes "@" and it, so a retry finds the first.
 */
void transfer_set_reqid(struct transfer *x, const char *id, size_t len);

/*
 * The completion callback, for a message whose xfer is x: true if it
 * was x's last (x->outcome is final; x is the sender's again).
 */
bool transfer_message_done(struct transfer *x);

static inline struct account_msg *account_msg_of(agr_message *msg)
{
	return (struct account_msg *)(void *)((char *)msg -
					      offsetof(struct account_msg,
						       msg));
}

/* ---- the bank: the handlers, and a journal per worker ---- */

struct bank;

/*
 * Registers the account handler on `disp` (not started yet) over
 * `accounts` (one table per group of disp; the bank takes them). The
 * journals are opened with bank_journal() before the
 * dispatcher starts. Returns the bank; a failure ends the program.
 */
struct bank *bank_new(agr_dispatcher *disp, struct accounts *accounts);

/* Worker w's journal. */
struct journal *bank_journal(struct bank *b, unsigned w);

/* The scheduler whose workers run the bank's groups. */
agr_scheduler *bank_scheduler(const struct bank *b);

/* The accounts, one table per group; each read only on its worker. */
const struct accounts *bank_tables(const struct bank *b);

/* Withdrawals refused for want of funds, over all workers. */
uint64_t bank_overdrafts(const struct bank *b);

/* Changes made durable, over all workers; any thread (relaxed). */
uint64_t bank_changes(const struct bank *b);

/* The number of open accounts; any thread (relaxed). */
uint64_t bank_accounts(const struct bank *b);

/* A transfer replay found open: debited, neither credited nor refunded. */
struct open_transfer {
	char id[REQID_MAX + 1];
	char from[KEY_MAX + 1], to[KEY_MAX + 1];
	long long amount;
};

/*
 * Once the dispatcher has started: sends the credit of each open
 * transfer again (they end on their own; no client waits for them).
 * Returns how many were sent.
 */
unsigned bank_resume_transfers(struct bank *b, agr_dispatcher *disp,
			       const struct open_transfer *open, unsigned n);

/* Where a test makes the server kill itself (--crash-after). */
enum crash_point {
	CRASH_NEVER,
	CRASH_AFTER_DEBIT,   /* the debit durable, its credit not sent */
	CRASH_AFTER_CREDIT,  /* the credit durable, not yet completed */
	CRASH_AFTER_REFUSAL, /* the credit refused, its refund not sent */
};
void bank_set_crash(struct bank *b, enum crash_point at);

/*
 * The dispatcher's completion callback (agr_dispatcher_options
 * on_complete, with complete_arg a struct bank_completion that lives as
 * long as the dispatcher): forwards each completion to c->fn, but that
 * of a message whose reply waits for the journal only once it is
 * durable or failed (m->journal_failed), on the journal's worker.
 */
struct bank_completion {
	agr_complete_fn fn;
	void *arg;
};
void bank_completed(agr_message *msg, int status, void *arg);

/* Closes the journals, frees the accounts; the workers have ended. */
void bank_free(struct bank *b);

#endif /* LEDGER_ACCOUNTS_H */
