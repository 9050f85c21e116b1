/* SPDX-License-Identifier: MIT */
/*
 * metrics_prometheus.c - check_metrics' Prometheus text of two
 * dispatchers, one with latency metrics and one without, an odd name
 * escaped: the strict reader accepts it, and the buffer and the fd
 * forms give the same text.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "metrics_test.h"
#include "testutil.h"

/*
 * Counts read back from the text are compared exactly, on purpose (see
 * prom_reader.c): a double holds them exactly.
 */
#pragma GCC diagnostic ignored "-Wfloat-equal"

/* ---- two dispatchers, one with latency metrics and one without ---- */

#define ODD_NAME "we\"ird\\name"

#define ODD_NAME_ESCAPED "dispatcher=\"we\\\"ird\\\\name\""

static const char *const pair_ids[] = { "order-11", "order-12", "order-13",
					"cart-21",  "cart-22",	"cart-23" };

struct pair {
	agr_supplier *sup;
	agr_dispatcher *ds[2];
	struct tu_tally done;
	struct tmsg msgs[10];
};

static agr_dispatcher *pair_dispatcher(struct pair *p, const char *name,
				       const agr_named_aggregate *named,
				       bool metrics)
{
	agr_dispatcher_options o = options(name, p->sup, &p->done);
	agr_dispatcher *d;

	o.named_aggregate = *named;
	o.metrics = metrics;
	d = new_dispatcher(&o);
	add_fn(d, "A", done_now, NULL);
	add_fn(d, "E", fail_eio, NULL);
	ck_assert_int_eq(agr_dispatcher_start(d), 0);
	return d;
}

/*
 * ODD_NAME (Order, metrics on): 3 handled, 1 failed, 2 skipped;
 * "plain" (Cart, metrics off): 2 handled, 2 failed. Both then stop,
 * and their supplier's workers, so that their figures no longer change.
 */
static void pair_setup(struct pair *p)
{
	static const char *const types[] = { "A", "A", "A", "E", "B", "B",
					     "A", "A", "E", "E" };
	int i;

	tu_tally_init(&p->done);
	p->sup = new_supplier("pool", 1);
	p->ds[0] = pair_dispatcher(p, ODD_NAME, &order, true);
	p->ds[1] = pair_dispatcher(p, "plain", &cart, false);
	for (i = 0; i < 10; i++) {
		tmsg_init(&p->msgs[i], pair_ids[(i < 6 ? 0 : 3) + i % 3],
			  types[i]);
		send_ok(p->ds[i < 6 ? 0 : 1], &p->msgs[i]);
	}
	wait_completed(&p->done, 10);
	stop(p->ds[0]);
	stop(p->ds[1]);
	/* The workers end too: their running time no longer grows. */
	ck_assert_int_eq(agr_supplier_stop_gracefully(p->sup, TU_LONG_NS), 0);
}

static void pair_teardown(struct pair *p)
{
	agr_dispatcher_free(p->ds[0]);
	agr_dispatcher_free(p->ds[1]);
	agr_supplier_free(p->sup);
	tu_tally_destroy(&p->done);
}

/* The whole text for ds[0..n), through the sizing call. */
static char *render(agr_dispatcher *const *ds, size_t n, int *len_out)
{
	int len = agr_metrics_write_prometheus(ds, n, NULL, 0);
	char *buf;

	ck_assert_int_gt(len, 0);
	buf = malloc((size_t)len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(agr_metrics_write_prometheus(ds, n, buf,
						      (size_t)len + 1), len);
	ck_assert_uint_eq(strlen(buf), (size_t)len);
	*len_out = len;
	return buf;
}

static void assert_outcomes(struct expo *e, const char *dispatcher,
			    const agr_dispatcher_stats *want)
{
	const char *const in = "aggring_sends_total";
	const char *const m = "aggring_messages_total";

	ck_assert(value_of(e, in, dispatcher, "admitted") ==
		  (double)want->admitted);
	ck_assert(value_of(e, in, dispatcher, "refused") ==
		  (double)want->refused);
	/* Outcomes only: their sum counts each completed message once. */
	ck_assert_ptr_null(find_sample(e, m, dispatcher, "admitted"));
	ck_assert_ptr_null(find_sample(e, in, dispatcher, "handled"));
	ck_assert(value_of(e, m, dispatcher, "handled") ==
		  (double)want->handled);
	ck_assert(value_of(e, m, dispatcher, "failed") ==
		  (double)want->failed);
	ck_assert(value_of(e, m, dispatcher, "skipped") ==
		  (double)want->skipped);
	ck_assert(value_of(e, m, dispatcher, "discarded") ==
		  (double)want->discarded);
	ck_assert(value_of(e, m, dispatcher, "interrupted") ==
		  (double)want->interrupted);
}

static const struct sample *find_worker(const struct expo *e,
					const char *name,
					const char *scheduler, int index)
{
	const struct sample *x;
	const char *s, *w;
	int i;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		s = label_value(x, "scheduler");
		w = label_value(x, "worker");
		if (strcmp(x->name, name) == 0 && s && w &&
		    strcmp(s, scheduler) == 0 && atoi(w) == index)
			return x;
	}
	return NULL;
}

static double worker_value(const struct expo *e, const char *name,
			   const char *scheduler, int index)
{
	const struct sample *x = find_worker(e, name, scheduler, index);

	ck_assert_msg(x != NULL, "no %s for %s worker %d", name, scheduler,
		      index);
	return x->value;
}

/*
 * One series per worker of each scheduler, equal to the worker's own
 * figures: the pair's workers have ended, so that these no longer move.
 */
static void assert_workers(struct expo *e, const struct pair *p)
{
	agr_scheduler *s;
	agr_worker_metrics m;
	const char *name;
	const struct sample *x;
	int d;

	for (d = 0; d < 2; d++) {
		s = agr_dispatcher_scheduler(p->ds[d]);
		name = agr_scheduler_name(s);
		ck_assert_int_eq(agr_scheduler_worker_metrics(s, 0, &m), 0);
		ck_assert(worker_value(e, "aggring_worker_iterations_total",
				       name, 0) == (double)m.iterations);
		ck_assert(worker_value(e, "aggring_worker_items_total", name,
				       0) == (double)m.items);
		ck_assert(worker_value(e, "aggring_worker_doorbells_total",
				       name, 0) == (double)m.doorbells);
		ck_assert(worker_value(e,
				       "aggring_worker_io_completions_total",
				       name, 0) == (double)m.io_completions);
		ck_assert(worker_value(e, "aggring_worker_sq_full_total", name,
				       0) == (double)m.sq_full);
		ck_assert(worker_value(e, "aggring_worker_early_submits_total",
				       name, 0) == (double)m.early_submits);
		ck_assert(fabs(worker_value(e,
					    "aggring_worker_sleep_seconds_total",
					    name, 0) -
			       (double)m.blocked_ns / 1e9) < 1e-9);
		ck_assert(worker_value(e, "aggring_worker_inflight_operations",
				       name, 0) == m.inflight);
		ck_assert_uint_gt(m.items, 0);
		ck_assert_ptr_null(find_worker(e,
					       "aggring_worker_items_total",
					       name, 1));
		x = find_worker(e, "aggring_worker_items_total", name, 0);
		ck_assert_str_eq(label_value(x, "context"), "sales");
		ck_assert_str_eq(label_value(x, "aggregate"),
				 d ? "Cart" : "Order");
	}
	ck_assert_str_eq(type_of(e, "aggring_worker_inflight_operations"),
			 "gauge");
	ck_assert_str_eq(type_of(e, "aggring_worker_sleep_seconds_total"),
			 "counter");
}

/* Each family of the text with its type. */
static void assert_family_types(struct expo *e)
{
	ck_assert_str_eq(type_of(e, "aggring_sends_total"), "counter");
	ck_assert_str_eq(type_of(e, "aggring_messages_total"), "counter");
	ck_assert_str_eq(type_of(e, "aggring_queue_depth"), "gauge");
	ck_assert_str_eq(type_of(e, "aggring_deepest_group_depth"), "gauge");
	ck_assert_str_eq(type_of(e, "aggring_queue_latency_seconds"),
			 "histogram");
	ck_assert_str_eq(type_of(e, "aggring_processing_latency_seconds"),
			 "histogram");
}

/* Latencies: all 6 of ODD_NAME started; none for "plain". */
static void assert_latency_samples(const struct expo *e)
{
	ck_assert(value_of(e, "aggring_queue_latency_seconds_count",
			   ODD_NAME, NULL) == 6);
	ck_assert(value_of(e, "aggring_processing_latency_seconds_count",
			   ODD_NAME, NULL) == 6);
	ck_assert(value_of(e, "aggring_processing_latency_seconds_sum",
			   ODD_NAME, NULL) > 0);
	ck_assert_ptr_null(find_sample(e,
				       "aggring_queue_latency_seconds_count",
				       "plain", NULL));
	ck_assert_ptr_null(find_sample(e,
				       "aggring_queue_latency_seconds_bucket",
				       "plain", NULL));
}

START_TEST(prometheus_text_passes_a_strict_reader)
{
	const agr_dispatcher_stats odd = { .admitted = 6, .handled = 3,
					   .failed = 1, .skipped = 2 };
	const agr_dispatcher_stats plain = { .admitted = 4, .handled = 2,
					     .failed = 2 };
	struct expo *e = new_expo();
	const struct sample *x;
	struct pair p;
	char *text;
	int len;

	pair_setup(&p);
	text = render(p.ds, 2, &len);
	ck_assert_msg(parse_exposition(e, text), "%s in:\n%s", e->error, text);
	ck_assert_msg(check_label_policy(e, pair_ids, ARRAY_SIZE(pair_ids)),
		      "%s in:\n%s", e->error, text);

	assert_family_types(e);
	assert_outcomes(e, ODD_NAME, &odd);
	assert_outcomes(e, "plain", &plain);
	ck_assert(value_of(e, "aggring_queue_depth", ODD_NAME, NULL) == 0);
	/* "plain" measures no depth: no sample, rather than a false 0. */
	ck_assert_ptr_null(find_sample(e, "aggring_queue_depth", "plain",
				       NULL));
	ck_assert_ptr_null(find_sample(e, "aggring_deepest_group_depth",
				       "plain", NULL));

	assert_latency_samples(e);

	/* The odd name is escaped in the text and whole once read. */
	ck_assert_ptr_nonnull(strstr(text, ODD_NAME_ESCAPED));
	x = find_sample(e, "aggring_messages_total", ODD_NAME, "handled");
	ck_assert_str_eq(label_value(x, "context"), "sales");
	ck_assert_str_eq(label_value(x, "aggregate"), "Order");
	x = find_sample(e, "aggring_messages_total", "plain", "handled");
	ck_assert_str_eq(label_value(x, "aggregate"), "Cart");
	assert_workers(e, &p);
	free(text);

	/* No dispatcher: the families alone, still well formed. */
	text = render(NULL, 0, &len);
	ck_assert_msg(parse_exposition(e, text), "%s in:\n%s", e->error, text);
	ck_assert_int_eq(e->nsamples, 0);
	free(text);
	pair_teardown(&p);
	free(e);
}
END_TEST

START_TEST(prometheus_buffer_works_like_snprintf)
{
	agr_dispatcher *with_null[2];
	char small[64], *full, *again;
	struct pair p;
	int len, len2;

	pair_setup(&p);
	full = render(p.ds, 2, &len);
	again = render(p.ds, 2, &len2);
	ck_assert_int_eq(len2, len);
	ck_assert_str_eq(again, full);
	ck_assert_uint_gt((size_t)len, sizeof(small));

	/* NULL or no room: only the length. */
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, NULL, 100),
			 len);
	small[0] = 'Z';
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small, 0), len);
	ck_assert_int_eq(small[0], 'Z');
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small, 1), len);
	ck_assert_int_eq(small[0], '\0');
	/* Too small: a NUL-terminated prefix. */
	memset(small, 'Z', sizeof(small));
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, small,
						      sizeof(small)), len);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	ck_assert(memcmp(small, full, sizeof(small) - 1) == 0);
	/* One byte short: all but the last newline. */
	memset(again, 'Z', (size_t)len + 1);
	ck_assert_int_eq(agr_metrics_write_prometheus(p.ds, 2, again,
						      (size_t)len), len);
	ck_assert_uint_eq(strlen(again), (size_t)len - 1);
	ck_assert(memcmp(again, full, (size_t)len - 1) == 0);

	ck_assert_int_eq(agr_metrics_write_prometheus(NULL, 1, small,
						      sizeof(small)), -EINVAL);
	with_null[0] = p.ds[0];
	with_null[1] = NULL;
	ck_assert_int_eq(agr_metrics_write_prometheus(with_null, 2, small,
						      sizeof(small)), -EINVAL);
	free(full);
	free(again);
	pair_teardown(&p);
}
END_TEST

/* Reads a pipe to its end on a thread of its own. */
struct drain {
	pthread_t thread;
	int fd;
	char buf[1 << 17];
	size_t len;
	int error;
};

static void *drain_pipe(void *arg)
{
	struct drain *r = arg;
	ssize_t n;

	for (;;) {
		n = read(r->fd, r->buf + r->len, sizeof(r->buf) - 1 - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r->error = errno;
		if (n <= 0)
			break;
		r->len += (size_t)n;
	}
	r->buf[r->len] = '\0';
	return NULL;
}

/* Reads all of `fd` from its start. */
static char *read_file(int fd, size_t max)
{
	char *buf = malloc(max + 1);
	size_t len = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return buf;
}

START_TEST(prometheus_fd_gets_the_same_text)
{
	char path[] = "/tmp/check_metrics-XXXXXX";
	struct drain *r = calloc(1, sizeof(*r));
	char *full, *got;
	struct pair p;
	int fds[2], fd, len;

	ck_assert_ptr_nonnull(r);
	pair_setup(&p);
	full = render(p.ds, 2, &len);
	ck_assert_uint_lt((size_t)len, sizeof(r->buf) - 1);

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, fd), 0);
	got = read_file(fd, (size_t)len * 2);
	ck_assert_str_eq(got, full);
	free(got);
	close(fd);

	ck_assert_int_eq(pipe(fds), 0);
	r->fd = fds[0];
	ck_assert_int_eq(pthread_create(&r->thread, NULL, drain_pipe, r), 0);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, fds[1]), 0);
	close(fds[1]);
	ck_assert_int_eq(pthread_join(r->thread, NULL), 0);
	close(fds[0]);
	ck_assert_int_eq(r->error, 0);
	ck_assert_str_eq(r->buf, full);

	ck_assert_int_eq(agr_metrics_write_prometheus_fd(p.ds, 2, -1), -EBADF);
	ck_assert_int_eq(agr_metrics_write_prometheus_fd(NULL, 1, 1), -EINVAL);
	free(full);
	free(r);
	pair_teardown(&p);
}
END_TEST

void metrics_prometheus_tests(TCase *prom)
{
	tcase_add_test(prom, prometheus_text_passes_a_strict_reader);
	tcase_add_test(prom, prometheus_buffer_works_like_snprintf);
	tcase_add_test(prom, prometheus_fd_gets_the_same_text);
}
