/* SPDX-License-Identifier: MIT */
/*
 * ledger_conn.h - ledger_server's front end: the RESP connections
 * (their requests and replies: ledger_request.h).
 *
 * The acceptor (acceptor.h) runs on worker 0 and deals connections
 * round-robin to the workers; a connection's recv and send then run on
 * its worker's ring. A parsed request (ledger_commands.h) is either
 * answered at once or becomes an account message (ledger_accounts.h)
 * keyed by account, which runs on the account's group, whose worker
 * may be another one; its reply travels back to the connection's worker
 * with agr_scheduler_schedule().
 *
 * Receiving (--recv). multishot: a connection keeps one multishot recv
 * armed into its worker's provided buffer ring, its socket in the
 * worker's fixed file table (both made by front_worker_init(), in the
 * worker init hook). Requests are parsed where they arrived, and each
 * buffer goes back to the kernel before the callback returns; only
 * what is left (a request cut at the buffer's end, or requests waiting
 * for room) is copied to the connection's input buffer. The kernel
 * ends a multishot when the ring is empty (-ENOBUFS: counted) or when
 * it likes; either way it is armed again at once. With PENDING_MAX
 * requests in flight the connection ends its multishot and arms it
 * again when there is room, so that the client waits in TCP's flow
 * control. single: one recv into the input buffer per completion.
 *
 * Reply order. Requests of one connection may finish out of order (they
 * go to different groups); each connection keeps its requests in a
 * queue in arrival order and sends a reply only when every earlier one
 * has been sent, which is what pipelining clients expect. Replies
 * finished in one turn of a worker go out together, at its end. MGET,
 * EXISTS and DEL of several keys become one message per key (each to
 * its own group), whose replies follow an array header (MGET) or are
 * counted by a request queued after them (EXISTS, DEL); EXEC is one
 * message; TRANSFER is a saga whose reply is ready when its last
 * message completes (ledger_accounts.h).
 *
 * Closing. On QUIT or a stop a connection answers the requests it has
 * read, then closes. When it closes first, it half-closes and drains
 * what the client still sends (for at most a second), so that no reset
 * destroys replies not yet read. A request read whole is applied even
 * if its reply cannot be sent; one cut off mid-frame never is.
 *
 * Protocol errors and limits, as Redis: a protocol error (a bulk
 * longer than --proto-max-bulk-len among them) is answered with
 * "-ERR Protocol error: ..." once, after the replies to the requests
 * before it, and the connection closes; a request that outgrows
 * --client-query-buffer-limit closes the connection without a reply; a
 * connection over --maxclients gets "-ERR max number of clients
 * reached" and is closed.
 */
#ifndef LEDGER_CONN_H
#define LEDGER_CONN_H

#include <stdint.h>

#include <aggring.h>

#include "drain.h"
#include "ledger_commands.h"

struct front;

struct front_stats {
	uint64_t connected, rejected; /* open now; over --maxclients */
	uint64_t connections, commands, protocol_errors;
	uint64_t output_limit_closed; /* --client-output-buffer-limit */
	/*
	 * --recv multishot: ends for want of a buffer; the kernel's other
	 * ends; pauses for want of room (PENDING_MAX). Each is re-armed.
	 */
	uint64_t recv_enobufs, recv_rearms, recv_pauses;
};

/* How connections receive (--recv). */
enum front_recv {
	FRONT_RECV_MULTISHOT, /* one multishot recv into a provided buffer
			       * ring per worker; sockets as fixed files */
	FRONT_RECV_SINGLE,    /* a recv into the connection's buffer,
			       * armed again after each completion */
};

struct front_options {
	enum front_recv recv;
	unsigned recv_buffers; /* per worker, a power of two (multishot) */
};

/*
 * Every connection, and the acceptor, count in `drain` while open.
 * `srv` (the limits, the password) must outlive the front.
 */
struct front *front_new(struct drain *drain,
			const struct command_server *srv,
			const struct front_options *opts);

/*
 * The front's per-worker state for `nworkers` workers: before the
 * workers start, so that front_worker_init() finds it.
 */
void front_prepare(struct front *f, unsigned nworkers);

/*
 * The worker init and exit hooks' part (agr_supplier_options): with
 * --recv multishot, the worker's provided buffer ring and fixed file
 * table. Where the kernel has neither, its connections use single
 * recvs and plain fds (logged). Returns 0.
 */
int front_worker_init(struct front *f, agr_worker *w);
void front_worker_exit(struct front *f, agr_worker *w);

/*
 * The dispatcher's completion callback (agr_dispatcher_options'
 * on_complete), with the front as its complete_arg.
 */
void front_completed(agr_message *msg, int status, void *arg);

/*
 * Listens on 127.0.0.1:port (the port bound in *bound) and accepts on
 * worker 0 of disp's scheduler. A failure ends the program.
 */
void front_start(struct front *f, agr_dispatcher *disp, int port,
		 int *bound);

/*
 * Any thread: stop accepting; every connection answers what it has
 * read, then closes (the drain tells when all have).
 */
void front_stop(struct front *f);

/* Any thread, once front_start() has returned (relaxed counters). */
void front_get_stats(const struct front *f, struct front_stats *st);
void front_free(struct front *f);

#endif /* LEDGER_CONN_H */
