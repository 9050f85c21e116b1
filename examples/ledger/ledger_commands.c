/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ledger_commands.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_command_ctx.h"
#include "ledger_record.h"
#include "util.h"

struct command {
	const char *name;
	int arity;	   /* n: exactly n words; -n: at least n */
	bool no_auth;	   /* allowed before AUTH */
	int first_key, last_key, key_step; /* as COMMAND INFO reports */
	const char *flags; /* COMMAND INFO's, space separated */
	const char *acl;   /* its ACL categories, space separated */
	const char *group, *since, *summary; /* COMMAND DOCS */
	void (*run)(const struct command_ctx *x);
};

static void reply_error_out(const struct command_ctx *x, const char *msg)
{
	x->out->kind = COMMAND_REPLY;
	reply_error(x->out->reply, msg);
}

void command_wrong_args(const struct command_ctx *x, const char *name)
{
	char msg[96];

	snprintf(msg, sizeof(msg),
		 "ERR wrong number of arguments for '%s' command", name);
	reply_error_out(x, msg);
}

bool command_name_valid(const struct resp_arg *arg, size_t cap)
{
	size_t i;

	if (arg->len >= cap)
		return false;
	for (i = 0; i < arg->len; i++)
		if (arg->p[i] < '!' || arg->p[i] > '~')
			return false;
	return true;
}

/* ---- accounts ---- */

static bool account_key(const struct command_ctx *x, const struct resp_arg *k)
{
	if (key_valid(k->p, k->len))
		return true;
	reply_error_out(x, "ERR invalid account name: 1 to 128 printable "
			   "characters, no spaces");
	return false;
}

static void to_account(const struct command_ctx *x, enum account_op op,
		       long long amount)
{
	x->out->kind = COMMAND_ACCOUNT;
	x->out->op = op;
	x->out->key = x->cmd->argv[1];
	x->out->amount = amount;
	x->out->value = (struct resp_arg){ NULL, 0 };
}

/*
 * The optional "REQID id" after a write's arguments, from argv[at]:
 * true with out->reqid set (empty without one), else the error is the
 * reply.
 */
static bool parse_reqid(const struct command_ctx *x, int at)
{
	const struct resp_command *cmd = x->cmd;

	x->out->reqid = (struct resp_arg){ NULL, 0 };
	if (cmd->argc == at)
		return true;
	if (cmd->argc != at + 2 || !resp_arg_is(&cmd->argv[at], "reqid")) {
		reply_error_out(x, "ERR syntax error");
		return false;
	}
	if (!reqid_valid(cmd->argv[at + 1].p, cmd->argv[at + 1].len)) {
		reply_error_out(x, "ERR invalid request id: 1 to 64 printable "
				   "characters, no spaces");
		return false;
	}
	x->out->reqid = cmd->argv[at + 1];
	return true;
}

/*
 * INCRBY, DECRBY (with an amount), INCR, DECR (1), each with an
 * optional REQID.
 */
static void run_move(const struct command_ctx *x, enum account_op op)
{
	bool by = x->cmd->argv[0].len == 6; /* INCRBY, DECRBY */
	long long amount = 1;

	if (!account_key(x, &x->cmd->argv[1]))
		return;
	if (by && x->cmd->argc < 3) {
		command_wrong_args(x, op == OP_DEPOSIT ? "incrby" : "decrby");
		return;
	}
	if (!parse_reqid(x, by ? 3 : 2))
		return;
	if (by) {
		if (!resp_parse_ll(x->cmd->argv[2].p, x->cmd->argv[2].len,
				   &amount)) {
			reply_error_out(x, "ERR value is not an integer or "
					   "out of range");
			return;
		}
		if (amount <= 0) {
			reply_error_out(x, "ERR amount must be positive");
			return;
		}
	}
	to_account(x, op, amount);
}

static void run_deposit(const struct command_ctx *x)
{
	run_move(x, OP_DEPOSIT);
}

static void run_withdraw(const struct command_ctx *x)
{
	run_move(x, OP_WITHDRAW);
}

/* GET, TYPE, STRLEN: a read of one key. */
static void run_read(const struct command_ctx *x, enum account_op op)
{
	x->out->reqid = (struct resp_arg){ NULL, 0 };
	if (account_key(x, &x->cmd->argv[1]))
		to_account(x, op, 0);
}

static void run_get(const struct command_ctx *x)
{
	run_read(x, OP_GET);
}

static void run_type(const struct command_ctx *x)
{
	run_read(x, OP_TYPE);
}

static void run_strlen(const struct command_ctx *x)
{
	run_read(x, OP_STRLEN);
}

/*
 * SET key value [REQID id]: a value that is an integer as Redis prints
 * it makes the key an account holding it (never negative); any other a
 * string key (ledger_accounts.h).
 */
static void run_set(const struct command_ctx *x)
{
	const struct resp_arg *val = &x->cmd->argv[2];
	long long v;

	if (!account_key(x, &x->cmd->argv[1]) || !parse_reqid(x, 3))
		return;
	if (resp_parse_ll(val->p, val->len, &v)) {
		if (v < 0)
			reply_error_out(x, "ERR a balance cannot be negative");
		else
			to_account(x, OP_SET, v);
		return;
	}
	if (val->len > VALUE_MAX) {
		char msg[64];

		snprintf(msg, sizeof(msg), "ERR string value too long: at "
			 "most %d bytes", VALUE_MAX);
		reply_error_out(x, msg);
		return;
	}
	to_account(x, OP_SET, 0);
	x->out->value = *val;
}

/* TRANSFER from to amount. */
static void run_transfer(const struct command_ctx *x)
{
	const struct resp_arg *from = &x->cmd->argv[1], *to = &x->cmd->argv[2];
	long long amount;

	if (!account_key(x, from) || !account_key(x, to))
		return;
	if (from->len == to->len && memcmp(from->p, to->p, to->len) == 0) {
		reply_error_out(x, "ERR a transfer needs two different "
				   "accounts");
		return;
	}
	if (!resp_parse_ll(x->cmd->argv[3].p, x->cmd->argv[3].len, &amount)) {
		reply_error_out(x, "ERR value is not an integer or out of "
				   "range");
		return;
	}
	if (amount <= 0) {
		reply_error_out(x, "ERR amount must be positive");
		return;
	}
	if (!parse_reqid(x, 4))
		return;
	if (x->out->reqid.len &&
	    (x->out->reqid.len >= REQID_MAX ||
	     memchr(x->out->reqid.p, ':', x->out->reqid.len))) {
		reply_error_out(x, "ERR invalid request id: a transfer's is 1 "
			    "to 63 printable characters, no spaces, no ':'");
		return;
	}
	x->out->kind = COMMAND_TRANSFER;
	x->out->key = *from;
	x->out->key2 = *to;
	x->out->amount = amount;
}

/* MGET, EXISTS, DEL: one message per key (ledger_conn.c fans out). */
static void run_keys(const struct command_ctx *x, enum account_op op,
		     bool count)
{
	if (x->cmd->argc - 1 > KEYS_MAX) {
		char msg[64];

		snprintf(msg, sizeof(msg), "ERR at most %d keys in one "
			 "command", KEYS_MAX);
		reply_error_out(x, msg);
		return;
	}
	x->out->kind = COMMAND_KEYS;
	x->out->op = op;
	x->out->count = count;
	x->out->reqid = (struct resp_arg){ NULL, 0 };
}

static void run_mget(const struct command_ctx *x)
{
	run_keys(x, OP_GET, false);
}

static void run_exists(const struct command_ctx *x)
{
	run_keys(x, OP_EXISTS, true);
}

static void run_del(const struct command_ctx *x)
{
	run_keys(x, OP_CLOSE, true);
}

/* ---- connection ---- */

static void run_ping(const struct command_ctx *x)
{
	x->out->kind = COMMAND_REPLY;
	if (x->cmd->argc > 2)
		command_wrong_args(x, "ping");
	else if (x->cmd->argc == 2)
		reply_bulk(x->out->reply, x->cmd->argv[1].p,
			   x->cmd->argv[1].len);
	else
		reply_simple(x->out->reply, "PONG");
}

static void run_echo(const struct command_ctx *x)
{
	x->out->kind = COMMAND_REPLY;
	reply_bulk(x->out->reply, x->cmd->argv[1].p, x->cmd->argv[1].len);
}

static void run_quit(const struct command_ctx *x)
{
	reply_simple(x->out->reply, "OK");
	x->out->kind = COMMAND_QUIT; /* close after the replies queued */
}

/* ---- transactions ---- */

/* The transaction is over (EXEC, DISCARD): and so are the watches. */
static void txn_reset(struct session *s)
{
	account_steps_free(s->queued, s->nqueued);
	free(s->queued);
	s->queued = NULL;
	s->nqueued = 0;
	s->multi = s->multi_dirty = s->multi_cross = false;
	s->multi_reqid[0] = '\0';
	session_unwatch(s);
}

/* MULTI [REQID id]: a retried transaction answers its first reply. */
static void run_multi(const struct command_ctx *x)
{
	x->out->kind = COMMAND_REPLY;
	if (x->s->multi) {
		reply_error(x->out->reply, "ERR MULTI calls can not be nested");
		return;
	}
	if (!parse_reqid(x, 1))
		return;
	x->out->kind = COMMAND_REPLY;
	snprintf(x->s->multi_reqid, sizeof(x->s->multi_reqid), "%.*s",
		 (int)x->out->reqid.len,
		 x->out->reqid.len ? x->out->reqid.p : "");
	x->s->multi_key[0] = '\0';
	x->out->reqid = (struct resp_arg){ NULL, 0 };
	x->s->multi = true;
	reply_simple(x->out->reply, "OK");
}

static void run_discard(const struct command_ctx *x)
{
	x->out->kind = COMMAND_REPLY;
	if (!x->s->multi) {
		reply_error(x->out->reply, "ERR DISCARD without MULTI");
		return;
	}
	txn_reset(x->s);
	reply_simple(x->out->reply, "OK");
}

/*
 * Whether EXEC can check the watches: all on the transaction's account
 * (key, which an empty transaction takes from the first watch).
 */
static bool watches_on(struct session *s, char *key)
{
	unsigned i;

	if (s->nwatches && !key[0])
		snprintf(key, KEY_MAX + 1, "%s", s->watches[0]->key);
	for (i = 0; i < s->nwatches; i++)
		if (strcmp(s->watches[i]->key, key) != 0)
			return false;
	return true;
}

/* EXEC's message: the queued steps, the watches, the id. */
static void exec_send(const struct command_ctx *x)
{
	struct session *s = x->s;

	x->out->kind = COMMAND_TXN;
	if (!s->queued) /* only watches: an empty transaction on their key */
		s->queued = xcalloc(1, sizeof(*s->queued));
	x->out->steps = s->queued;
	x->out->nsteps = s->nqueued;
	x->out->key.p = s->multi_key;
	x->out->key.len = strlen(s->multi_key);
	x->out->reqid.p = s->multi_reqid;
	x->out->reqid.len = strlen(s->multi_reqid);
	x->out->watches = s->watches;
	x->out->nwatches = s->nwatches;
	s->queued = NULL; /* the caller's now */
	s->nqueued = 0;
	s->watches = NULL;
	s->nwatches = 0;
}

/*
 * EXEC: the queued commands go to their account as one message, whose
 * net effect is one journal record: all or nothing. Refused whole when
 * a command was refused while queued, or they touch several accounts
 * (Redis Cluster refuses a cross-slot transaction the same way).
 */
static void run_exec(const struct command_ctx *x)
{
	struct session *s = x->s;

	x->out->kind = COMMAND_REPLY;
	if (!s->multi) {
		reply_error(x->out->reply, "ERR EXEC without MULTI");
	} else if (s->multi_dirty) {
		reply_error(x->out->reply, "EXECABORT Transaction discarded "
			    "because of previous errors.");
	} else if (s->multi_cross || !watches_on(s, s->multi_key)) {
		reply_error(x->out->reply, "CROSSSLOT Keys in request don't "
			    "hash to the same slot: a transaction may touch "
			    "(and watch) one account only; nothing was "
			    "applied");
	} else if (s->nqueued == 0 && s->nwatches == 0) {
		reply_array(x->out->reply, 0);
	} else {
		exec_send(x);
	}
	if (x->out->kind == COMMAND_REPLY)
		txn_reset(s);
	else
		s->multi = s->multi_dirty = s->multi_cross = false;
	/* multi_key and multi_reqid stay: out->key and reqid point there. */
}

/* Whether a command may be queued: one account's, one key. */
static bool txn_allowed(void (*run)(const struct command_ctx *x))
{
	return run == run_get || run == run_exists || run == run_deposit ||
	       run == run_withdraw || run == run_set || run == run_del ||
	       run == run_type || run == run_strlen;
}

/* A command's outcome while MULTI is on: queued, or refused. */
static void txn_queue(const struct command_ctx *x)
{
	struct session *s = x->s;
	const struct resp_arg *k = &x->cmd->argv[1];
	struct command_outcome *o = x->out;

	if (o->kind == COMMAND_KEYS && x->cmd->argc != 2) {
		o->reply->len = 0;
		reply_error(o->reply, "ERR only one key per command in a "
			    "transaction");
	} else if (o->kind == COMMAND_KEYS && !key_valid(k->p, k->len)) {
		o->reply->len = 0;
		reply_error(o->reply, "ERR invalid account name: 1 to 128 "
			    "printable characters, no spaces");
	} else if (o->kind != COMMAND_REPLY && o->reqid.len) {
		o->reply->len = 0;
		reply_error(o->reply, "ERR REQID is not supported inside a "
			    "transaction");
	} else if (o->kind != COMMAND_REPLY && s->nqueued >= TXN_MAX) {
		o->reply->len = 0;
		reply_error(o->reply, "ERR transaction too long");
	}
	if (o->kind == COMMAND_REPLY || o->reply->len) {
		o->kind = COMMAND_REPLY;
		s->multi_dirty = true; /* an error: EXEC will abort */
		return;
	}
	if (s->nqueued == 0) {
		memcpy(s->multi_key, k->p, k->len);
		s->multi_key[k->len] = '\0';
	} else if (strlen(s->multi_key) != k->len ||
		   memcmp(s->multi_key, k->p, k->len) != 0) {
		s->multi_cross = true;
	}
	s->queued = xrealloc(s->queued, (s->nqueued + 1) * sizeof(*s->queued));
	s->queued[s->nqueued] = (struct account_step){
		.op = o->op,
		.amount = o->kind == COMMAND_ACCOUNT ? o->amount : 0,
	};
	if (o->kind == COMMAND_ACCOUNT && o->value.p)
		account_step_set_str(&s->queued[s->nqueued], o->value.p,
				     o->value.len);
	s->nqueued++;
	o->kind = COMMAND_REPLY;
	reply_simple(o->reply, "QUEUED");
}

void session_free(struct session *s)
{
	txn_reset(s);
}

/* ---- the table ---- */

#define RW "write denyoom"
#define CONN "noscript loading stale fast"

static const struct command command_table[] = {
	{ "auth", -2, true, 0, 0, 0, "noscript loading stale fast no_auth",
	  "@fast @connection", "connection", "1.0.0",
	  "Authenticates the connection.", run_auth },
	{ "client", -2, false, 0, 0, 0, "noscript loading stale",
	  "@slow @connection", "connection", "2.4.0",
	  "A container for client connection commands.", run_client },
	{ "command", -1, false, 0, 0, 0, "loading stale",
	  "@slow @connection", "server", "2.8.13",
	  "Returns detailed information about all commands.", run_command },
	{ "config", -2, false, 0, 0, 0, "admin noscript loading stale",
	  "@admin @slow @dangerous", "server", "2.0.0",
	  "Gets the values of configuration parameters.", run_config },
	{ "dbsize", 1, false, 0, 0, 0, "readonly fast", "@keyspace @read @fast",
	  "server", "1.0.0", "Returns the number of accounts.", run_dbsize },
	{ "discard", 1, false, 0, 0, 0, "noscript loading stale fast",
	  "@fast @transaction", "transactions", "2.0.0",
	  "Discards a transaction.", run_discard },
	{ "decr", -2, false, 1, 1, 1, RW " fast", "@write @string @fast",
	  "string", "1.0.0", "Withdraws 1 from an account.", run_withdraw },
	{ "decrby", -3, false, 1, 1, 1, RW " fast", "@write @string @fast",
	  "string", "1.0.0", "Withdraws an amount from an account.",
	  run_withdraw },
	{ "del", -2, false, 1, -1, 1, "write", "@keyspace @write @slow",
	  "generic", "1.0.0", "Closes accounts.", run_del },
	{ "transfer", -4, false, 1, 2, 1, RW, "@write @string @slow", "string",
	  "1.0.0", "Moves an amount between two accounts (a saga).",
	  run_transfer },
	{ "exec", 1, false, 0, 0, 0, "noscript loading stale skip_slowlog",
	  "@slow @transaction", "transactions", "1.2.0",
	  "Executes a transaction on one account, atomically and durably.",
	  run_exec },
	{ "echo", 2, false, 0, 0, 0, CONN, "@fast @connection", "connection",
	  "1.0.0", "Returns the given string.", run_echo },
	{ "exists", -2, false, 1, -1, 1, "readonly fast",
	  "@keyspace @read @fast", "generic", "1.0.0",
	  "Determines whether accounts exist.", run_exists },
	{ "get", 2, false, 1, 1, 1, "readonly fast", "@read @string @fast",
	  "string", "1.0.0", "Returns the balance of an account.", run_get },
	{ "hello", -1, true, 0, 0, 0, CONN " no_auth", "@fast @connection",
	  "connection", "6.0.0", "Handshakes with the server.", run_hello },
	{ "incr", -2, false, 1, 1, 1, RW " fast", "@write @string @fast",
	  "string", "1.0.0", "Deposits 1 into an account.", run_deposit },
	{ "incrby", -3, false, 1, 1, 1, RW " fast", "@write @string @fast",
	  "string", "1.0.0", "Deposits an amount into an account.",
	  run_deposit },
	{ "info", -1, false, 0, 0, 0, "loading stale", "@slow @dangerous",
	  "server", "1.0.0", "Returns information about the server.",
	  run_info },
	{ "mget", -2, false, 1, -1, 1, "readonly fast", "@read @string @fast",
	  "string", "1.0.0", "Returns the balances of accounts.", run_mget },
	{ "multi", -1, false, 0, 0, 0, "noscript loading stale fast",
	  "@fast @transaction", "transactions", "1.2.0",
	  "Starts a transaction.", run_multi },
	{ "ping", -1, false, 0, 0, 0, "fast", "@fast @connection",
	  "connection", "1.0.0", "Returns the server's liveliness response.",
	  run_ping },
	{ "quit", -1, true, 0, 0, 0, "allow_busy noscript loading stale fast "
	  "no_auth", "@fast @connection", "connection", "1.0.0",
	  "Closes the connection.", run_quit },
	{ "scan", -2, false, 0, 0, 0, "readonly", "@keyspace @read @slow",
	  "generic", "2.8.0", "Iterates over the keys, a group at a time.",
	  run_scan },
	{ "select", 2, false, 0, 0, 0, "loading stale fast",
	  "@fast @connection", "connection", "1.0.0",
	  "Changes the selected database (0 only).", run_select },
	{ "set", -3, false, 1, 1, 1, RW, "@write @string @slow", "string",
	  "1.0.0", "Sets the balance of an account, or a string.", run_set },
	{ "strlen", 2, false, 1, 1, 1, "readonly fast", "@read @string @fast",
	  "string", "2.2.0", "Returns the length of a key's value.",
	  run_strlen },
	{ "type", 2, false, 1, 1, 1, "readonly fast", "@keyspace @read @fast",
	  "generic", "1.0.0", "Determines the type of a key.", run_type },
	{ "unwatch", 1, false, 0, 0, 0, "noscript loading stale fast",
	  "@fast @transaction", "transactions", "2.2.0",
	  "Forgets about watched keys of a transaction.", run_unwatch },
	{ "watch", -2, false, 1, -1, 1, "noscript loading stale fast",
	  "@fast @transaction", "transactions", "2.2.0",
	  "Monitors changes to keys to determine the execution of a "
	  "transaction.", run_watch },
};
#define NCOMMANDS (sizeof(command_table) / sizeof(command_table[0]))

/* Per request: a first-letter test rejects most names cheaply. */
static const struct command *command_find(const struct resp_arg *name)
{
	char first;
	size_t i;

	if (name->len == 0)
		return NULL;
	first = (char)(name->p[0] | 0x20); /* ASCII lower case */
	for (i = 0; i < NCOMMANDS; i++)
		if (command_table[i].name[0] == first &&
		    resp_arg_is(name, command_table[i].name))
			return &command_table[i];
	return NULL;
}

/* ---- COMMAND: Redis 7's shapes, in RESP2 ---- */

/* "a b c" as an array of simple strings. */
static void reply_words(struct buf *b, const char *words)
{
	const char *p = words, *end;
	size_t n = 0;
	char w[40];

	for (; *p; n++) {
		p += strcspn(p, " ");
		p += strspn(p, " ");
	}
	reply_array(b, n);
	for (p = words; *p; p = end + strspn(end, " ")) {
		end = p + strcspn(p, " ");
		snprintf(w, sizeof(w), "%.*s", (int)(end - p), p);
		reply_simple(b, w);
	}
}

/* COMMAND INFO's ten fields of one command. */
static void reply_command_info(struct buf *b, const struct command *c)
{
	reply_array(b, 10);
	reply_bulk_str(b, c->name);
	reply_integer(b, c->arity);
	reply_words(b, c->flags);
	reply_integer(b, c->first_key);
	reply_integer(b, c->last_key);
	reply_integer(b, c->key_step);
	reply_words(b, c->acl);
	reply_array(b, 0); /* tips */
	reply_array(b, 0); /* key specs */
	reply_array(b, 0); /* subcommands */
}

/* COMMAND DOCS' map of one command, flattened as RESP2 does. */
static void reply_command_docs(struct buf *b, const struct command *c)
{
	reply_bulk_str(b, c->name);
	reply_array(b, 6);
	reply_bulk_str(b, "summary");
	reply_bulk_str(b, c->summary);
	reply_bulk_str(b, "since");
	reply_bulk_str(b, c->since);
	reply_bulk_str(b, "group");
	reply_bulk_str(b, c->group);
}

static void command_list(const struct command_ctx *x, bool docs)
{
	const struct resp_command *cmd = x->cmd;
	struct buf *b = x->out->reply;
	const struct command *c;
	int i, n = cmd->argc < RESP_MAX_ARGS ? cmd->argc : RESP_MAX_ARGS;
	size_t k, found = 0;

	if (n <= 2) { /* all of them */
		reply_array(b, NCOMMANDS * (docs ? 2 : 1));
		for (k = 0; k < NCOMMANDS; k++)
			if (docs)
				reply_command_docs(b, &command_table[k]);
			else
				reply_command_info(b, &command_table[k]);
		return;
	}
	for (i = 2; i < n; i++)
		found += command_find(&cmd->argv[i]) != NULL;
	/* DOCS leaves unknown names out; INFO answers nil for them. */
	reply_array(b, docs ? found * 2 : (size_t)(n - 2));
	for (i = 2; i < n; i++) {
		c = command_find(&cmd->argv[i]);
		if (c && docs)
			reply_command_docs(b, c);
		else if (c)
			reply_command_info(b, c);
		else if (!docs)
			reply_nil(b);
	}
}

void run_command(const struct command_ctx *x)
{
	const struct resp_arg *sub = &x->cmd->argv[1];
	char msg[96];

	x->out->kind = COMMAND_REPLY;
	if (x->cmd->argc == 1) {
		command_list(x, false);
	} else if (resp_arg_is(sub, "count")) {
		if (x->cmd->argc != 2)
			command_wrong_args(x, "command|count");
		else
			reply_integer(x->out->reply, (long long)NCOMMANDS);
	} else if (resp_arg_is(sub, "info")) {
		command_list(x, false);
	} else if (resp_arg_is(sub, "docs")) {
		command_list(x, true);
	} else {
		snprintf(msg, sizeof(msg), "ERR unknown subcommand '%.*s'. "
			 "Try COMMAND HELP.",
			 (int)(sub->len < 32 ? sub->len : 32), sub->p);
		reply_error_out(x, msg);
	}
}

/* ---- routing ---- */

/* As redis 7 words it: the name, then the first arguments. */
static void reply_unknown(const struct command_ctx *x)
{
	const struct resp_command *cmd = x->cmd;
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
	reply_error_out(x, msg);
}

static void command_in_multi(const struct command_ctx *x,
			     const struct command *def)
{
	char msg[160];

	if (!txn_allowed(def->run)) {
		snprintf(msg, sizeof(msg), "ERR '%s' is not allowed in a "
			 "transaction: only GET, EXISTS, SET, DEL, INCRBY, "
			 "DECRBY, INCR and DECR on one account", def->name);
		reply_error_out(x, msg);
		x->s->multi_dirty = true;
		return;
	}
	def->run(x);
	txn_queue(x);
}

void command_run(const struct command_server *srv, struct session *s,
		 const struct resp_command *cmd, struct command_outcome *out)
{
	struct command_ctx x = { srv, s, cmd, out };
	const struct command *def = command_find(&cmd->argv[0]);

	out->reply->len = 0;
	out->kind = COMMAND_REPLY;
	/* Redis's order: unknown, then arity, then authentication. */
	if (!def) {
		reply_unknown(&x);
		s->multi_dirty = s->multi;
		return;
	}
	if (def->arity > 0 ? cmd->argc != def->arity :
			     cmd->argc < -def->arity) {
		command_wrong_args(&x, def->name);
		s->multi_dirty = s->multi;
		return;
	}
	if (!s->authed && !def->no_auth) {
		reply_error_out(&x, "NOAUTH Authentication required.");
		s->multi_dirty = s->multi;
		return;
	}
	if (s->multi && def->run != run_exec && def->run != run_discard &&
	    def->run != run_multi && def->run != run_quit &&
	    def->run != run_watch && def->run != run_unwatch) {
		command_in_multi(&x, def);
		return;
	}
	def->run(&x);
}

void command_protocol_error(struct buf *reply, const char *msg)
{
	char line[128];

	snprintf(line, sizeof(line), "ERR %s", msg);
	reply->len = 0;
	reply_error(reply, line);
}

/* ---- replies of the accounts ---- */

static size_t fit(size_t n)
{
	return n <= REPLY_MAX ? n : 0;
}

static size_t error_reply(char *dst, const char *msg)
{
	return fit(resp_encode_error(dst, REPLY_MAX, msg));
}

/* The reply of one step of a message. */
static size_t step_reply(const struct account_step *st, char *dst)
{
	char num[RESP_LL_MAX];
	size_t n;

	switch (st->result) {
	case ACCOUNT_CHANGED:
		return fit(resp_encode_integer(dst, REPLY_MAX, st->balance));
	case ACCOUNT_SET:
		return fit(resp_encode_simple(dst, REPLY_MAX, "OK"));
	case ACCOUNT_FOUND:
		if (st->op == OP_EXISTS)
			return fit(resp_encode_integer(dst, REPLY_MAX, 1));
		if (st->op == OP_TYPE) /* as Redis calls an integer too */
			return fit(resp_encode_simple(dst, REPLY_MAX,
						      "string"));
		if (st->op == OP_STRLEN)
			return fit(resp_encode_integer(dst, REPLY_MAX,
						       st->balance));
		if (st->str)
			return fit(resp_encode_bulk(dst, REPLY_MAX, st->str,
						    st->str_len));
		n = resp_format_ll(num, st->balance);
		return fit(resp_encode_bulk(dst, REPLY_MAX, num, n));
	case ACCOUNT_MISSING:
		if (st->op == OP_GET)
			return fit(resp_encode_nil(dst, REPLY_MAX));
		if (st->op == OP_TYPE)
			return fit(resp_encode_simple(dst, REPLY_MAX, "none"));
		return fit(resp_encode_integer(dst, REPLY_MAX, 0));
	case ACCOUNT_CLOSED:
		return fit(resp_encode_integer(dst, REPLY_MAX, 1));
	case ACCOUNT_OVERDRAFT:
		return error_reply(dst, "ERR insufficient funds");
	case ACCOUNT_OVERFLOW:
		return error_reply(dst, "ERR increment or decrement would "
				   "overflow");
	case ACCOUNT_NOT_INTEGER:
		return error_reply(dst, "ERR value is not an integer or out "
				   "of range");
	case ACCOUNT_NONE:
		break;
	}
	return error_reply(dst, "ERR internal error");
}

size_t command_account_reply(const struct account_msg *m, int status,
			     char *dst)
{
	if (m->journal_failed)
		return error_reply(dst, "ERR journal write failed");
	if (status == AGR_DISCARDED)
		return error_reply(dst, "ERR server is shutting down");
	if (status < 0)
		return error_reply(dst, "ERR internal error");
	return step_reply(&m->steps[0], dst);
}

void command_txn_reply(const struct account_msg *m, int status,
		       struct buf *dst)
{
	char one[REPLY_MAX];
	size_t n;
	unsigned i;

	if (m->journal_failed || status < 0) {
		n = command_account_reply(m, status, one);
		buf_append(dst, one, n);
		return;
	}
	switch (m->txn_outcome) {
	case TXN_WATCH_CHANGED: /* as Redis: a nil array, nothing applied */
		buf_append(dst, "*-1\r\n", 5);
		return;
	case TXN_RESULTS_TOO_LONG:
		reply_error(dst, "ERR the replies of a transaction with a "
			    "REQID must fit in 1024 bytes; nothing was "
			    "applied");
		return;
	case TXN_REQID_REUSED:
		reply_error(dst, "ERR REQID names another request; nothing "
			    "was applied");
		return;
	case TXN_RAN:
		break;
	}
	reply_array(dst, m->nsteps);
	for (i = 0; i < m->nsteps; i++) {
		n = step_reply(&m->steps[i], one);
		buf_append(dst, one, n);
	}
}

size_t command_transfer_reply(const struct transfer *x, char *dst)
{
	switch (x->outcome) {
	case TRANSFER_SETTLED:
		return fit(resp_encode_integer(dst, REPLY_MAX,
					       x->from_balance));
	case TRANSFER_REFUSED:
		return x->refusal == ACCOUNT_OVERDRAFT ?
			       error_reply(dst, "ERR insufficient funds") :
		       x->refusal == ACCOUNT_NOT_INTEGER ?
			       error_reply(dst, "ERR value is not an integer "
					   "or out of range") :
			       error_reply(dst, "ERR internal error");
	case TRANSFER_REFUNDED: /* a retry knows only that it was */
		return error_reply(dst, x->refusal == ACCOUNT_OVERFLOW ?
			"ERR transfer refused by the destination (its "
			"balance would overflow); refunded" :
			x->refusal == ACCOUNT_NOT_INTEGER ?
			"ERR transfer refused by the destination (it holds "
			"a string); refunded" :
			"ERR transfer refused by the destination; refunded");
	case TRANSFER_UNFINISHED:
		return error_reply(dst, "ERR server is shutting down; the "
				   "transfer completes at restart");
	case TRANSFER_PENDING:
		break;
	}
	return error_reply(dst, "ERR journal write failed; the transfer "
			   "completes at restart if it was debited");
}

void command_msg_release(struct account_msg *m)
{
	unsigned i;

	account_steps_free(m->steps, m->nsteps);
	watch_put(m->watch);
	m->watch = NULL;
	for (i = 0; i < m->nwatches; i++)
		watch_put(m->watches[i]);
	free(m->watches);
	m->watches = NULL;
	m->nwatches = 0;
}

bool command_account_counts(const struct account_msg *m, int status)
{
	return status == 0 && !m->journal_failed &&
	       (m->steps[0].result == ACCOUNT_FOUND ||
		m->steps[0].result == ACCOUNT_CLOSED);
}

size_t command_refused_reply(int err, char *dst)
{
	return error_reply(dst, err == -ESHUTDOWN ?
					"ERR server is shutting down" :
					"ERR server busy");
}
