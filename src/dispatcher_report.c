/* SPDX-License-Identifier: MIT */
/*
 * dispatcher_report.c - the log lines that name what holds a
 * dispatcher: the groups a stop waits for, and the watchdog's look at
 * messages pending too long.
 */
#include "dispatcher.h"

#include <stdio.h>
#include <string.h>

#define REPORT_GROUPS 8 /* groups named per report */

/*
 * One group that holds a stop. The type is read from the message,
 * which its group holds while it is reported: a report races only with
 * the message's completion at that very moment.
 */
static void report_group(struct agr_dispatcher *d, struct group *g,
			 const char *what, uint64_t waited_ns)
{
	struct agr_exchange *ex =
		atomic_load_explicit(&g->current, memory_order_acquire);
	uint64_t since = atomic_load_explicit(&g->pending_since,
					      memory_order_relaxed);
	uint64_t now = agr__now_ns();
	unsigned worker = (unsigned)agr_worker_index(g->worker);
	int inflight = agr__worker_inflight(g->worker);
	char tb[TYPE_PHRASE_LEN];
	const char *type = ex ? type_phrase(message_of(ex)->type, tb,
					    sizeof(tb)) : NULL;

	if (!ex)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) has work its worker "
			 "has not run yet; the worker has %d ring "
			 "operation(s) in flight (one torn down by a force "
			 "stop names what it waits for)", d->name, what,
			 g->index, worker, inflight);
	else if (since && now > since && inflight > 0)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) holds a message of "
			 "%s, pending for %.1f s: a function returned "
			 "AGR_PENDING, and its worker has %d ring "
			 "operation(s) in flight that may be its own I/O, "
			 "still running", d->name, what, g->index, worker,
			 type, (double)(now - since) / 1e9, inflight);
	else if (since && now > since)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) holds a message of "
			 "%s, pending for %.1f s: a function returned "
			 "AGR_PENDING and has not called agr_exchange_done(), "
			 "and its worker has no I/O in flight", d->name, what,
			 g->index, worker, type, (double)(now - since) / 1e9);
	else
		agr__log(AGR_LOG_WARN,
			 "%s: %s: group %u (worker %u) runs a function for a "
			 "message of %s, for %.1f s or more (blocked in a "
			 "call?)", d->name, what, g->index, worker, type,
			 (double)waited_ns / 1e9);
}

/*
 * The pending message of g as the watchdog sees it: its type copy and
 * since when, or false when none, or when it changed while we read.
 */
static bool read_pending(struct group *g, uint64_t *since, char *type,
			 size_t len)
{
	char text[PENDING_TYPE_WORDS * sizeof(uint64_t)];
	char phrase[TYPE_PHRASE_LEN];
	uint64_t word, again;
	size_t i;

	*since = atomic_load_explicit(&g->pending_since, memory_order_acquire);
	if (!*since)
		return false;
	for (i = 0; i < PENDING_TYPE_WORDS; i++) {
		word = atomic_load_explicit(&g->pending_type[i],
					    memory_order_acquire);
		memcpy(text + i * sizeof(word), &word, sizeof(word));
	}
	again = atomic_load_explicit(&g->pending_since, memory_order_relaxed);
	if (again != *since)
		return false;
	text[sizeof(text) - 1] = '\0';
	snprintf(type, len, "%s",
		 type_phrase(strcmp(text, NULL_TYPE_MARK) ? text : NULL,
			     phrase, sizeof(phrase)));
	return true;
}

/*
 * The watchdog's look at this dispatcher (a scheduler watch): a message
 * pending for `threshold_ns` or more is named once, and counted.
 */
void agr__dispatcher_watch_stuck(void *arg, uint64_t now,
				 uint64_t threshold_ns)
{
	struct agr_dispatcher *d = arg;
	char type[TYPE_PHRASE_LEN];
	uint64_t since;
	int i;

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		if (!read_pending(g, &since, type, sizeof(type)) ||
		    now <= since || now - since < threshold_ns ||
		    g->stuck_reported_since == since)
			continue;
		g->stuck_reported_since = since;
		atomic_fetch_add_explicit(&d->stuck_detected, 1,
					  memory_order_relaxed);
		agr__log(AGR_LOG_WARN,
			 "stuck message: %s group %u (worker %d) has held a "
			 "message of %s for %llu ms: a function "
			 "returned AGR_PENDING and has not called "
			 "agr_exchange_done()", d->name, g->index,
			 agr_worker_index(g->worker), type,
			 (unsigned long long)((now - since) / 1000000u));
	}
}

/* Logs every group (up to REPORT_GROUPS) that keeps us from idle. */
void agr__dispatcher_report_holders(struct agr_dispatcher *d,
				    const char *what, uint64_t waited_ns)
{
	int i, held = 0, sweeps = atomic_load(&d->sweeps_pending);

	for (i = 0; i < d->parallelism; i++) {
		struct group *g = &d->groups[i];

		if (atomic_load(&g->state) == G_IDLE &&
		    !atomic_load(&g->current))
			continue;
		if (held++ < REPORT_GROUPS)
			report_group(d, g, what, waited_ns);
	}
	if (held > REPORT_GROUPS)
		agr__log(AGR_LOG_WARN, "%s: %s: and %d more groups", d->name,
			 what, held - REPORT_GROUPS);
	if (sweeps > 0)
		agr__log(AGR_LOG_WARN,
			 "%s: %s: the force stop has yet to visit %d "
			 "worker(s) (blocked in a call?)", d->name, what,
			 sweeps);
}
