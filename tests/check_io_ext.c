/* SPDX-License-Identifier: MIT */
/*
 * check_io_ext.c - what a storage service needs beyond plain agr_io_*:
 * raw SQEs that cannot be lost, chains the SQ-full flush never splits,
 * one operation cancelled by its id, linked timeouts, CQE flags,
 * registered files and buffers, multishot receive into a provided
 * buffer ring, zero-copy send.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <aggring.h>
#include <liburing.h>

#include "testutil.h"

#define MS 1000000ull

static const agr_named_aggregate order = { "sales", "Order" };

/* ---- a supplier with one worker and small rings ---- */

struct rig {
	agr_supplier *sup;
	agr_scheduler *s;
};

static void rig_up_opts(struct rig *g, agr_supplier_options *o)
{
	ck_assert_int_eq(agr_supplier_new_opts("ioext", o, &g->sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(g->sup, &order, &g->s), 0);
}

static void rig_up(struct rig *g, unsigned sq_entries)
{
	agr_supplier_options o = AGR_SUPPLIER_OPTIONS_INIT;

	o.parallelism = 1;
	o.sq_entries = sq_entries;
	rig_up_opts(g, &o);
}

static void rig_down(struct rig *g)
{
	ck_assert_int_eq(agr_supplier_stop_gracefully(g->sup, TU_LONG_NS), 0);
	agr_supplier_free(g->sup);
}

static void run_on(struct rig *g, agr_task_fn fn, void *arg)
{
	ck_assert_int_eq(agr_scheduler_schedule(g->s, 0, fn, arg), 0);
}

static int temp_file(void)
{
	char path[] = "/tmp/aggring-ioext-XXXXXX";
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

/* ---- raw SQEs ---- */

#define RAW_WRITES 24
#define RAW_LEN 512

struct raw_run {
	int fd;
	struct tu_tally done;
	int res[RAW_WRITES];
	int submit[RAW_WRITES];
	int raw_res;
	int commit_ret;
	char data[RAW_WRITES][RAW_LEN];
};

static void raw_write_done(int res, void *arg)
{
	int *slot = arg;

	*slot = res;
}

static void raw_done(int res, void *arg)
{
	struct raw_run *r = arg;

	r->raw_res = res;
}

static void count_done(int res, void *arg)
{
	(void)res;
	tu_tally_add(arg);
}

/*
 * The documented misuse that lost data: take a raw SQE, leave it
 * unprepared, queue more writes than the SQ holds, then prepare it.
 * Each write either goes to the disk intact or is refused (-EBUSY,
 * logged) while the raw SQE is open; after agr_io_sqe_commit() the rest
 * go through. Nothing reports success without writing.
 */
static void raw_then_writes(void *arg)
{
	struct raw_run *r = arg;
	agr_worker *w = agr_worker_current();
	struct io_uring_sqe *raw;
	int i;

	TU_EXPECT(agr_io_sqe(w, raw_done, r, &raw) == 0);
	for (i = 0; i < RAW_WRITES / 2; i++)
		r->submit[i] = agr_io_write(w, r->fd, r->data[i], RAW_LEN,
					    (uint64_t)i * RAW_LEN,
					    raw_write_done, &r->res[i]);
	io_uring_prep_nop(raw);
	r->commit_ret = agr_io_sqe_commit(w);
	for (; i < RAW_WRITES; i++)
		r->submit[i] = agr_io_write(w, r->fd, r->data[i], RAW_LEN,
					    (uint64_t)i * RAW_LEN,
					    raw_write_done, &r->res[i]);
	/* Marks the end: runs after every write above has completed. */
	TU_EXPECT(agr_io_fsync(w, r->fd, 0, count_done, &r->done) == 0);
}

START_TEST(raw_sqe_is_never_submitted_unprepared)
{
	struct raw_run *r = calloc(1, sizeof(*r));
	char back[RAW_LEN];
	struct rig g;
	int i, written = 0, refused = 0;

	ck_assert_ptr_nonnull(r);
	r->fd = temp_file();
	tu_tally_init(&r->done);
	for (i = 0; i < RAW_WRITES; i++)
		memset(r->data[i], 'a' + i, RAW_LEN);
	r->raw_res = 1;
	rig_up(&g, 8);
	run_on(&g, raw_then_writes, r);
	ck_assert(tu_tally_wait(&r->done, 1, TU_LONG_NS));
	rig_down(&g);
	tu_assert_no_worker_failure();
	ck_assert_int_eq(r->commit_ret, 0);
	ck_assert_int_eq(r->raw_res, 0); /* the NOP, prepared late */
	for (i = 0; i < RAW_WRITES; i++) {
		if (r->submit[i] == -EBUSY) {
			refused++;
			continue;
		}
		ck_assert_int_eq(r->submit[i], 0);
		ck_assert_int_eq(r->res[i], RAW_LEN);
		ck_assert_int_eq(pread(r->fd, back, RAW_LEN,
				       (off_t)i * RAW_LEN), RAW_LEN);
		ck_assert_msg(memcmp(back, r->data[i], RAW_LEN) == 0,
			      "write %d reported %d but is not on disk", i,
			      r->res[i]);
		written++;
	}
	/* The SQ (8) filled while the raw SQE was open: some were refused. */
	ck_assert_int_gt(refused, 0);
	/* After the commit every write went through. */
	for (i = RAW_WRITES / 2; i < RAW_WRITES; i++)
		ck_assert_int_eq(r->submit[i], 0);
	ck_assert_int_eq(written + refused, RAW_WRITES);
	close(r->fd);
	tu_tally_destroy(&r->done);
	free(r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("io_ext");
	TCase *c = tcase_create("core");

	tcase_set_timeout(c, 60);
	tcase_add_test(c, raw_sqe_is_never_submitted_unprepared);
	suite_add_tcase(s, c);
	return s;
}

int main(void)
{
	tu_require_io_uring();
	return tu_run(suite());
}
