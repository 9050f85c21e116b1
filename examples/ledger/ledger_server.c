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
 *                 [--checkpoint-bytes BYTES] [--checkpoint-events N]
 *                 [--checkpoint-from auto|journal|tables] [--no-checkpoints]
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
 * so that a restart shows the saga finished or compensated;
 * checkpoint-write|checkpoint-rename|compaction: at that step of the
 * first checkpoint cycle that reaches it (written but not fsync'd;
 * renamed but the directory not fsync'd; one journal freed of two).
 *
 * Checkpoints (ledger_checkpoint.h): once the journal kept on disk, from
 * the previous checkpoint's positions (ledger_checkpointer.h), has grown
 * to --checkpoint-bytes (16 MiB) or --checkpoint-events (100,000), a
 * thread of its own writes the next one from the last one and the
 * journals' durable bytes, without stopping the workers; and a last one
 * at a clean stop. A restart loads the newest valid checkpoint and
 * replays only the journal after it. The journal blocks before the
 * previous checkpoint's positions are freed (fallocate PUNCH_HOLE).
 * --no-checkpoints: none (the journals only grow; a restart replays all).
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
 * Starting and stopping: an agr_runtime holds the dispatcher and the
 * network (the connections, the acceptor, /metrics), in that order, so
 * agr_runtime_start() starts the dispatcher, then the network (which
 * first resumes the open transfers). SIGTERM or SIGINT: the network
 * stops reading (no new request is read), then agr_runtime_stop(),
 * under one deadline (--shutdown-timeout): the requests already read
 * are admitted and answered until no message has been active for
 * QUIET_MS, then admission closes (a request sent later is answered
 * "-ERR server is shutting down"); the connections answer and close
 * (the network's stop waits for the sockets to go quiet), and then
 * the dispatcher finishes every admitted message and ends the workers.
 * Past the deadline the runtime forces every part.
 *
 * The bank is one dispatcher, not a composite: every message touches
 * its group's account table, which no other dispatcher's group may.
 *
 * Where the code is (one concern a file), a request's way in order:
 *   ledger_server.c    options, startup and shutdown: the wiring
 *   ledger_front.c     accepting, the workers' share, stopping
 *   ledger_conn.c      one connection: recv, parse, send in order,
 *                      linger (the rules: ledger_conn.h)
 *   ledger_request.c   a request's round trip, command to reply
 *   ledger_commands.c  what each command means; COMMAND's table;
 *                      ledger_session.c (HELLO, AUTH, SELECT, CLIENT),
 *                      ledger_info.c (INFO, DBSIZE, CONFIG GET),
 *                      ledger_keyspace.c (SCAN, WATCH), ledger_reply.c
 *   ledger_account_msg.c  the account messages and transfers' ids
 *   ledger_account_reply.c  their replies, once they have run
 *   ledger_accounts.c  the bank: handlers, steps, the transfer saga
 *   ledger_table.c     the account tables and their REQID windows
 *   ledger_journal.c   group commit; ledger_record.c its format
 *   ledger_replay.c    replay on restart, and --verify
 *   ledger_checkpoint.c  checkpoints: written, found, and the journal
 *                      they cover freed
 *   ledger_checkpointer.c  when: the thresholds, the stop; the stats
 *   ledger_cpus.c      --worker-cpus; http_metrics.c GET /metrics
 *   examples/common/   resp.c (RESP2), acceptor.c, net.c, drain.c,
 *                      opts.c, util.c, buf.c: shared with the others
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
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
#include "ledger_metrics.h"
#include "ledger_options.h"
#include "ledger_record.h"
#include "ledger_checkpointer.h"
#include "ledger_replay.h"
#include "ledger_request.h"
#include "util.h"

/*
 * No message active this long closes admission: it bridges a
 * connection's turn between one reply and its next request's send.
 */
#define QUIET_MS 100

struct server {
	struct config cfg;
	agr_dispatcher *disp;
	agr_runtime *rt; /* starts and stops disp, then the network */
	int port, metrics_port; /* bound by the network's start */
	unsigned nworkers;
	int ngroups;
	int lock_fd;
	struct drain drain;	      /* sockets with operations in flight */
	struct front *front;	      /* the RESP connections */
	struct http_metrics *metrics; /* GET /metrics, with --metrics-port */
	struct bank *bank;	      /* the accounts and the journals */
	struct bank_completion replies; /* completions, past the bank */
	struct replay_result replayed;
	uint64_t recovery_ns;	    /* the replay at startup */
	struct checkpointer *ckpt;  /* NULL with --no-checkpoints */
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
		.checkpoints = srv->ckpt != NULL,
		.recovery_ns = srv->recovery_ns,
	};
	for (i = 0; i < srv->nworkers && !st->journal_error; i++) {
		const struct journal *j = bank_journal(srv->bank, i);

		if (atomic_load_explicit(&j->failed, memory_order_acquire))
			st->journal_error = j->why;
	}
	if (srv->ckpt)
		checkpointer_get_stats(srv->ckpt, &st->ckpt);
}

/* /metrics: the checkpoints and the recovery, after the dispatcher's. */
static int ledger_metrics(void *arg, char *buf, size_t cap)
{
	struct server_stats st;
	int n, e;

	server_stats(arg, &st);
	n = snprintf(buf, cap,
		"# HELP ledger_checkpoint_seq The current checkpoint (0: none).\n"
		"# TYPE ledger_checkpoint_seq gauge\n"
		"ledger_checkpoint_seq %" PRIu64 "\n"
		"# HELP ledger_checkpoint_position_bytes Journal bytes the "
		"current checkpoint covers, over all journals.\n"
		"# TYPE ledger_checkpoint_position_bytes gauge\n"
		"ledger_checkpoint_position_bytes %" PRIu64 "\n"
		"# HELP ledger_checkpoint_age_seconds Since the current "
		"checkpoint was taken (or the server started).\n"
		"# TYPE ledger_checkpoint_age_seconds gauge\n"
		"ledger_checkpoint_age_seconds %.3f\n"
		"# HELP ledger_checkpoint_size_bytes The current checkpoint's "
		"size.\n"
		"# TYPE ledger_checkpoint_size_bytes gauge\n"
		"ledger_checkpoint_size_bytes %" PRIu64 "\n"
		"# HELP ledger_checkpoint_duration_seconds The last "
		"checkpoint cycle's duration.\n"
		"# TYPE ledger_checkpoint_duration_seconds gauge\n"
		"ledger_checkpoint_duration_seconds %.6f\n"
		"# HELP ledger_checkpoints_total Checkpoint cycles, by result.\n"
		"# TYPE ledger_checkpoints_total counter\n"
		"ledger_checkpoints_total{result=\"ok\"} %" PRIu64 "\n"
		"ledger_checkpoints_total{result=\"failed\"} %" PRIu64 "\n"
		"# HELP ledger_journal_bytes_since_checkpoint Durable journal "
		"bytes a restart would replay.\n"
		"# TYPE ledger_journal_bytes_since_checkpoint gauge\n"
		"ledger_journal_bytes_since_checkpoint %" PRIu64 "\n"
		"# HELP ledger_journal_bytes_kept Durable journal bytes after "
		"the fallback checkpoint, kept on disk.\n"
		"# TYPE ledger_journal_bytes_kept gauge\n"
		"ledger_journal_bytes_kept %" PRIu64 "\n"
		"# HELP ledger_recovery_seconds The replay at startup.\n"
		"# TYPE ledger_recovery_seconds gauge\n"
		"ledger_recovery_seconds %.6f\n",
		st.ckpt.seq, st.ckpt.position, (double)st.ckpt.age_ns / 1e9,
		st.ckpt.size, (double)st.ckpt.duration_ns / 1e9, st.ckpt.taken,
		st.ckpt.failed, st.ckpt.journal_bytes, st.ckpt.journal_kept,
		(double)st.recovery_ns / 1e9);
	/* then the journal's state and the clients cut off */
	e = n < 0 ? -EINVAL : ledger_metrics_health(&st,
		(size_t)n < cap ? buf + n : NULL,
		(size_t)n < cap ? cap - (size_t)n : 0);
	return e < 0 ? e : n + e;
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
		.size = sizeof(agr_dispatcher_options), /* as its _INIT */
		.name = "ledger",
		.named_aggregate = { "bank", "Account" },
		.parallelism = srv->cfg.groups,
		.owns_supplier = true,
		.on_complete = bank_completed, /* then requests_completed */
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

	srv->replies = (struct bank_completion){ requests_completed,
						 front_return(srv->front) };
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
 * bank. The workers run but are idle: no message is sent before the
 * dispatcher starts (agr_runtime_start()), and the tables reach them
 * through the dispatcher's queues.
 */
static void replay_into_groups(struct server *srv)
{
	struct accounts *accounts = accounts_new(srv->ngroups);
	uint64_t t0 = now_ns();

	replay_journals(srv->cfg.dir, accounts, true, &srv->replayed);
	srv->recovery_ns = now_ns() - t0;
	if (srv->replayed.interrupted) {
		printf("ledger_server: stopped during replay by a signal, after "
		       "%" PRIu64 " events; the journals are untouched\n",
		       srv->replayed.events);
		fflush(stdout);
		_exit(0); /* the idle workers go with the process */
	}
	srv->bank = bank_new(srv->disp, accounts);
}

/* A journal's share of a checkpoint threshold; 0: none. */
static uint64_t journal_share(const struct server *srv, uint64_t threshold)
{
	uint64_t n = threshold / srv->nworkers;

	return threshold && !n ? 1 : n;
}

/*
 * Opens the journals, whose zeros written ahead follow their share of
 * the checkpoint thresholds, so that the disk stays bounded by the
 * state and the thresholds; without checkpoints it grows anyway.
 */
static void open_journals(struct server *srv)
{
	const struct replay_result *r = &srv->replayed;
	const struct checkpointer_options *o = &srv->cfg.ckpt;
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
		if (!srv->cfg.no_checkpoints)
			journal_set_zero_budget(j, journal_share(srv, o->bytes),
						journal_share(srv, o->events));
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
	       srv->nworkers, srv->ngroups,
	       srv->replayed.checkpoint.events + srv->replayed.events,
	       srv->replayed.journals, srv->replayed.accounts);
	if (srv->replayed.checkpoint.seq)
		printf("ledger_server: recovered in %.1f ms from checkpoint %"
		       PRIu64 " (%" PRIu64 " bytes, %" PRIu64 " events) and "
		       "the %" PRIu64 " events after it\n",
		       (double)srv->recovery_ns / 1e6,
		       srv->replayed.checkpoint.seq,
		       srv->replayed.checkpoint.size,
		       srv->replayed.checkpoint.events, srv->replayed.events);
	else
		printf("ledger_server: recovered in %.1f ms, no checkpoint\n",
		       (double)srv->recovery_ns / 1e6);
	if (srv->ckpt)
		printf("ledger_server: checkpoints at %" PRIu64 " bytes or %"
		       PRIu64 " events of journal kept, and at a clean stop\n",
		       srv->cfg.ckpt.bytes, srv->cfg.ckpt.events);
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

/*
 * The network's start, once the dispatcher's (the runtime starts them
 * in that order): resume the open transfers, then take clients.
 */
static int network_start(void *self)
{
	struct server *srv = self;

	bank_set_crash(srv->bank, srv->cfg.crash_after);
	if (!srv->cfg.no_checkpoints)
		srv->ckpt = checkpointer_start(srv->cfg.dir, srv->bank,
					       srv->nworkers, &srv->replayed,
					       &srv->cfg.ckpt);
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
	front_start(srv->front, srv->disp, srv->cfg.port, &srv->port);
	if (srv->cfg.metrics_port >= 0)
		srv->metrics = http_metrics_start_extra(
			srv->disp, srv->cfg.metrics_port, &srv->drain,
			&srv->metrics_port, ledger_metrics, srv);
	return 0;
}

/*
 * The network's stop: every connection answered and closed, the
 * acceptor and /metrics ended, before the dispatcher stops (a worker
 * told to stop does not wait for its operations in the kernel).
 */
static int network_stop(void *self, uint64_t deadline_ns)
{
	struct server *srv = self;

	return drain_wait(&srv->drain, left_until(deadline_ns)) ? 0 :
								  -ETIMEDOUT;
}

static int network_force(void *self)
{
	struct server *srv = self;

	drain_abort(&srv->drain);
	return 0;
}

static void new_runtime(struct server *srv)
{
	static const agr_component_ops network = {
		.size = sizeof(agr_component_ops), /* as its _INIT */
		.stop_gracefully = network_stop,
		.force_stop = network_force,
		.start = network_start,
	};
	agr_runtime_options o;
	int ret;

	agr_runtime_options_init(&o);
	o.shutdown_timeout_ns = (uint64_t)(srv->cfg.shutdown_timeout * 1e9);
	o.quiet_period_ns = QUIET_MS * 1000000ull;
	ret = agr_runtime_new(&o, &srv->rt);
	if (!ret)
		ret = agr_runtime_add_dispatcher(srv->rt, srv->disp);
	if (!ret)
		ret = agr_runtime_add_component(srv->rt, "network", &network,
						srv);
	if (ret)
		die("agr_runtime: %s", agr_strerror(ret));
}

static void start_server(struct server *srv)
{
	int ret;

	drain_init(&srv->drain);
	init_commands(srv);
	srv->front = front_new(&srv->drain, &srv->cmd, &srv->cfg.front);
	block_signals();
	lock_dir(srv);
	start_dispatcher(srv);
	replay_into_groups(srv);
	open_journals(srv);
	new_runtime(srv);
	ret = agr_runtime_start(srv->rt);
	if (ret)
		die("agr_runtime_start: %s", agr_strerror(ret));
	print_started(srv, srv->port, srv->metrics_port);
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

/* Which part failed to stop in time, or at all. */
static void warn_stop_report(struct server *srv)
{
	agr_component_report c[2];
	agr_runtime_report r;
	size_t i;

	if (agr_runtime_report_get(srv->rt, &r, c, 2) < 0)
		return;
	for (i = 0; i < r.ncomponents && i < 2; i++)
		warnf("stop of %s: %s%s", c[i].name,
		      c[i].stop_ran ? agr_strerror(c[i].stop_result) :
				      "not reached",
		      c[i].force_ran ? "; forced" : "");
}

/*
 * Graceful stop, under one deadline (the runtime's): the network stops
 * reading here, so that a client that keeps sending cannot hold the
 * runtime's quiet period open; then the runtime stops everything (see
 * the top of the file). Returns true if it all happened in time.
 */
static bool stop_server(struct server *srv)
{
	int ret;

	front_stop(srv->front);
	if (srv->metrics)
		http_metrics_stop(srv->metrics);
	checkpointer_halt(srv->ckpt); /* a cycle may wait on the workers */
	ret = agr_runtime_stop(srv->rt);
	if (ret < 0) {
		warnf("graceful stop: %s; forced", agr_strerror(ret));
		warn_stop_report(srv);
	}
	agr_runtime_free(srv->rt);
	agr_dispatcher_free(srv->disp); /* joins the workers */
	return ret == 0;
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

/*
 * The last checkpoint, of everything journaled, once the workers have
 * ended: only after a clean stop with every journal intact (else the
 * next start replays, which is as safe, only longer).
 */
static void stop_checkpoints(struct server *srv, bool clean)
{
	struct checkpointer_stats st;

	if (!srv->ckpt)
		return;
	checkpointer_stop(srv->ckpt, clean, &st);
	srv->ckpt = NULL;
	printf("ledger_server: %" PRIu64 " checkpoints taken (%" PRIu64
	       " failed)%s; the current one: %" PRIu64 " at journal position %"
	       PRIu64 ", %" PRIu64 " bytes, written in %.1f ms, %" PRIu64
	       " journal bytes after it; %" PRIu64 " journal bytes freed\n",
	       st.taken, st.failed, clean ? ", the last at this stop" : "",
	       st.seq, st.position, st.size, (double)st.duration_ns / 1e6,
	       st.journal_bytes, st.freed);
	fflush(stdout);
}

static void free_server(struct server *srv)
{
	free(srv->replayed.ends);
	free(srv->replayed.open);
	free(srv->replayed.checkpoint.pos);
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
	stop_checkpoints(srv, clean && journal_ok);
	free_server(srv);
	return clean && journal_ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct server srv = { .lock_fd = -1 };

	ledger_options(argc, argv, &srv.cfg);
	record_init();
	if (srv.cfg.verify)
		return replay_verify(srv.cfg.dir, srv.cfg.dump);
	return serve(&srv);
}
