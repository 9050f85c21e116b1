/* SPDX-License-Identifier: MIT */
/*
 * resp.c - RESP2 requests and replies: parse and encode, nothing else.
 *
 * The error texts are Redis's (networking.c), so that a client sees
 * what it would see there. The parser also says where input could be
 * resynchronised; ledger_server does not use that: it closes the
 * connection after the error, as Redis does.
 */
#include "resp.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A header line ("*3", "$5", ":1") never needs more than this. */
#define HEADER_LINE_MAX 32
#define REPLY_DEPTH_MAX 8

/*
 * Finds the line starting at buf[pos]: *eol is where its text ends
 * (before "\r\n" or "\n"), *next where the following line starts.
 * False when no '\n' has arrived yet.
 */
static bool find_line(const char *buf, size_t len, size_t pos, size_t *eol,
		      size_t *next)
{
	const char *nl = memchr(buf + pos, '\n', len - pos);
	size_t end;

	if (!nl)
		return false;
	end = (size_t)(nl - buf);
	*next = end + 1;
	if (end > pos && buf[end - 1] == '\r')
		end--;
	*eol = end;
	return true;
}

static enum resp_status fail(struct resp_error *err, size_t used,
			     enum resp_sync sync, const char *what)
{
	snprintf(err->msg, sizeof(err->msg), "Protocol error: %s", what);
	err->used = used;
	err->sync = sync;
	return RESP_PROTOCOL;
}

bool resp_parse_ll(const char *p, size_t len, long long *out)
{
	unsigned long long v = 0, limit;
	bool neg = false;
	size_t i;

	if (len > 0 && p[0] == '-') {
		neg = true;
		p++;
		len--;
	}
	if (len == 0 || len > 19)
		return false;
	if (p[0] == '0') { /* only "0" itself: no "-0", no "007" */
		if (len != 1 || neg)
			return false;
		*out = 0;
		return true;
	}
	limit = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned)(p[i] - '0');

		if (d > 9 || v > (limit - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg)
		*out = v == limit ? LLONG_MIN : -(long long)v;
	else
		*out = (long long)v;
	return true;
}

bool resp_arg_is(const struct resp_arg *arg, const char *s)
{
	size_t n = strlen(s);

	return arg->len == n && strncasecmp(arg->p, s, n) == 0;
}

/* ---- requests ---- */

/*
 * The '\n' of the line that starts at buf[pos], searched for only in
 * bytes not searched before (st->scan of them were): a line that
 * arrives a few bytes at a time costs its length once, not once per
 * arrival.
 */
static bool find_line_from(const char *buf, size_t len, size_t pos,
			   struct resp_partial *st, size_t *eol, size_t *next)
{
	size_t from = pos + st->scan;
	const char *nl = from < len ? memchr(buf + from, '\n', len - from) :
				      NULL;
	size_t end;

	if (!nl) {
		st->scan = len - pos;
		return false;
	}
	st->scan = 0;
	end = (size_t)(nl - buf);
	*next = end + 1;
	if (end > pos && buf[end - 1] == '\r')
		end--;
	*eol = end;
	return true;
}

static void keep_arg(struct resp_partial *st, size_t off, size_t len)
{
	if (st->i < RESP_MAX_ARGS) {
		st->arg[st->i].off = off;
		st->arg[st->i].len = len;
	}
	st->i++;
}

/*
 * One bulk string of a multibulk request at buf[st->pos]. Errors are at
 * a line start, so resynchronising looks at that line first: it may be
 * the next request, after a client sent fewer arguments than it said.
 */
static enum resp_status parse_bulk(const char *buf, size_t len,
				   const struct resp_limits *lim,
				   struct resp_partial *st,
				   struct resp_error *err)
{
	size_t eol, next, at = st->pos, max = lim->max_bulk;
	long long n = -1; /* read in the error text even if unparsed */
	char what[40];

	if (at == len)
		return RESP_MORE;
	if (buf[at] != '$') {
		snprintf(what, sizeof(what), "expected '$', got '%c'",
			 buf[at] >= 0x20 && buf[at] < 0x7f ? buf[at] : '?');
		return fail(err, at, RESP_AWAIT_MULTIBULK, what);
	}
	if (!find_line_from(buf, len, at, st, &eol, &next))
		return len - at > RESP_MAX_INLINE ?
			       fail(err, at, RESP_AWAIT_MULTIBULK,
				    "too big bulk count string") :
			       RESP_MORE;
	if (lim->unauthenticated && max > RESP_UNAUTH_MAX_BULK)
		max = RESP_UNAUTH_MAX_BULK;
	if (eol - at > HEADER_LINE_MAX ||
	    !resp_parse_ll(buf + at + 1, eol - at - 1, &n) || n < 0 ||
	    (unsigned long long)n > max)
		return fail(err, at, RESP_AWAIT_MULTIBULK,
			    lim->unauthenticated && n >= 0 &&
					    (unsigned long long)n >
						    RESP_UNAUTH_MAX_BULK ?
				    "unauthenticated bulk length" :
				    "invalid bulk length");
	if (len - next < (size_t)n + 2)
		return RESP_MORE; /* the header is read again: a few bytes */
	if (buf[next + (size_t)n] != '\r' ||
	    buf[next + (size_t)n + 1] != '\n') {
		/*
		 * Shorter data than announced: drop the rest of the line
		 * it ran into, or look at that line if it starts there.
		 */
		at = next + (size_t)n;
		return fail(err, at,
			    buf[at - 1] == '\n' ? RESP_AWAIT_MULTIBULK :
						  RESP_SKIP_TO_MULTIBULK,
			    "expected CRLF after bulk string");
	}
	keep_arg(st, next, (size_t)n);
	st->pos = next + (size_t)n + 2;
	return RESP_DONE;
}

/* The "*N" line: st->n and st->pos. */
static enum resp_status parse_multibulk_count(const char *buf, size_t len,
					      const struct resp_limits *lim,
					      struct resp_partial *st,
					      struct resp_error *err)
{
	size_t eol, pos;
	long long n;

	if (!find_line_from(buf, len, 0, st, &eol, &pos))
		return len > RESP_MAX_INLINE ?
			       fail(err, 0, RESP_SKIP_TO_MULTIBULK,
				    "too big mbulk count string") :
			       RESP_MORE;
	if (eol > HEADER_LINE_MAX || !resp_parse_ll(buf + 1, eol - 1, &n) ||
	    n > RESP_MAX_MULTIBULK)
		return fail(err, 0, RESP_SKIP_TO_MULTIBULK,
			    "invalid multibulk length");
	if (lim->unauthenticated && n > RESP_UNAUTH_MAX_MULTIBULK)
		return fail(err, 0, RESP_SKIP_TO_MULTIBULK,
			    "unauthenticated multibulk length");
	st->n = n;
	st->pos = pos;
	st->i = 0;
	return RESP_DONE;
}

/* The arguments kept in st, pointing into buf, as *cmd. */
static void take_args(const char *buf, const struct resp_partial *st,
		      struct resp_command *cmd)
{
	int k;

	for (k = 0; k < st->i && k < RESP_MAX_ARGS; k++) {
		cmd->argv[k].p = buf + st->arg[k].off;
		cmd->argv[k].len = st->arg[k].len;
	}
}

static enum resp_status parse_multibulk(const char *buf, size_t len,
					const struct resp_limits *lim,
					struct resp_partial *st,
					struct resp_command *cmd,
					size_t *used, struct resp_error *err)
{
	enum resp_status s;

	if (st->pos == 0 &&
	    (s = parse_multibulk_count(buf, len, lim, st, err)) != RESP_DONE)
		return s;
	while (st->i < st->n)
		if ((s = parse_bulk(buf, len, lim, st, err)) != RESP_DONE)
			return s;
	cmd->argc = st->n > 0 ? (int)st->n : 0; /* "*0", "*-1": ignored */
	take_args(buf, st, cmd);
	*used = st->pos;
	return RESP_DONE;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static void keep_word(struct resp_command *cmd, int argc, const char *p,
		      size_t len)
{
	if (argc < RESP_MAX_ARGS) {
		cmd->argv[argc].p = p;
		cmd->argv[argc].len = len;
	}
}

/*
 * Splits an inline command into words. A word may be quoted with '"'
 * or '\'' (no escapes inside); a closing quote must end the word.
 */
static bool split_inline(const char *s, size_t n, struct resp_command *cmd)
{
	size_t i = 0, start;
	int argc = 0;

	for (;;) {
		while (i < n && is_blank(s[i]))
			i++;
		if (i == n)
			break;
		if (s[i] == '"' || s[i] == '\'') {
			const char *close = memchr(s + i + 1, s[i], n - i - 1);

			if (!close)
				return false;
			start = i + 1;
			i = (size_t)(close - s);
			keep_word(cmd, argc++, s + start, i - start);
			if (++i < n && !is_blank(s[i]))
				return false;
		} else {
			start = i;
			while (i < n && !is_blank(s[i]))
				i++;
			keep_word(cmd, argc++, s + start, i - start);
		}
	}
	cmd->argc = argc;
	return true;
}

static enum resp_status parse_inline(const char *buf, size_t len,
				     struct resp_partial *st,
				     struct resp_command *cmd, size_t *used,
				     struct resp_error *err)
{
	size_t eol, next;

	if (!find_line_from(buf, len, 0, st, &eol, &next))
		return len > RESP_MAX_INLINE ?
			       fail(err, len, RESP_SKIP_LINE,
				    "too big inline request") :
			       RESP_MORE;
	if (!split_inline(buf, eol, cmd))
		return fail(err, next, RESP_SYNCED,
			    "unbalanced quotes in request");
	*used = next;
	return RESP_DONE;
}

void resp_partial_reset(struct resp_partial *st)
{
	st->pos = 0;
	st->scan = 0;
	st->n = 0;
	st->i = 0;
}

enum resp_status resp_parse_request(const char *buf, size_t len,
				    const struct resp_limits *lim,
				    struct resp_partial *st,
				    struct resp_command *cmd, size_t *used,
				    struct resp_error *err)
{
	enum resp_status s;

	if (len == 0)
		return RESP_MORE;
	if (buf[0] == '*')
		s = parse_multibulk(buf, len, lim, st, cmd, used, err);
	else
		s = parse_inline(buf, len, st, cmd, used, err);
	if (s != RESP_MORE)
		resp_partial_reset(st);
	return s;
}

enum resp_status resp_parse_command(const char *buf, size_t len,
				    size_t max_bulk, struct resp_command *cmd,
				    size_t *used, struct resp_error *err)
{
	struct resp_limits lim = { .max_bulk = max_bulk };
	struct resp_partial st = { 0 };

	return resp_parse_request(buf, len, &lim, &st, cmd, used, err);
}

size_t resp_resync(enum resp_sync *sync, const char *buf, size_t len)
{
	size_t pos = 0;
	const char *nl;

	while (*sync != RESP_SYNCED && pos < len) {
		if (*sync == RESP_AWAIT_MULTIBULK) {
			if (buf[pos] == '*') {
				*sync = RESP_SYNCED;
				break;
			}
			*sync = RESP_SKIP_TO_MULTIBULK;
		}
		nl = memchr(buf + pos, '\n', len - pos);
		if (!nl)
			return len;
		pos = (size_t)(nl - buf) + 1;
		*sync = *sync == RESP_SKIP_LINE ? RESP_SYNCED :
						  RESP_AWAIT_MULTIBULK;
	}
	return pos;
}

/* ---- replies ---- */

static enum resp_status parse_value(const char *buf, size_t len,
				    size_t pos, struct resp_reply *r,
				    int depth, size_t *next);

static enum resp_status skip_elements(const char *buf, size_t len,
				      size_t *pos, long long n, int depth)
{
	struct resp_reply ignored;
	long long i;

	if (depth >= REPLY_DEPTH_MAX)
		return RESP_PROTOCOL;
	for (i = 0; i < n; i++) {
		enum resp_status s =
			parse_value(buf, len, *pos, &ignored, depth + 1, pos);

		if (s != RESP_DONE)
			return s;
	}
	return RESP_DONE;
}

static enum resp_status parse_value(const char *buf, size_t len,
				    size_t pos, struct resp_reply *r,
				    int depth, size_t *next)
{
	size_t eol, after;
	long long n;

	if (pos == len)
		return RESP_MORE;
	if (!find_line(buf, len, pos, &eol, &after))
		return RESP_MORE;
	if (eol + 2 != after) /* replies end their lines with CRLF */
		return RESP_PROTOCOL;
	r->type = (enum resp_type)buf[pos];
	r->str = buf + pos + 1;
	r->len = eol - pos - 1;
	switch (buf[pos]) {
	case '+':
	case '-':
		*next = after;
		return RESP_DONE;
	case ':':
		*next = after;
		return resp_parse_ll(r->str, r->len, &r->integer) ?
			       RESP_DONE : RESP_PROTOCOL;
	case '$':
		if (!resp_parse_ll(r->str, r->len, &n) || n < -1)
			return RESP_PROTOCOL;
		if (n == -1) {
			r->type = RESP_T_NIL;
			r->len = 0;
			*next = after;
			return RESP_DONE;
		}
		if (len - after < (size_t)n + 2)
			return RESP_MORE;
		if (buf[after + (size_t)n] != '\r' ||
		    buf[after + (size_t)n + 1] != '\n')
			return RESP_PROTOCOL;
		r->str = buf + after;
		r->len = (size_t)n;
		*next = after + (size_t)n + 2;
		return RESP_DONE;
	case '*':
		if (!resp_parse_ll(r->str, r->len, &n) || n < -1)
			return RESP_PROTOCOL;
		r->type = n == -1 ? RESP_T_NIL : RESP_T_ARRAY;
		r->len = n == -1 ? 0 : (size_t)n;
		*next = after;
		return skip_elements(buf, len, next, n, depth);
	default:
		return RESP_PROTOCOL;
	}
}

enum resp_status resp_parse_reply(const char *buf, size_t len,
				  struct resp_reply *r, size_t *used)
{
	return parse_value(buf, len, 0, r, 0, used);
}

/* ---- encoding ---- */

/* Copies what fits of src to dst at *pos; *pos counts every byte. */
static void put(char *dst, size_t cap, size_t *pos, const void *src,
		size_t n)
{
	if (*pos < cap)
		memcpy(dst + *pos, src, n < cap - *pos ? n : cap - *pos);
	*pos += n;
}

static size_t encode_line(char *dst, size_t cap, char type, const char *s,
			  size_t n)
{
	size_t pos = 0;

	put(dst, cap, &pos, &type, 1);
	put(dst, cap, &pos, s, n);
	put(dst, cap, &pos, "\r\n", 2);
	return pos;
}

size_t resp_format_ll(char dst[RESP_LL_MAX], long long v)
{
	/* Magnitude as unsigned: -LLONG_MIN does not fit a long long. */
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v :
				       (unsigned long long)v;
	char tmp[RESP_LL_MAX];
	size_t n = 0, i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		dst[n++] = '-';
	memcpy(dst + n, tmp + i, sizeof(tmp) - i);
	return n + sizeof(tmp) - i;
}

/*
 * A reply's header or integer ("*3\r\n", ":-42\r\n"): on every reply's
 * path, so formatted by hand rather than through snprintf.
 */
static size_t encode_number(char *dst, size_t cap, char type, long long v)
{
	char line[RESP_LL_MAX + 3];
	size_t n;

	line[0] = type;
	n = 1 + resp_format_ll(line + 1, v);
	line[n++] = '\r';
	line[n++] = '\n';
	if (n <= cap) {
		memcpy(dst, line, n);
		return n;
	}
	if (cap)
		memcpy(dst, line, cap);
	return n;
}

size_t resp_encode_simple(char *dst, size_t cap, const char *s)
{
	return encode_line(dst, cap, '+', s, strlen(s));
}

size_t resp_encode_error(char *dst, size_t cap, const char *msg)
{
	size_t n = encode_line(dst, cap, '-', msg, strlen(msg));
	size_t i, end = n - 2 < cap ? n - 2 : cap;

	for (i = 1; i < end; i++) /* a CR or LF would end the reply early */
		if (dst[i] == '\r' || dst[i] == '\n')
			dst[i] = ' ';
	return n;
}

size_t resp_encode_integer(char *dst, size_t cap, long long v)
{
	return encode_number(dst, cap, ':', v);
}

size_t resp_encode_bulk(char *dst, size_t cap, const char *p, size_t len)
{
	size_t pos = encode_number(dst, cap, '$', (long long)len);

	put(dst, cap, &pos, p, len);
	put(dst, cap, &pos, "\r\n", 2);
	return pos;
}

size_t resp_encode_nil(char *dst, size_t cap)
{
	return encode_line(dst, cap, '$', "-1", 2);
}

size_t resp_encode_array(char *dst, size_t cap, size_t n)
{
	return encode_number(dst, cap, '*', (long long)n);
}

size_t resp_encode_command(char *dst, size_t cap, int argc,
			   const struct resp_arg *argv)
{
	size_t pos = resp_encode_array(dst, cap, (size_t)argc);
	int i;

	for (i = 0; i < argc; i++)
		pos += resp_encode_bulk(pos < cap ? dst + pos : NULL,
					pos < cap ? cap - pos : 0, argv[i].p,
					argv[i].len);
	return pos;
}
