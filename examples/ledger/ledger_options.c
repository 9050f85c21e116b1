/* SPDX-License-Identifier: MIT */
/*
 * ledger_options.c - ledger_server's command line: its usage, its
 * defaults, and each option checked into struct config.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ledger_cpus.h"
#include "ledger_options.h"
#include "opts.h"

static const char usage_text[] =
	"usage: ledger_server [--port P] [--dir DIR] [--workers N] "
	"[--groups G]\n"
	"                     [--shutdown-timeout SECONDS] "
	"[--metrics-port P]\n"
	"                     [--watchdog-ms N] "
	"[--journal-io direct|buffered]\n"
	"                     [--journal-sync dsync|fdatasync]\n"
	"                     [--worker-cpus auto|none|LIST]\n"
	"                     [--requirepass PASSWORD] [--maxclients N]\n"
	"                     [--proto-max-bulk-len BYTES] "
	"[--client-query-buffer-limit BYTES]\n"
	"                     [--client-output-buffer-limit "
	"'HARD SOFT SECONDS']\n"
	"                     [--recv multishot|single] [--recv-buffers N]\n"
	"                     [--checkpoint-bytes BYTES] "
	"[--checkpoint-events N]\n"
	"                     [--checkpoint-from auto|journal|tables] "
	"[--no-checkpoints]\n"
	"                     [--crash-after debit|credit|refusal|"
	"checkpoint-write|\n"
	"                      checkpoint-rename|compaction]\n"
	"  defaults: --port 6380 --dir ledger-data --workers <CPUs / 2> "
	"--groups 4096\n"
	"            --shutdown-timeout 10, no metrics, no watchdog, "
	"--journal-io direct,\n"
	"            --journal-sync dsync, --worker-cpus auto, no password,\n"
	"            --maxclients 10000, --proto-max-bulk-len 8388608,\n"
	"            --client-query-buffer-limit 16777216,\n"
	"            --client-output-buffer-limit '8388608 4194304 10',\n"
	"            --recv multishot --recv-buffers 256,\n"
	"            --checkpoint-bytes 16777216 --checkpoint-events 100000"
	" (0: not by that),\n"
	"            --checkpoint-from auto\n"
	"       ledger_server --verify [--dir DIR] [--dump FILE]\n"
	"  fixed: before AUTH at most 10 arguments and bulks of 16 KiB; a "
	"\"POST\" or\n"
	"         \"Host:\" line closes the connection (cross-protocol "
	"scripting)\n"
	"  checkpoints: the next once the journal after the current one "
	"reaches half\n"
	"         of --checkpoint-bytes or --checkpoint-events, or the "
	"journal kept on disk\n"
	"         (from the checkpoint before it, kept for a damaged one) a "
	"whole one:\n"
	"         about two per threshold. The disk stays under 2 x "
	"(checkpoint + "
	"threshold) while a\n"
	"         checkpoint plus the journal's zeros ahead and what comes "
	"in while one\n"
	"         is written stay under the threshold: a state larger "
	"than the threshold\n"
	"         cannot meet that bound, so raise the threshold with it;\n"
	"         built from a copy of the workers' accounts (a pause of "
	"about 150 ns an\n"
	"         account on each worker) where that is cheaper than "
	"replaying the journal\n"
	"         since the last one (auto: at most half an account per "
	"event, at most\n"
	"         65,536 accounts a worker), else by that replay (off the "
	"workers)\n";

/* --client-output-buffer-limit "HARD SOFT SECONDS", as Redis's normal. */
static void parse_output_limit(const char *s, struct config *c)
{
	char hard[24], soft[24], secs[24], extra;

	if (sscanf(s, "%23s %23s %23s %c", hard, soft, secs, &extra) != 3)
		opts_bad();
	c->out_hard = opts_number(hard, 0, 1L << 40);
	c->out_soft = opts_number(soft, 0, 1L << 40);
	c->out_soft_secs = opts_number(secs, 0, 86400);
}

/* The index of s in names[n], or opts_bad(). */
static int choice(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	opts_bad();
}

/* The options that pick one of a few words, or a checked list. */
static bool parse_choice(int ch, struct config *c)
{
	static const char *const io[] = { "direct", "buffered" };
	static const char *const sync[] = { "dsync", "fdatasync" };
	static const char *const crash[] = { "debit", "credit", "refusal",
					     "checkpoint-write",
					     "checkpoint-rename",
					     "compaction" };
	static const char *const recv[] = { "multishot", "single" };
	static const char *const from[] = { "auto", "journal", "tables" };
	int n;

	switch (ch) {
	case 'j':
		c->journal_io = choice(optarg, io, 2) ? JOURNAL_IO_BUFFERED :
							JOURNAL_IO_DIRECT;
		return true;
	case 'J':
		c->journal_sync = choice(optarg, sync, 2) ?
					  JOURNAL_SYNC_FDATASYNC :
					  JOURNAL_SYNC_DSYNC;
		return true;
	case 'C':
		if (!worker_cpus_valid(optarg))
			opts_bad();
		c->worker_cpus = optarg;
		return true;
	case 'X':
		n = choice(optarg, crash, 6);
		if (n < 3)
			c->crash_after = (enum crash_point)(n +
							    CRASH_AFTER_DEBIT);
		else
			c->ckpt.crash = (enum checkpoint_crash)(n - 2);
		return true;
	case 'F':
		n = choice(optarg, from, 3);
		c->ckpt.from = (enum checkpoint_from)n;
		return true;
	case 'r':
		c->front.recv = choice(optarg, recv, 2) ? FRONT_RECV_SINGLE :
							  FRONT_RECV_MULTISHOT;
		return true;
	default:
		return false;
	}
}

static void parse_option(int ch, struct config *c)
{
	long n;

	switch (ch) {
	case 'p': c->port = (int)opts_number(optarg, 0, 65535); break;
	case 'd': c->dir = optarg; break;
	case 'w': c->workers = (int)opts_number(optarg, 1, 1024); break;
	case 'g': c->groups = (int)opts_number(optarg, 1, 1 << 20); break;
	case 't':
		n = opts_number(optarg, 1, 3600);
		c->shutdown_timeout = (double)n;
		break;
	case 'm': c->metrics_port = (int)opts_number(optarg, 0, 65535); break;
	case 'W': c->watchdog_ms = opts_number(optarg, 1, 3600000); break;
	case 'v': c->verify = true; break;
	case 'D': c->dump = optarg; break;
	case 'a': c->requirepass = optarg[0] ? optarg : NULL; break;
	case 'M': c->maxclients = opts_number(optarg, 1, 1000000); break;
	case 'B': c->max_bulk = opts_number(optarg, 1, 1L << 30); break;
	case 'Q': c->query_buf_max = opts_number(optarg, 1024, 1L << 31); break;
	case 'O': parse_output_limit(optarg, c); break;
	case 'b':
		n = opts_number(optarg, 1, 32768);
		if (n & (n - 1))
			opts_bad(); /* the kernel's rule for a buffer ring */
		c->front.recv_buffers = (unsigned)n;
		break;
	case 'K': c->ckpt.bytes = (uint64_t)opts_number(optarg, 0, 1L << 50);
		break;
	case 'E': c->ckpt.events = (uint64_t)opts_number(optarg, 0, 1L << 50);
		break;
	case 'N': c->no_checkpoints = true; break;
	case 'h': opts_help();
	default:
		if (!parse_choice(ch, c))
			opts_bad();
	}
}

void ledger_options(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },
		{ "workers", required_argument, NULL, 'w' },
		{ "groups", required_argument, NULL, 'g' },
		{ "shutdown-timeout", required_argument, NULL, 't' },
		{ "metrics-port", required_argument, NULL, 'm' },
		{ "watchdog-ms", required_argument, NULL, 'W' },
		{ "verify", no_argument, NULL, 'v' },
		{ "dump", required_argument, NULL, 'D' },
		{ "journal-io", required_argument, NULL, 'j' },
		{ "journal-sync", required_argument, NULL, 'J' },
		{ "worker-cpus", required_argument, NULL, 'C' },
		{ "requirepass", required_argument, NULL, 'a' },
		{ "crash-after", required_argument, NULL, 'X' },
		{ "maxclients", required_argument, NULL, 'M' },
		{ "proto-max-bulk-len", required_argument, NULL, 'B' },
		{ "client-query-buffer-limit", required_argument, NULL, 'Q' },
		{ "client-output-buffer-limit", required_argument, NULL, 'O' },
		{ "recv", required_argument, NULL, 'r' },
		{ "recv-buffers", required_argument, NULL, 'b' },
		{ "checkpoint-bytes", required_argument, NULL, 'K' },
		{ "checkpoint-events", required_argument, NULL, 'E' },
		{ "checkpoint-from", required_argument, NULL, 'F' },
		{ "no-checkpoints", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;

	opts_init("ledger_server", usage_text);
	/*
	 * Groups: a group runs one account's events back to back without
	 * waiting for the disk (only transfers hold their group until
	 * durable), so many groups are not needed for group commit any
	 * more; 4096 stays the default, which spreads transfers' waits.
	 */
	*c = (struct config){ .port = 6380, .dir = "ledger-data",
			      .groups = 4096, .shutdown_timeout = 10.0,
			      .metrics_port = -1, .worker_cpus = "auto",
			      .maxclients = 10000, .max_bulk = 8 << 20,
			      .query_buf_max = 16 << 20,
			      .out_hard = 8 << 20, .out_soft = 4 << 20,
			      .out_soft_secs = 10,
			      .front = { .recv = FRONT_RECV_MULTISHOT,
					 .recv_buffers = 256 },
			      .ckpt = { .bytes = CHECKPOINT_BYTES_DEFAULT,
					.events = CHECKPOINT_EVENTS_DEFAULT } };
	while ((ch = getopt_long(argc, argv,
				 "p:d:w:g:t:m:W:vD:j:J:C:a:M:B:Q:O:X:r:b:K:E:Nh",
				 opts, NULL)) != -1)
		parse_option(ch, c);
	if (optind != argc)
		opts_bad();
}
