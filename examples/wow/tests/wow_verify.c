/* SPDX-License-Identifier: MIT */
/*
 * wow_verify - checks what tests/wow_scale_out.sh promises, against the
 * Redis the examples ran on (-e: wow_produce's expect file):
 *  - each account's event stream in Wow's event store has versions
 *    1..n, n = its command count, and each version's balance is the
 *    previous one's plus its amount (appended in version order);
 *  - the final balance is the sum of its commands' amounts;
 *  - every request id is stored once, over all accounts;
 *  - the projection (wow_project's hash) holds "n sum" for each;
 *  - nothing is pending in the command and projection groups;
 *  - every version of every account was published on :event; with -s,
 *    also in version order (first publications; duplicates skipped).
 * Prints what failed, and "verify ok ..." when nothing did.
 *
 *   wow_verify [-h host] [-p port] [-c] -e expect-file [-s]
 */
#include <errno.h>
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>

#include "../wow_accounts.h"
#include "../wow_common.h"

#define PROJECTION "wow_project:{bank.Account}:balances"

struct verify;

struct account {
	struct verify *v;
	char id[32];
	unsigned long n;
	long long sum;
	unsigned char *published; /* n + 1 flags, by version */
	int last_published;	  /* highest first-published version */
};

struct verify {
	agr_redis_options ro;
	agr_redis *r;
	agr_wow_event_store *es;
	struct account *acct;
	size_t nacct;
	char **req;
	size_t nreq, capreq;
	unsigned outstanding;
	unsigned long failures, inversions, unpublished;
	bool strict_order;
	int phase; /* 1: the store, projection, groups; 2: :event */
	char last_id[64];
	char *event_topic;
	atomic_bool done;
};

static void failf(struct verify *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void failf(struct verify *v, const char *fmt, ...)
{
	va_list ap;

	if (v->failures++ < 20) {
		va_start(ap, fmt);
		fputs("verify FAIL: ", stdout);
		vprintf(fmt, ap);
		fputc('\n', stdout);
		va_end(ap);
	}
}

static void step_done(struct verify *v);

static void keep_request(struct verify *v, const char *id)
{
	if (v->nreq == v->capreq) {
		size_t cap = v->capreq ? 2 * v->capreq : 1024;
		char **n = realloc(v->req, cap * sizeof(*n));

		if (!n)
			abort();
		v->req = n;
		v->capreq = cap;
	}
	v->req[v->nreq] = strdup(id);
	if (!v->req[v->nreq])
		abort();
	v->nreq++;
}

static void on_load(agr_wow_event_store *es, int status,
		    agr_wow_event_stream *const *streams,
		    const char *const *json, const size_t *json_len,
		    size_t count, void *arg)
{
	struct account *a = arg;
	struct verify *v = a->v;
	long long balance = 0;

	(void)es;
	(void)json;
	(void)json_len;
	if (status < 0) {
		failf(v, "%s: load: %s", a->id, strerror(-status));
	} else if (count != a->n) {
		failf(v, "%s: %zu versions stored, %lu commands sent", a->id,
		      count, a->n);
	}
	for (size_t i = 0; status == 0 && i < count; i++) {
		int64_t amount, after;

		if (streams[i]->version != (int32_t)(i + 1))
			failf(v, "%s: stream %zu has version %d", a->id, i + 1,
			      streams[i]->version);
		if (wow_deposited_parse(streams[i]->events[0].body, &amount,
					&after) < 0 ||
		    after != balance + amount)
			failf(v, "%s: version %d's balance does not follow "
			      "version %d's", a->id, streams[i]->version,
			      streams[i]->version - 1);
		balance += amount;
		keep_request(v, streams[i]->request_id);
	}
	if (status == 0 && balance != a->sum)
		failf(v, "%s: balance %lld, commands sum to %lld", a->id,
		      balance, a->sum);
	step_done(v);
}

struct hget {
	struct verify *v;
	struct account *a;
};

static void on_hget(agr_redis *r, const redisReply *reply, int err,
		    void *arg)
{
	struct hget *h = arg;
	char want[64];

	(void)r;
	snprintf(want, sizeof(want), "%lu %lld", h->a->n, h->a->sum);
	if (err || reply->type != REDIS_REPLY_STRING)
		failf(h->v, "%s: no projection", h->a->id);
	else if (strcmp(reply->str, want))
		failf(h->v, "%s: projection \"%s\", store \"%s\"", h->a->id,
		      reply->str, want);
	step_done(h->v);
	free(h);
}

static void on_pending(agr_redis *r, const redisReply *reply, int err,
		       void *arg)
{
	struct verify *v = arg;

	(void)r;
	if (err || reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 ||
	    reply->element[0]->type != REDIS_REPLY_INTEGER)
		failf(v, "XPENDING failed");
	else if (reply->element[0]->integer != 0)
		failf(v, "%lld entries still pending in a group",
		      reply->element[0]->integer);
	step_done(v);
}

static struct account *find(struct verify *v, const char *id)
{
	size_t lo = 0, hi = v->nacct;

	while (lo < hi) { /* the expect file is sorted by id */
		size_t mid = (lo + hi) / 2;
		int c = strcmp(v->acct[mid].id, id);

		if (!c)
			return &v->acct[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void read_events(struct verify *v);

static void note_published(struct verify *v, const char *msg, size_t len)
{
	agr_wow_event_stream *s;
	struct account *a;

	if (agr_wow_event_stream_decode(msg, len, &s) < 0) {
		failf(v, ":event holds an undecodable stream");
		return;
	}
	a = find(v, s->aggregate_id);
	if (!a) { /* another round's account */
	} else if (s->version < 1 || (unsigned long)s->version > a->n) {
		failf(v, ":event: %s version %d was never stored",
		      s->aggregate_id, s->version);
	} else if (!a->published[s->version]) {
		a->published[s->version] = 1;
		if (s->version < a->last_published)
			v->inversions++;
		else
			a->last_published = s->version;
	}
	agr_wow_event_stream_free(s);
}

static void on_range(agr_redis *r, const redisReply *reply, int err,
		     void *arg)
{
	struct verify *v = arg;

	(void)r;
	if (err || reply->type != REDIS_REPLY_ARRAY) {
		failf(v, "XRANGE :event failed");
		step_done(v);
		return;
	}
	for (size_t i = 0; i < reply->elements; i++) {
		const redisReply *e = reply->element[i], *f = e->element[1];

		snprintf(v->last_id, sizeof(v->last_id), "(%s",
			 e->element[0]->str);
		for (size_t k = 0; k + 1 < f->elements; k += 2)
			if (!strcmp(f->element[k]->str, "msg"))
				note_published(v, f->element[k + 1]->str,
					       f->element[k + 1]->len);
	}
	if (reply->elements == 1000) {
		read_events(v);
		return;
	}
	for (size_t i = 0; i < v->nacct; i++)
		for (unsigned long k = 1; k <= v->acct[i].n; k++)
			if (!v->acct[i].published[k]) {
				v->unpublished++;
				if (v->unpublished < 5)
					failf(v, "%s version %lu never "
					      "published", v->acct[i].id, k);
			}
	step_done(v);
}

static void read_events(struct verify *v)
{
	if (agr_redis_command(v->r, v->event_topic, on_range, v,
			      "XRANGE %s %s + COUNT 1000", v->event_topic,
			      v->last_id) < 0) {
		failf(v, "XRANGE not sent");
		step_done(v);
	}
}

static int compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void finish(struct verify *v)
{
	unsigned long total = 0;

	qsort(v->req, v->nreq, sizeof(*v->req), compare);
	for (size_t i = 1; i < v->nreq; i++)
		if (!strcmp(v->req[i], v->req[i - 1]))
			failf(v, "request id %s stored twice", v->req[i]);
	for (size_t i = 0; i < v->nacct; i++)
		total += v->acct[i].n;
	if (v->nreq != total)
		failf(v, "%zu request ids stored, %lu commands sent", v->nreq,
		      total);
	agr_wow_event_store_free(v->es);
	agr_redis_close(v->r, NULL, NULL);
	atomic_store(&v->done, true);
}

static void finish_events(struct verify *v)
{
	unsigned long total = 0;

	for (size_t i = 0; i < v->nacct; i++)
		total += v->acct[i].n;
	printf("event order inversions %lu unpublished %lu\n", v->inversions,
	       v->unpublished);
	if (v->strict_order && v->inversions)
		failf(v, "%lu events published out of version order",
		      v->inversions);
	if (!v->failures)
		printf("verify ok accounts %zu commands %lu\n", v->nacct,
		       total);
	agr_redis_close(v->r, NULL, NULL);
	atomic_store(&v->done, true);
}

static void step_done(struct verify *v)
{
	if (--v->outstanding)
		return;
	if (v->phase == 1)
		finish(v);
	else
		finish_events(v);
}

static void start(void *arg)
{
	struct verify *v = arg;
	char *cmd_topic;

	if (agr_redis_new(agr_worker_current(), &v->ro, &v->r) < 0 ||
	    agr_wow_event_store_new(v->r, wow_named(), &v->es) < 0 ||
	    agr_wow_topic(wow_named(), AGR_WOW_TOPIC_COMMAND, &cmd_topic,
			  NULL) < 0) {
		failf(v, "no client");
		atomic_store(&v->done, true);
		return;
	}
	v->phase = 1;
	v->outstanding = 1; /* this function's own */
	for (size_t i = 0; i < v->nacct; i++) {
		struct account *a = &v->acct[i];
		struct hget *h = malloc(sizeof(*h));

		a->v = v;
		v->outstanding++;
		if (agr_wow_event_store_load(v->es, a->id, NULL,
					     AGR_WOW_VERSION_MIN,
					     AGR_WOW_VERSION_MAX, on_load,
					     a) < 0) {
			failf(v, "%s: load not sent", a->id);
			v->outstanding--;
		}
		h->v = v;
		h->a = a;
		v->outstanding++;
		if (agr_redis_command(v->r, PROJECTION, on_hget, h,
				      "HGET %s %s", PROJECTION, a->id) < 0) {
			v->outstanding--;
			free(h);
		}
	}
	v->outstanding += 2;
	if (agr_redis_command(v->r, cmd_topic, on_pending, v, "XPENDING %s %s",
			      cmd_topic, WOW_CONTEXT ".CommandDispatcher") < 0)
		v->outstanding--;
	if (agr_redis_command(v->r, v->event_topic, on_pending, v,
			      "XPENDING %s %s", v->event_topic,
			      WOW_PROJECT_GROUP) < 0)
		v->outstanding--;
	free(cmd_topic);
	step_done(v);
}

/* After the loads: every account's publication flags, then :event. */
static void start_events(void *arg)
{
	struct verify *v = arg;

	v->phase = 2;
	v->outstanding = 1;
	for (size_t i = 0; i < v->nacct; i++)
		v->acct[i].published = calloc(v->acct[i].n + 1, 1);
	snprintf(v->last_id, sizeof(v->last_id), "-");
	if (agr_redis_new(agr_worker_current(), &v->ro, &v->r) < 0) {
		failf(v, "no client");
		atomic_store(&v->done, true);
		return;
	}
	read_events(v);
}

static int read_expect(struct verify *v, const char *path)
{
	FILE *f = fopen(path, "r");
	struct account a;
	size_t cap = 0;

	if (!f) {
		perror(path);
		return -1;
	}
	memset(&a, 0, sizeof(a));
	while (fscanf(f, "%31s %lu %lld", a.id, &a.n, &a.sum) == 3) {
		if (v->nacct == cap) {
			cap = cap ? 2 * cap : 1024;
			v->acct = realloc(v->acct, cap * sizeof(*v->acct));
			if (!v->acct)
				abort();
		}
		v->acct[v->nacct++] = a;
	}
	fclose(f);
	return 0;
}

static void wait_done(struct verify *v)
{
	while (!atomic_load(&v->done))
		wow_wait_signal(&v->done);
}

int main(int argc, char **argv)
{
	struct verify v = { .last_id = "-" };
	struct wow_redis_opts ro = { 0 };
	agr_named_aggregate na = { WOW_CONTEXT, "verify" };
	const char *expect = NULL;
	agr_supplier *sup;
	agr_scheduler *sched;
	int opt;

	while ((opt = getopt(argc, argv, "h:p:ce:s")) != -1) {
		if (wow_redis_opt(&ro, opt, optarg))
			continue;
		if (opt == 'e')
			expect = optarg;
		else if (opt == 's')
			v.strict_order = true;
		else
			return 2;
	}
	if (!expect || read_expect(&v, expect) < 0)
		return 2;
	wow_block_signals();
	wow_redis_options(&ro, "wow_verify", &v.ro);
	if (agr_wow_topic(wow_named(), AGR_WOW_TOPIC_EVENT, &v.event_topic,
			  NULL) < 0 ||
	    agr_supplier_new("wowverify", 1, &sup) < 0 ||
	    agr_supplier_get_or_init(sup, &na, &sched) < 0 ||
	    agr_scheduler_schedule(sched, 0, start, &v) < 0)
		return 1;
	wait_done(&v);
	atomic_store(&v.done, false);
	if (agr_scheduler_schedule(sched, 0, start_events, &v) < 0)
		return 1;
	wait_done(&v);
	agr_supplier_stop_gracefully(sup, 10000000000ull);
	agr_supplier_free(sup);
	for (size_t i = 0; i < v.nacct; i++)
		free(v.acct[i].published);
	for (size_t i = 0; i < v.nreq; i++)
		free(v.req[i]);
	free(v.acct);
	free(v.req);
	free(v.event_topic);
	return v.failures ? 1 : 0;
}
