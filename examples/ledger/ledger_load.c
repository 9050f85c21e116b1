/* SPDX-License-Identifier: MIT */
/*
 * ledger_load - drives ledger_server and checks every answer.
 *
 *   ledger_load --port P [--connections C] [--requests N] [--accounts K]
 *               [--pipeline D] [--seed S] [--prefix STR]
 *               [--expect-out FILE] [--metrics-port M] [--transfers T]
 *   ledger_load --port P --check FILE [--connections C] [--metrics-port M]
 *
 * A load run has three phases over C connections, each keeping up to D
 * requests in flight (pipelining):
 *   1. read: GET every account, to learn where the balances start (the
 *      server may hold balances from earlier runs);
 *   2. load: N requests, 55% deposits (INCRBY), 35% withdrawals
 *      (DECRBY), 10% reads (GET), amounts 1..100 on random accounts;
 *      requests/s and latency percentiles are measured here;
 *   3. check: GET every account again and compare.
 * Each account belongs to one connection (account i to connection
 * i mod C), and the server applies one account's events in the order
 * they arrive, so the client can compute every answer in advance: the
 * new balance, the refusal of a withdrawal larger than the balance
 * ("-ERR insufficient funds"), the balance a GET must see. Every reply
 * is compared with that, not just the final balances.
 *
 * --transfers T adds two phases after the check: T TRANSFERs between
 * random accounts of any connection, whose replies must each be the
 * source's new balance (an integer >= 0) or "-ERR insufficient funds",
 * then a GET of every account: the sum of the balances must be what
 * the check phase found, since a transfer moves money and makes none.
 *
 * --expect-out writes "ACCOUNT BALANCE" lines at the end; --check reads
 * such a file and only runs phase 3, e.g. against a restarted server.
 * The exit status is 0 only if every reply and balance was as expected.
 *
 * --metrics-port M (the server's --metrics-port) fetches the server's
 * /metrics at the end and prints its side of the latency, split into
 * queueing (sent to the dispatcher until the handler starts) and
 * processing (handler start to completion, the fdatasync included),
 * estimated from the histogram buckets, and the dispatcher's handled
 * and failed counts. A failed fetch makes the exit status 1.
 *
 * A client need not use aggring: this one is a plain epoll loop on one
 * thread, with non-blocking sockets. Its RESP is hiredis's (the request
 * encoder and the reply reader), not the server's resp.c, so that a bug
 * in either cannot hide on both sides.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <hiredis.h>

#include "buf.h"
#include "load_metrics.h"
#include "load_options.h"
#include "net.h"
#include "opts.h"
#include "util.h"

#define STALL_NS (30ull * 1000000000ull) /* no reply for this long: fail */
#define REPORT_MAX 5			  /* mismatches printed in full */

enum kind { K_GET, K_DEPOSIT, K_WITHDRAW, K_TRANSFER };
enum phase { P_READ, P_LOAD, P_CHECK, P_TRANSFER, P_SUM };

/* A request sent and not yet answered, with the answer it must get. */
struct inflight {
	enum kind kind;
	bool refusal; /* a withdrawal larger than the balance */
	long account;
	long long expect; /* the balance after it, or the one read */
	uint64_t sent_ns;
};

struct conn {
	int fd;
	redisReader *reader; /* the replies, as hiredis parses them */
	struct buf out;
	size_t out_sent;
	struct inflight *q; /* ring of `pipeline` entries */
	unsigned qhead, qlen;
	long to_send;	   /* requests of this phase still to send */
	long *accounts;	   /* the accounts this connection owns */
	long naccounts;
	long next_account; /* read and check phases walk them in order */
	uint64_t rng;
	bool writing; /* EPOLLOUT is armed */
};

struct stats {
	long deposits, withdrawals, refused, reads;
	long mismatches, balances_ok, balances_bad;
	long transfers, transfers_refused;
	long long sum_before, sum_after; /* of the balances, --transfers */
};

struct load {
	struct config cfg;
	int epfd;
	struct conn *conns;
	int nconns;
	char **names;	  /* account names */
	long long *balance; /* what the server must hold, per account */
	long naccounts;
	enum phase phase;
	uint64_t *latency; /* load phase, ns, in completion order */
	long nlatency;
	struct stats st;
};

/* xorshift64*: fast, and the same stream for the same --seed. */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* ---- requests ---- */

static void send_command(struct conn *c, int argc, const char **argv)
{
	char *cmd;
	int n = redisFormatCommandArgv(&cmd, argc, argv, NULL);

	if (n < 0)
		die("out of memory");
	buf_append(&c->out, cmd, (size_t)n);
	redisFreeCommand(cmd);
}

static struct inflight *push_inflight(struct load *l, struct conn *c)
{
	struct inflight *f =
		&c->q[(c->qhead + c->qlen) % (unsigned)l->cfg.pipeline];

	c->qlen++;
	c->to_send--;
	*f = (struct inflight){ .sent_ns = now_ns() };
	return f;
}

static void send_get(struct load *l, struct conn *c, long account)
{
	const char *a[2] = { "GET", l->names[account] };
	struct inflight *f = push_inflight(l, c);

	f->kind = K_GET;
	f->account = account;
	f->expect = l->balance[account];
	send_command(c, 2, a);
}

/*
 * One random request of the load phase, with its answer computed now:
 * earlier requests on the account are all from this connection and
 * the server applies them in order.
 */
static void send_random(struct load *l, struct conn *c)
{
	uint64_t r = next_random(&c->rng);
	long account = c->accounts[(r >> 8) % (uint64_t)c->naccounts];
	long long amount = 1 + (long long)((r >> 40) % 100);
	long long *bal = &l->balance[account];
	unsigned pick = (unsigned)(r % 100);
	const char *a[3];
	struct inflight *f;
	char num[24];

	if (pick < 10) {
		l->st.reads++;
		send_get(l, c, account);
		return;
	}
	f = push_inflight(l, c);
	f->account = account;
	snprintf(num, sizeof(num), "%lld", amount);
	a[1] = l->names[account];
	a[2] = num;
	if (pick < 65) {
		l->st.deposits++;
		f->kind = K_DEPOSIT;
		*bal += amount;
		a[0] = "INCRBY";
	} else {
		l->st.withdrawals++;
		f->kind = K_WITHDRAW;
		f->refusal = amount > *bal;
		if (!f->refusal)
			*bal -= amount;
		a[0] = "DECRBY";
	}
	f->expect = *bal;
	send_command(c, 3, a);
}

/* A TRANSFER between two random accounts of any connection. */
static void send_transfer(struct load *l, struct conn *c)
{
	uint64_t r = next_random(&c->rng);
	long from = (long)((r >> 8) % (uint64_t)l->naccounts);
	long to = (long)((r >> 24) % (uint64_t)(l->naccounts - 1));
	struct inflight *f = push_inflight(l, c);
	const char *a[4];
	char num[24];

	to += to >= from; /* never the source itself */
	snprintf(num, sizeof(num), "%lld", 1 + (long long)((r >> 40) % 100));
	f->kind = K_TRANSFER;
	f->account = from;
	a[0] = "TRANSFER";
	a[1] = l->names[from];
	a[2] = l->names[to];
	a[3] = num;
	send_command(c, 4, a);
}

/* Fills the connection's pipeline for the current phase. */
static void fill(struct load *l, struct conn *c)
{
	while (c->to_send > 0 && c->qlen < (unsigned)l->cfg.pipeline) {
		if (l->phase == P_LOAD)
			send_random(l, c);
		else if (l->phase == P_TRANSFER)
			send_transfer(l, c);
		else
			send_get(l, c, c->accounts[c->next_account++]);
	}
}

/* ---- replies ---- */

/* The first byte RESP2 gives a reply of r's type. */
static char type_char(const redisReply *r)
{
	switch (r->type) {
	case REDIS_REPLY_STATUS: return '+';
	case REDIS_REPLY_ERROR: return '-';
	case REDIS_REPLY_INTEGER: return ':';
	case REDIS_REPLY_STRING: return '$';
	default: return '?';
	}
}

static void mismatch(struct load *l, const struct inflight *f,
		     const redisReply *r, const char *want)
{
	static const char *const names[] = { "GET", "INCRBY", "DECRBY",
					     "TRANSFER" };

	if (l->st.mismatches++ >= REPORT_MAX)
		return;
	if (r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_ARRAY)
		fprintf(stderr, "ledger_load: %s %s: expected %s, got %s\n",
			names[f->kind], l->names[f->account], want,
			r->type == REDIS_REPLY_NIL ? "nil" : "an array");
	else if (r->type == REDIS_REPLY_INTEGER)
		fprintf(stderr, "ledger_load: %s %s: expected %s, got ':%lld'\n",
			names[f->kind], l->names[f->account], want,
			r->integer);
	else
		fprintf(stderr, "ledger_load: %s %s: expected %s, got "
			"'%c%.*s'\n", names[f->kind], l->names[f->account],
			want, type_char(r), (int)(r->len < 60 ? r->len : 60),
			r->str);
}

/*
 * A decimal balance, strictly: digits with an optional '-', nothing
 * else (strtoll alone would take spaces and a '+').
 */
static bool parse_balance(const char *p, size_t len, long long *v)
{
	char num[24], *end;
	size_t i;

	if (len == 0 || len >= sizeof(num))
		return false;
	for (i = 0; i < len; i++)
		if (!(p[i] >= '0' && p[i] <= '9') && !(i == 0 && p[i] == '-'))
			return false;
	memcpy(num, p, len);
	num[len] = '\0';
	errno = 0;
	*v = strtoll(num, &end, 10);
	return errno == 0 && *end == '\0';
}

/* The value of a GET reply: nil is an account without events, 0. */
static bool read_balance(const redisReply *r, long long *v)
{
	if (r->type == REDIS_REPLY_NIL) {
		*v = 0;
		return true;
	}
	return r->type == REDIS_REPLY_STRING && parse_balance(r->str, r->len, v);
}

static void check_get(struct load *l, struct inflight *f,
		      const redisReply *r)
{
	char want[32];
	long long v;
	bool ok = read_balance(r, &v);

	if ((l->phase == P_READ || l->phase == P_SUM) && ok) {
		l->balance[f->account] = v; /* where this run starts */
		l->st.sum_after += l->phase == P_SUM ? v : 0;
		return;
	}
	if (ok && v == f->expect) {
		l->st.balances_ok += l->phase == P_CHECK;
		return;
	}
	l->st.balances_bad += l->phase == P_CHECK;
	snprintf(want, sizeof(want), "%lld", f->expect);
	mismatch(l, f, r, want);
}

static void check_change(struct load *l, struct inflight *f,
			 const redisReply *r)
{
	static const char refusal[] = "ERR insufficient funds";
	char want[40];

	if (f->refusal) {
		if (r->type == REDIS_REPLY_ERROR &&
		    r->len == sizeof(refusal) - 1 &&
		    memcmp(r->str, refusal, r->len) == 0) {
			l->st.refused++;
			return;
		}
		mismatch(l, f, r, "-ERR insufficient funds");
		return;
	}
	if (r->type == REDIS_REPLY_INTEGER && r->integer == f->expect)
		return;
	snprintf(want, sizeof(want), ":%lld", f->expect);
	mismatch(l, f, r, want);
}

static void check_transfer(struct load *l, struct inflight *f,
			   const redisReply *r)
{
	static const char refusal[] = "ERR insufficient funds";

	l->st.transfers++;
	if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0)
		return;
	if (r->type == REDIS_REPLY_ERROR && r->len == sizeof(refusal) - 1 &&
	    memcmp(r->str, refusal, r->len) == 0) {
		l->st.transfers_refused++;
		return;
	}
	mismatch(l, f, r, "a balance or -ERR insufficient funds");
}

static void on_reply(struct load *l, struct conn *c, const redisReply *r)
{
	struct inflight *f = &c->q[c->qhead];
	uint64_t t = now_ns();

	if (c->qlen == 0)
		die("a reply nobody asked for");
	if (l->phase == P_LOAD)
		l->latency[l->nlatency++] = t - f->sent_ns;
	if (f->kind == K_GET)
		check_get(l, f, r);
	else if (f->kind == K_TRANSFER)
		check_transfer(l, f, r);
	else
		check_change(l, f, r);
	c->qhead = (c->qhead + 1) % (unsigned)l->cfg.pipeline;
	c->qlen--;
}

/* Hands one reply after another from hiredis's reader to on_reply. */
static void take_replies(struct load *l, struct conn *c)
{
	void *reply;

	for (;;) {
		if (redisReaderGetReply(c->reader, &reply) != REDIS_OK)
			die("the server sent something that is not RESP2: %s",
			    c->reader->errstr);
		if (!reply)
			return;
		on_reply(l, c, reply);
		freeReplyObject(reply);
	}
}

/* Reads what arrived and matches replies to requests, in order. */
static void receive(struct load *l, struct conn *c)
{
	char in[16384];
	ssize_t n;

	for (;;) {
		n = read(c->fd, in, sizeof(in));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0)
			die("the server closed a connection%s%s",
			    n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
		if (redisReaderFeed(c->reader, in, (size_t)n) != REDIS_OK)
			die("hiredis: %s", c->reader->errstr);
		take_replies(l, c);
	}
}

/* ---- the loop ---- */

static void watch(struct load *l, struct conn *c, bool writing)
{
	struct epoll_event ev = { .events = EPOLLIN | (writing ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (c->writing == writing)
		return;
	c->writing = writing;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

static void transmit(struct load *l, struct conn *c)
{
	ssize_t n;

	while (c->out_sent < c->out.len) {
		n = write(c->fd, c->out.p + c->out_sent,
			  c->out.len - c->out_sent);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			die("write: %s", strerror(errno));
		c->out_sent += (size_t)n;
	}
	if (c->out_sent == c->out.len)
		c->out.len = c->out_sent = 0;
	watch(l, c, c->out.len > 0);
}

static bool phase_done(const struct load *l)
{
	int i;

	for (i = 0; i < l->nconns; i++)
		if (l->conns[i].to_send > 0 || l->conns[i].qlen > 0)
			return false;
	return true;
}

static void run_phase(struct load *l, enum phase phase)
{
	struct epoll_event evs[64];
	uint64_t last = now_ns();
	int i, n;

	l->phase = phase;
	for (i = 0; i < l->nconns; i++) {
		struct conn *c = &l->conns[i];

		c->next_account = 0;
		c->to_send = c->naccounts;
		if (phase == P_LOAD)
			c->to_send = l->cfg.requests / l->nconns +
				     (i < l->cfg.requests % l->nconns);
		if (phase == P_TRANSFER)
			c->to_send = l->cfg.transfers / l->nconns +
				     (i < l->cfg.transfers % l->nconns);
		fill(l, c);
		transmit(l, c);
	}
	while (!phase_done(l)) {
		n = epoll_wait(l->epfd, evs, 64, 1000);
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		if (n > 0)
			last = now_ns();
		else if (now_ns() - last > STALL_NS)
			die("no reply for %llu s: is the server stuck?",
			    STALL_NS / 1000000000ull);
		for (i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				receive(l, c);
			fill(l, c);
			transmit(l, c);
		}
	}
}

/* ---- setup ---- */

static int connect_to(int port)
{
	int fd = net_connect(port, 0);

	if (fd < 0)
		die("connect 127.0.0.1:%d: %s", port, strerror(-fd));
	net_nodelay(fd);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Account i belongs to connection i mod C: see the top of the file. */
static void open_connections(struct load *l)
{
	struct epoll_event ev = { .events = EPOLLIN };
	long a;
	int i;

	l->nconns = l->cfg.connections;
	if (l->naccounts < l->nconns)
		l->nconns = (int)l->naccounts;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		die("epoll_create1: %s", strerror(errno));
	l->conns = xcalloc((size_t)l->nconns, sizeof(*l->conns));
	for (i = 0; i < l->nconns; i++) {
		struct conn *c = &l->conns[i];

		c->fd = connect_to(l->cfg.port);
		c->reader = redisReaderCreate();
		if (!c->reader)
			die("out of memory");
		c->q = xcalloc((size_t)l->cfg.pipeline, sizeof(*c->q));
		c->accounts = xcalloc((size_t)(l->naccounts / l->nconns + 1),
				      sizeof(long));
		c->rng = l->cfg.seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 1;
		ev.data.ptr = c;
		if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	for (a = 0; a < l->naccounts; a++) {
		struct conn *c = &l->conns[a % l->nconns];

		c->accounts[c->naccounts++] = a;
	}
}

static void make_accounts(struct load *l)
{
	long a;

	l->naccounts = l->cfg.accounts;
	l->names = xcalloc((size_t)l->naccounts, sizeof(*l->names));
	l->balance = xcalloc((size_t)l->naccounts, sizeof(*l->balance));
	for (a = 0; a < l->naccounts; a++)
		if (asprintf(&l->names[a], "%s%ld", l->cfg.prefix, a) < 0)
			die("out of memory");
}

/* Reads "ACCOUNT BALANCE" lines: the accounts and what they must hold. */
static void read_expectations(struct load *l, const char *path)
{
	FILE *f = fopen(path, "r");
	char name[NAME_MAX_LEN + 1];
	long long v;
	long cap = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fscanf(f, "%128s %lld", name, &v) == 2) {
		if (l->naccounts == cap) {
			cap = cap ? cap * 2 : 1024;
			l->names = xrealloc(l->names,
					    (size_t)cap * sizeof(*l->names));
			l->balance = xrealloc(l->balance, (size_t)cap *
							  sizeof(*l->balance));
		}
		l->names[l->naccounts] = strdup(name);
		l->balance[l->naccounts++] = v;
	}
	if (!feof(f))
		die("%s: not \"ACCOUNT BALANCE\" lines", path);
	fclose(f);
}

static void write_expectations(const struct load *l, const char *path)
{
	FILE *f = fopen(path, "w");
	long a;

	if (!f)
		die("%s: %s", path, strerror(errno));
	for (a = 0; a < l->naccounts; a++)
		fprintf(f, "%s %lld\n", l->names[a], l->balance[a]);
	if (fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

/* ---- report ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double percentile_ms(const uint64_t *sorted, long n, double p)
{
	long i = (long)(p / 100.0 * (double)n);

	if (n == 0)
		return 0.0;
	return (double)sorted[i < n ? i : n - 1] / 1e6;
}

static void report_load(struct load *l, double seconds)
{
	const struct config *c = &l->cfg;
	uint64_t *lat = l->latency;
	long n = l->nlatency;

	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("ledger_load: %ld requests over %d connections (pipeline %d),"
	       " %ld accounts\n", c->requests, l->nconns, c->pipeline,
	       l->naccounts);
	printf("ledger_load: %.0f requests/s; latency p50 %.3f ms, p99 %.3f "
	       "ms, p99.9 %.3f ms, max %.3f ms\n",
	       (double)c->requests / seconds, percentile_ms(lat, n, 50),
	       percentile_ms(lat, n, 99), percentile_ms(lat, n, 99.9),
	       n ? (double)lat[n - 1] / 1e6 : 0.0);
	printf("ledger_load: %ld deposits, %ld withdrawals (%ld refused: "
	       "insufficient funds), %ld reads\n", l->st.deposits,
	       l->st.withdrawals, l->st.refused, l->st.reads);
}

/* --transfers: T transfers, then the sum of every balance again. */
static int run_transfers(struct load *l)
{
	long a;
	bool ok;

	for (a = 0; a < l->naccounts; a++)
		l->st.sum_before += l->balance[a];
	run_phase(l, P_TRANSFER);
	run_phase(l, P_SUM);
	ok = l->st.mismatches == 0 && l->st.sum_after == l->st.sum_before;
	printf("ledger_load: %ld transfers (%ld refused: insufficient "
	       "funds); the balances sum to %lld, before %lld: %s\n",
	       l->st.transfers, l->st.transfers_refused, l->st.sum_after,
	       l->st.sum_before, ok ? "OK" : "FAILED");
	return ok ? 0 : 1;
}

static int report_check(const struct load *l)
{
	bool ok = l->st.mismatches == 0 && l->st.balances_bad == 0 &&
		  l->st.balances_ok == l->naccounts;

	printf("ledger_load: check: %ld of %ld balances as expected, %ld "
	       "unexpected replies: %s\n", l->st.balances_ok, l->naccounts,
	       l->st.mismatches, ok ? "OK" : "FAILED");
	return ok ? 0 : 1;
}

static void free_load(struct load *l)
{
	long a;
	int i;

	for (i = 0; i < l->nconns; i++) {
		close(l->conns[i].fd);
		free(l->conns[i].out.p);
		redisReaderFree(l->conns[i].reader);
		free(l->conns[i].q);
		free(l->conns[i].accounts);
	}
	for (a = 0; a < l->naccounts; a++)
		free(l->names[a]);
	free(l->conns);
	free(l->names);
	free(l->balance);
	free(l->latency);
	close(l->epfd);
}

int main(int argc, char **argv)
{
	struct load l = { .epfd = -1 };
	uint64_t t0;
	int ret;

	load_options(argc, argv, &l.cfg);
	if (l.cfg.check) {
		read_expectations(&l, l.cfg.check);
		if (l.naccounts == 0)
			die("%s lists no accounts", l.cfg.check);
		open_connections(&l);
	} else {
		make_accounts(&l);
		open_connections(&l);
		run_phase(&l, P_READ);
		l.latency = xcalloc((size_t)l.cfg.requests, sizeof(uint64_t));
		t0 = now_ns();
		run_phase(&l, P_LOAD);
		report_load(&l, (double)(now_ns() - t0) / 1e9);
	}
	run_phase(&l, P_CHECK);
	ret = report_check(&l);
	if (l.cfg.transfers && l.naccounts > 1 && run_transfers(&l) != 0)
		ret = 1;
	if (l.cfg.metrics_port && report_server(l.cfg.metrics_port) != 0)
		ret = 1;
	if (l.cfg.expect_out)
		write_expectations(&l, l.cfg.expect_out);
	free_load(&l);
	return ret;
}
