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
 *                 [--recv multishot|single] [--recv-buffers N]
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
 * from processing latency (handler start to completion: the wait for
 * the durable write only for transfers, as other messages complete
 * once their record is queued), outcome counters and queue depth.
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
 * Commands (ledger_commands.h): GET, MGET, EXISTS, SET account
 * integer, DEL, INCRBY, DECRBY, INCR, DECR, DBSIZE; MULTI, EXEC,
 * DISCARD on one account (one journal record); TRANSFER from to amount
 * (a saga, ledger_accounts.h); REQID on writes (idempotent retries);
 * HELLO 2, AUTH, SELECT 0, CLIENT, PING, ECHO, QUIT; INFO, COMMAND,
 * CONFIG GET.
 * Amounts are positive; a withdrawal that would make the balance
 * negative is refused with "-ERR insufficient funds" and journals
 * nothing. GET of an account that never had an event is nil, as redis
 * answers for a missing key. An account name is 1 to 128 printable
 * ASCII characters without spaces.
 *
 * Limits, as Redis has them: --requirepass (AUTH first, else
 * "-NOAUTH Authentication required."), --maxclients (10000), bulk
 * strings up to --proto-max-bulk-len (8 MiB; Redis's 512 MiB is far
 * more than a ledger needs), a request up to
 * --client-query-buffer-limit (16 MiB) while it is incomplete, replies
 * a client leaves unread up to --client-output-buffer-limit 'HARD SOFT
 * SECONDS' (8 MiB at once, or 4 MiB for 10 s; 0 for none). A
 * protocol error is answered once, then the connection closes. Before
 * AUTH, Redis's caps: 10 arguments, bulks of 16 KiB. A "POST" or
 * "Host:" line (cross-protocol scripting from a browser) is logged and
 * the connection closed, as redis-server does.
 *
 * --recv: how connections receive. multishot, the default: one
 * multishot recv per connection into a provided buffer ring of its
 * worker (--recv-buffers buffers of 8 KiB, a power of two, 256 by
 * default), made in a worker init hook together with a fixed file
 * table, in which each socket is registered for its recv and sends.
 * single: the way before, a recv into the connection's own buffer per
 * completion, plain fds. bench/network.sh compares the two.
 *
 * --crash-after debit|credit|refusal, for tests: the server kills
 * itself (SIGKILL) at that step of the first TRANSFER that reaches it,
 * so that a restart shows the saga finished or compensated.
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
 * buffered goes through the page cache instead. A change is applied
 * in memory as soon as its record is queued, and its message completes
 * then, with its reply held until the record is durable
 * (ledger_accounts.h): a group runs its next event at once, so one
 * batch holds many events of one hot account. Since a batch is written
 * only after the previous one is durable, a crash can tear only the
 * last batch, whose events nobody has seen acknowledged: the file is
 * always acknowledged records, then maybe a torn batch, then maybe
 * zeros.
 *
 * Stopping. SIGTERM or SIGINT: stop accepting, let every connection
 * answer the requests it has read and close, let the dispatcher finish
 * every admitted message, end the workers; all under one deadline
 * (--shutdown-timeout), after which the stop is forced.
 *
 * Where the code is (one concern a file):
 *   ledger_server.c    options, startup and shutdown: the wiring
 *   ledger_conn.c      RESP connections: recv, parse, reply in order,
 *                      send, linger (reply order, closing, protocol
 *                      errors: ledger_conn.h)
 *   ledger_commands.c  what each command means, and its replies;
 *                      COMMAND's table
 *   ledger_session.c   HELLO, AUTH, SELECT, CLIENT: the client's state
 *   ledger_info.c      INFO, DBSIZE, CONFIG GET
 *   ledger_reply.c     RESP replies into a reused buffer
 *   ledger_accounts.c  the account aggregate: balances and handlers
 *   ledger_journal.c   group commit of the records to the journals
 *   ledger_record.c    the record format and its CRC
 *   ledger_replay.c    replay on restart, and --verify
 *   ledger_cpus.c      --worker-cpus
 *   http_metrics.c     GET /metrics on worker 0's ring
 *   resp.c             the RESP2 parser and encoder
 *   acceptor.c, net.c, drain.c, opts.c, util.c, buf.c: shared with
 *   the other examples (accepting on a ring, sockets, waiting for the
 *   network to go quiet, the command line, messages, buffers).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring.h>

#include "drain.h"
#include "http_metrics.h"
#include "ledger_accounts.h"
#include "ledger_conn.h"
#include "ledger_cpus.h"
#include "ledger_journal.h"
#include "ledger_record.h"
#include "ledger_replay.h"
#include "opts.h"
#include "util.h"

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
	struct front_options front; /* --recv, --recv-buffers */
	const char *requirepass; /* NULL: none */
	long long maxclients, max_bulk, query_buf_max;
	long long out_hard, out_soft, out_soft_secs; /* output limit */
	enum crash_point crash_after; /* tests: die there (SIGKILL) */
};

struct server {
	struct config cfg;
	agr_dispatcher *disp;
	unsigned nworkers;
	int ngroups;
	int lock_fd;
	struct drain drain;	      /* sockets with operations in flight */
	struct front *front;	      /* the RESP connections */
	struct http_metrics *metrics; /* GET /metrics, with --metrics-port */
	struct bank *bank;	      /* the accounts and the journals */
	struct bank_completion replies; /* completions, past the bank */
	struct replay_result replayed;
	unsigned journals_direct; /* journals that could use O_DIRECT */
	struct command_server cmd; /* what the commands see of us */
};

/* ---- startup ---- */

/* INFO and DBSIZE, on any worker: the counters as they are. */
static void server_stats(void *arg, struct server_stats *st)
{
	struct server *srv = arg;
	struct front_stats fs;
	unsigned i;

	front_get_stats(srv->front, &fs);
	*st = (struct server_stats){
		.connected = fs.connected,
		.connections = fs.connections,
		.rejected = fs.rejected,
		.commands = fs.commands,
		.protocol_errors = fs.protocol_errors,
		.output_limit_closed = fs.output_limit_closed,
		.accounts = bank_accounts(srv->bank),
		.changes = bank_changes(srv->bank),
		.overdrafts = bank_overdrafts(srv->bank),
	};
	for (i = 0; i < srv->nworkers && !st->journal_error; i++) {
		const struct journal *j = bank_journal(srv->bank, i);

		if (atomic_load_explicit(&j->failed, memory_order_acquire))
			st->journal_error = j->why;
	}
}

static void init_commands(struct server *srv)
{
	const struct config *c = &srv->cfg;

	srv->cmd = (struct command_server){
		.requirepass = c->requirepass,
		.max_bulk = (size_t)c->max_bulk,
		.query_buf_max = (size_t)c->query_buf_max,
		.out_hard = (size_t)c->out_hard,
		.out_soft = (size_t)c->out_soft,
		.out_soft_ns = (uint64_t)c->out_soft_secs * 1000000000ull,
		.maxclients = (unsigned)c->maxclients,
		.start_ns = now_ns(),
		.stats = server_stats,
		.stats_arg = srv,
	};
}

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

/*
 * The worker hooks: the per-worker setup of each part that has one, on
 * the worker's thread before any work.
 */
static int worker_init(agr_worker *w, void *arg)
{
	struct server *srv = arg;

	return front_worker_init(srv->front, w);
}

static void worker_exit(agr_worker *w, void *arg)
{
	struct server *srv = arg;

	front_worker_exit(srv->front, w);
}

static void start_dispatcher(struct server *srv)
{
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_supplier *sup;
	agr_dispatcher_options o = {
		.name = "ledger",
		.named_aggregate = { "bank", "Account" },
		.parallelism = srv->cfg.groups,
		.owns_supplier = true,
		.on_complete = bank_completed, /* then front_completed */
		.complete_arg = &srv->replies,
		.group_key = bank_group_key, /* SCAN names its group */
		/*
		 * Only when asked: two clock reads and a shared depth count
		 * per message are little next to an fdatasync, but without
		 * the flag the server runs exactly as before, to compare.
		 */
		.metrics = srv->cfg.metrics_port >= 0,
	};
	int ret;

	srv->replies = (struct bank_completion){ front_completed, srv->front };
	so.parallelism = srv->cfg.workers;
	if (!so.parallelism && !getenv("AGR_SCHEDULER_POOL_SIZE"))
		so.parallelism = (int)default_workers();
	so.worker_init = worker_init;
	so.worker_exit = worker_exit;
	so.hook_arg = srv;
	ret = agr_supplier_new_opts("ledger", &so, &sup);
	if (ret)
		die("agr_supplier_new_opts: %s", agr_strerror(ret));
	front_prepare(srv->front, (unsigned)agr_supplier_parallelism(sup));
	/* Its workers start with the dispatcher's scheduler, below. */
	place_workers(srv->cfg.worker_cpus, srv->cfg.dir,
		      (unsigned)agr_supplier_parallelism(sup));
	o.supplier = sup;
	ret = agr_dispatcher_new(&o, &srv->disp);
	if (ret)
		die("agr_dispatcher_new: %s (is io_uring available?)",
		    agr_strerror(ret));
	srv->nworkers = (unsigned)agr_scheduler_parallelism(
		agr_dispatcher_scheduler(srv->disp));
	srv->ngroups = agr_dispatcher_parallelism(srv->disp);
}

/*
 * Replays the journals into the group tables, then hands them to the
 * bank. The workers run but are idle: no message is sent before
 * agr_dispatcher_start(), and the tables reach them through the
 * dispatcher's queues.
 */
static void replay_into_groups(struct server *srv)
{
	struct accounts *accounts = accounts_new(srv->ngroups);

	replay_journals(srv->cfg.dir, accounts, true, &srv->replayed);
	if (srv->replayed.interrupted) {
		printf("ledger_server: stopped during replay by a signal, after "
		       "%" PRIu64 " events; the journals are untouched\n",
		       srv->replayed.events);
		fflush(stdout);
		_exit(0); /* the idle workers go with the process */
	}
	srv->bank = bank_new(srv->disp, accounts);
}

static void open_journals(struct server *srv)
{
	const struct replay_result *r = &srv->replayed;
	unsigned i;
	int dfd;

	for (i = 0; i < srv->nworkers; i++) {
		struct journal *j = bank_journal(srv->bank, i);
		uint64_t end = i < r->nends ? r->ends[i] : 0;
		char path[PATH_MAX];
		int ret;

		snprintf(path, sizeof(path), "%s/journal-%u.log", srv->cfg.dir,
			 i);
		ret = journal_open(j, path, end, srv->cfg.journal_io,
				   srv->cfg.journal_sync,
				   agr_dispatcher_scheduler(srv->disp), i);
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

static void start_watchdog(const struct server *srv)
{
	int ret = srv->cfg.watchdog_ms ?
		agr_watchdog_start((uint64_t)srv->cfg.watchdog_ms * 1000000u) :
		0;

	if (ret)
		die("agr_watchdog_start: %s", agr_strerror(ret));
}

/* How the journals write: as asked, or buffered where O_DIRECT is not. */
static const char *journal_io_name(const struct server *srv)
{
	if (srv->journals_direct == srv->nworkers)
		return "direct (O_DIRECT)";
	if (srv->cfg.journal_io == JOURNAL_IO_BUFFERED)
		return "buffered";
	return "buffered (O_DIRECT refused here)";
}

static void print_started(const struct server *srv, int port,
			  int metrics_port)
{
	printf("ledger_server: %u workers, %d groups; replayed %" PRIu64
	       " events from %u journals: %" PRIu64 " accounts\n",
	       srv->nworkers, srv->ngroups, srv->replayed.events,
	       srv->replayed.journals, srv->replayed.accounts);
	printf("ledger_server: journal I/O %s, %s\n", journal_io_name(srv),
	       srv->cfg.journal_sync == JOURNAL_SYNC_FDATASYNC ?
		       "write + fdatasync" :
		       "RWF_DSYNC writes");
	if (srv->cfg.front.recv == FRONT_RECV_MULTISHOT)
		printf("ledger_server: recv multishot, %u buffers of 8 KiB "
		       "per worker, sockets as fixed files\n",
		       srv->cfg.front.recv_buffers);
	else
		printf("ledger_server: recv single\n");
	if (srv->metrics)
		printf("metrics on 127.0.0.1:%d\n", metrics_port);
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
}

/* Every thread, workers included, inherits this mask. */
static void block_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN); /* a file size limit: EFBIG, not death */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void start_server(struct server *srv)
{
	int port, metrics_port = 0, ret;

	drain_init(&srv->drain);
	init_commands(srv);
	srv->front = front_new(&srv->drain, &srv->cmd, &srv->cfg.front);
	block_signals();
	lock_dir(srv);
	start_dispatcher(srv);
	replay_into_groups(srv);
	open_journals(srv);
	ret = agr_dispatcher_start(srv->disp);
	if (ret)
		die("agr_dispatcher_start: %s", agr_strerror(ret));
	bank_set_crash(srv->bank, srv->cfg.crash_after);
	if (srv->replayed.nopen)
		printf("ledger_server: resuming %u open transfers (%lld in "
		       "flight)\n",
		       bank_resume_transfers(srv->bank, srv->disp,
					     srv->replayed.open,
					     srv->replayed.nopen),
		       srv->replayed.in_flight);
	start_watchdog(srv);
	srv->cmd.workers = srv->nworkers; /* before the first connection */
	srv->cmd.groups = srv->ngroups;
	front_start(srv->front, srv->disp, srv->cfg.port, &port);
	if (srv->cfg.metrics_port >= 0)
		srv->metrics = http_metrics_start(srv->disp,
						  srv->cfg.metrics_port,
						  &srv->drain, &metrics_port);
	print_started(srv, port, metrics_port);
}

/* ---- shutdown ---- */

static void wait_signal(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
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
	int ret;

	front_stop(srv->front);
	if (srv->metrics)
		http_metrics_stop(srv->metrics);
	clean = drain_wait(&srv->drain, left_until(deadline));
	ret = agr_dispatcher_stop_gracefully(srv->disp, left_until(deadline));
	if (ret < 0) {
		warnf("graceful stop: %s; forcing", agr_strerror(ret));
		agr_dispatcher_force_stop(srv->disp);
		clean = false;
	}
	agr_dispatcher_free(srv->disp); /* joins the workers */
	return clean;
}

/* Whether every journal is still writable (no sticky error). */
static bool journals_ok(struct server *srv)
{
	unsigned i;

	for (i = 0; i < srv->nworkers; i++)
		if (bank_journal(srv->bank, i)->error)
			return false;
	return true;
}

static void print_summary(struct server *srv, bool clean, uint64_t ns)
{
	uint64_t events = 0, syncs = 0;
	struct front_stats st;
	unsigned i;

	front_get_stats(srv->front, &st);
	for (i = 0; i < srv->nworkers; i++) {
		const struct journal *j = bank_journal(srv->bank, i);

		events += j->events;
		syncs += j->syncs;
	}
	printf("ledger_server: stopped %s in %.1f ms: %" PRIu64
	       " connections, %" PRIu64 " commands, %" PRIu64
	       " overdrafts refused, %" PRIu64 " protocol errors\n",
	       clean ? "cleanly" : "BY FORCE", (double)ns / 1e6,
	       st.connections, st.commands, bank_overdrafts(srv->bank),
	       st.protocol_errors);
	printf("ledger_server: %" PRIu64 " events journaled in %" PRIu64
	       " durable writes (%.1f events per write)%s\n",
	       events, syncs, syncs ? (double)events / (double)syncs : 0.0,
	       journals_ok(srv) ? "" : "; JOURNAL FAILED");
	if (srv->cfg.front.recv == FRONT_RECV_MULTISHOT)
		printf("ledger_server: multishot recvs re-armed %" PRIu64
		       " times, %" PRIu64 " of them after ENOBUFS, %" PRIu64
		       " after a pause for room\n",
		       st.recv_rearms + st.recv_enobufs + st.recv_pauses,
		       st.recv_enobufs, st.recv_pauses);
	fflush(stdout);
}

static void free_server(struct server *srv)
{
	free(srv->replayed.ends);
	free(srv->replayed.open);
	bank_free(srv->bank);
	front_free(srv->front);
	if (srv->metrics)
		http_metrics_free(srv->metrics);
	close(srv->lock_fd);
	drain_destroy(&srv->drain);
}

static int serve(struct server *srv)
{
	uint64_t t0;
	bool clean, journal_ok;

	start_server(srv);
	wait_signal();
	t0 = now_ns();
	clean = stop_server(srv);
	agr_watchdog_stop(); /* after the workers: they may still report */
	print_summary(srv, clean, now_ns() - t0);
	journal_ok = journals_ok(srv);
	free_server(srv);
	return clean && journal_ok ? 0 : 1;
}

/* ---- options ---- */

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
	"                     [--crash-after debit|credit|refusal]\n"
	"  defaults: --port 6380 --dir ledger-data --workers <CPUs / 2> "
	"--groups 4096\n"
	"            --shutdown-timeout 10, no metrics, no watchdog, "
	"--journal-io direct,\n"
	"            --journal-sync dsync, --worker-cpus auto, no password,\n"
	"            --maxclients 10000, --proto-max-bulk-len 8388608,\n"
	"            --client-query-buffer-limit 16777216,\n"
	"            --client-output-buffer-limit '8388608 4194304 10',\n"
	"            --recv multishot --recv-buffers 256\n"
	"       ledger_server --verify [--dir DIR] [--dump FILE]\n"
	"  fixed: before AUTH at most 10 arguments and bulks of 16 KiB; a "
	"\"POST\" or\n"
	"         \"Host:\" line closes the connection (cross-protocol "
	"scripting)\n";

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

static void parse_option(int ch, struct config *c)
{
	static const char *const io[] = { "direct", "buffered" };
	static const char *const sync[] = { "dsync", "fdatasync" };
	static const char *const crash[] = { "debit", "credit", "refusal" };
	static const char *const recv[] = { "multishot", "single" };
	long secs, n;

	switch (ch) {
	case 'p': c->port = (int)opts_number(optarg, 0, 65535); break;
	case 'd': c->dir = optarg; break;
	case 'w': c->workers = (int)opts_number(optarg, 1, 1024); break;
	case 'g': c->groups = (int)opts_number(optarg, 1, 1 << 20); break;
	case 't':
		secs = opts_number(optarg, 1, 3600);
		c->shutdown_timeout = (double)secs;
		break;
	case 'm': c->metrics_port = (int)opts_number(optarg, 0, 65535); break;
	case 'W': c->watchdog_ms = opts_number(optarg, 1, 3600000); break;
	case 'v': c->verify = true; break;
	case 'D': c->dump = optarg; break;
	case 'j':
		c->journal_io = choice(optarg, io, 2) ? JOURNAL_IO_BUFFERED :
							JOURNAL_IO_DIRECT;
		break;
	case 'J':
		c->journal_sync = choice(optarg, sync, 2) ?
					  JOURNAL_SYNC_FDATASYNC :
					  JOURNAL_SYNC_DSYNC;
		break;
	case 'C':
		if (!worker_cpus_valid(optarg))
			opts_bad();
		c->worker_cpus = optarg;
		break;
	case 'X':
		c->crash_after = (enum crash_point)(choice(optarg, crash, 3) +
						    CRASH_AFTER_DEBIT);
		break;
	case 'a': c->requirepass = optarg[0] ? optarg : NULL; break;
	case 'M': c->maxclients = opts_number(optarg, 1, 1000000); break;
	case 'B': c->max_bulk = opts_number(optarg, 1, 1L << 30); break;
	case 'Q': c->query_buf_max = opts_number(optarg, 1024, 1L << 31); break;
	case 'O': parse_output_limit(optarg, c); break;
	case 'r':
		c->front.recv = choice(optarg, recv, 2) ? FRONT_RECV_SINGLE :
							  FRONT_RECV_MULTISHOT;
		break;
	case 'b':
		n = opts_number(optarg, 1, 32768);
		if (n & (n - 1))
			opts_bad(); /* the kernel's rule for a buffer ring */
		c->front.recv_buffers = (unsigned)n;
		break;
	case 'h': opts_help();
	default: opts_bad();
	}
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
		{ "requirepass", required_argument, NULL, 'a' },
		{ "crash-after", required_argument, NULL, 'X' },
		{ "maxclients", required_argument, NULL, 'M' },
		{ "proto-max-bulk-len", required_argument, NULL, 'B' },
		{ "client-query-buffer-limit", required_argument, NULL, 'Q' },
		{ "client-output-buffer-limit", required_argument, NULL, 'O' },
		{ "recv", required_argument, NULL, 'r' },
		{ "recv-buffers", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;

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
					 .recv_buffers = 256 } };
	while ((ch = getopt_long(argc, argv,
				 "p:d:w:g:t:m:W:vD:j:J:C:a:M:B:Q:O:X:r:b:h",
				 opts, NULL)) != -1)
		parse_option(ch, c);
	if (optind != argc)
		opts_bad();
}

int main(int argc, char **argv)
{
	struct server srv = { .lock_fd = -1 };

	opts_init("ledger_server", usage_text);
	parse_options(argc, argv, &srv.cfg);
	record_init();
	if (srv.cfg.verify)
		return replay_verify(srv.cfg.dir, srv.cfg.dump);
	return serve(&srv);
}
