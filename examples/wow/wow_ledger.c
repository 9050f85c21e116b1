/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger - bank.Account as a Wow command handler on Redis: consumes
 * bank.Account:command in a consumer group (shared by every instance),
 * appends each Deposit's event to Wow's event store, publishes it on
 * bank.Account:event. Run one instance or several against one Redis
 * (or Redis Cluster with -c); SIGINT or SIGTERM stops it gracefully.
 *
 *   wow_ledger [-h host] [-p port] [-c] [-g group] [-n consumer]
 *              [-w workers] [-m min-idle-ms] [-i interval-ms]
 *              [-f max-in-flight] [-k count]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aggring/wow_bus.h>
#include <aggring/wow_event_store.h>

#include "wow_accounts.h"
#include "wow_common.h"
#include "wow_ledger_handler.h"

#define STOP_NS (30ull * 1000000000ull)

struct settings {
	struct wow_redis_opts redis;
	const char *group, *consumer;
	int workers;
	unsigned min_idle_ms, interval_ms, max_in_flight, count;
};

__attribute__((noreturn)) static void usage(void)
{
	fprintf(stderr, "usage: wow_ledger [-h host] [-p port] [-c] [-g group] "
		"[-n consumer] [-w workers] [-m min-idle-ms] [-i interval-ms] "
		"[-f max-in-flight] [-k count]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct settings *s)
{
	int opt;

	while ((opt = getopt(argc, argv, "h:p:cg:n:w:m:i:f:k:")) != -1) {
		if (wow_redis_opt(&s->redis, opt, optarg))
			continue;
		switch (opt) {
		case 'g': s->group = optarg; break;
		case 'n': s->consumer = optarg; break;
		case 'w': s->workers = atoi(optarg); break;
		case 'm': s->min_idle_ms = (unsigned)atoi(optarg); break;
		case 'i': s->interval_ms = (unsigned)atoi(optarg); break;
		case 'f': s->max_in_flight = (unsigned)atoi(optarg); break;
		case 'k': s->count = (unsigned)atoi(optarg); break;
		default: usage();
		}
	}
	if (s->workers < 1)
		usage();
}

static int run(const struct settings *s, struct wow_workers *ws,
	       struct wow_ledger *ledger, const char *command_topic)
{
	agr_named_aggregate na = { WOW_CONTEXT, WOW_AGGREGATE };
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_dispatcher_options d = { 0 };
	agr_wow_bus_options bo = AGR_WOW_BUS_OPTIONS_INIT;
	const char *topics[1] = { command_topic };
	agr_supplier *sup = NULL;
	agr_scheduler *sched = NULL;
	agr_dispatcher *disp = NULL;
	agr_wow_bus *bus = NULL;
	agr_wow_bus_stats st;
	int ret;

	so.parallelism = s->workers;
	so.worker_init = wow_workers_init;
	so.worker_exit = wow_workers_exit;
	so.hook_arg = ws;
	ret = agr_supplier_new_opts("wowledger", &so, &sup);
	if (ret == 0)
		ret = agr_supplier_get_or_init(sup, &na, &sched);
	if (ret < 0) {
		fprintf(stderr, "wow_ledger: workers: %s\n", strerror(-ret));
		return 1;
	}
	d.name = "wowledger";
	d.named_aggregate = na;
	d.supplier = sup;
	d.owns_supplier = true;
	d.on_complete = agr_wow_bus_complete;
	ret = agr_dispatcher_new(&d, &disp);
	if (ret == 0)
		ret = agr_dispatcher_register(disp, WOW_DEPOSIT,
					      wow_ledger_deposit, ledger);
	if (ret == 0)
		ret = agr_dispatcher_start(disp);
	if (ret < 0) {
		fprintf(stderr, "wow_ledger: dispatcher: %s\n", strerror(-ret));
		return 1;
	}
	bo.redis = ws->redis;
	bo.scheduler = sched;
	bo.dispatcher = disp;
	bo.topics = topics;
	bo.ntopics = 1;
	bo.group = s->group;
	bo.consumer = s->consumer;
	bo.min_idle_ms = s->min_idle_ms;
	bo.recovery_interval_ms = s->interval_ms;
	bo.max_in_flight = s->max_in_flight;
	bo.count = s->count;
	ret = agr_wow_bus_new(&bo, &bus);
	if (ret == 0)
		ret = agr_wow_bus_start(bus);
	if (ret == 0)
		ret = agr_wow_bus_wait_ready(bus, STOP_NS);
	if (ret < 0) {
		fprintf(stderr, "wow_ledger: bus: %s\n", strerror(-ret));
		return 1;
	}
	printf("ready consumer %s group %s topic %s\n",
	       agr_wow_bus_consumer_name(bus), s->group, command_topic);
	fflush(stdout);
	wow_wait_signal(NULL);
	ret = agr_wow_bus_stop(bus, STOP_NS);
	agr_wow_bus_stats_get(bus, &st);
	agr_wow_bus_free(bus);
	wow_workers_close(ws, sched, STOP_NS);
	if (agr_dispatcher_stop_gracefully(disp, STOP_NS) < 0)
		agr_dispatcher_force_stop(disp);
	agr_dispatcher_free(disp);
	printf("stopped read %llu acked %llu claimed %llu undecodable %llu "
	       "applied %llu duplicates %llu conflicts %llu retries %llu "
	       "failed %llu\n", (unsigned long long)st.read,
	       (unsigned long long)st.acked, (unsigned long long)st.claimed,
	       (unsigned long long)st.undecodable,
	       (unsigned long long)atomic_load(&ledger->applied),
	       (unsigned long long)atomic_load(&ledger->duplicates),
	       (unsigned long long)atomic_load(&ledger->conflicts),
	       (unsigned long long)atomic_load(&ledger->retries),
	       (unsigned long long)atomic_load(&ledger->failed));
	return ret < 0 ? 1 : 0;
}

static int store_init(struct wow_worker_state *st)
{
	int ret = agr_wow_event_store_new(st->redis, wow_named(), &st->store);

	if (ret < 0)
		fprintf(stderr, "wow_ledger: event store: %s\n",
			strerror(-ret));
	return ret;
}

static void store_exit(struct wow_worker_state *st)
{
	agr_wow_event_store_free(st->store);
	st->store = NULL;
}

static void *accounts_new(void)
{
	return wow_accounts_new();
}

int main(int argc, char **argv)
{
	struct settings s = { .group = WOW_CONTEXT ".CommandDispatcher",
			      .workers = 2 };
	struct wow_workers ws = { 0 };
	struct wow_ledger ledger = { .retry_for_ms = 120000 };
	char *command_topic, *event_topic;
	int rc;

	parse(argc, argv, &s);
	wow_block_signals();
	if (agr_wow_topic(wow_named(), AGR_WOW_TOPIC_COMMAND, &command_topic,
			  NULL) < 0 ||
	    agr_wow_topic(wow_named(), AGR_WOW_TOPIC_EVENT, &event_topic,
			  NULL) < 0)
		return 1;
	wow_redis_options(&s.redis, "wow_ledger", &ws.redis);
	ws.state_init = store_init;
	ws.state_exit = store_exit;
	ws.n = s.workers;
	ws.state = calloc((size_t)s.workers, sizeof(*ws.state));
	ws.user_new = accounts_new;
	ws.user_free = wow_accounts_free;
	ledger.workers = &ws;
	ledger.event_topic = event_topic;
	rc = ws.state ? run(&s, &ws, &ledger, command_topic) : 1;
	free(ws.state);
	free(command_topic);
	free(event_topic);
	return rc;
}
