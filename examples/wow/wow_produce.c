/* SPDX-License-Identifier: MIT */
/*
 * wow_produce - sends Wow-format Deposit commands to bank.Account:command
 * (XADD ... msg <json>), each with its own command and request id, over
 * a window of XADDs in flight on one worker's client. Command i goes to
 * account <prefix>-NNNN, NNNN = (i * 7919) % accounts, with amount
 * 1 + i % 100, so a checker can recompute what each account must hold;
 * -o writes that as "account commands sum" lines. A failed XADD is sent again with the
 * same ids: if the first did land, the event store's request id check
 * keeps the effect single.
 *
 *   wow_produce [-h host] [-p port] [-c] [-a accounts] [-A prefix]
 *               [-n commands] [-r run-id] [-W window] [-o expect-file]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <aggring/wow_bus.h>

#include "wow_common.h"

#define RESEND_DELAY_NS 50000000ull /* 50 ms */

struct producer {
	struct wow_redis_opts ro;
	agr_redis_options redis;
	unsigned accounts, window;
	unsigned long commands, next, acked, resent;
	const char *run;
	const char *prefix; /* account ids: <prefix>-NNNN */
	char *topic;
	agr_redis *r;
	atomic_bool done;
	int err;
	uint64_t t0, t1;
};

struct send {
	struct producer *p;
	unsigned long i;
	char *json;
	size_t len;
};

static unsigned account_of(const struct producer *p, unsigned long i)
{
	return (unsigned)((i * 7919u) % p->accounts);
}

static long long amount_of(unsigned long i)
{
	return 1 + (long long)(i % 100);
}

static int encode(const struct producer *p, unsigned long i, char **json,
		  size_t *len)
{
	char id[64], req[64], acct[48], body[48];
	agr_wow_command c = { 0 };

	snprintf(id, sizeof(id), "cmd-%s-%lu", p->run, i);
	snprintf(req, sizeof(req), "req-%s-%lu", p->run, i);
	snprintf(acct, sizeof(acct), "%s-%04u", p->prefix, account_of(p, i));
	snprintf(body, sizeof(body), "{\"amount\":%lld}", amount_of(i));
	c.id = id;
	c.context_name = WOW_CONTEXT;
	c.aggregate_name = WOW_AGGREGATE;
	c.name = WOW_DEPOSIT;
	c.aggregate_id = acct;
	c.request_id = req;
	c.allow_create = true;
	c.body_type = WOW_DEPOSIT_TYPE;
	c.body = body;
	c.body_len = strlen(body);
	c.create_time = (int64_t)wow_now_ms();
	return agr_wow_command_encode(&c, json, len);
}

static void send_next(struct producer *p);
static void send_one(struct send *s);

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_resend_timer(int res, void *arg)
{
	(void)res;
	send_one(arg); /* the store's request id check keeps it single */
}

static void on_sent(int err, const char *entry_id, void *arg)
{
	struct send *s = arg;
	struct producer *p = s->p;

	(void)entry_id;
	if (err && err != -ECANCELED) {
		/* Same ids again, after a pause: the node may be restarting. */
		p->resent++;
		if (agr_io_timeout(agr_redis_worker(p->r), RESEND_DELAY_NS,
				   on_resend_timer, s) == 0)
			return;
	}
	if (err)
		p->err = err;
	free(s->json);
	free(s);
	p->acked++;
	if (p->acked == p->commands) {
		p->t1 = mono_ns();
		agr_redis_close(p->r, NULL, NULL);
		atomic_store(&p->done, true);
		return;
	}
	send_next(p);
}

static void send_one(struct send *s)
{
	int ret = agr_wow_publish(s->p->r, s->p->topic, s->json, s->len,
				  on_sent, s);

	if (ret < 0) {
		fprintf(stderr, "wow_produce: XADD: %s\n", strerror(-ret));
		s->p->err = ret;
		atomic_store(&s->p->done, true);
	}
}

static void send_next(struct producer *p)
{
	struct send *s;

	if (p->next >= p->commands)
		return;
	s = calloc(1, sizeof(*s));
	if (!s || encode(p, p->next, &s->json, &s->len) < 0) {
		fprintf(stderr, "wow_produce: cannot encode command %lu\n",
			p->next);
		free(s);
		p->err = -ENOMEM;
		atomic_store(&p->done, true);
		return;
	}
	s->p = p;
	s->i = p->next++;
	send_one(s);
}

static void start_task(void *arg)
{
	struct producer *p = arg;
	int ret = agr_redis_new(agr_worker_current(), &p->redis, &p->r);

	if (ret < 0) {
		fprintf(stderr, "wow_produce: client: %s\n", strerror(-ret));
		p->err = ret;
		atomic_store(&p->done, true);
		return;
	}
	p->t0 = mono_ns();
	for (unsigned k = 0; k < p->window; k++)
		send_next(p);
}

static int write_expect(const struct producer *p, const char *path)
{
	unsigned long *n = calloc(p->accounts, sizeof(*n));
	long long *sum = calloc(p->accounts, sizeof(*sum));
	FILE *f = fopen(path, "w");

	if (!n || !sum || !f) {
		perror(path);
		free(n);
		free(sum);
		if (f)
			fclose(f);
		return -1;
	}
	for (unsigned long i = 0; i < p->commands; i++) {
		n[account_of(p, i)]++;
		sum[account_of(p, i)] += amount_of(i);
	}
	for (unsigned a = 0; a < p->accounts; a++)
		if (n[a])
			fprintf(f, "%s-%04u %lu %lld\n", p->prefix, a, n[a],
				sum[a]);
	free(n);
	free(sum);
	return fclose(f);
}

int main(int argc, char **argv)
{
	struct producer p = { .accounts = 1000, .commands = 10000,
			      .window = 512, .run = "r1", .prefix = "acct" };
	agr_named_aggregate na = { WOW_CONTEXT, "producer" };
	const char *expect = NULL;
	agr_supplier *sup = NULL;
	agr_scheduler *sched = NULL;
	int opt, ret;

	while ((opt = getopt(argc, argv, "h:p:ca:A:n:r:W:o:")) != -1) {
		if (wow_redis_opt(&p.ro, opt, optarg))
			continue;
		switch (opt) {
		case 'a': p.accounts = (unsigned)atoi(optarg); break;
		case 'A': p.prefix = optarg; break;
		case 'n': p.commands = strtoul(optarg, NULL, 10); break;
		case 'r': p.run = optarg; break;
		case 'W': p.window = (unsigned)atoi(optarg); break;
		case 'o': expect = optarg; break;
		default:
			fprintf(stderr, "usage: wow_produce [-h host] [-p port] "
				"[-c] [-a accounts] [-A account-prefix] "
				"[-n commands] [-r run-id] "
				"[-W window] [-o expect-file]\n");
			return 2;
		}
	}
	if (!p.accounts || !p.commands || !p.window)
		return 2;
	if (expect && write_expect(&p, expect) < 0)
		return 1;
	wow_block_signals();
	wow_redis_options(&p.ro, "wow_produce", &p.redis);
	if (agr_wow_topic(wow_named(), AGR_WOW_TOPIC_COMMAND, &p.topic,
			  NULL) < 0)
		return 1;
	ret = agr_supplier_new("wowproduce", 1, &sup);
	if (ret == 0)
		ret = agr_supplier_get_or_init(sup, &na, &sched);
	if (ret == 0)
		ret = agr_scheduler_schedule(sched, 0, start_task, &p);
	if (ret < 0) {
		fprintf(stderr, "wow_produce: %s\n", strerror(-ret));
		return 1;
	}
	wow_wait_signal(&p.done);
	agr_supplier_stop_gracefully(sup, 10000000000ull);
	agr_supplier_free(sup);
	if (p.t1 > p.t0)
		printf("sent %lu commands in %.3f s: %.0f commands/s (%lu resent)\n",
		       p.acked, (double)(p.t1 - p.t0) / 1e9,
		       (double)p.acked * 1e9 / (double)(p.t1 - p.t0), p.resent);
	free(p.topic);
	return p.err || p.acked != p.commands ? 1 : 0;
}
