/* SPDX-License-Identifier: MIT */
/*
 * ledger_keyspace.c - the commands over the keyspace rather than one
 * key: SCAN, which lists one group's keys per call (ledger_commands.h
 * says why), and WATCH, UNWATCH, whose watches EXEC checks on the
 * transaction's account (ledger_accounts.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_command_ctx.h"
#include "ledger_record.h"
#include "util.h"

/* ---- SCAN ---- */

/* One SCAN call: its filters, and the keys found (RESP bulks). */
struct scan_job {
	struct account_scan scan;
	char *pattern;	  /* MATCH's, or NULL */
	bool none;	  /* TYPE other than string: nothing matches */
	long long next;	  /* the cursor to answer */
	size_t nkeys;
	struct buf keys;
};

/* On the group's worker, for each of its keys. */
static void scan_found(void *arg, const char *key)
{
	struct scan_job *j = arg;

	if (j->none || (j->pattern && fnmatch(j->pattern, key, 0) != 0))
		return;
	reply_bulk_str(&j->keys, key);
	j->nkeys++;
}

static void scan_job_free(struct scan_job *j)
{
	free(j->pattern);
	buf_free(&j->keys);
	free(j);
}

/* The options after the cursor: MATCH, COUNT, TYPE. False: replied. */
static bool scan_options(const struct command_ctx *x, struct scan_job *j)
{
	const struct resp_command *cmd = x->cmd;
	long long count;
	int i;

	for (i = 2; i < cmd->argc; i += 2) {
		const struct resp_arg *opt = &cmd->argv[i];
		const struct resp_arg *val = &cmd->argv[i + 1];

		if (i + 1 >= cmd->argc) {
			reply_error(x->out->reply, "ERR syntax error");
			return false;
		}
		if (resp_arg_is(opt, "match")) {
			free(j->pattern);
			j->pattern = xrealloc(NULL, val->len + 1);
			memcpy(j->pattern, val->p, val->len);
			j->pattern[val->len] = '\0';
		} else if (resp_arg_is(opt, "count")) {
			if (!resp_parse_ll(val->p, val->len, &count)) {
				reply_error(x->out->reply, "ERR value is not "
					    "an integer or out of range");
				return false;
			}
			if (count < 1) {
				reply_error(x->out->reply, "ERR syntax error");
				return false;
			}
		} else if (resp_arg_is(opt, "type")) {
			j->none = !resp_arg_is(val, "string");
		} else {
			reply_error(x->out->reply, "ERR syntax error");
			return false;
		}
	}
	return true;
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] */
void run_scan(const struct command_ctx *x)
{
	const struct resp_arg *c = &x->cmd->argv[1];
	struct scan_job *j;
	long long cursor;

	x->out->kind = COMMAND_REPLY;
	if (!resp_parse_ll(c->p, c->len, &cursor) || cursor < 0) {
		reply_error(x->out->reply, "ERR invalid cursor");
		return;
	}
	j = xcalloc(1, sizeof(*j));
	if (!scan_options(x, j)) {
		scan_job_free(j);
		return;
	}
	if (cursor >= x->srv->groups) { /* past the end: done */
		scan_job_free(j);
		reply_array(x->out->reply, 2);
		reply_bulk_str(x->out->reply, "0");
		reply_array(x->out->reply, 0);
		return;
	}
	j->scan.group = (int)cursor;
	j->scan.found = scan_found;
	j->scan.arg = j;
	j->next = cursor + 1 < x->srv->groups ? cursor + 1 : 0;
	x->out->kind = COMMAND_SCAN;
	x->out->scan = &j->scan;
}

void command_scan_reply(const struct account_msg *m, int status,
			struct buf *dst)
{
	struct scan_job *j = container_of(m->scan, struct scan_job, scan);
	char cursor[24];

	if (status < 0) {
		reply_error(dst, status == AGR_DISCARDED ?
					 "ERR server is shutting down" :
					 "ERR internal error");
	} else {
		snprintf(cursor, sizeof(cursor), "%lld", j->next);
		reply_array(dst, 2);
		reply_bulk_str(dst, cursor);
		reply_array(dst, j->nkeys);
		buf_append(dst, j->keys.p, j->keys.len);
	}
	scan_job_free(j);
}

/* ---- WATCH, UNWATCH ---- */

void session_unwatch(struct session *s)
{
	unsigned i;

	for (i = 0; i < s->nwatches; i++)
		watch_put(s->watches[i]);
	free(s->watches);
	s->watches = NULL;
	s->nwatches = 0;
}

/*
 * WATCH key...: each key's state is read on its group, in this
 * connection's order; EXEC compares (ledger_accounts.c). A name that
 * cannot be an account's can never change, and is not watched.
 */
void run_watch(const struct command_ctx *x)
{
	const struct resp_command *cmd = x->cmd;
	struct session *s = x->s;
	int i, n = cmd->argc - 1;

	x->out->kind = COMMAND_REPLY;
	if (s->multi) {
		reply_error(x->out->reply, "ERR WATCH inside MULTI is not "
			    "allowed");
		return;
	}
	if (n > KEYS_MAX || s->nwatches + (unsigned)n > WATCH_MAX) {
		reply_error(x->out->reply, "ERR too many watched keys");
		return;
	}
	x->out->watches = xcalloc((size_t)n, sizeof(*x->out->watches));
	x->out->nwatches = (unsigned)n;
	s->watches = xrealloc(s->watches, (s->nwatches + (unsigned)n) *
						  sizeof(*s->watches));
	for (i = 0; i < n; i++) {
		const struct resp_arg *k = &cmd->argv[i + 1];
		struct watch *w;

		if (!key_valid(k->p, k->len))
			continue;
		w = watch_new(k->p, k->len);
		s->watches[s->nwatches++] = w;
		x->out->watches[i] = watch_get(w);
	}
	x->out->kind = COMMAND_KEYS;
	x->out->op = OP_WATCH;
	x->out->count = true;
	x->out->reqid = (struct resp_arg){ NULL, 0 };
}

/* Inside MULTI it is queued as Redis queues it, and changes nothing. */
void run_unwatch(const struct command_ctx *x)
{
	x->out->kind = COMMAND_REPLY;
	if (x->s->multi) {
		reply_simple(x->out->reply, "QUEUED");
		return;
	}
	session_unwatch(x->s);
	reply_simple(x->out->reply, "OK");
}
