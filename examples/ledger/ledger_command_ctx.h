/* SPDX-License-Identifier: MIT */
/*
 * ledger_command_ctx.h - what the files of ledger_server's commands
 * share (ledger_commands.c routes, ledger_session.c answers for the
 * connection, ledger_info.c for the server). Not for other files.
 */
#ifndef LEDGER_COMMAND_CTX_H
#define LEDGER_COMMAND_CTX_H

#include "ledger_commands.h"
#include "ledger_reply.h"

/* One command being run. */
struct command_ctx {
	const struct command_server *srv;
	struct session *s;
	const struct resp_command *cmd;
	struct command_outcome *out;
};

/* "-ERR wrong number of arguments for 'NAME' command". */
void command_wrong_args(const struct command_ctx *x, const char *name);

/* ledger_session.c */
void run_hello(const struct command_ctx *x);
void run_auth(const struct command_ctx *x);
void run_select(const struct command_ctx *x);
void run_client(const struct command_ctx *x);

/* ledger_info.c */
void run_info(const struct command_ctx *x);
void run_config(const struct command_ctx *x);
void run_dbsize(const struct command_ctx *x);

/* ledger_keyspace.c */
void run_scan(const struct command_ctx *x);
void run_watch(const struct command_ctx *x);
void run_unwatch(const struct command_ctx *x);
/* Drops the session's watches (EXEC, DISCARD, UNWATCH, closing). */
void session_unwatch(struct session *s);

/* ledger_commands.c: COMMAND [COUNT | INFO | DOCS] */
void run_command(const struct command_ctx *x);

/* Whether arg, a C string of at most `cap` - 1 bytes, is made of
 * printable ASCII without spaces (Redis's rule for client names). */
bool command_name_valid(const struct resp_arg *arg, size_t cap);

#endif /* LEDGER_COMMAND_CTX_H */
