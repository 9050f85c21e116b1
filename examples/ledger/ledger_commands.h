/* SPDX-License-Identifier: MIT */
/*
 * ledger_commands.h - what ledger_server's commands mean. Protocol
 * only: a command becomes either a reply known at once or messages to
 * the account aggregate (ledger_accounts.h), whose results become
 * replies here too. No I/O.
 *
 * Data: GET, MGET, EXISTS, TYPE, STRLEN, SET key value (a balance, or a
 * string of at most VALUE_MAX bytes), DEL, INCRBY, DECRBY, INCR, DECR,
 * DBSIZE, SCAN; MULTI, EXEC, DISCARD, WATCH, UNWATCH on one account;
 * TRANSFER from to amount across two (ledger_accounts.h). Connection: HELLO (protocol 2; 3 is refused with
 * -NOPROTO), AUTH (with --requirepass), SELECT 0, CLIENT SETNAME,
 * GETNAME, ID, SETINFO, LIST, INFO, PING, ECHO, QUIT. Server: INFO,
 * COMMAND (COUNT, INFO, DOCS), CONFIG GET. The reply texts are Redis's.
 *
 * Idempotent retries: INCRBY, DECRBY, INCR, DECR, SET, TRANSFER and
 * MULTI take an optional trailing "REQID id" (ledger_accounts.h says
 * what a known id does; a transfer's id has no ':').
 *
 * SCAN's cursor is the next group to list (0: done): each call answers
 * one group's keys whole, whatever COUNT says (a hint, as in Redis), so
 * a key there for the whole scan is returned exactly once.
 *
 * Amounts are positive, balances never negative; an account name is 1
 * to 128 printable ASCII characters without spaces (ledger_record.h).
 * An account that never had an event, or was closed by DEL, is missing:
 * GET is nil, EXISTS 0, as Redis answers for a missing key.
 */
#ifndef LEDGER_COMMANDS_H
#define LEDGER_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ledger_accounts.h"
#include "resp.h"

#define REPLY_MAX 384	     /* the longest reply of one account message */
#define CLIENT_NAME_MAX 255  /* CLIENT SETNAME, lib-name, lib-ver */
#define KEYS_MAX (RESP_MAX_ARGS - 1) /* MGET, EXISTS, DEL */
#define TXN_MAX 1024	     /* commands queued in one transaction */
#define WATCH_MAX 1024	     /* keys watched by one connection */

/* What INFO and DBSIZE report; filled by the server's stats hook. */
struct server_stats {
	uint64_t connected, connections, rejected, commands;
	uint64_t protocol_errors, accounts, changes, overdrafts;
	uint64_t output_limit_closed;
	const char *journal_error; /* the first failed journal's why; NULL */
};

/* The server, as the commands see it; set up once, then read only. */
struct command_server {
	const char *requirepass; /* NULL: no AUTH needed */
	size_t max_bulk;	 /* --proto-max-bulk-len */
	size_t query_buf_max;	 /* --client-query-buffer-limit */
	/* --client-output-buffer-limit: replies a client has not read */
	size_t out_hard, out_soft; /* bytes; 0: no limit */
	uint64_t out_soft_ns;	   /* how long over out_soft closes */
	unsigned maxclients;	 /* --maxclients */
	unsigned workers;
	int groups;
	uint64_t start_ns; /* now_ns() at startup */
	/* Any thread; a snapshot of the counters. */
	void (*stats)(void *arg, struct server_stats *st);
	void *stats_arg;
};

/* One client connection's state; its connection's, on its worker. */
struct session {
	uint64_t id;
	uint64_t since_ns;
	bool authed;
	int fd;
	char addr[64], laddr[64]; /* "ip:port" */
	char name[CLIENT_NAME_MAX + 1];
	char lib_name[CLIENT_NAME_MAX + 1], lib_ver[CLIENT_NAME_MAX + 1];
	/* MULTI: the commands queued, and what EXEC will refuse. */
	bool multi;
	bool multi_dirty; /* a queued command was refused: EXECABORT */
	bool multi_cross; /* more than one account: CROSSSLOT */
	struct account_step *queued;
	unsigned nqueued;
	char multi_key[KEY_MAX + 1]; /* the account of the first */
	char multi_reqid[REQID_MAX + 1]; /* MULTI REQID id, or "" */
	/* WATCH: the keys watched (one reference each), for EXEC. */
	struct watch **watches;
	unsigned nwatches;
};

enum command_kind {
	COMMAND_REPLY,	 /* answer `reply` */
	COMMAND_ACCOUNT, /* send op on key with amount to the accounts */
	COMMAND_KEYS,	 /* op on each of argv[1, argc): MGET, EXISTS, DEL */
	COMMAND_TXN,	 /* EXEC: steps[0, nsteps) on key, as one message */
	COMMAND_TRANSFER, /* amount from key to key2: a saga */
	COMMAND_QUIT,	 /* answer `reply`, then close */
	COMMAND_SCAN,	 /* list the keys of `scan`'s group */
};

struct command_outcome {
	enum command_kind kind;
	struct buf *reply;    /* the caller's; COMMAND_REPLY, QUIT */
	enum account_op op;   /* ACCOUNT, KEYS */
	struct resp_arg key;  /* ACCOUNT: points into the command */
	struct resp_arg key2; /* TRANSFER: the destination */
	long long amount;     /* ACCOUNT */
	struct resp_arg reqid; /* ACCOUNT: REQID's id, or len 0 */
	bool count;	      /* KEYS: reply the number found (else MGET) */
	struct account_step *steps; /* TXN: the caller's now, to free() */
	unsigned nsteps;	    /* TXN */
	struct resp_arg value;	    /* ACCOUNT SET of a string, or p NULL */
	/*
	 * TXN: the watches EXEC checks; KEYS with OP_WATCH: argv[i + 1]'s
	 * watch, or NULL. The caller's now: the array, and a reference each.
	 */
	struct watch **watches;
	unsigned nwatches;
	struct account_scan *scan; /* SCAN: the caller's, for its reply */
};

/* A new connection's session; fd its socket (for addresses). */
void session_init(struct session *s, const struct command_server *srv,
		  uint64_t id, int fd);
/* Frees what a closing connection's session holds. */
void session_free(struct session *s);

/*
 * What to do about a parsed command (argc > 0). out->reply must be set
 * by the caller; it is emptied first and holds the reply of
 * COMMAND_REPLY and COMMAND_QUIT.
 */
void command_run(const struct command_server *srv, struct session *s,
		 const struct resp_command *cmd, struct command_outcome *out);

/* The reply to a protocol error: "-ERR Protocol error: ...". */
void command_protocol_error(struct buf *reply, const char *msg);

/*
 * The reply to an account message the dispatcher has completed with
 * `status`, into dst[REPLY_MAX]; its length, 0 if it does not fit.
 */
size_t command_account_reply(const struct account_msg *m, int status,
			     char *dst);

/*
 * The reply to a completed EXEC (COMMAND_TXN): an array of the steps'
 * replies, or one error when nothing was applied; appended to dst.
 */
void command_txn_reply(const struct account_msg *m, int status,
		       struct buf *dst);

/* The reply to a transfer that has ended, into dst[REPLY_MAX]. */
size_t command_transfer_reply(const struct transfer *x, char *dst);

/*
 * The reply to a completed SCAN (its message's scan, which this
 * frees), appended to dst.
 */
void command_scan_reply(const struct account_msg *m, int status,
			struct buf *dst);

/* Frees what a request's message holds: its steps' strings, watches. */
void command_msg_release(struct account_msg *m);

/* Whether a completed EXISTS or DEL message counts 1 (KEYS count). */
bool command_account_counts(const struct account_msg *m, int status);

/* The reply to a message agr_dispatcher_send() refused with err. */
size_t command_refused_reply(int err, char *dst);

#endif /* LEDGER_COMMANDS_H */
