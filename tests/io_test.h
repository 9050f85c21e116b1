/* SPDX-License-Identifier: MIT */
/*
 * io_test.h - what the files of check_io share: scratch files,
 * loopback sockets, one supplier and scheduler, and plans of operations
 * issued step by step on one worker (io_plan.c).
 */
#ifndef TESTS_IO_TEST_H
#define TESTS_IO_TEST_H

#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <aggring.h>

#include "testutil.h"

#define MS 1000000ull

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
};

enum op_kind {
	OP_READ, OP_WRITE, OP_READV, OP_WRITEV, OP_FSYNC, OP_OPENAT,
	OP_CLOSE, OP_ACCEPT, OP_CONNECT, OP_RECV, OP_SEND, OP_TIMEOUT,
	OP_NOP, OP_STATX, OP_FALLOCATE,
};

#define WANT_FD (INT_MIN + 1)  /* a new descriptor: res >= 0 */

#define WANT_ANY (INT_MIN + 2) /* the test checks the result itself */

/*
 * One operation. Descriptors are read through pointers when the op is
 * issued, so an op can use what an earlier one opened (`save`).
 */
struct op {
	enum op_kind kind;
	int *fd; /* file, socket, or the directory of openat/statx */
	void *dst;
	const void *src;
	unsigned len;
	uint64_t off; /* file offset; timeout in ns */
	const struct iovec *iov;
	unsigned iovcnt;
	int flags;
	const char *path;
	struct sockaddr *addr;
	socklen_t *addrlen;
	int *save;	/* receives the result: a new descriptor */
	bool with_next; /* issued in the same turn as the next op */
	int want;
};

#define MAX_OPS 16

struct op_slot {
	struct run *r;
	int i;
};

struct run {
	const struct op *ops;
	int nops;
	int next;	 /* first op not yet issued */
	int first, last; /* the step in flight */
	int pending;	 /* its ops not yet completed */
	bool failed;	 /* an op could not be issued */
	int submit_err, submit_op;
	int res[MAX_OPS];
	int calls[MAX_OPS];
	int inflight_seen[MAX_OPS]; /* agr_io_inflight() in each callback */
	unsigned queued[MAX_OPS];   /* SQEs not yet submitted, per step */
	agr_worker *w;
	struct op_slot slots[MAX_OPS];
	void (*on_step)(struct run *r); /* optional: a step completed */
	void (*on_end)(struct run *r);	/* default: counts `ended` down */
	void *ctx;
	struct tu_latch ended;
};

/* A callback argument that leads back to the test's state. */
struct timer_key {
	struct timers *t;
};

struct timers {
	agr_worker *w;
	struct timer_key long_key, short_key, nobody;
	int long_ret, short_ret;
	int long_res, short_res, long_calls, short_calls;
	int cancel_ret, cancel_none_ret;
	uint64_t start, fired;
	struct tu_latch done;
};

#define NCALLS 15

struct misuse {
	agr_worker *peer;
	atomic_int *calls;
	int null_cb[NCALLS], at_peer[NCALLS];
	int null_sqe_out, null_path, null_addr, inflight;
	struct tu_latch done;
};

#define MAX_EVENTS 256

struct journal {
	pthread_mutex_t lock;
	int ev[MAX_EVENTS];
	int n;
};

/* Events: message `seq` started, its step from op k ended, completed. */
#define EV(seq, what) ((seq) * 100 + (what))

#define EV_START 0

#define EV_STEP(k) (1 + (k))

#define EV_COMPLETE 99

enum job { JOB_FILE, JOB_FILE_THEN_SIGNAL, JOB_WAIT };

struct dtest {
	struct journal j;
	struct tu_latch completed;
	struct tu_latch armed; /* a JOB_WAIT message issued its recv */
	int sv[2];	       /* JOB_WAIT reads sv[0]; the signal: sv[1] */
	int cwd;	       /* AT_FDCWD, for openat */
	char dir[PATH_MAX];
};

struct dmsg {
	agr_message m;
	struct dtest *t;
	int seq;
	enum job job;
	struct op ops[6];
	struct run run;
	char path[PATH_MAX];
	int fd;
	char out[32], in[32];
	agr_exchange *ex;
	agr_worker *ran_on;
	int status;
	atomic_int completions;
};

#define SERIAL_MSGS 4

#define FILE_OPS 5

/* A new empty file, open for reading and writing; its name in `path`. */
int tmp_file(char *path, size_t size);
void tmp_dir(char *path, size_t size);
/* The file holds exactly `text`, read back from the test thread. */
void assert_file_holds(const char *path, const char *text);
int tcp_socket(void);
/* A TCP socket bound to 127.0.0.1 on an ephemeral port. */
int tcp_bound(bool listening, struct sockaddr_in *addr);
/* Two connected TCP sockets. */
void tcp_pair(int fds[2]);
in_port_t port_of(int fd, bool peer);
agr_supplier *new_supplier(int workers);
void rig_up(struct rig *g, int workers);
/* Nothing may be left in flight, so the graceful stop ends at once. */
void rig_down(struct rig *g);
void run_on(agr_scheduler *s, unsigned hint, agr_task_fn fn,
	    void *arg);
agr_worker *worker_at(struct rig *g, unsigned hint);
struct op op_read(int *fd, void *dst, unsigned len, uint64_t off,
		  int want);
struct op op_write(int *fd, const char *text, uint64_t off);
struct op op_readv(int *fd, const struct iovec *iov, unsigned n,
		   uint64_t off, int want);
struct op op_writev(int *fd, const struct iovec *iov, unsigned n,
		    uint64_t off, int want);
struct op op_fsync(int *fd, unsigned flags, int want);
struct op op_openat(int *dir, const char *path, int flags,
		    int *save, int want);
struct op op_close(int *fd, int want);
struct op op_accept(int *fd, struct sockaddr *addr, socklen_t *len,
		    int *save);
struct op op_connect(int *fd, struct sockaddr *addr, socklen_t *len,
		     int want);
struct op op_recv(int *fd, void *dst, unsigned len, int want);
/* MSG_NOSIGNAL: a reset peer must not kill the test with SIGPIPE. */
struct op op_send(int *fd, const char *text, int want);
struct op op_timeout(uint64_t ns, int want);
struct op op_nop(void);
struct op op_statx(int *dir, const char *path, struct statx *stx);
struct op op_fallocate(int *fd, uint64_t off, unsigned len);
struct op with_next(struct op o);
/* Issues the next step: one op, or a run of ops marked with_next. */
void run_next(struct run *r);
void run_init(struct run *r, const struct op *ops, int nops);
/* Starts the plan on worker `hint`; run_wait() waits for its end. */
void run_start(agr_scheduler *s, unsigned hint, struct run *r,
	       const struct op *ops, int nops);
void run_wait(struct run *r);
void run_plan(agr_scheduler *s, unsigned hint, struct run *r,
	      const struct op *ops, int nops);
const char *res_str(int res);
/* The first error of an ended plan, or 0. */
int run_status(const struct run *r);
/* Every op ran once, on its worker, with the result it wants. */
void assert_plan(const struct run *r);
void start_timers(void *arg);
extern const char *const call_names[NCALLS];
void count_call(int res, void *arg);
/*
 * Calls every function of aggring/io.h with arguments that are valid
 * but for `w` and `cb`. Static buffers: if a call wrongly went through,
 * the kernel would still have live memory to use.
 */
void call_every_op(agr_worker *w, agr_io_cb cb, void *arg,
		   int ret[NCALLS]);
void assert_all_einval(const int ret[NCALLS], int n, const char *how);
void misuse_task(void *arg);
void assert_before(struct journal *j, int a, int b);
/* Copied first: a failed check must not leave the lock held. */
void assert_journal_is(struct journal *j, const int *want, int n);
void dmsg_init(struct dmsg *dm, struct dtest *t, const char *id,
	       int seq, enum job job);
agr_dispatcher *dtest_up(struct dtest *t, agr_supplier *sup,
			 bool owns, int messages);
void dtest_down(struct dtest *t);
void send_ok(agr_dispatcher *d, struct dmsg *dm);
/* A file job ended well: its plan, its status, its file. */
void assert_file_job(struct dmsg *dm);

/* io_sockets.c */
void io_socket_tests(TCase *net);

/* io_ring.c */
void io_ring_tests(TCase *ring);

/* io_dispatch.c */
void io_dispatch_tests(TCase *disp, TCase *down);

#endif /* TESTS_IO_TEST_H */
