/* SPDX-License-Identifier: MIT */
/*
 * resp.h - a small RESP2 (REdis Serialization Protocol) parser and
 * encoder, shared by ledger_server and ledger_load. Protocol only: no
 * I/O, no allocation; the caller owns every buffer.
 *
 * Requests come as multibulk arrays of bulk strings
 * ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), as redis-cli and every client
 * library send them, or as inline commands ("GET k\r\n"), as a person
 * types them. The parser is stateless: it looks at the start of a
 * buffer and either finds one whole request, asks for more bytes, or
 * reports a protocol error and says how to get back in step.
 * resp_parse_request() also resumes an incomplete request where it
 * stopped, so that a request arriving in pieces costs its length once.
 */
#ifndef LEDGER_RESP_H
#define LEDGER_RESP_H

#include <stdbool.h>
#include <stddef.h>

#define RESP_MAX_ARGS 64	       /* arguments kept; others counted */
#define RESP_MAX_MULTIBULK (1024 * 1024) /* arguments in one request */
#define RESP_MAX_INLINE (64 * 1024)    /* an inline command, a header */

/* One argument; points into the parsed buffer, not NUL-terminated. */
struct resp_arg {
	const char *p;
	size_t len;
};

struct resp_command {
	int argc; /* as sent; argv holds the first RESP_MAX_ARGS */
	struct resp_arg argv[RESP_MAX_ARGS];
};

/*
 * How to get back in step after a protocol error. An inline command is
 * one line, so the next line starts afresh. A broken multibulk frame
 * has no reliable end, so input is dropped up to the next line that
 * starts with '*', the start of the next multibulk request.
 */
enum resp_sync {
	RESP_SYNCED = 0,
	RESP_SKIP_LINE,		/* drop the rest of this line */
	RESP_SKIP_TO_MULTIBULK, /* drop this line, then up to a '*' line */
	RESP_AWAIT_MULTIBULK,	/* at a line start, waiting for a '*' */
};

struct resp_error {
	char msg[80];	     /* "Protocol error: ...": the reply */
	size_t used;	     /* bytes to drop before resynchronising */
	enum resp_sync sync; /* then what to skip */
};

enum resp_status {
	RESP_MORE = 0,	     /* incomplete: nothing used, read more */
	RESP_DONE = 1,	     /* one request parsed */
	RESP_PROTOCOL = -1,  /* malformed: see struct resp_error */
};

/*
 * Parses the request at the start of buf[0..len); a bulk string longer
 * than max_bulk is a protocol error. RESP_DONE: *cmd
 * holds it (argc 0 for an empty line or "*0", which redis ignores) and
 * *used is its size. RESP_MORE: the request is not complete yet.
 * RESP_PROTOCOL: *err says what to reply and how to resynchronise
 * (resp_resync()). cmd's arguments point into buf.
 */
enum resp_status resp_parse_command(const char *buf, size_t len,
				    size_t max_bulk, struct resp_command *cmd,
				    size_t *used, struct resp_error *err);

/* Redis's caps on a client that has not authenticated yet. */
#define RESP_UNAUTH_MAX_MULTIBULK 10
#define RESP_UNAUTH_MAX_BULK (16 * 1024)

struct resp_limits {
	size_t max_bulk;      /* the longest bulk string */
	bool unauthenticated; /* also Redis's caps before AUTH, above */
};

/*
 * Where an incomplete request stopped: what resp_parse_request() has
 * checked of it already, as offsets from the request's first byte (the
 * buffer may move between calls). Zero it (RESP_PARTIAL_INIT or
 * resp_partial_reset()) before a new request.
 */
struct resp_partial {
	size_t pos;	/* multibulk: where the next bulk starts; 0: none */
	size_t scan;	/* bytes from the current line's start without '\n' */
	long long n;	/* arguments announced */
	int i;		/* arguments complete */
	struct {
		size_t off, len;
	} arg[RESP_MAX_ARGS];
};

#define RESP_PARTIAL_INIT { 0 }

void resp_partial_reset(struct resp_partial *st);

/*
 * resp_parse_command() that resumes: after RESP_MORE, call it again
 * with the same *st and the same request at buf[0] (the bytes already
 * passed unchanged, more after them); it goes on from where it stopped
 * instead of from the first byte. *st is reset after RESP_DONE and
 * RESP_PROTOCOL. Before AUTH (lim->unauthenticated) a multibulk of more
 * than 10 arguments or a bulk longer than 16 KiB is an error, with
 * Redis's texts ("unauthenticated multibulk length", "unauthenticated
 * bulk length"): the caller closes the connection.
 */
enum resp_status resp_parse_request(const char *buf, size_t len,
				    const struct resp_limits *lim,
				    struct resp_partial *st,
				    struct resp_command *cmd, size_t *used,
				    struct resp_error *err);

/*
 * Drops input while *sync is not RESP_SYNCED; returns the number of
 * bytes dropped from buf[0..len) and updates *sync, which stays
 * unsynced (across calls) until the point of resynchronisation.
 */
size_t resp_resync(enum resp_sync *sync, const char *buf, size_t len);

/* True when arg equals the NUL-terminated `s`, ignoring ASCII case. */
bool resp_arg_is(const struct resp_arg *arg, const char *s);

/*
 * Parses a decimal long long the way redis does (string2ll): an
 * optional '-', no '+', no spaces, no leading zeros, no overflow.
 */
bool resp_parse_ll(const char *p, size_t len, long long *out);

/* The longest decimal long long: "-9223372036854775808". */
#define RESP_LL_MAX 20

/*
 * Writes v in decimal to dst (no NUL), as "%lld" would; returns the
 * length. Hand-written: replies are formatted on every request's path.
 */
size_t resp_format_ll(char dst[RESP_LL_MAX], long long v);

/* ---- replies, as a client reads them ---- */

enum resp_type {
	RESP_T_SIMPLE = '+',
	RESP_T_ERROR = '-',
	RESP_T_INTEGER = ':',
	RESP_T_BULK = '$',
	RESP_T_ARRAY = '*',
	RESP_T_NIL = 'n', /* "$-1" or "*-1" */
};

struct resp_reply {
	enum resp_type type;
	const char *str;   /* SIMPLE, ERROR, BULK: into the buffer */
	size_t len;	   /* its length; ARRAY: number of elements */
	long long integer; /* INTEGER */
};

/*
 * Parses the reply at the start of buf[0..len): RESP_DONE with *used,
 * RESP_MORE, or RESP_PROTOCOL when it is not RESP2. An array is parsed
 * whole (its elements are skipped over, not returned).
 */
enum resp_status resp_parse_reply(const char *buf, size_t len,
				  struct resp_reply *r, size_t *used);

/* ---- encoding ----
 *
 * Like snprintf(), each encoder returns the number of bytes the whole
 * encoding takes and writes at most `cap` of them to dst (no NUL is
 * added): the encoding is complete only when the result is <= cap.
 */
size_t resp_encode_simple(char *dst, size_t cap, const char *s);
/* An error reply; CR and LF in msg become spaces. */
size_t resp_encode_error(char *dst, size_t cap, const char *msg);
size_t resp_encode_integer(char *dst, size_t cap, long long v);
size_t resp_encode_bulk(char *dst, size_t cap, const char *p, size_t len);
size_t resp_encode_nil(char *dst, size_t cap);
size_t resp_encode_array(char *dst, size_t cap, size_t n);
/* A request: an array of argc bulk strings. */
size_t resp_encode_command(char *dst, size_t cap, int argc,
			   const struct resp_arg *argv);

#endif /* LEDGER_RESP_H */
