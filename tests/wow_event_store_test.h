/* SPDX-License-Identifier: MIT */
/*
 * wow_event_store_test.h - what the files of check_wow_event_store
 * share: the event store's environment and the steps run on its worker
 * (wow_event_store_steps.c).
 */
#ifndef TESTS_WOW_EVENT_STORE_TEST_H
#define TESTS_WOW_EVENT_STORE_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include <aggring.h>
#include <aggring/redis.h>

#include "testutil.h"

/* A plain server, and a one-node cluster that owns every slot. */
struct server {
	pid_t pid;
	int port;
	bool cluster;
	char dir[64];
};

struct env {
	agr_supplier *sup;
	agr_scheduler *sched;
	agr_redis *redis;
	agr_wow_event_store *es;
	redisContext *sync;
};

struct step {
	void (*fn)(struct step *);
	struct tu_latch done;
	int status;		/* what the call or its callback said */
	int value;
	/* inputs */
	const char *id;
	const char *tenant;
	const char *request;
	int32_t version;
	int32_t head, tail;
	const char *json;
	/* outputs of a load */
	size_t count;
	int32_t versions[8];
	char request_ids[8][32];
	char event_names[8][32];
	char snapshot[1024];
	/* a scan */
	const char *after;
	int limit;
	char ids[8][32];
	char tenants[8][32];
};

extern const agr_wow_named bank;
/* The redis-server of the test case running (check_wow_event_store.c). */
extern struct server *server;
/* The event store under test and what it runs on. */
extern struct env E;
/* Runs fn(s) on the store's worker and waits for it to finish s. */
void run(struct step *s, void (*fn)(struct step *));
void finish(struct step *s, int status);
void open_step(struct step *s);
void ping_step(struct step *s);
void close_step(struct step *s);
void value_cb(agr_wow_event_store *es, int value, void *arg);
/* One stream of one event, "Deposited" with the version in its body. */
void append_step(struct step *s);
void load_step(struct step *s);
void last_step(struct step *s);
void exists_step(struct step *s);
void save_step(struct step *s);
void snapshot_load_step(struct step *s);
void scan_step(struct step *s);

#endif /* TESTS_WOW_EVENT_STORE_TEST_H */
