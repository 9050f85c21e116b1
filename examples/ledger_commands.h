/* SPDX-License-Identifier: MIT */
/*
 * ledger_commands.h - what ledger_server's commands mean: PING [msg],
 * ECHO msg, GET account, INCRBY account n, DECRBY account n, INCR
 * account, DECR account, QUIT, and the CONFIG GET and COMMAND replies
 * that clients ask for when they connect. Protocol only: a command
 * becomes either a reply known at once or a message to the account
 * aggregate, whose result becomes a reply here too. No I/O.
 *
 * Amounts are positive; an account name is 1 to 128 printable ASCII
 * characters without spaces (ledger_record.h). GET of an account that
 * never had an event is nil, as redis answers for a missing key.
 */
#ifndef LEDGER_COMMANDS_H
#define LEDGER_COMMANDS_H

#include <stddef.h>

#include "ledger_accounts.h"
#include "resp.h"

#define REPLY_MAX 384 /* the longest reply of one command */

enum command_kind {
	COMMAND_REPLY,	 /* answer `reply` */
	COMMAND_ACCOUNT, /* send op on key with amount to the accounts */
	COMMAND_QUIT,	 /* answer `reply`, then close */
};

struct command_outcome {
	enum command_kind kind;
	size_t len; /* of reply, <= REPLY_MAX */
	char reply[REPLY_MAX];
	enum account_op op;
	struct resp_arg key; /* points into the command */
	long long amount;
};

/* What to do about a parsed command (argc > 0). */
void command_run(const struct resp_command *cmd,
		 struct command_outcome *out);

/* An error reply "-msg\r\n" ("-ERR error" if msg is too long). */
void command_error(struct command_outcome *out, const char *msg);

/*
 * The reply to an account message the dispatcher has completed with
 * `status`, into dst[REPLY_MAX]; its length, 0 if it does not fit.
 */
size_t command_account_reply(const struct account_msg *m, int status,
			     char *dst);

/* The reply to a message agr_dispatcher_send() refused with err. */
size_t command_refused_reply(int err, char *dst);

#endif /* LEDGER_COMMANDS_H */
