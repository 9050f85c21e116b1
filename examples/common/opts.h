/* SPDX-License-Identifier: MIT */
/*
 * opts.h - the examples' command lines, one way: --help prints the
 * usage on stdout and exits 0; a bad option or value prints it on
 * stderr and exits 2.
 */
#ifndef EXAMPLES_OPTS_H
#define EXAMPLES_OPTS_H

/* Names the program (util_set_program) and keeps its usage text. */
void opts_init(const char *program, const char *usage);

/* --help: the usage on stdout, exit 0. */
void opts_help(void) __attribute__((noreturn));

/* A bad command line: the usage on stderr, exit 2. */
void opts_bad(void) __attribute__((noreturn));

/* The decimal number s, in [min, max]; opts_bad() if it is not one. */
long opts_number(const char *s, long min, long max);

#endif /* EXAMPLES_OPTS_H */
