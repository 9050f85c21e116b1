/* SPDX-License-Identifier: MIT */
/*
 * ledger_info.c - the commands about the server: INFO (the server,
 * clients, memory, persistence, stats and keyspace sections, with the
 * field names redis-cli --stat and monitoring tools read), DBSIZE and
 * CONFIG GET.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ledger_command_ctx.h"
#include "util.h"

struct info_text {
	char p[4096];
	size_t len;
};

static void add(struct info_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add(struct info_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len >= sizeof(t->p))
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->p + t->len, sizeof(t->p) - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n;
	if (t->len > sizeof(t->p))
		t->len = sizeof(t->p);
}

static void info_server(struct info_text *t, const struct command_ctx *x)
{
	const struct command_server *srv = x->srv;
	uint64_t up = (now_ns() - srv->start_ns) / 1000000000u;
	const char *port = strrchr(x->s->laddr, ':');
	struct utsname u;

	if (uname(&u) < 0)
		memset(&u, 0, sizeof(u));
	add(t, "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
	    "aggring_version:%s\r\nos:%s %s %s\r\narch_bits:%d\r\n"
	    "multiplexing_api:io_uring\r\nprocess_id:%ld\r\n"
	    "tcp_port:%s\r\nuptime_in_seconds:%" PRIu64 "\r\n"
	    "uptime_in_days:%" PRIu64 "\r\nworkers:%u\r\ngroups:%d\r\n\r\n",
	    agr_version(), u.sysname, u.release, u.machine,
	    (int)(sizeof(void *) * 8), (long)getpid(), port ? port + 1 : "0", up,
	    up / 86400, srv->workers, srv->groups);
}

static void info_clients(struct info_text *t, const struct command_server *srv,
			 const struct server_stats *st)
{
	add(t, "# Clients\r\nconnected_clients:%" PRIu64 "\r\n"
	    "maxclients:%u\r\nblocked_clients:0\r\n"
	    "client_query_buffer_limit:%zu\r\nproto_max_bulk_len:%zu\r\n\r\n",
	    st->connected, srv->maxclients, srv->query_buf_max,
	    srv->max_bulk);
}

/* The resident set, from /proc: the allocator keeps no totals here. */
static void info_memory(struct info_text *t)
{
	unsigned long long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	rss *= (unsigned long long)sysconf(_SC_PAGESIZE);
	add(t, "# Memory\r\nused_memory:%llu\r\nused_memory_rss:%llu\r\n\r\n",
	    rss, rss);
}

static void info_persistence(struct info_text *t,
			     const struct server_stats *st)
{
	const struct checkpointer_stats *c = &st->ckpt;

	add(t, "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:0\r\n"
	    "rdb_bgsave_in_progress:0\r\nrdb_last_bgsave_status:ok\r\n"
	    "aof_enabled:1\r\naof_rewrite_in_progress:%d\r\n"
	    "appendfsync:always\r\naof_last_write_status:%s\r\n"
	    "journal_error:%s\r\njournal_changes:%" PRIu64 "\r\n",
	    c->running, st->journal_error ? "err" : "ok",
	    st->journal_error ? st->journal_error : "", st->changes);
	add(t, "checkpoints_enabled:%d\r\ncheckpoint_seq:%" PRIu64 "\r\n"
	    "checkpoint_position:%" PRIu64 "\r\ncheckpoint_age_sec:%.3f\r\n"
	    "checkpoint_size:%" PRIu64 "\r\ncheckpoint_duration_ms:%.3f\r\n"
	    "checkpoints_taken:%" PRIu64 "\r\ncheckpoints_failed:%" PRIu64
	    "\r\ncheckpoints_from_tables:%" PRIu64
	    "\r\njournal_bytes_since_checkpoint:%" PRIu64 "\r\n"
	    "journal_bytes_kept:%" PRIu64 "\r\n"
	    "journal_bytes_freed:%" PRIu64 "\r\nrecovery_time_ms:%.3f\r\n\r\n",
	    st->checkpoints, c->seq, c->position, (double)c->age_ns / 1e9,
	    c->size, (double)c->duration_ns / 1e6, c->taken, c->failed,
	    c->from_tables, c->journal_bytes, c->journal_kept, c->freed,
	    (double)st->recovery_ns / 1e6);
}

static void info_stats(struct info_text *t, const struct server_stats *st)
{
	add(t, "# Stats\r\ntotal_connections_received:%" PRIu64 "\r\n"
	    "total_commands_processed:%" PRIu64 "\r\n"
	    "rejected_connections:%" PRIu64 "\r\n"
	    "protocol_errors:%" PRIu64 "\r\n"
	    "client_output_buffer_limit_disconnections:%" PRIu64 "\r\n"
	    "overdrafts_refused:%" PRIu64 "\r\n\r\n",
	    st->connections, st->commands, st->rejected,
	    st->protocol_errors, st->output_limit_closed, st->overdrafts);
}

static void info_keyspace(struct info_text *t, const struct server_stats *st)
{
	add(t, "# Keyspace\r\n");
	if (st->accounts) /* Redis lists only the databases with keys */
		add(t, "db0:keys=%" PRIu64 ",expires=0,avg_ttl=0\r\n",
		    st->accounts);
	add(t, "\r\n");
}

static const char *const sections[] = { "server",      "clients", "memory",
					"persistence", "stats",	  "keyspace" };
#define NSECTIONS (sizeof(sections) / sizeof(sections[0]))

/* Which sections INFO [section ...] asks for: a bit each. */
static unsigned wanted_sections(const struct resp_command *cmd)
{
	unsigned want = 0;
	size_t k;
	int i;

	if (cmd->argc == 1)
		return (1u << NSECTIONS) - 1;
	for (i = 1; i < cmd->argc && i < RESP_MAX_ARGS; i++) {
		if (resp_arg_is(&cmd->argv[i], "all") ||
		    resp_arg_is(&cmd->argv[i], "default") ||
		    resp_arg_is(&cmd->argv[i], "everything"))
			want = (1u << NSECTIONS) - 1;
		for (k = 0; k < NSECTIONS; k++)
			if (resp_arg_is(&cmd->argv[i], sections[k]))
				want |= 1u << k;
	}
	return want;
}

void run_info(const struct command_ctx *x)
{
	unsigned want = wanted_sections(x->cmd);
	struct info_text t = { .len = 0 };
	struct server_stats st;

	x->srv->stats(x->srv->stats_arg, &st);
	if (want & 1)
		info_server(&t, x);
	if (want & 2)
		info_clients(&t, x->srv, &st);
	if (want & 4)
		info_memory(&t);
	if (want & 8)
		info_persistence(&t, &st);
	if (want & 16)
		info_stats(&t, &st);
	if (want & 32)
		info_keyspace(&t, &st);
	if (t.len >= 2) /* Redis ends without the last blank line */
		t.len -= 2;
	x->out->kind = COMMAND_REPLY;
	reply_bulk(x->out->reply, t.p, t.len);
}

void run_dbsize(const struct command_ctx *x)
{
	struct server_stats st;

	x->srv->stats(x->srv->stats_arg, &st);
	x->out->kind = COMMAND_REPLY;
	reply_integer(x->out->reply, (long long)st.accounts);
}

/*
 * CONFIG GET: redis-benchmark reads "save" and "appendonly" before it
 * starts. The answers describe this server: every event is fsync'ed
 * ("appendfsync always"), nothing is snapshotted.
 */
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

void run_config(const struct command_ctx *x)
{
	char maxclients[24], bulk[24], qbuf[24], obuf[96];
	const char *const params[][2] = {
		{ "appendfsync", "always" },
		{ "appendonly", "yes" },
		{ "client-output-buffer-limit", obuf },
		{ "client-query-buffer-limit", qbuf },
		{ "databases", "1" },
		{ "maxclients", maxclients },
		{ "proto-max-bulk-len", bulk },
		{ "save", "" },
	};
	size_t n = sizeof(params) / sizeof(params[0]), i, matched = 0;

	x->out->kind = COMMAND_REPLY;
	if (!resp_arg_is(&x->cmd->argv[1], "get")) {
		reply_error(x->out->reply, "ERR CONFIG: only CONFIG GET is "
			    "supported");
		return;
	}
	if (x->cmd->argc < 3) {
		command_wrong_args(x, "config|get");
		return;
	}
	snprintf(maxclients, sizeof(maxclients), "%u", x->srv->maxclients);
	snprintf(bulk, sizeof(bulk), "%zu", x->srv->max_bulk);
	snprintf(qbuf, sizeof(qbuf), "%zu", x->srv->query_buf_max);
	snprintf(obuf, sizeof(obuf), "normal %zu %zu %llu", x->srv->out_hard,
		 x->srv->out_soft,
		 (unsigned long long)(x->srv->out_soft_ns / 1000000000ull));
	for (i = 0; i < n; i++)
		matched += config_matches(x->cmd, params[i][0]);
	reply_array(x->out->reply, matched * 2);
	for (i = 0; i < n; i++) {
		if (!config_matches(x->cmd, params[i][0]))
			continue;
		reply_bulk_str(x->out->reply, params[i][0]);
		reply_bulk_str(x->out->reply, params[i][1]);
	}
}
