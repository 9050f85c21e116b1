/* SPDX-License-Identifier: MIT */
/*
 * wow_ledger - bank.Account as a Wow command processor on Redis:
 * consumes bank.Account:command in a consumer group (shared by every
 * instance, and by JVM instances), and runs the account logic
 * (wow_ledger_handler.c) under Wow's rules (aggring/wow_processor.h):
 * each Deposit's event is appended to Wow's event store and published
 * on bank.Account:event, its state event on bank.Account:state. Run one instance or several against one Redis
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
#include <aggring/wow_processor.h>

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

/*
 * Wow's rules around the account logic, with what the scale-out test
 * needs beyond Wow's defaults: retries that outlast a master restarting
 * (about 30 s of them), a stored stream published again on a
 * duplicate request, so that a crash between the append and the
 * publication loses no event, and a Deposit that loses the race to
 * create an account (two instances, one new account) retried instead of
 * failed with DuplicateAggregateId; and the cached state trusted (a
 * Deposit has no precondition the cache could get wrong: the append's
 * version check catches another instance's versions).
 */
static void processor_options(const struct settings *s,
			      agr_wow_processor_options *po)
{
	po->named = *wow_named();
	wow_redis_options(&s->redis, "wow_ledger", &po->redis);
	po->workers = (unsigned)s->workers;
	po->on_command = wow_account_on_command;
	po->on_sourcing = wow_account_on_sourcing;
	po->max_retries = 40;
	po->min_backoff_ms = 20;
	po->max_backoff_ms = 1000;
	po->republish_duplicate = true;
	po->retry_create_conflict = true;
	po->trust_cache = true;
}

static void print_stats(agr_wow_bus *bus, agr_wow_processor *proc)
{
	agr_wow_bus_stats st;
	agr_wow_processor_stats ps;

	agr_wow_bus_stats_get(bus, &st);
	agr_wow_processor_stats_get(proc, &ps);
	printf("stopped read %llu acked %llu claimed %llu undecodable %llu "
	       "applied %llu duplicates %llu conflicts %llu failed %llu "
	       "local_first %llu void %llu\n", (unsigned long long)st.read,
	       (unsigned long long)st.acked, (unsigned long long)st.claimed,
	       (unsigned long long)st.undecodable,
	       (unsigned long long)ps.processed,
	       (unsigned long long)ps.republished,
	       (unsigned long long)ps.conflicts,
	       (unsigned long long)ps.failed,
	       (unsigned long long)ps.local_first,
	       (unsigned long long)ps.void_dropped);
}

/*
 * The dispatcher does not own the workers: a forced stop of it leaves
 * them to the consumer, which closes its clients there, and to the
 * processor's close.
 */
static int start_dispatcher(const struct settings *s, agr_wow_processor *proc,
			    agr_supplier **supp, agr_scheduler **sched,
			    agr_dispatcher **disp)
{
	agr_named_aggregate na = { WOW_CONTEXT, WOW_AGGREGATE };
	agr_supplier_options so = AGR_SUPPLIER_OPTIONS_INIT;
	agr_dispatcher_options d = AGR_DISPATCHER_OPTIONS_INIT;
	agr_supplier *sup = NULL;
	int ret;

	so.parallelism = s->workers;
	so.worker_init = agr_wow_processor_worker_init;
	so.worker_exit = agr_wow_processor_worker_exit;
	so.hook_arg = proc;
	ret = agr_supplier_new_opts("wowledger", &so, &sup);
	*supp = sup;
	if (ret == 0)
		ret = agr_supplier_get_or_init(sup, &na, sched);
	if (ret < 0)
		return ret;
	d.name = "wowledger";
	d.named_aggregate = na;
	d.supplier = sup;
	d.on_complete = agr_wow_bus_complete;
	ret = agr_dispatcher_new(&d, disp);
	if (ret < 0)
		return ret;
	ret = agr_dispatcher_register(*disp, NULL, agr_wow_processor_handle,
				      proc);
	return ret == 0 ? agr_dispatcher_start(*disp) : ret;
}

static int start_bus(const struct settings *s, agr_scheduler *sched,
		     agr_dispatcher *disp, const char **topics,
		     agr_wow_bus **bus)
{
	agr_wow_bus_options bo = AGR_WOW_BUS_OPTIONS_INIT;
	int ret;

	wow_redis_options(&s->redis, "wow_ledger", &bo.redis);
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
	ret = agr_wow_bus_new(&bo, bus);
	if (ret == 0)
		ret = agr_wow_bus_start(*bus);
	if (ret == 0)
		ret = agr_wow_bus_wait_ready(*bus, STOP_NS);
	return ret;
}

/*
 * The stop always ends: the consumer's shutdown forces the dispatcher
 * if messages are still in flight after STOP_NS, then the clients
 * close and the workers stop.
 */
static int stop_all(agr_wow_bus *bus, agr_wow_processor *proc,
		    agr_supplier *sup, agr_scheduler *sched,
		    agr_dispatcher *disp)
{
	int ret = agr_wow_bus_shutdown(bus, STOP_NS);

	if (ret == -ECANCELED)
		fprintf(stderr, "wow_ledger: messages still in flight after "
			"%llu s; forced (their entries stay pending)\n",
			STOP_NS / 1000000000ull);
	print_stats(bus, proc);
	agr_wow_bus_free(bus);
	agr_wow_processor_close(proc, sched, STOP_NS);
	if (agr_dispatcher_stop_gracefully(disp, STOP_NS) < 0)
		agr_dispatcher_force_stop(disp);
	agr_dispatcher_free(disp);
	if (agr_supplier_stop_gracefully(sup, STOP_NS) < 0)
		agr_supplier_force_stop(sup);
	agr_supplier_free(sup);
	return ret == 0 || ret == -ECANCELED ? 0 : ret;
}

static int run(const struct settings *s, const char *command_topic)
{
	agr_wow_processor_options po = AGR_WOW_PROCESSOR_OPTIONS_INIT;
	const char *topics[1] = { command_topic };
	agr_wow_processor *proc = NULL;
	agr_supplier *sup = NULL;
	agr_scheduler *sched = NULL;
	agr_dispatcher *disp = NULL;
	agr_wow_bus *bus = NULL;
	int ret;

	processor_options(s, &po);
	ret = agr_wow_processor_new(&po, &proc);
	if (ret == 0)
		ret = start_dispatcher(s, proc, &sup, &sched, &disp);
	if (ret < 0) {
		fprintf(stderr, "wow_ledger: dispatcher: %s\n", strerror(-ret));
		return 1;
	}
	ret = start_bus(s, sched, disp, topics, &bus);
	if (ret < 0) {
		fprintf(stderr, "wow_ledger: bus: %s\n", strerror(-ret));
		return 1;
	}
	printf("ready consumer %s group %s topic %s\n",
	       agr_wow_bus_consumer_name(bus), s->group, command_topic);
	fflush(stdout);
	wow_wait_signal(NULL);
	ret = stop_all(bus, proc, sup, sched, disp);
	agr_wow_processor_free(proc);
	return ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct settings s = { .group = WOW_CONTEXT ".CommandDispatcher",
			      .workers = 2 };
	char *command_topic;
	int rc;

	parse(argc, argv, &s);
	wow_block_signals();
	if (agr_wow_topic(wow_named(), AGR_WOW_TOPIC_COMMAND, &command_topic,
			  NULL) < 0)
		return 1;
	rc = run(&s, command_topic);
	free(command_topic);
	return rc;
}
