/* SPDX-License-Identifier: MIT */
#include "opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

static const char *usage_text = "";

void opts_init(const char *program, const char *usage)
{
	util_set_program(program);
	usage_text = usage;
}

void opts_help(void)
{
	fputs(usage_text, stdout);
	exit(fflush(stdout) == 0 ? 0 : 1);
}

void opts_bad(void)
{
	fputs(usage_text, stderr);
	exit(2);
}

long opts_number(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		opts_bad();
	return v;
}
