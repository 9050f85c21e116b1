/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ledger_input.c - libFuzzer target for what ledger_server reads
 * from outside: RESP requests off the network (examples/common/resp.c) and
 * journal records off the disk (examples/ledger/ledger_record.c).
 *
 * First byte even: the rest is a stream of requests. It is parsed whole
 * and again in pieces of a size the second byte picks, resuming each
 * incomplete request (resp_parse_request), authenticated or not: both
 * must find the same requests with the same arguments, the same error,
 * or the same incomplete tail; no argument may point outside the input.
 * First byte odd: the rest is one journal line (with a first byte of
 * 3 mod 4, the body of one, sealed with its CRC first so that the
 * fuzzer gets past the checksum). If record_parse() accepts it, the
 * record is encoded again and must parse back to the same record, and
 * that encoding must be the line itself.
 *
 * Built and run by .ci/run with clang -fsanitize=fuzzer,address,undefined
 * for a bounded time.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/ledger/ledger_record.h"
#include "../../examples/common/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	enum resp_status status;
	size_t used; /* bytes of the stream before this outcome */
	int argc;
	size_t off[RESP_MAX_ARGS], len[RESP_MAX_ARGS];
	char msg[80];
};

#define OUTCOMES_MAX 64

/*
 * Parses buf[0, size) as a client's stream, giving the parser `step`
 * more bytes at a time (0: all at once). Fills out[]; returns how many.
 */
static int parse_stream(const char *buf, size_t size, size_t step,
			const struct resp_limits *lim, struct outcome *out)
{
	struct resp_partial st = RESP_PARTIAL_INIT;
	size_t start = 0, have = step ? 0 : size, used;
	struct resp_command cmd;
	struct resp_error err;
	int n = 0, k;

	while (n < OUTCOMES_MAX) {
		enum resp_status s = resp_parse_request(buf + start,
							have - start, lim, &st,
							&cmd, &used, &err);

		if (s == RESP_MORE && have < size) {
			have = have + step < size ? have + step : size;
			continue;
		}
		out[n].status = s;
		out[n].used = start;
		if (s == RESP_DONE) {
			if (used == 0 || used > have - start)
				abort();
			out[n].argc = cmd.argc;
			for (k = 0; k < cmd.argc && k < RESP_MAX_ARGS; k++) {
				if (cmd.argv[k].p < buf + start ||
				    cmd.argv[k].p + cmd.argv[k].len >
					    buf + start + used)
					abort();
				out[n].off[k] = (size_t)(cmd.argv[k].p - buf);
				out[n].len[k] = cmd.argv[k].len;
			}
			start += used;
		} else if (s == RESP_PROTOCOL) {
			memcpy(out[n].msg, err.msg, sizeof(err.msg));
		}
		n++;
		if (s != RESP_DONE || start == size)
			break;
	}
	return n;
}

static void check_requests(const char *buf, size_t size, size_t step,
			   bool unauthenticated)
{
	static struct outcome whole[OUTCOMES_MAX], pieces[OUTCOMES_MAX];
	const struct resp_limits lim = { .max_bulk = 1 << 20,
					 .unauthenticated = unauthenticated };
	int n = parse_stream(buf, size, 0, &lim, whole), i, k;

	if (parse_stream(buf, size, step, &lim, pieces) != n)
		abort();
	for (i = 0; i < n; i++) {
		if (whole[i].status != pieces[i].status ||
		    whole[i].used != pieces[i].used)
			abort();
		if (whole[i].status == RESP_PROTOCOL &&
		    strcmp(whole[i].msg, pieces[i].msg) != 0)
			abort();
		if (whole[i].status != RESP_DONE)
			continue;
		if (whole[i].argc != pieces[i].argc)
			abort();
		for (k = 0; k < whole[i].argc && k < RESP_MAX_ARGS; k++)
			if (whole[i].off[k] != pieces[i].off[k] ||
			    whole[i].len[k] != pieces[i].len[k])
				abort();
	}
}

static void check_record(const char *line, size_t size)
{
	static struct record rec, again;
	static char enc[RECORD_MAX];
	size_t n;

	if (!record_parse(line, size, &rec))
		return;
	n = record_encode(enc, &rec);
	if (n > RECORD_MAX || !record_parse(enc, n, &again))
		abort();
	if (n != size || memcmp(enc, line, n) != 0)
		abort(); /* one record, one spelling */
	if (again.kind != rec.kind || again.delta != rec.delta ||
	    strcmp(again.key, rec.key) != 0 ||
	    strcmp(again.reqid, rec.reqid) != 0)
		abort();
}

/* body[0, size) as a record's body, sealed with its CRC and '\n'. */
static void check_sealed(const char *body, size_t size)
{
	static char text[RECORD_MAX], line[RECORD_MAX];
	size_t n;

	if (size >= RECORD_MAX - 10 || memchr(body, '\n', size) ||
	    memchr(body, '\0', size))
		return;
	memcpy(text, body, size);
	text[size] = '\0';
	n = record_seal(line, text);
	check_record(line, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	char *copy;

	if (!ready) {
		record_init();
		ready = true;
	}
	if (size < 2)
		return 0;
	/* An exact-size copy: a read past the input is caught. */
	copy = malloc(size - 2 ? size - 2 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 2, size - 2);
	if (data[0] % 2 == 0) {
		check_requests(copy, size - 2, 1 + data[1] % 64, false);
		check_requests(copy, size - 2, 1 + data[1] % 64, true);
	} else if (data[0] % 4 == 1) {
		check_record(copy, size - 2);
	} else {
		check_sealed(copy, size - 2);
	}
	free(copy);
	return 0;
}
