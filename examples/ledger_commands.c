/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_commands.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ledger_record.h"

struct command {
	const char *name;
	int arity; /* n: exactly n words; -n: at least n */
	void (*run)(const struct resp_command *cmd,
		    struct command_outcome *out);
};

void command_error(struct command_outcome *out, const char *msg)
{
	out->kind = COMMAND_REPLY;
	out->len = resp_encode_error(out->reply, REPLY_MAX, msg);
	if (out->len > REPLY_MAX)
		out->len = resp_encode_error(out->reply, REPLY_MAX,
					     "ERR error");
}

/* PONG, OK: none of ours is too long. */
static void reply_simple(struct command_outcome *out, const char *s)
{
	out->kind = COMMAND_REPLY;
	out->len = resp_encode_simple(out->reply, REPLY_MAX, s);
}

static void run_account(const struct resp_command *cmd,
			struct command_outcome *out, enum account_op op)
{
	long long amount = 1;

	if (!key_valid(cmd->argv[1].p, cmd->argv[1].len)) {
		command_error(out, "ERR invalid account name: 1 to 128 "
			      "printable characters, no spaces");
		return;
	}
	if (op != OP_GET && cmd->argc == 3) {
		if (!resp_parse_ll(cmd->argv[2].p, cmd->argv[2].len,
				   &amount)) {
			command_error(out, "ERR value is not an integer or "
				      "out of range");
			return;
		}
		if (amount <= 0) {
			command_error(out, "ERR amount must be positive");
			return;
		}
	}
	out->kind = COMMAND_ACCOUNT;
	out->op = op;
	out->key = cmd->argv[1];
	out->amount = amount;
}

static void run_get(const struct resp_command *cmd,
		    struct command_outcome *out)
{
	run_account(cmd, out, OP_GET);
}

static void run_deposit(const struct resp_command *cmd,
			struct command_outcome *out)
{
	run_account(cmd, out, OP_DEPOSIT);
}

static void run_withdraw(const struct resp_command *cmd,
			 struct command_outcome *out)
{
	run_account(cmd, out, OP_WITHDRAW);
}

/* PING msg, ECHO msg: a reply must fit a request's reply buffer. */
static void reply_bulk_arg(struct command_outcome *out,
			   const struct resp_arg *arg)
{
	size_t n = resp_encode_bulk(out->reply, REPLY_MAX, arg->p, arg->len);

	if (n > REPLY_MAX) {
		command_error(out, "ERR message too long");
		return;
	}
	out->kind = COMMAND_REPLY;
	out->len = n;
}

static void run_ping(const struct resp_command *cmd,
		     struct command_outcome *out)
{
	if (cmd->argc > 2)
		command_error(out, "ERR wrong number of arguments for "
			      "'ping' command");
	else if (cmd->argc == 2)
		reply_bulk_arg(out, &cmd->argv[1]);
	else
		reply_simple(out, "PONG");
}

static void run_echo(const struct resp_command *cmd,
		     struct command_outcome *out)
{
	reply_bulk_arg(out, &cmd->argv[1]);
}

static void run_quit(const struct resp_command *cmd,
		     struct command_outcome *out)
{
	(void)cmd;
	reply_simple(out, "OK");
	out->kind = COMMAND_QUIT; /* close after the replies queued */
}

/*
 * CONFIG GET: redis-benchmark reads "save" and "appendonly" before it
 * starts. The answers describe this server: every event is
 * fsync'ed ("appendfsync always"), nothing is snapshotted.
 */
static const char *const config_params[][2] = {
	{ "appendfsync", "always" },
	{ "appendonly", "yes" },
	{ "save", "" },
};
#define NPARAMS (sizeof(config_params) / sizeof(config_params[0]))

static bool config_matches(const struct resp_command *cmd, const char *name)
{
	char pattern[64];
	int i;

	for (i = 2; i < cmd->argc && i < RESP_MAX_ARGS; i++) {
		if (cmd->argv[i].len >= sizeof(pattern))
			continue;
		memcpy(pattern, cmd->argv[i].p, cmd->argv[i].len);
		pattern[cmd->argv[i].len] = '\0';
		if (fnmatch(pattern, name, FNM_CASEFOLD) == 0)
			return true;
	}
	return false;
}

static void run_config(const struct resp_command *cmd,
		       struct command_outcome *out)
{
	char *reply = out->reply;
	size_t n = 0, i, matched = 0;

	if (!resp_arg_is(&cmd->argv[1], "get")) {
		command_error(out, "ERR CONFIG: only CONFIG GET is "
			      "supported");
		return;
	}
	if (cmd->argc < 3) {
		command_error(out, "ERR wrong number of arguments for "
			      "'config|get' command");
		return;
	}
	for (i = 0; i < NPARAMS; i++)
		matched += config_matches(cmd, config_params[i][0]);
	n += resp_encode_array(reply, REPLY_MAX, matched * 2);
	for (i = 0; i < NPARAMS; i++) {
		const char *const *p = config_params[i];

		if (!config_matches(cmd, p[0]))
			continue;
		n += resp_encode_bulk(reply + n, REPLY_MAX - n, p[0],
				      strlen(p[0]));
		n += resp_encode_bulk(reply + n, REPLY_MAX - n, p[1],
				      strlen(p[1]));
	}
	out->kind = COMMAND_REPLY;
	out->len = n;
}

/* COMMAND (and COMMAND DOCS): redis-cli copes with an empty answer. */
static void run_command(const struct resp_command *cmd,
			struct command_outcome *out)
{
	(void)cmd;
	out->kind = COMMAND_REPLY;
	out->len = 4;
	memcpy(out->reply, "*0\r\n", 4);
}

static const struct command command_table[] = {
	{ "ping", -1, run_ping },	 { "echo", 2, run_echo },
	{ "get", 2, run_get },		 { "incrby", 3, run_deposit },
	{ "decrby", 3, run_withdraw },	 { "incr", 2, run_deposit },
	{ "decr", 2, run_withdraw },	 { "quit", -1, run_quit },
	{ "config", -2, run_config },	 { "command", -1, run_command },
};

/* As redis 7 words it: the name, then the first arguments. */
static void reply_unknown(const struct resp_command *cmd,
			  struct command_outcome *out)
{
	char msg[256];
	int n, i;

	n = snprintf(msg, sizeof(msg), "ERR unknown command '%.*s', with "
		     "args beginning with: ",
		     (int)(cmd->argv[0].len < 64 ? cmd->argv[0].len : 64),
		     cmd->argv[0].p);
	for (i = 1; i < cmd->argc && i < RESP_MAX_ARGS && n < 200; i++)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n, "'%.*s' ",
			      (int)(cmd->argv[i].len < 32 ?
					    cmd->argv[i].len : 32),
			      cmd->argv[i].p);
	command_error(out, msg);
}

void command_run(const struct resp_command *cmd,
		 struct command_outcome *out)
{
	const struct command *def = NULL;
	char msg[96];
	size_t i;

	for (i = 0; i < sizeof(command_table) / sizeof(command_table[0]); i++)
		if (resp_arg_is(&cmd->argv[0], command_table[i].name))
			def = &command_table[i];
	if (!def) {
		reply_unknown(cmd, out);
		return;
	}
	if (def->arity > 0 ? cmd->argc != def->arity :
			     cmd->argc < -def->arity) {
		snprintf(msg, sizeof(msg), "ERR wrong number of arguments "
			 "for '%s' command", def->name);
		command_error(out, msg);
		return;
	}
	def->run(cmd, out);
}

static size_t fit(size_t n)
{
	return n <= REPLY_MAX ? n : 0;
}

size_t command_account_reply(const struct account_msg *m, int status,
			     char *dst)
{
	char num[24];
	int n;

	switch (m->result) {
	case ACCOUNT_CHANGED:
		return fit(resp_encode_integer(dst, REPLY_MAX, m->balance));
	case ACCOUNT_FOUND:
		n = snprintf(num, sizeof(num), "%lld", m->balance);
		return fit(resp_encode_bulk(dst, REPLY_MAX, num, (size_t)n));
	case ACCOUNT_MISSING:
		return fit(resp_encode_nil(dst, REPLY_MAX));
	case ACCOUNT_OVERDRAFT:
		return fit(resp_encode_error(dst, REPLY_MAX,
					     "ERR insufficient funds"));
	case ACCOUNT_OVERFLOW:
		return fit(resp_encode_error(dst, REPLY_MAX,
					     "ERR increment or decrement "
					     "would overflow"));
	case ACCOUNT_JOURNAL_FAILED:
		return fit(resp_encode_error(dst, REPLY_MAX,
					     "ERR journal write failed"));
	case ACCOUNT_NONE:
		break;
	}
	return fit(resp_encode_error(dst, REPLY_MAX,
				     status == AGR_DISCARDED ?
					     "ERR server is shutting down" :
					     "ERR internal error"));
}

size_t command_refused_reply(int err, char *dst)
{
	return fit(resp_encode_error(dst, REPLY_MAX,
				     err == -ESHUTDOWN ?
					     "ERR server is shutting down" :
					     "ERR server busy"));
}
