/* SPDX-License-Identifier: MIT */
/*
 * load_options.c - ledger_load's command line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "load_options.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>

#include "opts.h"

static const char usage_text[] =
	"usage: ledger_load --port P [--connections C] [--requests N]"
	" [--accounts K]\n"
	"                   [--pipeline D] [--seed S] [--prefix STR]"
	" [--expect-out FILE]\n"
	"                   [--metrics-port M] [--transfers T]\n"
	"       ledger_load --port P --check FILE [--connections C]"
	" [--metrics-port M]\n";

void load_options(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "connections", required_argument, NULL, 'c' },
		{ "requests", required_argument, NULL, 'n' },
		{ "accounts", required_argument, NULL, 'k' },
		{ "pipeline", required_argument, NULL, 'P' },
		{ "seed", required_argument, NULL, 's' },
		{ "prefix", required_argument, NULL, 'x' },
		{ "expect-out", required_argument, NULL, 'o' },
		{ "check", required_argument, NULL, 'C' },
		{ "metrics-port", required_argument, NULL, 'M' },
		{ "transfers", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;

	opts_init("ledger_load", usage_text);
	*c = (struct config){ .connections = 32, .requests = 200000,
			      .accounts = 1000, .pipeline = 16, .seed = 1,
			      .prefix = "acct:" };
	while ((ch = getopt_long(argc, argv, "p:c:n:k:P:s:x:o:C:M:T:h", opts,
				 NULL)) != -1) {
		switch (ch) {
		case 'p': c->port = (int)opts_number(optarg, 1, 65535); break;
		case 'c':
			c->connections = (int)opts_number(optarg, 1, 10000);
			break;
		case 'n': c->requests = opts_number(optarg, 1, 1L << 40); break;
		case 'k': c->accounts = opts_number(optarg, 1, 1L << 30); break;
		case 'P': c->pipeline = (int)opts_number(optarg, 1, 1000); break;
		case 's':
			c->seed = (uint64_t)opts_number(optarg, 0, LONG_MAX);
			break;
		case 'x': c->prefix = optarg; break;
		case 'o': c->expect_out = optarg; break;
		case 'C': c->check = optarg; break;
		case 'M':
			c->metrics_port = (int)opts_number(optarg, 1, 65535);
			break;
		case 'T': c->transfers = opts_number(optarg, 1, 1L << 40); break;
		case 'h': opts_help();
		default: opts_bad();
		}
	}
	if (optind != argc || c->port == 0 ||
	    strlen(c->prefix) + 20 > NAME_MAX_LEN)
		opts_bad();
}
