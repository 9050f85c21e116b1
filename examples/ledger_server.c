/* SPDX-License-Identifier: MIT */
/*
 * ledger_server - a durable bank ledger that speaks RESP2, on aggring.
 *
 * Each account is an aggregate. A deposit (INCRBY) or a withdrawal
 * (DECRBY) is an event: it is routed by account to the account's group,
 * applied serially there, appended to a journal and acknowledged only
 * once fdatasync has made it durable. Stock redis-cli and
 * redis-benchmark are its clients.
 *
 *   ledger_server [--port P] [--dir DIR] [--workers N] [--groups G]
 *                 [--shutdown-timeout SECONDS] [--metrics-port P]
 *                 [--watchdog-ms N] [--journal-io direct|buffered]
 *                 [--journal-sync dsync|fdatasync]
 *                 [--worker-cpus auto|none|LIST]
 *   ledger_server --verify [--dir DIR] [--dump FILE]
 *
 * --port 0 picks a free port; either way the server prints
 * "listening on 127.0.0.1:PORT" once it accepts connections. SIGTERM
 * or SIGINT stops it gracefully. --verify rereads the journals offline
 * and reports what a restart would serve (--dump writes "account
 * balance" lines).
 *
 * --metrics-port P (0: a free port; the server prints "metrics on
 * 127.0.0.1:PORT" before its "listening on" line) turns on the
 * dispatcher's latency metrics and serves them at GET /metrics in the
 * Prometheus text format: queue latency (send to handler start) apart
 * from processing latency (handler start to completion, which here
 * includes the wait for fdatasync), outcome counters and queue depth.
 * The scrapes run on worker 0's ring like the acceptor: accept, recv,
 * send, one request per connection. --watchdog-ms N reports handlers
 * that hold their worker longer than N ms (none should: every wait is
 * on the ring).
 *
 * --worker-cpus: where the workers run (through AGR_WORKER_CPUS). auto,
 * the default: with fewer workers than CPUs, first on the CPUs that
 * take the journal disk's interrupts (agr_disk_irq_cpus()), where a
 * durable write comes back without a cross-CPU wake-up; unpinned if
 * that cannot be told, and when there is a worker per CPU. An
 * AGR_WORKER_CPUS already set wins over auto. none: unpinned. LIST
 * ("1", "0,2-3"): worker i on the i-th CPU of it. The server prints
 * which.
 *
 * Commands: PING [msg], ECHO msg, GET account, INCRBY account n,
 * DECRBY account n, INCR account, DECR account, QUIT, and the CONFIG
 * GET and COMMAND replies that clients ask for when they connect.
 * Amounts are positive; a withdrawal that would make the balance
 * negative is refused with "-ERR insufficient funds" and journals
 * nothing. GET of an account that never had an event is nil, as redis
 * answers for a missing key. An account name is 1 to 128 printable
 * ASCII characters without spaces.
 *
 * Threads and rings. One supplier, one scheduler ("bank"/"Account") of
 * N workers, each a thread with its own io_uring ring, and one
 * dispatcher with G groups on top. Worker 0 also runs the acceptor (a
 * multishot accept), which deals connections round-robin to the
 * workers; a connection's recv and send then run on its worker's ring.
 * A parsed request becomes an agr_message keyed by account and runs on
 * the account's group, whose worker may be another one: the handler
 * reads and writes the group's own account table, so no lock is
 * needed, and the reply travels back to the connection's worker with
 * agr_scheduler_schedule().
 *
 * Group commit (ledger_journal.h). All groups of a worker append to
 * that worker's journal file (journal-W.log). A journal has one durable
 * write in flight at a time; records appended meanwhile gather in the
 * next batch, which starts once the current one is durable, at the end
 * of the worker's turn so that every group woken by the last write
 * adds its record first. Under load one durable write makes many
 * events durable. By default the journal writes whole blocks with
 * O_DIRECT into zeros it wrote ahead, so that a batch costs one write
 * and one cache flush and no kernel worker thread; --journal-io
 * buffered goes through the page cache instead. One group holds one
 * event in flight (an account's events are serial), so a batch holds at
 * most one event per group: hence --groups defaults to 4096, far above
 * the library's CPU-based default. Since a batch is written only after
 * the previous one is durable, a crash can tear only the last batch,
 * whose events nobody has seen acknowledged: the file is always
 * acknowledged records, then maybe a torn batch, then maybe zeros.
 *
 * Reply order. Requests of one connection may finish out of order (they
 * go to different groups); each connection keeps its requests in a
 * queue in arrival order and sends a reply only when every earlier one
 * has been sent, which is what pipelining clients expect.
 *
 * Records. "ACCOUNT +AMOUNT CRC\n" or "ACCOUNT -AMOUNT CRC\n", CRC the
 * CRC-32 of what precedes it on the line in 8 hex digits. A restart
 * sums each account's amounts over every journal in DIR, so replay does
 * not depend on the worker or group count; in each file it stops at the
 * first line that is incomplete or fails its CRC. What follows must be
 * the zeros a direct journal wrote ahead; anything else is a torn
 * batch, cut off with everything after it before the journal is
 * written again, so that no record of it can count later.
 *
 * Stopping. SIGTERM or SIGINT: stop accepting, let every connection
 * answer the requests it has read and close, let the dispatcher finish
 * every admitted message, end the workers; all under one deadline
 * (--shutdown-timeout), after which the stop is forced. When it closes
 * first, the server half-closes and drains what the client still sends
 * (for at most a second), so that no reset destroys replies not yet
 * read. A client that disconnects mid-request loses nothing
 * acknowledged: a request read whole is applied and journaled even if
 * its reply cannot be sent; a request cut off mid-frame is never
 * applied.
 *
 * Protocol errors. Redis closes a connection on a protocol error; this
 * server replies "-ERR Protocol error: ..." and keeps the connection:
 * a bad inline command is dropped up to its end of line, a broken
 * multibulk frame up to the next line that starts with '*' (resp.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "ledger_journal.h"
#include "resp.h"

#define KEY_MAX 128
#define RECORD_MAX (KEY_MAX + 64)
#define REPLY_MAX 384
#define PENDING_MAX 1024	   /* requests in flight per connection */
#define IN_BUF_MIN (16 * 1024)
#define IN_BUF_MAX (1024 * 1024)   /* the largest request accepted */
#define ACCEPT_BACKOFF_NS 100000000ull /* out of descriptors: retry in */
#define LINGER_NS 1000000000ull	      /* a closing peer gets this long */

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

struct config {
	int port;
	int metrics_port; /* -1: no metrics */
	long watchdog_ms; /* 0: no watchdog */
	const char *dir;
	int workers;
	int groups;
	double shutdown_timeout;
	bool verify;
	const char *dump;
	enum journal_io journal_io;
	enum journal_sync journal_sync;
	const char *worker_cpus; /* "auto", "none" or a CPU list */
};

/* ---- small helpers ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("ledger_server: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Memory runs out: like redis, give up rather than limp on. */
static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		die("out of memory");
	return p;
}

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t extra, size_t min)
{
	size_t cap = b->cap ? b->cap : min;

	if (b->len + extra <= b->cap)
		return;
	while (cap < b->len + extra)
		cap *= 2;
	b->p = xrealloc(b->p, cap);
	b->cap = cap;
}

static void buf_append(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n, 256);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_consume(struct buf *b, size_t n)
{
	if (n == 0)
		return;
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	*b = (struct buf){ 0 };
}

/* ---- records ---- */

static uint32_t crc_table[256];

/* CRC-32 (IEEE, as zlib): filled once, before any thread starts. */
static void crc_init(void)
{
	uint32_t c;
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		c = i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_of(const char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--)
		c = crc_table[(c ^ (unsigned char)*p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static bool key_valid(const char *p, size_t len)
{
	size_t i;

	if (len == 0 || len > KEY_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return false;
	return true;
}

/* "ACCOUNT +AMOUNT CRC\n"; returns its length. */
static size_t record_encode(char *dst, const char *key, long long delta)
{
	int n = snprintf(dst, RECORD_MAX, "%s %+lld", key, delta);

	n += snprintf(dst + n, RECORD_MAX - (size_t)n, " %08" PRIx32 "\n",
		      crc32_of(dst, (size_t)n));
	return (size_t)n;
}

/* Parses one whole line (with its '\n'); false if torn or corrupt. */
static bool record_parse(const char *line, size_t len, char *key,
			 long long *delta)
{
	size_t body = len - 10, klen;
	const char *sp;
	uint32_t crc = 0;
	long long amount;
	size_t i;

	if (len < 14 || len > RECORD_MAX || line[len - 1] != '\n' ||
	    line[body] != ' ')
		return false;
	for (i = body + 1; i < len - 1; i++) {
		const char *hex = "0123456789abcdef";
		const char *d = line[i] ? strchr(hex, line[i]) : NULL;

		if (!d)
			return false;
		crc = crc << 4 | (uint32_t)(d - hex);
	}
	if (crc != crc32_of(line, body))
		return false;
	sp = memchr(line, ' ', body);
	if (!sp)
		return false;
	klen = (size_t)(sp - line);
	if (!key_valid(line, klen) || sp + 2 >= line + body ||
	    (sp[1] != '+' && sp[1] != '-') ||
	    !resp_parse_ll(sp + 2, (size_t)(line + body - sp - 2), &amount) ||
	    amount <= 0)
		return false;
	memcpy(key, line, klen);
	key[klen] = '\0';
	*delta = sp[1] == '+' ? amount : -amount;
	return true;
}

/* ---- accounts: one table per group, touched only by that group ---- */

struct account {
	long long balance;
	uint64_t hash;
	char key[];
};

struct accounts {
	struct account **slots;
	size_t mask; /* slots - 1; slots is a power of two */
	size_t count;
};

static uint64_t key_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (*key)
		h = (h ^ (unsigned char)*key++) * 0x100000001b3ull;
	return h;
}

static struct account **accounts_slot(struct account **slots, size_t mask,
				      const char *key, uint64_t h)
{
	size_t i = (size_t)h & mask;

	while (slots[i] &&
	       (slots[i]->hash != h || strcmp(slots[i]->key, key) != 0))
		i = (i + 1) & mask;
	return &slots[i];
}

static void accounts_grow(struct accounts *t)
{
	size_t n = t->slots ? (t->mask + 1) * 2 : 16, i;
	struct account **slots = xcalloc(n, sizeof(*slots));

	for (i = 0; t->slots && i <= t->mask; i++)
		if (t->slots[i])
			*accounts_slot(slots, n - 1, t->slots[i]->key,
				       t->slots[i]->hash) = t->slots[i];
	free(t->slots);
	t->slots = slots;
	t->mask = n - 1;
}

static struct account *accounts_find(const struct accounts *t,
				     const char *key)
{
	if (!t->slots)
		return NULL;
	return *accounts_slot(t->slots, t->mask, key, key_hash(key));
}

/* The account, created with balance 0 if it has none yet. */
static struct account *accounts_get(struct accounts *t, const char *key)
{
	uint64_t h = key_hash(key);
	struct account **slot, *a;
	size_t len = strlen(key);

	if (!t->slots || (t->count + 1) * 4 > (t->mask + 1) * 3)
		accounts_grow(t);
	slot = accounts_slot(t->slots, t->mask, key, h);
	a = *slot;
	if (a)
		return a;
	a = xcalloc(1, sizeof(*a) + len + 1);
	a->hash = h;
	memcpy(a->key, key, len + 1);
	*slot = a;
	t->count++;
	return a;
}

static void accounts_free(struct accounts *t)
{
	size_t i;

	for (i = 0; t->slots && i <= t->mask; i++)
		free(t->slots[i]);
	free(t->slots);
}

/* ---- the server ---- */

struct conn;

/*
 * One worker's share; touched only by its thread until it has ended.
 * Cache-line aligned: neighbours are written by other workers.
 */
struct worker_ctx {
	_Alignas(64) struct journal journal;
	struct conn *conns; /* its live connections */
	struct conn *replied; /* with replies finished in this turn */
	bool flush_queued;    /* worker_flush_replies() is queued */
	struct server *srv;
	unsigned index;
	uint64_t commands, overdrafts, protocol_errors, connections;
};

/* A listening socket whose accepts run on worker 0. */
struct acceptor {
	struct server *srv;
	int fd;
	void (*take)(struct acceptor *a, int fd); /* a new connection */
	bool listening; /* under srv->lock: its operation is armed */
	bool multishot;
	bool accepted; /* multishot worked at least once */
	unsigned next; /* round-robin over the workers */
};

struct server {
	struct config cfg;
	agr_dispatcher *disp;
	agr_scheduler *sched;
	unsigned nworkers;
	int ngroups;
	struct worker_ctx *wctx; /* [nworkers] */
	struct accounts *tables; /* [ngroups] */
	int lock_fd;
	struct acceptor acceptor;
	struct acceptor metrics; /* GET /metrics, with --metrics-port */
	struct http_conn *scrapes; /* worker 0's open /metrics connections */
	atomic_bool stopping;

	/* cond: open_conns hit 0, or an acceptor stopped listening */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	long open_conns; /* RESP and /metrics connections */

	uint64_t replayed_events, replayed_accounts;
	unsigned replayed_journals;
	uint64_t *journal_ends; /* [njournal_ends]: from replay */
	unsigned njournal_ends;
	unsigned journals_direct; /* journals that could use O_DIRECT */
};

enum op { OP_GET, OP_DEPOSIT, OP_WITHDRAW };

static const char *const op_type[] = { "Get", "Deposit", "Withdraw" };

/*
 * A request of a connection. Lives from parsing until its reply has
 * been queued for sending; in between its message may visit the
 * account's group on another worker, which touches only the fields
 * below the message, never the connection.
 */
struct request {
	struct conn *conn;
	struct request *next; /* the connection's queue, arrival order */
	bool ready;	      /* reply[] is final */
	agr_message msg;      /* aggregate_id = key, user = this */
	enum op op;
	unsigned conn_worker;
	long long amount;
	long long balance; /* after the event, while it is journaled */
	agr_exchange *ex;
	struct accounts *table;
	struct commit_wait wait;
	unsigned reply_len;
	char key[KEY_MAX + 1];
	char reply[REPLY_MAX];
};

static void set_reply(struct request *rq, size_t n)
{
	rq->reply_len = n <= REPLY_MAX ? (unsigned)n : 0;
}

static void reply_error(struct request *rq, const char *msg)
{
	set_reply(rq, resp_encode_error(rq->reply, REPLY_MAX, msg));
}

static void reply_integer(struct request *rq, long long v)
{
	set_reply(rq, resp_encode_integer(rq->reply, REPLY_MAX, v));
}

/* ---- handlers: on the account's group, serial per account ---- */

static void entry_durable(struct commit_wait *w, int status)
{
	struct request *rq = container_of(w, struct request, wait);
	agr_exchange *ex = rq->ex;

	if (status == 0) {
		/* Applied only now: nothing unjournaled is ever visible. */
		accounts_get(rq->table, rq->key)->balance = rq->balance;
		reply_integer(rq, rq->balance);
	} else {
		reply_error(rq, "ERR journal write failed");
	}
	agr_exchange_done(ex, status);
}

/* The balance after the event, or false with the refusal as reply. */
static bool next_balance(struct request *rq, long long balance,
			 struct worker_ctx *wc)
{
	if (rq->op == OP_WITHDRAW) {
		if (rq->amount > balance) {
			wc->overdrafts++;
			reply_error(rq, "ERR insufficient funds");
			return false;
		}
		rq->balance = balance - rq->amount;
	} else {
		if (balance > 0 && rq->amount > LLONG_MAX - balance) {
			reply_error(rq, "ERR increment or decrement would "
				    "overflow");
			return false;
		}
		rq->balance = balance + rq->amount;
	}
	return true;
}

/* Deposit and Withdraw: journal the event, reply once it is durable. */
static int post_entry(agr_exchange *ex, void *arg)
{
	struct server *srv = arg;
	struct request *rq = agr_exchange_message(ex)->user;
	struct worker_ctx *wc =
		&srv->wctx[agr_worker_index(agr_exchange_worker(ex))];
	struct account *a;
	char rec[RECORD_MAX];
	size_t len;
	int ret;

	rq->table = &srv->tables[agr_exchange_group(ex)];
	a = accounts_find(rq->table, rq->key);
	if (!next_balance(rq, a ? a->balance : 0, wc))
		return 0;
	len = record_encode(rec, rq->key,
			    rq->op == OP_DEPOSIT ? rq->amount : -rq->amount);
	rq->ex = ex;
	rq->wait.durable = entry_durable;
	ret = journal_append(&wc->journal, rec, len, &rq->wait);
	if (ret < 0) {
		reply_error(rq, "ERR journal write failed");
		return ret;
	}
	return AGR_PENDING;
}

/* Get: serial with the account's events, so it sees every ack'd one. */
static int get_balance(agr_exchange *ex, void *arg)
{
	struct server *srv = arg;
	struct request *rq = agr_exchange_message(ex)->user;
	struct account *a =
		accounts_find(&srv->tables[agr_exchange_group(ex)], rq->key);
	char num[24];
	int n;

	if (!a) {
		set_reply(rq, resp_encode_nil(rq->reply, REPLY_MAX));
		return 0;
	}
	n = snprintf(num, sizeof(num), "%lld", a->balance);
	set_reply(rq, resp_encode_bulk(rq->reply, REPLY_MAX, num, (size_t)n));
	return 0;
}

/* ---- connections: recv, parse, dispatch, reply in order, send ---- */

struct conn {
	struct worker_ctx *wc;
	struct conn *prev, *next; /* wc->conns */
	int fd;
	bool eof;	   /* the peer sends no more (or we gave up on it) */
	bool closing;	   /* we serve no more: QUIT, a stop, a dead peer */
	bool broken;	   /* sending failed: replies are dropped */
	bool lingering;	   /* our FIN is sent; draining until the peer's */
	bool recv_armed;   /* a recv is in flight (callback arg: conn) */
	bool send_armed;   /* a send is in flight (callback arg: &wire) */
	bool linger_armed; /* the linger timer (callback arg: &lingering) */
	bool replied;	   /* on wc->replied, until the end of the turn */
	struct conn *next_replied;
	enum resp_sync sync;
	struct request *head, *tail;
	unsigned pending; /* requests in the queue */
	struct buf in;	  /* received, not yet parsed */
	struct buf out;	  /* replies, in order, waiting for the wire */
	struct buf wire;  /* being sent */
	size_t wire_sent;
};

static void conn_pump(struct conn *c);
static void conn_stop_reading(struct conn *c);

static void request_enqueue(struct conn *c, struct request *rq)
{
	rq->conn = c;
	rq->next = NULL;
	if (c->tail)
		c->tail->next = rq;
	else
		c->head = rq;
	c->tail = rq;
	c->pending++;
}

/*
 * A reply known at once (n <= REPLY_MAX), queued behind the requests
 * still running, or straight to the output when there are none.
 */
static void conn_reply(struct conn *c, const char *p, size_t n)
{
	struct request *rq;

	if (!c->head) {
		buf_append(&c->out, p, n);
		return;
	}
	rq = xcalloc(1, sizeof(*rq));
	memcpy(rq->reply, p, n);
	rq->reply_len = (unsigned)n;
	rq->ready = true;
	request_enqueue(c, rq);
}

static void conn_reply_error(struct conn *c, const char *msg)
{
	char reply[REPLY_MAX];
	size_t n = resp_encode_error(reply, sizeof(reply), msg);

	if (n > sizeof(reply))
		n = resp_encode_error(reply, sizeof(reply), "ERR error");
	conn_reply(c, reply, n);
}

static void conn_reply_simple(struct conn *c, const char *s)
{
	char reply[64];
	size_t n = resp_encode_simple(reply, sizeof(reply), s);

	if (n > sizeof(reply)) /* none of ours is that long */
		n = resp_encode_error(reply, sizeof(reply), "ERR reply too long");
	conn_reply(c, reply, n);
}

/* Runs on the connection's worker: the request's reply is final. */
/* The end of a worker's turn: send what its connections have finished. */
static void worker_flush_replies(void *arg)
{
	struct worker_ctx *wc = arg;
	struct conn *c;

	wc->flush_queued = false;
	while ((c = wc->replied) != NULL) {
		wc->replied = c->next_replied;
		c->replied = false;
		conn_pump(c);
	}
}

/* Dropped by a forced stop: the connections go with the workers. */
static void worker_flush_dropped(void *arg, int err)
{
	struct worker_ctx *wc = arg;

	(void)err;
	wc->flush_queued = false;
	for (; wc->replied; wc->replied = wc->replied->next_replied)
		wc->replied->replied = false;
}

/*
 * A reply is final. It goes out at the end of the worker's turn, with
 * every other reply of its connection finished in that turn: a
 * pipelining client gets one send per batch of events, not one for the
 * first reply and another for the rest.
 */
static void request_ready(void *arg)
{
	struct request *rq = arg;
	struct conn *c = rq->conn;
	struct worker_ctx *wc = c->wc;

	rq->ready = true;
	if (c->replied)
		return;
	c->replied = true;
	c->next_replied = wc->replied;
	wc->replied = c;
	if (wc->flush_queued)
		return;
	wc->flush_queued = true;
	if (agr_scheduler_schedule_cancellable(wc->srv->sched, wc->index,
					       worker_flush_replies,
					       worker_flush_dropped, wc) < 0)
		worker_flush_replies(wc); /* stopping: now */
}

/*
 * The dispatcher is done with a message (on the group's worker). Its
 * reply goes to the connection's worker, directly if that is this one.
 */
static void request_completed(agr_message *msg, int status, void *arg)
{
	struct server *srv = arg;
	struct request *rq = msg->user;
	agr_worker *w = agr_worker_current();
	int ret;

	if (rq->reply_len == 0)
		reply_error(rq, status == AGR_DISCARDED ?
					"ERR server is shutting down" :
					"ERR internal error");
	if (w && agr_worker_scheduler(w) == srv->sched &&
	    (unsigned)agr_worker_index(w) == rq->conn_worker) {
		request_ready(rq);
		return;
	}
	ret = agr_scheduler_schedule(srv->sched, rq->conn_worker,
				     request_ready, rq);
	if (ret < 0) /* only after a forced stop: the connection is gone */
		fprintf(stderr, "ledger_server: reply lost: %s\n",
			strerror(-ret));
}

static void dispatch(struct conn *c, enum op op, const struct resp_arg *key,
		     long long amount)
{
	struct server *srv = c->wc->srv;
	struct request *rq = xcalloc(1, sizeof(*rq));
	int ret;

	memcpy(rq->key, key->p, key->len);
	rq->op = op;
	rq->amount = amount;
	rq->conn_worker = c->wc->index;
	rq->msg.aggregate_id = rq->key;
	rq->msg.type = op_type[op];
	rq->msg.user = rq;
	request_enqueue(c, rq);
	ret = agr_dispatcher_send(srv->disp, &rq->msg);
	if (ret < 0) {
		/* Not admitted: no callback will come, so answer now. */
		reply_error(rq, ret == -ESHUTDOWN ?
					"ERR server is shutting down" :
					"ERR server busy");
		rq->ready = true;
	}
}

/* ---- commands ---- */

struct command {
	const char *name;
	int arity; /* n: exactly n words; -n: at least n */
	void (*run)(struct conn *c, const struct resp_command *cmd);
};

static void run_account(struct conn *c, const struct resp_command *cmd,
			enum op op)
{
	long long amount = 1;

	if (!key_valid(cmd->argv[1].p, cmd->argv[1].len)) {
		conn_reply_error(c, "ERR invalid account name: 1 to 128 "
				 "printable characters, no spaces");
		return;
	}
	if (op != OP_GET && cmd->argc == 3) {
		if (!resp_parse_ll(cmd->argv[2].p, cmd->argv[2].len,
				   &amount)) {
			conn_reply_error(c, "ERR value is not an integer or "
					 "out of range");
			return;
		}
		if (amount <= 0) {
			conn_reply_error(c, "ERR amount must be positive");
			return;
		}
	}
	dispatch(c, op, &cmd->argv[1], amount);
}

static void run_get(struct conn *c, const struct resp_command *cmd)
{
	run_account(c, cmd, OP_GET);
}

static void run_deposit(struct conn *c, const struct resp_command *cmd)
{
	run_account(c, cmd, OP_DEPOSIT);
}

static void run_withdraw(struct conn *c, const struct resp_command *cmd)
{
	run_account(c, cmd, OP_WITHDRAW);
}

/* PING msg, ECHO msg: a reply must fit a request's reply buffer. */
static void reply_bulk_arg(struct conn *c, const struct resp_arg *arg)
{
	char reply[REPLY_MAX];
	size_t n = resp_encode_bulk(reply, sizeof(reply), arg->p, arg->len);

	if (n > sizeof(reply))
		conn_reply_error(c, "ERR message too long");
	else
		conn_reply(c, reply, n);
}

static void run_ping(struct conn *c, const struct resp_command *cmd)
{
	if (cmd->argc > 2) {
		conn_reply_error(c, "ERR wrong number of arguments for "
				 "'ping' command");
		return;
	}
	if (cmd->argc == 2)
		reply_bulk_arg(c, &cmd->argv[1]);
	else
		conn_reply_simple(c, "PONG");
}

static void run_echo(struct conn *c, const struct resp_command *cmd)
{
	reply_bulk_arg(c, &cmd->argv[1]);
}

static void run_quit(struct conn *c, const struct resp_command *cmd)
{
	(void)cmd;
	conn_reply_simple(c, "OK");
	conn_stop_reading(c); /* and close after the replies queued */
}

/*
 * CONFIG GET: redis-benchmark reads "save" and "appendonly" before it
 * starts. The answers describe this server: every event is
 * fsync'ed ("appendfsync always"), nothing is snapshotted.
 */
static const char *const config_params[][2] = {
	{ "appendfsync", "always" },
	{ "appendonly", "yes" },
	{ "save", "" },
};
#define NPARAMS (sizeof(config_params) / sizeof(config_params[0]))

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

static void run_config(struct conn *c, const struct resp_command *cmd)
{
	char reply[REPLY_MAX];
	size_t n = 0, i, matched = 0;

	if (!resp_arg_is(&cmd->argv[1], "get")) {
		conn_reply_error(c, "ERR CONFIG: only CONFIG GET is "
				 "supported");
		return;
	}
	if (cmd->argc < 3) {
		conn_reply_error(c, "ERR wrong number of arguments for "
				 "'config|get' command");
		return;
	}
	for (i = 0; i < NPARAMS; i++)
		matched += config_matches(cmd, config_params[i][0]);
	n += resp_encode_array(reply, sizeof(reply), matched * 2);
	for (i = 0; i < NPARAMS; i++) {
		const char *const *p = config_params[i];

		if (!config_matches(cmd, p[0]))
			continue;
		n += resp_encode_bulk(reply + n, sizeof(reply) - n, p[0],
				      strlen(p[0]));
		n += resp_encode_bulk(reply + n, sizeof(reply) - n, p[1],
				      strlen(p[1]));
	}
	conn_reply(c, reply, n);
}

/* COMMAND (and COMMAND DOCS): redis-cli copes with an empty answer. */
static void run_command(struct conn *c, const struct resp_command *cmd)
{
	(void)cmd;
	conn_reply(c, "*0\r\n", 4);
}

static const struct command command_table[] = {
	{ "ping", -1, run_ping },	 { "echo", 2, run_echo },
	{ "get", 2, run_get },		 { "incrby", 3, run_deposit },
	{ "decrby", 3, run_withdraw },	 { "incr", 2, run_deposit },
	{ "decr", 2, run_withdraw },	 { "quit", -1, run_quit },
	{ "config", -2, run_config },	 { "command", -1, run_command },
};

/* As redis 7 words it: the name, then the first arguments. */
static void reply_unknown(struct conn *c, const struct resp_command *cmd)
{
	char msg[256];
	int n, i;

	n = snprintf(msg, sizeof(msg), "ERR unknown command '%.*s', with "
		     "args beginning with: ",
		     (int)(cmd->argv[0].len < 64 ? cmd->argv[0].len : 64),
		     cmd->argv[0].p);
	for (i = 1; i < cmd->argc && i < RESP_MAX_ARGS && n < 200; i++)
		n += snprintf(msg + n, sizeof(msg) - (size_t)n, "'%.*s' ",
			      (int)(cmd->argv[i].len < 32 ?
					    cmd->argv[i].len : 32),
			      cmd->argv[i].p);
	conn_reply_error(c, msg);
}

static void conn_execute(struct conn *c, const struct resp_command *cmd)
{
	const struct command *def = NULL;
	char msg[96];
	size_t i;

	c->wc->commands++;
	for (i = 0; i < sizeof(command_table) / sizeof(command_table[0]); i++)
		if (resp_arg_is(&cmd->argv[0], command_table[i].name))
			def = &command_table[i];
	if (!def) {
		reply_unknown(c, cmd);
		return;
	}
	if (def->arity > 0 ? cmd->argc != def->arity :
			     cmd->argc < -def->arity) {
		snprintf(msg, sizeof(msg), "ERR wrong number of arguments "
			 "for '%s' command", def->name);
		conn_reply_error(c, msg);
		return;
	}
	def->run(c, cmd);
}

/*
 * Parses and runs the requests in the input buffer, up to PENDING_MAX
 * in flight. Returns true if it stopped at that limit.
 */
static bool conn_parse(struct conn *c)
{
	struct resp_command cmd;
	struct resp_error err;
	size_t pos = 0, used;
	enum resp_status s;
	bool blocked = false;

	while (!c->closing && pos < c->in.len) {
		if (c->pending >= PENDING_MAX) {
			blocked = true;
			break;
		}
		if (c->sync != RESP_SYNCED) {
			pos += resp_resync(&c->sync, c->in.p + pos,
					   c->in.len - pos);
			continue;
		}
		s = resp_parse_command(c->in.p + pos, c->in.len - pos, &cmd,
				       &used, &err);
		if (s == RESP_MORE) {
			if (pos > 0 || c->in.len < IN_BUF_MAX)
				break;
			s = RESP_PROTOCOL; /* a full buffer, still no end */
			snprintf(err.msg, sizeof(err.msg),
				 "Protocol error: too big request");
			err.used = 0;
			err.sync = RESP_SKIP_TO_MULTIBULK;
		}
		if (s == RESP_PROTOCOL) {
			char msg[sizeof(err.msg) + 8];

			c->wc->protocol_errors++;
			snprintf(msg, sizeof(msg), "ERR %s", err.msg);
			conn_reply_error(c, msg);
			pos += err.used;
			c->sync = err.sync;
			continue;
		}
		pos += used;
		if (cmd.argc > 0)
			conn_execute(c, &cmd);
	}
	buf_consume(&c->in, pos);
	return blocked;
}

/* Moves the replies that are next in line to the output buffer. */
static void conn_collect(struct conn *c)
{
	struct request *rq;

	while ((rq = c->head) && rq->ready) {
		c->head = rq->next;
		if (!c->head)
			c->tail = NULL;
		c->pending--;
		if (!c->broken)
			buf_append(&c->out, rq->reply, rq->reply_len);
		free(rq);
	}
}

static void conn_sent(int res, void *arg);

/* QUIT, a stop, a dead peer: serve no more requests, then close. */
static void conn_stop_reading(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->recv_armed)
		agr_io_cancel(agr_worker_current(), c);
}

static void conn_send_more(struct conn *c)
{
	int ret = agr_io_send(agr_worker_current(), c->fd,
			      c->wire.p + c->wire_sent,
			      c->wire.len - c->wire_sent, MSG_NOSIGNAL,
			      conn_sent, &c->wire);

	if (ret < 0) {
		c->broken = true;
		c->wire.len = 0;
		conn_stop_reading(c);
		return;
	}
	c->send_armed = true;
}

static void conn_send(struct conn *c)
{
	struct buf t;

	if (c->broken)
		c->out.len = 0;
	if (c->send_armed || c->out.len == 0)
		return;
	t = c->wire; /* double buffering: fill one, send the other */
	c->wire = c->out;
	c->out = t;
	c->out.len = 0;
	c->wire_sent = 0;
	conn_send_more(c);
}

static void conn_sent(int res, void *arg)
{
	struct conn *c = container_of(arg, struct conn, wire);

	c->send_armed = false;
	if (res <= 0) {
		c->broken = true;
		c->wire.len = 0;
		conn_stop_reading(c);
	} else if ((c->wire_sent += (size_t)res) < c->wire.len) {
		conn_send_more(c); /* the socket buffer was full */
		return;
	} else {
		c->wire.len = 0;
	}
	conn_pump(c);
}

static void conn_received(int res, void *arg);

/*
 * Keeps a recv armed while requests may come and there is room for
 * them; while lingering, to read and drop what the peer still sends.
 */
static void conn_arm_recv(struct conn *c)
{
	size_t room;
	int ret;

	if (c->recv_armed || c->eof)
		return;
	if (c->closing ? !c->lingering : c->pending >= PENDING_MAX)
		return;
	if (c->lingering)
		c->in.len = 0; /* what it sends now is dropped */
	if (c->in.len >= IN_BUF_MAX)
		return; /* conn_parse has reported it */
	room = IN_BUF_MAX - c->in.len;
	buf_reserve(&c->in, room < IN_BUF_MIN / 4 ? room : IN_BUF_MIN / 4,
		    IN_BUF_MIN);
	room = (c->in.cap < IN_BUF_MAX ? c->in.cap : IN_BUF_MAX) - c->in.len;
	ret = agr_io_recv(agr_worker_current(), c->fd, c->in.p + c->in.len,
			  room, 0, conn_received, c);
	if (ret < 0)
		c->eof = true;
	else
		c->recv_armed = true;
}

static void conn_received(int res, void *arg)
{
	struct conn *c = arg;

	c->recv_armed = false;
	if (res > 0 && !c->closing)
		c->in.len += (size_t)res;
	else if (res == 0 || (res < 0 && res != -ECANCELED))
		c->eof = true; /* end of stream, or the peer is gone */
	if (c->eof && c->linger_armed)
		agr_io_cancel(agr_worker_current(), &c->lingering);
	conn_pump(c);
}

static void conn_linger_over(int res, void *arg)
{
	struct conn *c = container_of(arg, struct conn, lingering);

	(void)res; /* -ETIME: time is up; -ECANCELED: the peer closed */
	c->linger_armed = false;
	if (!c->eof) {
		c->eof = true; /* stop waiting for the peer's FIN */
		if (c->recv_armed)
			agr_io_cancel(agr_worker_current(), c);
	}
	conn_pump(c);
}

/*
 * We close first (QUIT, a stop) once every reply has been sent. Closing
 * a socket with unread input makes the kernel send a reset, which can
 * destroy replies the client has not read yet. So half-close instead,
 * and read until the client closes too, for at most LINGER_NS.
 */
static void conn_linger(struct conn *c)
{
	c->lingering = true;
	shutdown(c->fd, SHUT_WR); /* our FIN follows the last reply */
	if (agr_io_timeout(agr_worker_current(), LINGER_NS, conn_linger_over,
			   &c->lingering) < 0)
		c->eof = true;
	else
		c->linger_armed = true;
}

static void server_conn_closed(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	if (--srv->open_conns == 0)
		pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
}

static void conn_free(struct conn *c)
{
	struct server *srv = c->wc->srv;

	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else if (c->wc->conns == c)
		c->wc->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->wire);
	free(c);
	server_conn_closed(srv);
}

/* Every request has been answered, or the peer is gone. */
static bool conn_answered(const struct conn *c)
{
	return c->pending == 0 && c->out.len == 0 && !c->send_armed;
}

/*
 * Done when the peer sends no more, every request has been answered
 * and no operation of ours is in flight.
 */
static bool conn_done(const struct conn *c)
{
	return (c->eof || c->broken) && conn_answered(c) && !c->recv_armed &&
	       !c->linger_armed && !c->replied;
}

/*
 * Moves a connection along after any event: parse what arrived, pass
 * finished replies to the wire in order, keep a recv armed while there
 * is room, and free the connection once it is done. Never re-entered:
 * nothing it calls completes a request synchronously.
 */
static void conn_pump(struct conn *c)
{
	bool blocked;

	do {
		blocked = conn_parse(c);
		conn_collect(c);
	} while (blocked && c->pending < PENDING_MAX);
	conn_send(c);
	if (c->closing && !c->eof && !c->broken && !c->lingering &&
	    !c->recv_armed && conn_answered(c))
		conn_linger(c);
	conn_arm_recv(c);
	if (conn_done(c))
		conn_free(c);
}

/* Runs on the connection's worker. */
static void conn_start(void *arg)
{
	struct conn *c = arg;
	struct worker_ctx *wc = c->wc;

	c->next = wc->conns;
	if (c->next)
		c->next->prev = c;
	wc->conns = c;
	wc->connections++;
	if (atomic_load(&wc->srv->stopping))
		c->closing = true; /* arrived after the stop began */
	conn_pump(c);
}

/* A stop: every connection answers what it has read, then closes. */
static void worker_close_conns(void *arg)
{
	struct worker_ctx *wc = arg;
	struct conn *c, *next;

	for (c = wc->conns; c; c = next) {
		next = c->next;
		conn_stop_reading(c);
		conn_pump(c);
	}
}

/* ---- accepting ---- */

static void acceptor_arm(struct acceptor *a);

static void acceptor_close(struct acceptor *a)
{
	struct server *srv = a->srv;

	close(a->fd);
	a->fd = -1;
	pthread_mutex_lock(&srv->lock);
	a->listening = false;
	pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
}

static void hand_off(struct acceptor *a, int fd)
{
	struct server *srv = a->srv;
	unsigned target = a->next++ % srv->nworkers;
	struct conn *c = xcalloc(1, sizeof(*c));
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	c->wc = &srv->wctx[target];
	pthread_mutex_lock(&srv->lock);
	srv->open_conns++;
	pthread_mutex_unlock(&srv->lock);
	if (target == (unsigned)agr_worker_index(agr_worker_current())) {
		conn_start(c);
		return;
	}
	if (agr_scheduler_schedule(srv->sched, target, conn_start, c) < 0) {
		close(fd);
		free(c);
		server_conn_closed(srv);
	}
}

static void acceptor_retry(int res, void *arg)
{
	struct acceptor *a = arg;

	if (res == -ECANCELED || atomic_load(&a->srv->stopping))
		acceptor_close(a);
	else
		acceptor_arm(a);
}

static void accepted(int res, void *arg)
{
	struct acceptor *a = arg;
	struct server *srv = a->srv;
	bool stopping = atomic_load(&srv->stopping);

	if (res >= 0) {
		a->accepted = true;
		if (stopping)
			close(res);
		else
			a->take(a, res);
		if (!a->multishot && !stopping)
			acceptor_arm(a);
		return;
	}
	/* The accept ended: a single one, or the multishot's last call. */
	if (res == -ECANCELED || stopping) {
		acceptor_close(a);
	} else if (res == -EINVAL && a->multishot && !a->accepted) {
		a->multishot = false; /* a kernel before 5.19 */
		acceptor_arm(a);
	} else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS ||
		   res == -ENOMEM) {
		/* Out of descriptors: wait a little rather than spin. */
		if (agr_io_timeout(agr_worker_current(), ACCEPT_BACKOFF_NS,
				   acceptor_retry, a) < 0)
			acceptor_close(a);
	} else {
		acceptor_arm(a); /* ECONNABORTED and friends: go on */
	}
}

static void acceptor_arm(struct acceptor *a)
{
	agr_worker *w = agr_worker_current();
	int ret;

	if (a->multishot)
		ret = agr_io_accept_multishot(w, a->fd,
					      SOCK_CLOEXEC, accepted, a);
	else
		ret = agr_io_accept(w, a->fd, NULL, NULL,
				    SOCK_CLOEXEC, accepted, a);
	if (ret < 0) {
		fprintf(stderr, "ledger_server: accept: %s\n",
			strerror(-ret));
		acceptor_close(a);
	}
}

static void acceptor_start(void *arg)
{
	acceptor_arm(arg);
}

static void acceptor_stop(void *arg)
{
	struct acceptor *a = arg;

	/* Its callback (or the backoff timer's) sees -ECANCELED. */
	agr_io_cancel(agr_worker_current(), a);
}

/* ---- GET /metrics: HTTP on worker 0's ring ---- */

#define HTTP_REQ_MAX 4096 /* request line and headers */
#define HTTP_HEAD_MAX 256 /* our status line and headers */

/*
 * One scrape: read the request head, answer once, close. Lives on
 * worker 0 (the acceptor's) from accept to close, so the list of them
 * needs no lock.
 */
struct http_conn {
	struct server *srv;
	struct http_conn *prev, *next;
	int fd;
	size_t len;	 /* of req */
	char *resp;	 /* HTTP_HEAD_MAX bytes of room, then the body */
	const char *out; /* the response: its head ends where body starts */
	size_t out_len, sent;
	char req[HTTP_REQ_MAX + 1];
};

static void http_free(struct http_conn *h)
{
	struct server *srv = h->srv;

	close(h->fd);
	if (h->prev)
		h->prev->next = h->next;
	else
		srv->scrapes = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h->resp);
	free(h);
	server_conn_closed(srv);
}

/* Is the request head [p, p + n) complete (its empty line arrived)? */
static bool http_head_done(const char *p, size_t n)
{
	return memmem(p, n, "\r\n\r\n", 4) || memmem(p, n, "\n\n", 2);
}

/*
 * The status to answer, or 0 while the head is incomplete and still
 * plausible. A broken request line is refused as soon as it has ended,
 * so a client sending garbage is not kept waiting for an empty line.
 */
static int http_status(const char *req, size_t len)
{
	const char *eol = memchr(req, '\n', len), *sp, *path, *end;

	if (!eol)
		return len < HTTP_REQ_MAX ? 0 : 400;
	/* "METHOD SP TARGET SP HTTP/x.y" */
	sp = memchr(req, ' ', (size_t)(eol - req));
	if (!sp || sp == req)
		return 400;
	path = sp + 1;
	end = memmem(path, (size_t)(eol - path), " HTTP/", 6);
	if (!end || end == path)
		return 400;
	if (!http_head_done(req, len))
		return len < HTTP_REQ_MAX ? 0 : 400;
	if (sp - req != 3 || memcmp(req, "GET", 3) != 0)
		return 405;
	if (end - path < 8 || memcmp(path, "/metrics", 8) != 0 ||
	    (end - path > 8 && path[8] != '?'))
		return 404;
	return 200;
}

/*
 * Renders the page after HTTP_HEAD_MAX bytes of room in h->resp. The
 * first call only sizes it; counters may gain digits before the second
 * one, hence the slack and the loop.
 */
static int http_render(struct http_conn *h, size_t *len)
{
	agr_dispatcher *const ds[] = { h->srv->disp };
	int n = agr_metrics_write_prometheus(ds, 1, NULL, 0);
	size_t cap = 0;

	while (n >= 0 && (size_t)n >= cap) {
		cap = (size_t)n + 1024;
		h->resp = xrealloc(h->resp, HTTP_HEAD_MAX + cap);
		n = agr_metrics_write_prometheus(ds, 1,
						 h->resp + HTTP_HEAD_MAX, cap);
	}
	*len = (size_t)n;
	return n < 0 ? n : 0;
}

/* A short text body for an error status. */
static size_t http_error_body(struct http_conn *h, const char *reason)
{
	size_t n = strlen(reason);

	h->resp = xrealloc(h->resp, HTTP_HEAD_MAX + n + 1);
	memcpy(h->resp + HTTP_HEAD_MAX, reason, n);
	h->resp[HTTP_HEAD_MAX + n] = '\n';
	return n + 1;
}

static const char *http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	default: return "Internal Server Error";
	}
}

static void http_sent(int res, void *arg);

static void http_send_more(struct http_conn *h)
{
	if (agr_io_send(agr_worker_current(), h->fd, h->out + h->sent,
			h->out_len - h->sent, MSG_NOSIGNAL, http_sent, h) < 0)
		http_free(h);
}

static void http_sent(int res, void *arg)
{
	struct http_conn *h = arg;

	if (res <= 0 || atomic_load(&h->srv->stopping)) {
		http_free(h);
		return;
	}
	h->sent += (size_t)res;
	if (h->sent < h->out_len)
		http_send_more(h); /* a short send */
	else
		http_free(h); /* Connection: close */
}

/* The whole response in one buffer: the head just before the body. */
static void http_respond(struct http_conn *h, int status)
{
	char head[HTTP_HEAD_MAX];
	size_t body = 0;
	int n;

	if (status == 200 && http_render(h, &body) < 0)
		status = 500;
	if (status != 200)
		body = http_error_body(h, http_reason(status));
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain%s\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		     status, http_reason(status),
		     status == 200 ? "; version=0.0.4" : "", body);
	h->out = h->resp + HTTP_HEAD_MAX - n;
	memcpy(h->resp + HTTP_HEAD_MAX - n, head, (size_t)n);
	h->out_len = (size_t)n + body;
	http_send_more(h);
}

static void http_received(int res, void *arg);

static void http_arm_recv(struct http_conn *h)
{
	if (agr_io_recv(agr_worker_current(), h->fd, h->req + h->len,
			HTTP_REQ_MAX - h->len, 0, http_received, h) < 0)
		http_free(h);
}

static void http_received(int res, void *arg)
{
	struct http_conn *h = arg;
	int status;

	/* Gone before asking, or the server stops: nothing to answer. */
	if (res <= 0 || atomic_load(&h->srv->stopping)) {
		http_free(h);
		return;
	}
	h->len += (size_t)res;
	h->req[h->len] = '\0';
	status = http_status(h->req, h->len);
	if (status)
		http_respond(h, status);
	else
		http_arm_recv(h);
}

/* Takes a scrape's connection; on worker 0, like every accept. */
static void http_take(struct acceptor *a, int fd)
{
	struct server *srv = a->srv;
	struct http_conn *h = xcalloc(1, sizeof(*h));

	h->srv = srv;
	h->fd = fd;
	h->next = srv->scrapes;
	if (h->next)
		h->next->prev = h;
	srv->scrapes = h;
	pthread_mutex_lock(&srv->lock);
	srv->open_conns++;
	pthread_mutex_unlock(&srv->lock);
	http_arm_recv(h);
}

/*
 * A stop: cancel the accept and every scrape's operation. Their
 * callbacks see the stop (or -ECANCELED) and close, which is what
 * wait_network_closed() waits for.
 */
static void metrics_stop(void *arg)
{
	struct server *srv = arg;
	agr_worker *w = agr_worker_current();
	struct http_conn *h;

	agr_io_cancel(w, &srv->metrics);
	for (h = srv->scrapes; h; h = h->next)
		agr_io_cancel(w, h);
}

static int listen_on(int port, int *bound_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind 127.0.0.1:%d: %s", port, strerror(errno));
	if (listen(fd, 511) < 0)
		die("listen: %s", strerror(errno));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*bound_port = ntohs(sa.sin_port);
	return fd;
}

/* ---- replay: rebuild the balances from the journals ---- */

struct replay {
	struct accounts *tables;
	int ngroups;
	bool repair; /* cut torn tails (a server), or only report (verify) */
	unsigned journals;
	uint64_t events, torn_bytes;
	uint64_t *ends; /* [nends]: journal-I.log's whole records end here */
	unsigned nends;
};

/* Applies one journal; returns the length of its valid prefix. */
static uint64_t replay_file(struct replay *r, FILE *f, const char *name)
{
	char *line = NULL, key[KEY_MAX + 1];
	size_t cap = 0;
	ssize_t n;
	uint64_t valid = 0;
	long long delta;
	struct account *a;

	while ((n = getline(&line, &cap, f)) > 0) {
		if (!record_parse(line, (size_t)n, key, &delta))
			break;
		a = accounts_get(&r->tables[agr_group_key(key, r->ngroups)],
				 key);
		if (__builtin_add_overflow(a->balance, delta, &a->balance))
			die("%s: the balance of %s overflows", name, key);
		valid += (uint64_t)n;
		r->events++;
	}
	free(line);
	if (ferror(f))
		die("reading %s: %s", name, strerror(errno));
	return valid;
}

/* Whether `name` is journal-I.log; sets *idx to I. */
static bool is_journal_name(const char *name, unsigned *idx)
{
	int end = 0;

	return sscanf(name, "journal-%u.log%n", idx, &end) == 1 &&
	       end > 0 && name[end] == '\0' && *idx < 1u << 20;
}

/* Remembers where journal-idx.log's records end, for open_journals(). */
static void replay_keep_end(struct replay *r, unsigned idx, uint64_t end)
{
	if (idx >= r->nends) {
		r->ends = xrealloc(r->ends, (idx + 1) * sizeof(*r->ends));
		memset(r->ends + r->nends, 0,
		       (idx + 1 - r->nends) * sizeof(*r->ends));
		r->nends = idx + 1;
	}
	r->ends[idx] = end;
}

/*
 * What follows the whole records of a journal: nothing, the zeros a
 * direct journal writes ahead (kept), or a torn batch, never
 * acknowledged since its write never completed: reported, and cut off
 * when repairing, zeros after it included, so that no record of it can
 * ever count.
 */
static void replay_tail(struct replay *r, FILE *f, const char *path,
			uint64_t valid, uint64_t size)
{
	int zeros = journal_zeros_after(fileno(f), valid, size);

	if (zeros < 0)
		die("%s: %s", path, strerror(-zeros));
	if (zeros)
		return;
	fprintf(stderr, "ledger_server: %s: %" PRIu64
		" bytes after the last whole record %s\n", path, size - valid,
		r->repair ? "cut off" : "(a torn write)");
	r->torn_bytes += size - valid;
	if (r->repair && (ftruncate(fileno(f), (off_t)valid) < 0 ||
			  fdatasync(fileno(f)) < 0))
		die("%s: %s", path, strerror(errno));
}

static void replay_dir(struct replay *r, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		die("%s: %s", dir, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		char path[PATH_MAX];
		uint64_t valid;
		struct stat st;
		unsigned idx;
		FILE *f;

		if (!is_journal_name(e->d_name, &idx))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, r->repair ? "r+" : "r");
		if (!f || fstat(fileno(f), &st) < 0)
			die("%s: %s", path, strerror(errno));
		valid = replay_file(r, f, path);
		r->journals++;
		if ((uint64_t)st.st_size > valid)
			replay_tail(r, f, path, valid, (uint64_t)st.st_size);
		replay_keep_end(r, idx, valid);
		fclose(f);
	}
	closedir(d);
}

static uint64_t count_accounts(const struct accounts *tables, int n,
			       long long *total, uint64_t *negative)
{
	uint64_t count = 0;
	size_t i;
	int g;

	*total = 0;
	*negative = 0;
	for (g = 0; g < n; g++)
		for (i = 0; tables[g].slots && i <= tables[g].mask; i++) {
			const struct account *a = tables[g].slots[i];

			if (!a)
				continue;
			count++;
			*total += a->balance;
			*negative += a->balance < 0;
		}
	return count;
}

static void dump_balances(const struct accounts *tables, int n,
			  const char *path)
{
	FILE *f = fopen(path, "w");
	size_t i;
	int g;

	if (!f)
		die("%s: %s", path, strerror(errno));
	for (g = 0; g < n; g++)
		for (i = 0; tables[g].slots && i <= tables[g].mask; i++)
			if (tables[g].slots[i])
				fprintf(f, "%s %lld\n", tables[g].slots[i]->key,
					tables[g].slots[i]->balance);
	if (fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

/* --verify: what would a restart serve? Reads, never writes. */
static int verify(const struct config *cfg)
{
	struct replay r = { .ngroups = 64 };
	uint64_t accounts, negative;
	long long total;
	int g;

	r.tables = xcalloc((size_t)r.ngroups, sizeof(*r.tables));
	replay_dir(&r, cfg->dir);
	accounts = count_accounts(r.tables, r.ngroups, &total, &negative);
	if (cfg->dump)
		dump_balances(r.tables, r.ngroups, cfg->dump);
	printf("verify: %u journals, %" PRIu64 " events, %" PRIu64
	       " accounts, total balance %lld, %" PRIu64 " torn bytes: %s\n",
	       r.journals, r.events, accounts, total, r.torn_bytes,
	       negative ? "FAILED (negative balances)" : "OK");
	for (g = 0; g < r.ngroups; g++)
		accounts_free(&r.tables[g]);
	free(r.tables);
	free(r.ends);
	return negative ? 1 : 0;
}

/* ---- startup and shutdown ---- */

static void lock_dir(struct server *srv)
{
	char path[PATH_MAX];

	if (mkdir(srv->cfg.dir, 0755) < 0 && errno != EEXIST)
		die("%s: %s", srv->cfg.dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/LOCK", srv->cfg.dir);
	srv->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (srv->lock_fd < 0)
		die("%s: %s", path, strerror(errno));
	if (flock(srv->lock_fd, LOCK_EX | LOCK_NB) < 0)
		die("%s is in use by another ledger_server", srv->cfg.dir);
}

static void open_journals(struct server *srv)
{
	unsigned i;
	int dfd;

	for (i = 0; i < srv->nworkers; i++) {
		struct journal *j = &srv->wctx[i].journal;
		uint64_t end = i < srv->njournal_ends ? srv->journal_ends[i] : 0;
		char path[PATH_MAX];
		int ret;

		snprintf(path, sizeof(path), "%s/journal-%u.log", srv->cfg.dir,
			 i);
		ret = journal_open(j, path, end, srv->cfg.journal_io,
				   srv->cfg.journal_sync, srv->sched, i);
		if (ret < 0)
			die("%s: %s", path, strerror(-ret));
		srv->journals_direct += j->direct;
	}
	/* The new files' names must be durable too. */
	dfd = open(srv->cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		die("%s: %s", srv->cfg.dir, strerror(errno));
	close(dfd);
}

/* ---- worker placement ---- */

/* Appends ",cpu" (or "cpu" first) to `list`, of `size` bytes. */
static void list_add(char *list, size_t size, int cpu)
{
	size_t len = strlen(list);

	snprintf(list + len, size - len, "%s%d", len ? "," : "", cpu);
}

/*
 * Why --worker-cpus auto leaves `nworkers` workers unpinned, or NULL if
 * it pins them: then `list` holds the CPUs we may run on, those that
 * take the journal disk's interrupts first, and `near` those.
 */
static const char *near_disk(const char *dir, unsigned nworkers, char *list,
			     char *near, size_t size)
{
	static int disk[CPU_SETSIZE];
	static char why[128];
	cpu_set_t allowed, first;
	int n;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return "cannot read the CPUs we may run on";
	if (nworkers >= (unsigned)CPU_COUNT(&allowed))
		return "as many workers as CPUs";
	n = agr_disk_irq_cpus(dir, disk, CPU_SETSIZE);
	if (n < 0) {
		snprintf(why, sizeof(why), "the journal disk's interrupts: %s",
			 agr_strerror(n));
		return why;
	}
	CPU_ZERO(&first);
	for (int i = 0; i < n && i < CPU_SETSIZE; i++)
		if (CPU_ISSET((size_t)disk[i], &allowed))
			CPU_SET((size_t)disk[i], &first);
	if (CPU_COUNT(&first) == 0)
		return "the journal disk's interrupts go to CPUs we may not use";
	if (CPU_EQUAL(&first, &allowed))
		return "every CPU takes the journal disk's interrupts";
	list[0] = near[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET((size_t)cpu, &first)) {
			list_add(list, size, cpu);
			list_add(near, size, cpu);
		}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET((size_t)cpu, &allowed) &&
		    !CPU_ISSET((size_t)cpu, &first))
			list_add(list, size, cpu);
	return NULL;
}

/*
 * Where the workers run, told to the library through AGR_WORKER_CPUS
 * before the first one starts (no other thread runs yet, so setenv is
 * safe). auto: with fewer workers than CPUs, the CPUs that take the
 * journal disk's interrupts first, so that a durable write comes back
 * without a cross-CPU wake-up; a value already in the environment
 * wins. With a worker per CPU pinning measured no faster
 * (bench/RESULTS.md, network), so they are left to the kernel.
 */
static void place_workers(const struct server *srv, unsigned nworkers)
{
	static char list[CPU_SETSIZE * 6], near[CPU_SETSIZE * 6];
	const char *mode = srv->cfg.worker_cpus, *env, *why;

	if (strcmp(mode, "none") == 0) {
		unsetenv("AGR_WORKER_CPUS");
		printf("ledger_server: workers not pinned (--worker-cpus "
		       "none)\n");
		return;
	}
	if (strcmp(mode, "auto") != 0) {
		if (setenv("AGR_WORKER_CPUS", mode, 1) < 0)
			die("setenv: %s", strerror(errno));
		printf("ledger_server: workers pinned to CPUs %s "
		       "(--worker-cpus)\n", mode);
		return;
	}
	env = getenv("AGR_WORKER_CPUS");
	if (env && *env) {
		printf("ledger_server: workers pinned to CPUs %s "
		       "(AGR_WORKER_CPUS)\n", env);
		return;
	}
	why = near_disk(srv->cfg.dir, nworkers, list, near, sizeof(list));
	if (why) {
		printf("ledger_server: workers not pinned (%s)\n", why);
		return;
	}
	if (setenv("AGR_WORKER_CPUS", list, 1) < 0)
		die("setenv: %s", strerror(errno));
	printf("ledger_server: workers pinned to CPUs %s (the journal "
	       "disk's interrupts go to CPU %s)\n", list, near);
}

static void start_dispatcher(struct server *srv)
{
	agr_supplier *sup;
	agr_dispatcher_options o = {
		.name = "ledger",
		.named_aggregate = { "bank", "Account" },
		.parallelism = srv->cfg.groups,
		.owns_supplier = true,
		.on_complete = request_completed,
		.complete_arg = srv,
		/*
		 * Only when asked: two clock reads and a shared depth count
		 * per message are little next to an fdatasync, but without
		 * the flag the server runs exactly as before, to compare.
		 */
		.metrics = srv->cfg.metrics_port >= 0,
	};
	int ret;

	ret = agr_supplier_new("ledger", srv->cfg.workers, &sup);
	if (ret)
		die("agr_supplier_new: %s", agr_strerror(ret));
	/* Its workers start with the dispatcher's scheduler, below. */
	place_workers(srv, (unsigned)agr_supplier_parallelism(sup));
	o.supplier = sup;
	ret = agr_dispatcher_new(&o, &srv->disp);
	if (ret)
		die("agr_dispatcher_new: %s (is io_uring available?)",
		    agr_strerror(ret));
	if ((ret = agr_dispatcher_register(srv->disp, "Get", get_balance,
					   srv)) ||
	    (ret = agr_dispatcher_register(srv->disp, "Deposit", post_entry,
					   srv)) ||
	    (ret = agr_dispatcher_register(srv->disp, "Withdraw", post_entry,
					   srv)))
		die("agr_dispatcher_register: %s", agr_strerror(ret));
	srv->sched = agr_dispatcher_scheduler(srv->disp);
	srv->nworkers = (unsigned)agr_scheduler_parallelism(srv->sched);
	srv->ngroups = agr_dispatcher_parallelism(srv->disp);
}

static void make_workers(struct server *srv)
{
	size_t size = srv->nworkers * sizeof(*srv->wctx);
	unsigned i;

	srv->wctx = aligned_alloc(_Alignof(struct worker_ctx), size);
	if (!srv->wctx)
		die("out of memory");
	memset(srv->wctx, 0, size);
	for (i = 0; i < srv->nworkers; i++) {
		srv->wctx[i].srv = srv;
		srv->wctx[i].index = i;
	}
}

/*
 * Replays the journals into the group tables. The workers run but are
 * idle: no message is sent before agr_dispatcher_start(), and the
 * tables reach them through the dispatcher's queues.
 */
static void replay_into_groups(struct server *srv)
{
	struct replay r = { .ngroups = srv->ngroups, .repair = true };
	uint64_t negative;
	long long total;

	srv->tables = xcalloc((size_t)srv->ngroups, sizeof(*srv->tables));
	r.tables = srv->tables;
	replay_dir(&r, srv->cfg.dir);
	srv->journal_ends = r.ends;
	srv->njournal_ends = r.nends;
	srv->replayed_journals = r.journals;
	srv->replayed_events = r.events;
	srv->replayed_accounts =
		count_accounts(srv->tables, srv->ngroups, &total, &negative);
}

static void wait_signal(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

/* Every thread, workers included, inherits this mask. */
static void block_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static uint64_t deadline_after(double seconds)
{
	return now_ns() + (uint64_t)(seconds * 1e9);
}

static uint64_t left_until(uint64_t deadline)
{
	uint64_t now = now_ns();

	return deadline > now ? deadline - now : 0;
}

/* Under srv->lock: a socket operation may still be in flight. */
static bool network_open(const struct server *srv)
{
	return srv->open_conns > 0 || srv->acceptor.listening ||
	       srv->metrics.listening;
}

/*
 * Waits until the acceptors have ended and every connection has closed,
 * or the deadline: then no socket operation is left in flight.
 */
static bool wait_network_closed(struct server *srv, uint64_t deadline)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(left_until(deadline) / 1000000000ull);
	ts.tv_nsec += (long)(left_until(deadline) % 1000000000ull);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&srv->lock);
	while (network_open(srv) &&
	       pthread_cond_timedwait(&srv->cond, &srv->lock, &ts) == 0)
		;
	done = !network_open(srv);
	pthread_mutex_unlock(&srv->lock);
	return done;
}

/*
 * Graceful stop, under one deadline: stop accepting, let every
 * connection answer what it has read and close, let the dispatcher
 * finish every admitted message, then end the workers. Returns true if
 * it all happened in time.
 *
 * The sockets are quiet before the dispatcher stops: besides being the
 * natural order, a worker told to stop while an operation of its own is
 * in flight does not wait for it in the kernel (aggring 0.1), so the
 * cancels of the accept and the recvs must have completed by then.
 */
static bool stop_server(struct server *srv)
{
	uint64_t deadline = deadline_after(srv->cfg.shutdown_timeout);
	bool clean;
	unsigned i;
	int ret;

	atomic_store(&srv->stopping, true);
	agr_scheduler_schedule(srv->sched, 0, acceptor_stop, &srv->acceptor);
	if (srv->cfg.metrics_port >= 0)
		agr_scheduler_schedule(srv->sched, 0, metrics_stop, srv);
	for (i = 0; i < srv->nworkers; i++)
		agr_scheduler_schedule(srv->sched, i, worker_close_conns,
				       &srv->wctx[i]);
	clean = wait_network_closed(srv, deadline);
	ret = agr_dispatcher_stop_gracefully(srv->disp, left_until(deadline));
	if (ret < 0) {
		fprintf(stderr, "ledger_server: graceful stop: %s; forcing\n",
			agr_strerror(ret));
		agr_dispatcher_force_stop(srv->disp);
		clean = false;
	}
	agr_dispatcher_free(srv->disp); /* joins the workers */
	return clean;
}

static void print_summary(struct server *srv, bool clean, uint64_t ns)
{
	uint64_t commands = 0, conns = 0, overdrafts = 0, perrs = 0;
	uint64_t events = 0, syncs = 0;
	bool journal_ok = true;
	unsigned i;

	for (i = 0; i < srv->nworkers; i++) {
		struct worker_ctx *wc = &srv->wctx[i];

		commands += wc->commands;
		conns += wc->connections;
		overdrafts += wc->overdrafts;
		perrs += wc->protocol_errors;
		events += wc->journal.events;
		syncs += wc->journal.syncs;
		journal_ok = journal_ok && !wc->journal.error;
	}
	printf("ledger_server: stopped %s in %.1f ms: %" PRIu64
	       " connections, %" PRIu64 " commands, %" PRIu64
	       " overdrafts refused, %" PRIu64 " protocol errors\n",
	       clean ? "cleanly" : "BY FORCE", (double)ns / 1e6, conns,
	       commands, overdrafts, perrs);
	printf("ledger_server: %" PRIu64 " events journaled in %" PRIu64
	       " durable writes (%.1f events per write)%s\n",
	       events, syncs, syncs ? (double)events / (double)syncs : 0.0,
	       journal_ok ? "" : "; JOURNAL FAILED");
	fflush(stdout);
}

static void free_server(struct server *srv)
{
	unsigned i;
	int g;

	for (i = 0; i < srv->nworkers; i++)
		journal_close(&srv->wctx[i].journal);
	free(srv->journal_ends);
	for (g = 0; g < srv->ngroups; g++)
		accounts_free(&srv->tables[g]);
	free(srv->tables);
	free(srv->wctx);
	close(srv->lock_fd);
	pthread_mutex_destroy(&srv->lock);
	pthread_cond_destroy(&srv->cond);
}

/* Listens on 127.0.0.1:port and arms the accept on worker 0. */
static void start_acceptor(struct server *srv, struct acceptor *a, int port,
			   void (*take)(struct acceptor *, int), int *bound)
{
	int ret;

	*a = (struct acceptor){ .srv = srv, .take = take, .multishot = true,
				.listening = true };
	a->fd = listen_on(port, bound);
	ret = agr_scheduler_schedule(srv->sched, 0, acceptor_start, a);
	if (ret)
		die("agr_scheduler_schedule: %s", agr_strerror(ret));
}

static int serve(struct server *srv)
{
	uint64_t t0;
	bool clean, journal_ok = true;
	int port, metrics_port = 0, ret;
	unsigned i;

	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->cond, NULL);
	block_signals();
	lock_dir(srv);
	start_dispatcher(srv);
	make_workers(srv);
	replay_into_groups(srv);
	open_journals(srv);
	ret = agr_dispatcher_start(srv->disp);
	if (ret)
		die("agr_dispatcher_start: %s", agr_strerror(ret));
	ret = srv->cfg.watchdog_ms ?
		agr_watchdog_start((uint64_t)srv->cfg.watchdog_ms * 1000000u) :
		0;
	if (ret)
		die("agr_watchdog_start: %s", agr_strerror(ret));
	start_acceptor(srv, &srv->acceptor, srv->cfg.port, hand_off, &port);
	if (srv->cfg.metrics_port >= 0)
		start_acceptor(srv, &srv->metrics, srv->cfg.metrics_port,
			       http_take, &metrics_port);
	printf("ledger_server: %u workers, %d groups; replayed %" PRIu64
	       " events from %u journals: %" PRIu64 " accounts\n",
	       srv->nworkers, srv->ngroups, srv->replayed_events,
	       srv->replayed_journals, srv->replayed_accounts);
	printf("ledger_server: journal I/O %s, %s\n",
	       srv->journals_direct == srv->nworkers ? "direct (O_DIRECT)" :
	       srv->cfg.journal_io == JOURNAL_IO_BUFFERED ?
						       "buffered" :
						       "buffered (O_DIRECT refused here)",
	       srv->cfg.journal_sync == JOURNAL_SYNC_FDATASYNC ?
		       "write + fdatasync" :
		       "RWF_DSYNC writes");
	if (srv->cfg.metrics_port >= 0)
		printf("metrics on 127.0.0.1:%d\n", metrics_port);
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);

	wait_signal();
	t0 = now_ns();
	clean = stop_server(srv);
	agr_watchdog_stop(); /* after the workers: they may still report */
	print_summary(srv, clean, now_ns() - t0);
	for (i = 0; i < srv->nworkers; i++)
		journal_ok = journal_ok && !srv->wctx[i].journal.error;
	free_server(srv);
	return clean && journal_ok ? 0 : 1;
}

/* ---- options ---- */

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: ledger_server [--port P] [--dir DIR] [--workers N] "
		"[--groups G]\n"
		"                     [--shutdown-timeout SECONDS] "
		"[--metrics-port P]\n"
		"                     [--watchdog-ms N] "
		"[--journal-io direct|buffered]\n"
		"                     [--journal-sync dsync|fdatasync]\n"
		"                     [--worker-cpus auto|none|LIST]\n"
		"  defaults: --port 6380 --dir ledger-data --workers <CPUs> "
		"--groups 4096\n"
		"            --shutdown-timeout 10, no metrics, no watchdog, "
		"--journal-io direct,\n"
		"            --journal-sync dsync, --worker-cpus auto\n"
		"       ledger_server --verify [--dir DIR] [--dump FILE]\n");
	exit(2);
}

static long number(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		usage();
	return v;
}

/* "1", "0,2-3": the library parses it when the workers start. */
static bool looks_like_cpu_list(const char *s)
{
	return *s && strspn(s, "0123456789,-") == strlen(s);
}

static void parse_options(int argc, char **argv, struct config *c)
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
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	long secs;
	int ch;

	/*
	 * Groups: an account's events are serial, so one fdatasync can make
	 * at most one event per busy group durable. Accounts are many and
	 * each waits milliseconds for its fdatasync, hence many more groups
	 * than the library's CPU-based default.
	 */
	*c = (struct config){ .port = 6380, .dir = "ledger-data",
			      .groups = 4096, .shutdown_timeout = 10.0,
			      .metrics_port = -1, .worker_cpus = "auto" };
	while ((ch = getopt_long(argc, argv, "p:d:w:g:t:m:W:vD:j:J:C:h", opts,
				 NULL)) != -1) {
		switch (ch) {
		case 'p': c->port = (int)number(optarg, 0, 65535); break;
		case 'd': c->dir = optarg; break;
		case 'w': c->workers = (int)number(optarg, 1, 1024); break;
		case 'g': c->groups = (int)number(optarg, 1, 1 << 20); break;
		case 't':
			secs = number(optarg, 1, 3600);
			c->shutdown_timeout = (double)secs;
			break;
		case 'm':
			c->metrics_port = (int)number(optarg, 0, 65535);
			break;
		case 'W': c->watchdog_ms = number(optarg, 1, 3600000); break;
		case 'v': c->verify = true; break;
		case 'D': c->dump = optarg; break;
		case 'j':
			if (strcmp(optarg, "direct") == 0)
				c->journal_io = JOURNAL_IO_DIRECT;
			else if (strcmp(optarg, "buffered") == 0)
				c->journal_io = JOURNAL_IO_BUFFERED;
			else
				usage();
			break;
		case 'J':
			if (strcmp(optarg, "dsync") == 0)
				c->journal_sync = JOURNAL_SYNC_DSYNC;
			else if (strcmp(optarg, "fdatasync") == 0)
				c->journal_sync = JOURNAL_SYNC_FDATASYNC;
			else
				usage();
			break;
		case 'C':
			if (strcmp(optarg, "auto") != 0 &&
			    strcmp(optarg, "none") != 0 &&
			    !looks_like_cpu_list(optarg))
				usage();
			c->worker_cpus = optarg;
			break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
}

int main(int argc, char **argv)
{
	struct server srv = { .acceptor.fd = -1, .metrics.fd = -1 };

	parse_options(argc, argv, &srv.cfg);
	crc_init();
	if (srv.cfg.verify)
		return verify(&srv.cfg);
	return serve(&srv);
}
