/* SPDX-License-Identifier: MIT */
/*
 * wow_project - a projection of bank.Account's domain events: consumes
 * bank.Account:event in its own group (bank.wow_project: not the JVM
 * projection's bank.ProjectionDispatcher, whose entries it would split), and
 * keeps each account's balance and version, written to the Redis hash
 * "wow_project:{bank.Account}:balances" as "<version> <balance>".
 *
 * Delivery is at least once and, after a crash upstream, not always in
 * version order; so the projection applies version v only after v - 1:
 * an older or repeated version is skipped, and a newer one jumps to the
 * balance its event carries (counted as a gap, which the late events
 * then fill as duplicates).
 *
 *   wow_project [-h host] [-p port] [-c] [-g group] [-n consumer]
 *               [-w workers] [-m min-idle-ms] [-i interval-ms]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/wow_bus.h>

#include "wow_accounts.h"
#include "wow_common.h"

#define STOP_NS (30ull * 1000000000ull)
#define READ_MODEL "wow_project:{bank.Account}:balances"

struct projector {
	struct wow_workers ws;
	_Atomic uint64_t applied, duplicates, gaps, mismatches, failed;
};

struct write {
	agr_exchange *ex;
	struct projector *pj;
	char value[48];
	const char *id;
	unsigned tries;
};

static void write_model(struct write *w);

static void on_written(agr_redis *r, const struct redisReply *reply, int err,
		       void *arg)
{
	struct write *w = arg;
	agr_exchange *ex = w->ex;

	(void)r;
	(void)reply;
	if (err && err != -ECANCELED && ++w->tries < 1000) {
		write_model(w); /* the node may be restarting: again */
		return;
	}
	if (err)
		atomic_fetch_add(&w->pj->failed, 1);
	free(w);
	agr_exchange_done(ex, err == -ECANCELED ? AGR_DISCARDED : err);
}

static void write_model(struct write *w)
{
	struct wow_worker_state *st =
		wow_worker_state(&w->pj->ws, agr_exchange_worker(w->ex));
	int ret = agr_redis_command(st->redis, READ_MODEL, on_written, w,
				    "HSET %s %s %s", READ_MODEL, w->id,
				    w->value);

	if (ret < 0) {
		agr_exchange *ex = w->ex;

		free(w);
		agr_exchange_done(ex, ret);
	}
}

/* Applies stream s to acct; returns false when nothing changed. */
static bool apply(struct projector *pj, struct wow_account *acct,
		  const agr_wow_event_stream *s)
{
	int64_t amount, balance;

	if (s->version <= acct->version) {
		atomic_fetch_add(&pj->duplicates, 1);
		return false;
	}
	if (wow_deposited_parse(s->events[s->event_count - 1].body, &amount,
				&balance) < 0)
		return false;
	if (s->version == acct->version + 1) {
		acct->balance += amount;
		if (acct->balance != balance)
			atomic_fetch_add(&pj->mismatches, 1);
	} else {
		atomic_fetch_add(&pj->gaps, 1);
		acct->balance = balance;
	}
	acct->version = s->version;
	atomic_fetch_add(&pj->applied, 1);
	return true;
}

static int on_event(agr_exchange *ex, void *arg)
{
	struct projector *pj = arg;
	agr_message *m = agr_exchange_message(ex);
	const agr_wow_event_stream *s = agr_wow_message_value(m);
	struct wow_worker_state *st =
		wow_worker_state(&pj->ws, agr_exchange_worker(ex));
	struct wow_account *acct = wow_accounts_get(st->user, s->aggregate_id);
	struct write *w;

	if (!acct)
		return -ENOMEM;
	if (!apply(pj, acct, s))
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ex = ex;
	w->pj = pj;
	w->id = acct->id;
	snprintf(w->value, sizeof(w->value), "%d %lld", acct->version,
		 (long long)acct->balance);
	write_model(w);
	return AGR_PENDING;
}

static void *accounts_new(void)
{
	return wow_accounts_new();
}

struct project_args {
	struct wow_redis_opts ro;
	const char *group, *consumer;
	unsigned min_idle, interval;
	int workers;
};

/* The command line into *a; exits with 2 on a bad one. */
static void parse_args(int argc, char **argv, struct project_args *a)
{
	int opt;

	*a = (struct project_args){
		.group = WOW_PROJECT_GROUP, .workers = 1
	};
	while ((opt = getopt(argc, argv, "h:p:cg:n:w:m:i:")) != -1) {
		if (wow_redis_opt(&a->ro, opt, optarg))
			continue;
		switch (opt) {
		case 'g': a->group = optarg; break;
		case 'n': a->consumer = optarg; break;
		case 'w': a->workers = atoi(optarg); break;
		case 'm': a->min_idle = (unsigned)atoi(optarg); break;
		case 'i': a->interval = (unsigned)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: wow_project [-h host] [-p port] "
				"[-c] [-g group] [-n consumer] [-w workers] "
				"[-m min-idle-ms] [-i interval-ms]\n");
			exit(2);
		}
	}
	if (a->workers < 1)
		exit(2);
}

/* The workers and the dispatcher of on_event, started. */
static int start_projector(struct projector *pj, int workers,
			   agr_scheduler **sched, agr_dispatcher **disp)
{
	agr_named_aggregate na = { WOW_CONTEXT, WOW_AGGREGATE };
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_dispatcher_options d = AGR_DISPATCHER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	int ret;

	pj->ws.n = workers;
	pj->ws.state = calloc((size_t)workers, sizeof(*pj->ws.state));
	pj->ws.user_new = accounts_new;
	pj->ws.user_free = wow_accounts_free;
	so.parallelism = workers;
	so.worker_init = wow_workers_init;
	so.worker_exit = wow_workers_exit;
	so.hook_arg = &pj->ws;
	ret = pj->ws.state ? agr_supplier_new_opts("wowproject", &so, &sup) :
			     -ENOMEM;
	if (ret == 0)
		ret = agr_supplier_get_or_init(sup, &na, sched);
	d.name = "wowproject";
	d.named_aggregate = na;
	d.supplier = sup;
	d.owns_supplier = true;
	d.on_complete = agr_wow_bus_complete;
	if (ret == 0)
		ret = agr_dispatcher_new(&d, disp);
	if (ret == 0)
		ret = agr_dispatcher_register(*disp, NULL, on_event, pj);
	if (ret == 0)
		ret = agr_dispatcher_start(*disp);
	return ret;
}

/* The bus that feeds the dispatcher the topic's events, ready. */
static int start_bus(const struct projector *pj,
		     const struct project_args *a, agr_scheduler *sched,
		     agr_dispatcher *disp, const char **topics,
		     agr_wow_bus **bus)
{
	agr_wow_bus_options bo = AGR_WOW_BUS_OPTIONS_INIT;
	int ret;

	bo.redis = pj->ws.redis;
	bo.scheduler = sched;
	bo.dispatcher = disp;
	bo.topics = topics;
	bo.ntopics = 1;
	bo.group = a->group;
	bo.consumer = a->consumer;
	bo.min_idle_ms = a->min_idle;
	bo.recovery_interval_ms = a->interval;
	ret = agr_wow_bus_new(&bo, bus);
	if (ret == 0)
		ret = agr_wow_bus_start(*bus);
	if (ret == 0)
		ret = agr_wow_bus_wait_ready(*bus, STOP_NS);
	return ret;
}

static void print_stopped(struct projector *pj)
{
	printf("stopped applied %llu duplicates %llu gaps %llu mismatches %llu "
	       "failed %llu\n", (unsigned long long)atomic_load(&pj->applied),
	       (unsigned long long)atomic_load(&pj->duplicates),
	       (unsigned long long)atomic_load(&pj->gaps),
	       (unsigned long long)atomic_load(&pj->mismatches),
	       (unsigned long long)atomic_load(&pj->failed));
}

int main(int argc, char **argv)
{
	struct projector pj = { 0 };
	struct project_args a;
	agr_scheduler *sched = NULL;
	agr_dispatcher *disp = NULL;
	agr_wow_bus *bus = NULL;
	const char *topics[1];
	char *topic;
	int ret;

	parse_args(argc, argv, &a);
	wow_block_signals();
	if (agr_wow_topic(wow_named(), AGR_WOW_TOPIC_EVENT, &topic, NULL) < 0)
		return 1;
	topics[0] = topic;
	wow_redis_options(&a.ro, "wow_project", &pj.ws.redis);
	ret = start_projector(&pj, a.workers, &sched, &disp);
	if (ret == 0)
		ret = start_bus(&pj, &a, sched, disp, topics, &bus);
	if (ret < 0) {
		fprintf(stderr, "wow_project: %s\n", strerror(-ret));
		return 1;
	}
	printf("ready consumer %s group %s topic %s\n",
	       agr_wow_bus_consumer_name(bus), a.group, topic);
	fflush(stdout);
	wow_wait_signal(NULL);
	ret = agr_wow_bus_stop(bus, STOP_NS);
	agr_wow_bus_free(bus);
	wow_workers_close(&pj.ws, sched, STOP_NS);
	if (agr_dispatcher_stop_gracefully(disp, STOP_NS) < 0)
		agr_dispatcher_force_stop(disp);
	agr_dispatcher_free(disp);
	print_stopped(&pj);
	free(pj.ws.state);
	free(topic);
	return ret < 0 ? 1 : 0;
}
