/* SPDX-License-Identifier: MIT */
/*
 * wow_processor_internal.h - what the command processor's files share
 * (aggring/wow_processor.h); not installed.
 */
#ifndef AGGRING_WOW_PROCESSOR_INTERNAL_H
#define AGGRING_WOW_PROCESSOR_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aggring/wow_processor.h>

#define AGR__WOW_MAX_EVENTS 64
#define AGR__WOW_MAX_HEADERS 32

struct agr_wow_outcome {
	agr_wow_event events[AGR__WOW_MAX_EVENTS];
	size_t event_count;
	char *state;
	size_t state_len;
	bool has_state;
	bool deleted;
	char *error_code;
	char *error_msg;
};

void agr__wow_outcome_reset(agr_wow_outcome *o);

/* Headers the processor writes on its events (owned copies). */
struct agr__wow_headers {
	agr_wow_header owned[AGR__WOW_MAX_HEADERS];
	size_t count;
};

int agr__wow_headers_propagate(const agr_wow_command *c,
			       struct agr__wow_headers *h);
void agr__wow_headers_free(struct agr__wow_headers *h);

bool agr__wow_is_local_first_copy(const agr_wow_command *c);
int agr__wow_precondition(const agr_wow_command *c,
			  const agr_wow_aggregate_state *st, const char **code);

/* ---- wait notifications over HTTP (wow_wait_notify.c) ---- */
struct agr__wow_notify;

/* A worker's notifications in flight, so that a close can cancel them. */
struct agr__wow_notify_list {
	struct agr__wow_notify *head;
	_Atomic uint64_t *ok;	  /* counters to bump */
	_Atomic uint64_t *failed;
	uint64_t timeout_ns;
	bool closing; /* cancel_all ran: no more retries */
};

/*
 * POSTs `json` (taken over, freed here) to http `endpoint` from worker
 * `w`, fire and forget: up to 3 retries, 2 s apart then doubling.
 * Returns 0, or a negative errno (logged; json freed).
 */
int agr__wow_notify_post(agr_worker *w, struct agr__wow_notify_list *l,
			 const char *endpoint, char *json, size_t len);
/* Cancels every notification of `l` (on its worker). */
void agr__wow_notify_cancel_all(agr_worker *w, struct agr__wow_notify_list *l);
/* Frees what is left once the worker's loop has ended (no I/O). */
void agr__wow_notify_free_all(struct agr__wow_notify_list *l);
/* Parses "http://host[:port]/path": 0 or -EINVAL / -EAFNOSUPPORT. */
int agr__wow_http_url(const char *url, void *sockaddr_storage,
		      unsigned *addrlen, char *hostport, size_t hplen,
		      const char **path);

#endif
