/* SPDX-License-Identifier: MIT */
/*
 * soak.c - many producers, several named aggregates, handlers doing real
 * I/O, and dispatchers stopped (forcibly or gracefully, with deadlines)
 * and replaced while sends race the stops.
 *
 * Every message lives until the dispatcher instance it was sent to is
 * freed, so that the checks after the free can look at all of them:
 * every admitted message completed exactly once with its expected
 * status (or a stop's status if the instance was forced), no refused
 * message completed, and the instance's counters agree with ours.
 * Worker-side checks (per-id order, one message at a time per group,
 * data read back equals data written) are recorded with TU_EXPECT.
 *
 * Knobs (environment): SOAK_SECONDS (default 10), SOAK_SEED (printed at
 * start; the same seed replays the same random choices, though not the
 * same thread interleaving), SOAK_PRODUCERS (default 6).
 */
#include "testutil.h"

#include <aggring.h>
#include <aggring/io.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEYS_PER_PRODUCER 16
#define MAX_PRODUCERS 64
#define BLOCK 64		/* bytes each I/O message writes and reads */
#define BACKLOG_LIMIT 4000	/* admitted, not completed, per instance */
#define FINAL_STOP_NS (120ull * 1000000000ull)

/* ---- random numbers ---- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned below(uint64_t *s, unsigned n)
{
	return (unsigned)(splitmix(s) % n);
}

/* ---- what a message does ---- */

enum action {
	A_SYNC,	   /* returns 0 at once */
	A_FAIL,	   /* returns -EIO */
	A_GARBAGE, /* returns 7: reported as -EINVAL */
	A_FILE,	   /* write, maybe fsync, read back, compare */
	A_TIMER,   /* a timer of up to 2 ms */
	A_SOCKET,  /* send a packet on a socketpair, receive one */
	A_SKIP,	   /* a type nobody registered: completes with 0 */
	A_COUNT
};

static const char *const type_of[A_COUNT] = {
	"sync", "fail", "garbage", "file", "timer", "socket", "nobody",
};

static int expected_status(enum action a)
{
	return a == A_FAIL ? -EIO : a == A_GARBAGE ? -EINVAL : 0;
}

enum msg_state { M_NEW, M_SENT, M_REFUSED, M_COMPLETED, M_TWICE };

struct instance;

struct soak_msg {
	agr_message m;
	struct soak_msg *next; /* the instance's list of every message */
	struct instance *inst;
	atomic_int state;
	int status;	/* written by the completion */
	bool ran;	/* a function started for it */
	enum action action;
	unsigned id;	/* producer * KEYS_PER_PRODUCER + key */
	uint64_t seq;	/* per id, increasing in send order */
	unsigned param; /* file: fsync if 1; timer: x 100 us */
	int step;
	int group;
	char id_text[24];
	unsigned char wbuf[BLOCK];
	unsigned char rbuf[BLOCK];
};

/* ---- one dispatcher and everything sent to it ---- */

struct slot;

struct instance {
	struct slot *slot;
	unsigned gen;
	agr_dispatcher *d;
	agr_supplier *own_supplier; /* owned by d, or NULL */
	int fd;			    /* a temp file, unlinked */
	int sock[2];		    /* SOCK_SEQPACKET pair */
	_Atomic(struct soak_msg *) msgs;
	atomic_bool forced;
	atomic_long admitted, refused, completed;
	/* Worker side: plain, so ThreadSanitizer checks the hand-offs. */
	uint64_t *last_seq; /* per id, +1; 0 = none ran yet */
	atomic_int *busy;   /* per group */
	int parallelism;
};

struct slot {
	const char *context, *aggregate;
	int parallelism;
	unsigned queue_limit;
	bool metrics;
	bool owns_supplier;
	pthread_rwlock_t lock; /* readers send; the writer swaps */
	struct instance *cur;
	unsigned gens;
};

#define SLOT(ctx, agg, par, limit, met, own)                              \
	{ .context = ctx, .aggregate = agg, .parallelism = par,          \
	  .queue_limit = limit, .metrics = met, .owns_supplier = own }

static struct slot slots[] = {
	SLOT("Soak", "Order", 1, 0, false, false),
	SLOT("Soak", "Ledger", 7, 64, false, false),
	SLOT("Soak", "Journal", 64, 0, true, false),
	SLOT("Soak", "Order", 3, 0, false, false), /* same aggregate as 0 */
	SLOT("Owned", "Cart", 16, 0, false, true), /* its own supplier */
};
#define NSLOTS (sizeof(slots) / sizeof(slots[0]))

static agr_supplier *shared;
static unsigned nproducers = 6;
static atomic_bool producers_stop;

/* Totals for the report. */
static atomic_long t_admitted, t_refused, t_eshutdown, t_eagain, t_ran;
static atomic_long t_discarded, t_cancelled, t_forced, t_graceful,
	t_graceful_late, t_overlap;
static long by_status[A_COUNT];

/* ---- handler ---- */

static struct soak_msg *soak_of(agr_exchange *ex)
{
	return agr_exchange_message(ex)->user;
}

static void finish(agr_exchange *ex, struct soak_msg *s, int status)
{
	atomic_store(&s->inst->busy[s->group], 0);
	agr_exchange_done(ex, status);
}

static void io_step(int res, void *arg);

static int next_io(agr_exchange *ex, struct soak_msg *s)
{
	agr_worker *w = agr_exchange_worker(ex);
	uint64_t off = (uint64_t)s->group * BLOCK;
	struct instance *in = s->inst;

	switch (s->action) {
	case A_FILE:
		if (s->step == 0)
			return agr_io_write(w, in->fd, s->wbuf, BLOCK, off,
					    io_step, ex);
		if (s->step == 1 && s->param)
			return agr_io_fsync(w, in->fd, AGR_IO_DATASYNC,
					    io_step, ex);
		if (s->step <= 2) {
			s->step = 2;
			return agr_io_read(w, in->fd, s->rbuf, BLOCK, off,
					   io_step, ex);
		}
		break;
	case A_TIMER:
		if (s->step == 0)
			return agr_io_timeout(w, s->param * 100000ull,
					      io_step, ex);
		break;
	case A_SOCKET:
		if (s->step == 0)
			return agr_io_send(w, in->sock[0], s->wbuf, BLOCK, 0,
					   io_step, ex);
		if (s->step == 1)
			return agr_io_recv(w, in->sock[1], s->rbuf, BLOCK, 0,
					   io_step, ex);
		break;
	case A_SYNC:
	case A_FAIL:
	case A_GARBAGE:
	case A_SKIP:
	case A_COUNT:
		break; /* no I/O */
	}
	return 1; /* nothing left */
}

/* Checks one completed step; returns a status to finish with, or 1. */
static int check_step(struct soak_msg *s, int res)
{
	if (res == -ECANCELED)
		return res; /* only after a force stop: checked at the end */
	switch (s->action) {
	case A_FILE:
		if (s->step == 2) {
			TU_EXPECT(res == BLOCK);
			TU_EXPECT(memcmp(s->rbuf, s->wbuf, BLOCK) == 0);
		} else {
			TU_EXPECT(res == (s->step == 0 ? BLOCK : 0));
		}
		break;
	case A_TIMER:
		TU_EXPECT(res == -ETIME);
		return 1;
	case A_SOCKET:
		TU_EXPECT(res == BLOCK);
		/* Every packet is the same, whoever sent it. */
		if (s->step == 1)
			TU_EXPECT(memcmp(s->rbuf, s->wbuf, BLOCK) == 0);
		break;
	case A_SYNC:
	case A_FAIL:
	case A_GARBAGE:
	case A_SKIP:
	case A_COUNT:
		break; /* no I/O */
	}
	return res < 0 ? res : 1;
}

static void io_step(int res, void *arg)
{
	agr_exchange *ex = arg;
	struct soak_msg *s = soak_of(ex);
	int ret = check_step(s, res);

	if (ret != 1) {
		finish(ex, s, ret);
		return;
	}
	s->step++;
	ret = next_io(ex, s);
	if (ret == 1)
		finish(ex, s, 0);
	else if (ret < 0)
		finish(ex, s, ret); /* -ESHUTDOWN while tearing down */
}

static void note_start(agr_exchange *ex, struct soak_msg *s)
{
	struct instance *in = s->inst;

	s->ran = true;
	s->group = agr_exchange_group(ex);
	TU_EXPECT(s->group >= 0 && s->group < in->parallelism);
	TU_EXPECT(agr_exchange_dispatcher(ex) == in->d);
	TU_EXPECT(agr_worker_current() == agr_exchange_worker(ex));
	/* One message at a time per group. */
	TU_EXPECT(atomic_exchange(&in->busy[s->group], 1) == 0);
	/* Per-id order among the messages that run. */
	TU_EXPECT(s->seq + 1 > in->last_seq[s->id]);
	in->last_seq[s->id] = s->seq + 1;
}

static int handle(agr_exchange *ex, void *arg)
{
	struct soak_msg *s = soak_of(ex);
	int ret;

	(void)arg;
	note_start(ex, s);
	switch (s->action) {
	case A_SYNC:
		atomic_store(&s->inst->busy[s->group], 0);
		return 0;
	case A_FAIL:
		atomic_store(&s->inst->busy[s->group], 0);
		return -EIO;
	case A_GARBAGE:
		atomic_store(&s->inst->busy[s->group], 0);
		return 7;
	case A_FILE:
	case A_TIMER:
	case A_SOCKET:
	case A_SKIP:
	case A_COUNT:
		break; /* I/O below */
	}
	s->step = 0;
	ret = next_io(ex, s);
	TU_EXPECT(ret == 0 || ret == -ESHUTDOWN);
	if (ret < 0) {
		atomic_store(&s->inst->busy[s->group], 0);
		return ret;
	}
	return AGR_PENDING;
}

static void on_complete(agr_message *m, int status, void *arg)
{
	struct soak_msg *s = m->user;
	int was;

	(void)arg;
	s->status = status;
	was = atomic_exchange(&s->state, M_COMPLETED);
	if (was != M_SENT)
		atomic_store(&s->state, M_TWICE);
	TU_EXPECT(was == M_SENT);
	atomic_fetch_add(&s->inst->completed, 1);
}

/* ---- instances ---- */

static int temp_file(void)
{
	const char *dir = getenv("TMPDIR");
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/aggring-soak-XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	ck_assert_msg(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	return fd;
}

static struct instance *instance_new(struct slot *sl)
{
	struct instance *in = calloc(1, sizeof(*in));
	agr_dispatcher_options o = { 0 };
	int i, ret;

	ck_assert_ptr_nonnull(in);
	in->slot = sl;
	in->gen = sl->gens++;
	in->fd = temp_file();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				    in->sock), 0);
	in->parallelism = sl->parallelism;
	in->last_seq = calloc(nproducers * KEYS_PER_PRODUCER,
			      sizeof(*in->last_seq));
	in->busy = calloc((size_t)in->parallelism, sizeof(*in->busy));
	ck_assert(in->last_seq && in->busy);
	for (i = 0; i < in->parallelism; i++)
		atomic_init(&in->busy[i], 0);
	o.name = sl->aggregate;
	o.named_aggregate.context_name = sl->context;
	o.named_aggregate.aggregate_name = sl->aggregate;
	o.parallelism = sl->parallelism;
	o.queue_limit = sl->queue_limit;
	o.metrics = sl->metrics;
	o.on_complete = on_complete;
	o.complete_arg = in;
	if (sl->owns_supplier) {
		ck_assert_int_eq(agr_supplier_new("soak-own", 2,
						  &in->own_supplier), 0);
		o.supplier = in->own_supplier;
		o.owns_supplier = true;
	} else {
		o.supplier = shared;
	}
	ret = agr_dispatcher_new(&o, &in->d);
	ck_assert_msg(ret == 0, "agr_dispatcher_new: %s", agr_strerror(ret));
	for (i = 0; i < A_COUNT; i++)
		if (i != A_SKIP)
			ck_assert_int_eq(agr_dispatcher_register(in->d,
								 type_of[i],
								 handle, NULL),
					 0);
	ck_assert_int_eq(agr_dispatcher_start(in->d), 0);
	return in;
}

static bool status_ok(struct instance *in, struct soak_msg *s)
{
	bool forced = atomic_load(&in->forced);

	/* No function saw it: a skip completes with 0, unless dropped. */
	if (!s->ran)
		return (s->action == A_SKIP && s->status == 0) ||
		       (forced && s->status == AGR_DISCARDED);
	if (s->status == expected_status(s->action))
		return true;
	/*
	 * Handled and cut short by the force (its I/O cancelled), or its
	 * next I/O refused by workers that tear down.
	 */
	return forced && (s->status == AGR_INTERRUPTED ||
			  s->status == -ESHUTDOWN);
}

/* After agr_dispatcher_free(): every message of `in` is ours again. */
/* What one instance's messages came to. */
struct outcomes {
	long admitted, refused, ran, discarded, skipped, failed, interrupted;
};

/* A message admitted: it completed once, with what its action says. */
static void count_admitted(struct instance *in, struct soak_msg *s,
			   int state, struct outcomes *o)
{
	ck_assert_msg(state == M_COMPLETED,
		      "message %s#%" PRIu64 " (%s) admitted "
		      "to %s gen %u never completed",
		      s->id_text, s->seq, type_of[s->action],
		      in->slot->aggregate, in->gen);
	ck_assert_msg(status_ok(in, s),
		      "message %s#%" PRIu64 " (%s, ran %d, "
		      "forced %d) completed with %d",
		      s->id_text, s->seq, type_of[s->action],
		      s->ran, atomic_load(&in->forced),
		      s->status);
	o->admitted++;
	o->ran += s->ran;
	o->discarded += !s->ran && s->status == AGR_DISCARDED;
	o->skipped += s->action == A_SKIP && s->status == 0;
	o->interrupted += s->status == AGR_INTERRUPTED;
	o->failed += s->ran && s->status < 0 && s->status != AGR_INTERRUPTED;
	if (s->status == AGR_INTERRUPTED)
		atomic_fetch_add(&t_cancelled, 1);
	if (s->ran && s->status == expected_status(s->action))
		by_status[s->action]++;
}

static void instance_verify_and_free(struct instance *in,
				     const agr_dispatcher_stats *st)
{
	struct soak_msg *s, *next;
	struct outcomes o = { 0 };
	int state;

	for (s = atomic_load(&in->msgs); s; s = next) {
		next = s->next;
		state = atomic_load(&s->state);
		ck_assert_msg(state != M_TWICE, "message %s#%" PRIu64
			      " completed twice", s->id_text, s->seq);
		if (state == M_REFUSED)
			o.refused++;
		else if (state != M_NEW)
			count_admitted(in, s, state, &o);
		free(s);
	}
	ck_assert_int_eq(o.admitted, atomic_load(&in->admitted));
	ck_assert_int_eq(o.admitted, atomic_load(&in->completed));
	ck_assert_int_eq(o.refused, atomic_load(&in->refused));
	/* The dispatcher's own counters, exact once it has stopped. */
	ck_assert_uint_eq(st->admitted, (uint64_t)o.admitted);
	ck_assert_uint_eq(st->refused, (uint64_t)o.refused);
	ck_assert_uint_eq(st->discarded, (uint64_t)o.discarded);
	ck_assert_uint_eq(st->skipped, (uint64_t)o.skipped);
	ck_assert_uint_eq(st->failed, (uint64_t)o.failed);
	ck_assert_uint_eq(st->interrupted, (uint64_t)o.interrupted);
	ck_assert_uint_eq(st->handled + st->failed + st->skipped +
				  st->discarded + st->interrupted,
			  (uint64_t)o.admitted);
	atomic_fetch_add(&t_ran, o.ran);
	atomic_fetch_add(&t_discarded, o.discarded);
	close(in->fd);
	close(in->sock[0]);
	close(in->sock[1]);
	free(in->last_seq);
	free(in->busy);
	free(in);
}

/*
 * Stops `in` the way `how` says (0 force, else a graceful stop with a
 * deadline of `how` microseconds, forced if it runs out), waits for
 * every completion, frees the dispatcher and checks the books.
 */
static void instance_stop(struct instance *in, unsigned how, bool wait_free)
{
	int ret;

	if (how == 0) {
		atomic_store(&in->forced, true);
		ck_assert_int_eq(agr_dispatcher_force_stop(in->d), 0);
		atomic_fetch_add(&t_forced, 1);
	} else {
		ret = agr_dispatcher_stop_gracefully(in->d, how * 1000ull);
		ck_assert(ret == 0 || ret == -ETIMEDOUT);
		atomic_fetch_add(&t_graceful, 1);
		if (ret == -ETIMEDOUT) {
			atomic_fetch_add(&t_graceful_late, 1);
			atomic_store(&in->forced, true);
			ck_assert_int_eq(agr_dispatcher_force_stop(in->d), 0);
		}
	}
	if (wait_free) {
		/* After a force stop this waits for the last completions. */
		ret = agr_dispatcher_stop_gracefully(in->d, FINAL_STOP_NS);
		ck_assert_msg(ret == 0, "final stop: %s", agr_strerror(ret));
	}
}

static void instance_finish(struct instance *in)
{
	agr_dispatcher_stats st;
	int ret;

	ret = agr_dispatcher_stop_gracefully(in->d, FINAL_STOP_NS);
	ck_assert_msg(ret == 0, "final stop: %s", agr_strerror(ret));
	ck_assert_int_eq(agr_dispatcher_stats_get(in->d, &st), 0);
	agr_dispatcher_free(in->d); /* frees own_supplier too */
	instance_verify_and_free(in, &st);
}

/* ---- producers ---- */

struct producer {
	pthread_t thread;
	unsigned index;
	uint64_t rng;
	uint64_t next_seq[KEYS_PER_PRODUCER];
	long sent;
};

static struct soak_msg *make_msg(struct producer *p, struct instance *in)
{
	struct soak_msg *s = calloc(1, sizeof(*s));
	unsigned key = below(&p->rng, KEYS_PER_PRODUCER);
	unsigned r = below(&p->rng, 100);

	ck_assert_ptr_nonnull(s);
	s->inst = in;
	s->id = p->index * KEYS_PER_PRODUCER + key;
	s->seq = p->next_seq[key]++;
	/* Mostly I/O; a few of everything else. */
	s->action = r < 30 ? A_FILE : r < 50 ? A_TIMER : r < 70 ? A_SOCKET :
		    r < 85 ? A_SYNC : r < 91 ? A_FAIL : r < 95 ? A_GARBAGE :
		    A_SKIP;
	s->param = below(&p->rng, 21);
	s->param = s->action == A_FILE ? s->param & 1 : s->param;
	memset(s->wbuf, s->action == A_SOCKET ? 0x5a : (int)(s->seq & 0xff),
	       BLOCK);
	memcpy(s->wbuf, &s->id, sizeof(s->id));
	if (s->action == A_SOCKET)
		memset(s->wbuf, 0x5a, sizeof(s->id));
	snprintf(s->id_text, sizeof(s->id_text), "p%u-k%u", p->index, key);
	s->m.aggregate_id = s->id_text;
	s->m.type = type_of[s->action];
	s->m.user = s;
	atomic_init(&s->state, M_SENT);
	/* On the instance's list before the send: its completion may come
	 * before send returns. */
	s->next = atomic_load(&in->msgs);
	while (!atomic_compare_exchange_weak(&in->msgs, &s->next, s))
		;
	return s;
}

static void refused(struct soak_msg *s, int ret)
{
	struct instance *in = s->inst;

	TU_EXPECT(ret == -ESHUTDOWN ||
		  (ret == -EAGAIN && in->slot->queue_limit));
	/* No callback may have run for it. */
	TU_EXPECT(atomic_exchange(&s->state, M_REFUSED) == M_SENT);
	atomic_fetch_add(&in->refused, 1);
	atomic_fetch_add(&t_refused, 1);
	atomic_fetch_add(ret == -EAGAIN ? &t_eagain : &t_eshutdown, 1);
}

static void send_some(struct producer *p, struct instance *in)
{
	struct soak_msg *batch[8];
	agr_message *ms[8];
	size_t n = 1, admitted = 0, i;
	int ret;

	if (below(&p->rng, 4) == 0)
		n = 1 + below(&p->rng, 8);
	for (i = 0; i < n; i++) {
		batch[i] = make_msg(p, in);
		ms[i] = &batch[i]->m;
	}
	if (n == 1) {
		ret = agr_dispatcher_send(in->d, ms[0]);
		admitted = ret == 0;
	} else {
		ret = agr_dispatcher_send_batch(in->d, ms, n, &admitted);
		TU_EXPECT((ret == 0) == (admitted == n));
	}
	atomic_fetch_add(&in->admitted, (long)admitted);
	atomic_fetch_add(&t_admitted, (long)admitted);
	/* A batch counts one refusal: the message its error is about. */
	if (admitted < n)
		refused(batch[admitted], ret);
	/* Those after a refusal were never offered: M_NEW, no completion. */
	for (i = admitted + 1; i < n; i++)
		TU_EXPECT(atomic_exchange(&batch[i]->state, M_NEW) == M_SENT);
	p->sent += (long)n;
}

static bool backlogged(struct instance *in)
{
	return atomic_load(&in->admitted) - atomic_load(&in->completed) >
	       BACKLOG_LIMIT;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct slot *sl;

	while (!atomic_load(&producers_stop)) {
		sl = &slots[below(&p->rng, NSLOTS)];
		pthread_rwlock_rdlock(&sl->lock);
		if (backlogged(sl->cur))
			sched_yield(); /* let the workers catch up */
		else
			send_some(p, sl->cur);
		pthread_rwlock_unlock(&sl->lock);
	}
	return NULL;
}

/* ---- the controller ---- */

static void pace(uint64_t *rng, unsigned max_ms)
{
	struct timespec ts = { 0, (long)below(rng, max_ms * 1000) * 1000 };

	/* Only spreads the stops over time; nothing waits on it. */
	nanosleep(&ts, NULL);
}

/* Replaces the dispatcher of `sl` while producers keep sending to it. */
static void restart(struct slot *sl, uint64_t *rng)
{
	struct instance *old = sl->cur, *fresh = NULL;
	unsigned how = below(rng, 3) == 0 ? 0 :
		       1 + below(rng, below(rng, 2) ? 20000 : 300000);
	bool overlap = below(rng, 3) == 0;

	/* Sometimes two dispatchers of one aggregate run side by side. */
	if (overlap && !sl->owns_supplier) {
		fresh = instance_new(sl);
		atomic_fetch_add(&t_overlap, 1);
	}
	instance_stop(old, how, false); /* races the producers' sends */
	if (!fresh)
		fresh = instance_new(sl);
	pthread_rwlock_wrlock(&sl->lock);
	sl->cur = fresh;
	pthread_rwlock_unlock(&sl->lock);
	instance_finish(old);
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 0) : dflt;
}

/* Each slot's lock (writers first: a restart must not starve) and instance. */
static void slots_open(void)
{
	pthread_rwlockattr_t ra;
	unsigned i;

	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(
		&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (i = 0; i < NSLOTS; i++) {
		pthread_rwlock_init(&slots[i].lock, &ra);
		slots[i].cur = instance_new(&slots[i]);
	}
	pthread_rwlockattr_destroy(&ra);
}

/* The run's figures, for the log. */
static void print_totals(uint64_t ns, unsigned restarts)
{
	printf("soak: %.1f s, %u restarts (%ld forced, %ld graceful of which "
	       "%ld ran out of time, %ld overlapping), %ld admitted, %ld ran, "
	       "%ld discarded, %ld cancelled, %ld refused (%ld ESHUTDOWN, "
	       "%ld EAGAIN)\n",
	       (double)ns / 1e9, restarts,
	       atomic_load(&t_forced), atomic_load(&t_graceful),
	       atomic_load(&t_graceful_late), atomic_load(&t_overlap),
	       atomic_load(&t_admitted), atomic_load(&t_ran),
	       atomic_load(&t_discarded), atomic_load(&t_cancelled),
	       atomic_load(&t_refused), atomic_load(&t_eshutdown),
	       atomic_load(&t_eagain));
	printf("soak: ran to their own status: file %ld, timer %ld, socket "
	       "%ld, sync %ld, fail %ld, garbage %ld\n",
	       by_status[A_FILE], by_status[A_TIMER], by_status[A_SOCKET],
	       by_status[A_SYNC], by_status[A_FAIL], by_status[A_GARBAGE]);
}

START_TEST(soak)
{
	struct producer *prods;
	uint64_t seed, rng, end, started = tu_now_ns();
	unsigned seconds = env_uint("SOAK_SECONDS", 10);
	unsigned i, restarts = 0;
	const char *seed_env = getenv("SOAK_SEED");

	seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) :
				       (uint64_t)time(NULL) ^
					       ((uint64_t)getpid() << 32);
	nproducers = env_uint("SOAK_PRODUCERS", 6);
	if (nproducers < 1 || nproducers > MAX_PRODUCERS)
		nproducers = 6;
	printf("soak: SOAK_SEED=%" PRIu64 " SOAK_SECONDS=%u "
	       "SOAK_PRODUCERS=%u\n", seed, seconds, nproducers);
	fflush(stdout);
	rng = seed;

	ck_assert_int_eq(agr_supplier_new("soak", 2, &shared), 0);
	slots_open();

	prods = calloc(nproducers, sizeof(*prods));
	ck_assert_ptr_nonnull(prods);
	for (i = 0; i < nproducers; i++) {
		prods[i].index = i;
		prods[i].rng = seed + 1000003ull * (i + 1);
		ck_assert_int_eq(pthread_create(&prods[i].thread, NULL,
						producer_main, &prods[i]),
				 0);
	}

	end = started + (uint64_t)seconds * 1000000000ull;
	while (tu_now_ns() < end) {
		pace(&rng, 40);
		restart(&slots[below(&rng, NSLOTS)], &rng);
		restarts++;
		tu_assert_no_worker_failure();
	}

	atomic_store(&producers_stop, true);
	for (i = 0; i < nproducers; i++)
		pthread_join(prods[i].thread, NULL);
	for (i = 0; i < NSLOTS; i++) {
		if (below(&rng, 2))
			instance_stop(slots[i].cur, 0, true);
		instance_finish(slots[i].cur);
		pthread_rwlock_destroy(&slots[i].lock);
	}
	ck_assert_int_eq(agr_supplier_stop_gracefully(shared, FINAL_STOP_NS),
			 0);
	agr_supplier_free(shared);
	tu_assert_no_worker_failure();

	print_totals(tu_now_ns() - started, restarts);
	ck_assert_int_gt(atomic_load(&t_ran), 0);
	free(prods);
}
END_TEST

/* Errors are expected here (garbage returns): keep stderr readable. */
static void quiet_log(agr_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level == AGR_LOG_ERROR && !strstr(msg, "neither 0, AGR_PENDING"))
		fprintf(stderr, "aggring: %s\n", msg);
}

int main(void)
{
	Suite *s = suite_create("soak");
	TCase *tc = tcase_create("soak");

	tu_require_io_uring();
	agr_set_log_hook(quiet_log, NULL);
	tcase_set_timeout(tc, env_uint("SOAK_SECONDS", 10) + 600.0);
	tcase_add_test(tc, soak);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
