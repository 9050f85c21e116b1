/* SPDX-License-Identifier: MIT */
/*
 * ledger_session.c - the commands about the client's own connection:
 * HELLO, AUTH, SELECT, CLIENT. The texts of their replies are Redis
 * 7's, so that client libraries that parse them (redis-py, hiredis,
 * redis-cli) behave as they do with Redis.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ledger_command_ctx.h"
#include "util.h"

#define REDIS_VERSION "7.0.0" /* the Redis whose commands we answer */

static void addr_of(int fd, bool peer, char *dst, size_t cap)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	char ip[INET_ADDRSTRLEN];
	int ret = peer ? getpeername(fd, (struct sockaddr *)&a, &len) :
			 getsockname(fd, (struct sockaddr *)&a, &len);

	if (ret < 0 || a.sin_family != AF_INET ||
	    !inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip))) {
		snprintf(dst, cap, "?:0");
		return;
	}
	snprintf(dst, cap, "%s:%u", ip, ntohs(a.sin_port));
}

void session_init(struct session *s, const struct command_server *srv,
		  uint64_t id, int fd)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->fd = fd;
	s->since_ns = now_ns();
	s->authed = srv->requirepass == NULL;
	addr_of(fd, true, s->addr, sizeof(s->addr));
	addr_of(fd, false, s->laddr, sizeof(s->laddr));
}

static void reply_err(const struct command_ctx *x, const char *msg)
{
	x->out->kind = COMMAND_REPLY;
	reply_error(x->out->reply, msg);
}

/* Compares every byte whatever differs, so timing tells nothing. */
static bool same_secret(const struct resp_arg *a, const char *secret)
{
	size_t n = strlen(secret), i;
	unsigned char diff = a->len != n;

	for (i = 0; i < a->len; i++)
		diff |= (unsigned char)(a->p[i] ^ secret[i % (n ? n : 1)]);
	return diff == 0 && n > 0;
}

/*
 * AUTH [user] password: the only user is "default", whose password is
 * --requirepass. Returns true if it authenticated; else the error is
 * the reply.
 */
static bool authenticate(const struct command_ctx *x,
			 const struct resp_arg *user,
			 const struct resp_arg *pass)
{
	const char *want = x->srv->requirepass;

	if (!want && !user) {
		reply_err(x, "ERR AUTH <password> called without any password "
			  "configured for the default user. Are you sure "
			  "your configuration is correct?");
		return false;
	}
	if ((user && !resp_arg_is(user, "default")) ||
	    (want && !same_secret(pass, want))) {
		reply_err(x, "WRONGPASS invalid username-password pair or "
			  "user is disabled.");
		return false;
	}
	x->s->authed = true;
	return true;
}

void run_auth(const struct command_ctx *x)
{
	const struct resp_command *cmd = x->cmd;

	if (cmd->argc > 3) {
		reply_err(x, "ERR syntax error");
		return;
	}
	if (authenticate(x, cmd->argc == 3 ? &cmd->argv[1] : NULL,
			 &cmd->argv[cmd->argc - 1]))
		reply_simple(x->out->reply, "OK");
}

static void copy_name(char *dst, const struct resp_arg *a)
{
	memcpy(dst, a->p, a->len);
	dst[a->len] = '\0';
}

static bool valid_client_name(const struct command_ctx *x,
			      const struct resp_arg *name)
{
	if (name->len > CLIENT_NAME_MAX) {
		reply_err(x, "ERR client name is too long");
		return false;
	}
	if (!command_name_valid(name, CLIENT_NAME_MAX + 1)) {
		reply_err(x, "ERR Client names cannot contain spaces, newlines "
			  "or special characters.");
		return false;
	}
	return true;
}

/* HELLO's reply in RESP2: a map as a flat array. */
static void reply_hello(const struct command_ctx *x)
{
	struct buf *b = x->out->reply;

	reply_array(b, 14);
	reply_bulk_str(b, "server");
	reply_bulk_str(b, "redis");
	reply_bulk_str(b, "version");
	reply_bulk_str(b, REDIS_VERSION);
	reply_bulk_str(b, "proto");
	reply_integer(b, 2);
	reply_bulk_str(b, "id");
	reply_integer(b, (long long)x->s->id);
	reply_bulk_str(b, "mode");
	reply_bulk_str(b, "standalone");
	reply_bulk_str(b, "role");
	reply_bulk_str(b, "master");
	reply_bulk_str(b, "modules");
	reply_array(b, 0);
}

/* HELLO's options after the version: AUTH user pass, SETNAME name. */
static bool hello_options(const struct command_ctx *x, int *auth, int *name)
{
	const struct resp_command *cmd = x->cmd;
	char msg[96];
	int i;

	for (i = 2; i < cmd->argc && i < RESP_MAX_ARGS; i++) {
		const struct resp_arg *o = &cmd->argv[i];

		if (resp_arg_is(o, "auth") && i + 2 < cmd->argc &&
		    i + 2 < RESP_MAX_ARGS) {
			*auth = i + 1;
			i += 2;
		} else if (resp_arg_is(o, "setname") && i + 1 < cmd->argc &&
			   i + 1 < RESP_MAX_ARGS) {
			*name = ++i;
		} else {
			snprintf(msg, sizeof(msg),
				 "ERR Syntax error in HELLO option '%.*s'",
				 (int)(o->len < 32 ? o->len : 32), o->p);
			reply_err(x, msg);
			return false;
		}
	}
	return true;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 only. */
void run_hello(const struct command_ctx *x)
{
	const struct resp_command *cmd = x->cmd;
	int auth = 0, name = 0;
	long long ver;

	if (cmd->argc >= 2) {
		if (!resp_parse_ll(cmd->argv[1].p, cmd->argv[1].len, &ver)) {
			reply_err(x, "ERR Protocol version is not an integer "
				  "or out of range");
			return;
		}
		if (ver != 2) { /* RESP3 is not served */
			reply_err(x, "NOPROTO unsupported protocol version");
			return;
		}
	}
	if (!hello_options(x, &auth, &name))
		return;
	if (name && !valid_client_name(x, &cmd->argv[name]))
		return;
	if (auth && !authenticate(x, &cmd->argv[auth], &cmd->argv[auth + 1]))
		return;
	if (!x->s->authed) {
		reply_err(x, "NOAUTH HELLO must be called with the client "
			  "already authenticated, otherwise the HELLO <proto> "
			  "AUTH <user> <pass> option can be used to "
			  "authenticate the client and select the RESP "
			  "protocol version at the same time");
		return;
	}
	if (name)
		copy_name(x->s->name, &cmd->argv[name]);
	reply_hello(x);
}

void run_select(const struct command_ctx *x)
{
	long long db;

	if (!resp_parse_ll(x->cmd->argv[1].p, x->cmd->argv[1].len, &db))
		reply_err(x, "ERR value is not an integer or out of range");
	else if (db != 0)
		reply_err(x, "ERR DB index is out of range");
	else
		reply_simple(x->out->reply, "OK");
}

/* CLIENT LIST's line for this client, as Redis writes it. */
static void reply_client_line(const struct command_ctx *x)
{
	const struct session *s = x->s;
	char line[1024 + 3 * CLIENT_NAME_MAX];
	int n;

	n = snprintf(line, sizeof(line),
		     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=0 "
		     "flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 "
		     "qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 "
		     "oll=0 omem=0 tot-mem=0 events=r cmd=client|list "
		     "user=default redir=-1 resp=2 lib-name=%s lib-ver=%s\n",
		     (unsigned long long)s->id, s->addr, s->laddr, s->fd,
		     s->name,
		     (unsigned long long)((now_ns() - s->since_ns) /
					  1000000000u),
		     s->lib_name, s->lib_ver);
	reply_bulk(x->out->reply, line, (size_t)n);
}

static void client_setinfo(const struct command_ctx *x)
{
	const struct resp_arg *attr = &x->cmd->argv[2], *v = &x->cmd->argv[3];
	char msg[96];
	char *dst;

	if (resp_arg_is(attr, "lib-name")) {
		dst = x->s->lib_name;
	} else if (resp_arg_is(attr, "lib-ver")) {
		dst = x->s->lib_ver;
	} else {
		snprintf(msg, sizeof(msg), "ERR Unrecognized option '%.*s'",
			 (int)(attr->len < 32 ? attr->len : 32), attr->p);
		reply_err(x, msg);
		return;
	}
	if (!command_name_valid(v, CLIENT_NAME_MAX + 1)) {
		snprintf(msg, sizeof(msg), "ERR %.*s cannot contain spaces, "
			 "newlines or special characters.", (int)attr->len,
			 attr->p);
		reply_err(x, msg);
		return;
	}
	copy_name(dst, v);
	reply_simple(x->out->reply, "OK");
}

/* The subcommands and their word counts (CLIENT included). */
static const struct {
	const char *name, *full;
	int arity;
} client_subs[] = {
	{ "setname", "client|setname", 3 }, { "getname", "client|getname", 2 },
	{ "id", "client|id", 2 },	    { "setinfo", "client|setinfo", 4 },
	{ "list", "client|list", -2 },	    { "info", "client|info", 2 },
};

/* CLIENT LIST shows the calling connection only (see the README). */
void run_client(const struct command_ctx *x)
{
	const struct resp_arg *sub = &x->cmd->argv[1];
	char msg[96];
	size_t i;

	x->out->kind = COMMAND_REPLY;
	for (i = 0; i < sizeof(client_subs) / sizeof(client_subs[0]); i++)
		if (resp_arg_is(sub, client_subs[i].name))
			break;
	if (i == sizeof(client_subs) / sizeof(client_subs[0])) {
		snprintf(msg, sizeof(msg), "ERR unknown subcommand '%.*s'. "
			 "Try CLIENT HELP.",
			 (int)(sub->len < 32 ? sub->len : 32), sub->p);
		reply_err(x, msg);
		return;
	}
	if (client_subs[i].arity > 0 ? x->cmd->argc != client_subs[i].arity :
				       x->cmd->argc < -client_subs[i].arity) {
		command_wrong_args(x, client_subs[i].full);
		return;
	}
	switch (i) {
	case 0:
		if (valid_client_name(x, &x->cmd->argv[2])) {
			copy_name(x->s->name, &x->cmd->argv[2]);
			reply_simple(x->out->reply, "OK");
		}
		break;
	case 1:
		if (x->s->name[0])
			reply_bulk_str(x->out->reply, x->s->name);
		else
			reply_nil(x->out->reply);
		break;
	case 2: reply_integer(x->out->reply, (long long)x->s->id); break;
	case 3: client_setinfo(x); break;
	default: reply_client_line(x); break;
	}
}
