/* SPDX-License-Identifier: MIT */
/*
 * check_resp.c - ledger_server's RESP request parser (examples/common/resp.c):
 * a request that arrives in pieces parses as it does whole, resuming
 * where it stopped; Redis's caps before AUTH, with its texts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "testutil.h"

static const struct resp_limits open_lim = { .max_bulk = 512u << 20 };
static const struct resp_limits unauth_lim = { .max_bulk = 512u << 20,
					       .unauthenticated = true };

/*
 * Feeds req to the parser `step` bytes at a time (the buffer grows,
 * the request stays at its start) and returns the final status; *calls
 * counts the parser's calls.
 */
static enum resp_status feed(const char *req, size_t len, size_t step,
			     const struct resp_limits *lim,
			     struct resp_command *cmd, size_t *used,
			     struct resp_error *err, long *calls)
{
	struct resp_partial st = RESP_PARTIAL_INIT;
	enum resp_status s = RESP_MORE;
	size_t have = 0;

	*calls = 0;
	while (s == RESP_MORE && have < len) {
		have = have + step < len ? have + step : len;
		s = resp_parse_request(req, have, lim, &st, cmd, used, err);
		(*calls)++;
	}
	return s;
}

START_TEST(a_request_in_pieces_parses_as_it_does_whole)
{
	static const char *reqs[] = {
		"*3\r\n$6\r\nINCRBY\r\n$5\r\nalice\r\n$3\r\n100\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
		"*0\r\n",
		"INCRBY 'a b' 7\r\n",
		"PING\n",
	};
	struct resp_command whole, cmd;
	struct resp_error err;
	size_t i, step, wused, used;
	long calls;
	int k;

	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		size_t len = strlen(reqs[i]);

		ck_assert_int_eq(feed(reqs[i], len, len, &open_lim, &whole,
				      &wused, &err, &calls), RESP_DONE);
		ck_assert_uint_eq(wused, len);
		for (step = 1; step < len; step++) {
			ck_assert_int_eq(feed(reqs[i], len, step, &open_lim,
					      &cmd, &used, &err, &calls),
					 RESP_DONE);
			ck_assert_uint_eq(used, wused);
			ck_assert_int_eq(cmd.argc, whole.argc);
			for (k = 0; k < cmd.argc; k++) {
				ck_assert_uint_eq(cmd.argv[k].len,
						  whole.argv[k].len);
				ck_assert(cmd.argv[k].p == whole.argv[k].p);
			}
		}
	}
}
END_TEST

/* A CR at the end of one piece and its LF in the next. */
START_TEST(a_crlf_split_between_pieces)
{
	const char *req = "*1\r\n$4\r\nPING\r\n";
	struct resp_partial st = RESP_PARTIAL_INIT;
	struct resp_command cmd;
	struct resp_error err;
	size_t used;

	ck_assert_int_eq(resp_parse_request(req, 3, &open_lim, &st, &cmd,
					    &used, &err), RESP_MORE);
	ck_assert_int_eq(resp_parse_request(req, 7, &open_lim, &st, &cmd,
					    &used, &err), RESP_MORE);
	ck_assert_int_eq(resp_parse_request(req, 14, &open_lim, &st, &cmd,
					    &used, &err), RESP_DONE);
	ck_assert_int_eq(cmd.argc, 1);
	ck_assert_uint_eq(cmd.argv[0].len, 4);
	ck_assert(memcmp(cmd.argv[0].p, "PING", 4) == 0);
	ck_assert_uint_eq(used, 14);
}
END_TEST

/*
 * The case: 1,048,576 one-byte arguments (7 MB) in 1,000-byte
 * pieces. Resuming, each piece's call starts where the last stopped:
 * st.pos never goes back and ends within a piece of the end. (Its cost
 * is measured in bench/, not here.)
 */
START_TEST(a_huge_request_resumes_where_it_stopped)
{
	size_t nargs = RESP_MAX_MULTIBULK, len, have = 0, last_pos = 0;
	struct resp_partial st = RESP_PARTIAL_INIT;
	enum resp_status s = RESP_MORE;
	struct resp_command cmd;
	struct resp_error err;
	char *req, *p;
	size_t used = 0, i;

	req = malloc(16 + nargs * 7);
	ck_assert_ptr_nonnull(req);
	p = req + sprintf(req, "*%zu\r\n", nargs);
	for (i = 0; i < nargs; i++) {
		memcpy(p, "$1\r\nx\r\n", 7);
		p += 7;
	}
	len = (size_t)(p - req);
	while (s == RESP_MORE) {
		have = have + 1000 < len ? have + 1000 : len;
		s = resp_parse_request(req, have, &open_lim, &st, &cmd, &used,
				       &err);
		if (s == RESP_MORE) {
			ck_assert_uint_ge(st.pos, last_pos);
			ck_assert_uint_le(have - st.pos, 1000 + 7);
			last_pos = st.pos;
		}
	}
	ck_assert_int_eq(s, RESP_DONE);
	ck_assert_uint_eq(used, len);
	ck_assert_int_eq(cmd.argc, (int)nargs);
	free(req);
}
END_TEST

static void expect_error(const char *req, const struct resp_limits *lim,
			 const char *msg)
{
	struct resp_partial st = RESP_PARTIAL_INIT;
	struct resp_command cmd;
	struct resp_error err;
	size_t used;

	ck_assert_int_eq(resp_parse_request(req, strlen(req), lim, &st, &cmd,
					    &used, &err), RESP_PROTOCOL);
	ck_assert_str_eq(err.msg, msg);
	ck_assert_uint_eq(st.pos, 0); /* reset for whatever comes next */
}

START_TEST(before_auth_lengths_are_capped_as_redis_caps_them)
{
	struct resp_partial st = RESP_PARTIAL_INIT;
	struct resp_command cmd;
	struct resp_error err;
	size_t used;

	/* Incomplete, and already refused: nothing is buffered for it. */
	expect_error("*1\r\n$15000000\r\n", &unauth_lim,
		     "Protocol error: unauthenticated bulk length");
	expect_error("*1\r\n$16385\r\n", &unauth_lim,
		     "Protocol error: unauthenticated bulk length");
	expect_error("*11\r\n", &unauth_lim,
		     "Protocol error: unauthenticated multibulk length");
	expect_error("*1\r\n$-5\r\n", &unauth_lim,
		     "Protocol error: invalid bulk length");
	/* At the caps, and after AUTH, the same requests are fine. */
	ck_assert_int_eq(resp_parse_request("*10\r\n", 5, &unauth_lim, &st,
					    &cmd, &used, &err), RESP_MORE);
	resp_partial_reset(&st);
	ck_assert_int_eq(resp_parse_request("*1\r\n$16384\r\n", 12,
					    &unauth_lim, &st, &cmd, &used,
					    &err), RESP_MORE);
	resp_partial_reset(&st);
	ck_assert_int_eq(resp_parse_request("*11\r\n$15000000\r\n", 16,
					    &open_lim, &st, &cmd, &used, &err),
			 RESP_MORE);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("resp");
	TCase *c = tcase_create("core");

	tcase_set_timeout(c, 60);
	tcase_add_test(c, a_request_in_pieces_parses_as_it_does_whole);
	tcase_add_test(c, a_crlf_split_between_pieces);
	tcase_add_test(c, a_huge_request_resumes_where_it_stopped);
	tcase_add_test(c, before_auth_lengths_are_capped_as_redis_caps_them);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
