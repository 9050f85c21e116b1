/* SPDX-License-Identifier: MIT */
/*
 * wow_bus_state.h - the bus consumer's state, which its files share:
 * wow_bus_consumer.c (reads, setup, recovery, acks, and the end of a
 * stop), wow_bus_life.c (creation, start, and the stop's first steps),
 * which calls the first and never the other way round, and
 * wow_bus_message.c (what a handler reads of a message). Every function
 * here runs on the consumer's worker, but agr__wowbus_init_parts()
 * (before start).
 */
#ifndef AGGRING_REDIS_WOW_BUS_STATE_H
#define AGGRING_REDIS_WOW_BUS_STATE_H

#include "wow_bus_internal.h"

#include <pthread.h>
#include <stdatomic.h>

#include <aggring/dispatcher.h>
#include <aggring/wow_codec.h>

#define MAX_TOPICS 8

struct wow_entry {
	agr_message msg; /* first: the dispatcher's message is the entry */
	struct wow_entry *next; /* ack stack, then ack batch */
	struct wow_entry *held_prev, *held_next; /* on the worker */
	agr_wow_bus *bus;
	unsigned topic;
	agr_wow_decoded d;
	bool no_ack; /* discarded unhandled: left pending */
	char *json;
	char id[]; /* the entry id, NUL, the msg JSON, NUL */
};

/* The id of an undecodable entry of ours: it stays pending, unclaimed. */
struct kept_id {
	struct kept_id *next;
	char id[];
};

struct reader {
	agr_wow_bus *bus;
	unsigned index;
	agr_redis *r;
	bool reading;	/* an XREADGROUP is out */
	bool waiting;	/* a retry timer is armed */
	bool group_ok;
	bool closed;
};

/* A timer's argument: which job it runs when it fires. */
struct timer {
	agr_wow_bus *bus;
	void (*fire)(agr_wow_bus *b, unsigned index);
	unsigned index;
	bool armed;
};

enum phase { P_NEW, P_SETUP, P_RUNNING, P_STOPPING, P_STOPPED };

struct agr_wow_bus {
	/* Options, copied. */
	agr_redis_options redis; /* its strings: the copies below */
	char *host, *name, *username, *password;
	agr_scheduler *sched;
	unsigned hint;
	agr_dispatcher *disp;
	char *topics[MAX_TOPICS];
	unsigned ntopics;
	char *group, *consumer;
	unsigned block_ms, count, max_in_flight, batch;
	bool recovery;
	uint64_t min_idle_ms, interval_ms;
	agr_wow_decode_fn decode;
	void *decode_arg;

	/* On the worker. */
	agr_worker *w;
	agr_redis *ctl;
	struct reader readers[MAX_TOPICS];
	struct agr__wowbus_lease leases[MAX_TOPICS];
	struct timer retry[MAX_TOPICS], sweep_timer[MAX_TOPICS], heartbeat;
	struct timer ack_timer;
	struct ack_batch *ack_retry; /* XACKs that failed, to send again */
	bool sweeping[MAX_TOPICS];
	struct wow_entry *held[MAX_TOPICS]; /* in flight, per topic */
	struct kept_id *kept[MAX_TOPICS];
	unsigned nkept[MAX_TOPICS];
	unsigned groups_made, timers, closing, releasing, acks_out;
	unsigned long in_flight;

	/* Shared. */
	_Atomic(struct wow_entry *) acks;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum phase phase; /* written under lock, on the worker once started */
	bool ready;	  /* under lock */
	int setup_err;	  /* under lock */
	_Atomic uint64_t st_read, st_dispatched, st_acked, st_undecodable,
		st_not_admitted, st_claimed, st_sweeps, st_redis_errors,
		st_in_flight;
};

/* Creates the consumer group of topic `index` (XGROUP CREATE), then of
 * the next; the last one made starts the reads. */
void agr__wowbus_create_group(agr_wow_bus *b, unsigned index);
/* Frees an entry that was never handed to the dispatcher or is done. */
void agr__wowbus_entry_free(struct wow_entry *en);
/* Setup's outcome (0 or a negative errno) for agr_wow_bus_wait_ready(). */
void agr__wowbus_set_ready(agr_wow_bus *b, int err);
/* Ends a stop once its clients are closed and its sweeps and timers are
 * done. */
void agr__wowbus_try_finish_stop(agr_wow_bus *b);
/* Sets the phase and tells whoever waits for it (under the lock). */
void agr__wowbus_set_phase(agr_wow_bus *b, enum phase p);
/* The leases, readers and timers of a new bus: 0 or a negative errno. */
int agr__wowbus_init_parts(agr_wow_bus *b);

#endif
