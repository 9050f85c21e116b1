/* SPDX-License-Identifier: MIT */
/* wow_accounts.c - a worker's cache of accounts, and their JSON bodies. */
#include "wow_accounts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define BUCKETS 4096

struct wow_accounts {
	struct wow_account *bucket[BUCKETS];
};

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % BUCKETS;
}

struct wow_accounts *wow_accounts_new(void)
{
	return calloc(1, sizeof(struct wow_accounts));
}

void wow_accounts_free(void *accounts)
{
	struct wow_accounts *a = accounts;

	if (!a)
		return;
	for (unsigned i = 0; i < BUCKETS; i++) {
		struct wow_account *n, *next;

		for (n = a->bucket[i]; n; n = next) {
			next = n->next;
			free(n->id);
			free(n);
		}
	}
	free(a);
}

struct wow_account *wow_accounts_get(struct wow_accounts *a, const char *id)
{
	unsigned h = hash(id);
	struct wow_account *n;

	for (n = a->bucket[h]; n; n = n->next)
		if (!strcmp(n->id, id))
			return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->id = strdup(id);
	if (!n->id) {
		free(n);
		return NULL;
	}
	n->next = a->bucket[h];
	a->bucket[h] = n;
	return n;
}

void wow_accounts_each(struct wow_accounts *a,
		       void (*fn)(struct wow_account *acct, void *arg),
		       void *arg)
{
	for (unsigned i = 0; i < BUCKETS; i++)
		for (struct wow_account *n = a->bucket[i]; n; n = n->next)
			fn(n, arg);
}

static int int_field(json_object *o, const char *name, int64_t *out)
{
	json_object *v;

	if (!json_object_object_get_ex(o, name, &v) ||
	    !json_object_is_type(v, json_type_int))
		return -EBADMSG;
	*out = json_object_get_int64(v);
	return 0;
}

/*
 * json_tokener_parse()'s 32 levels are a 1 KiB calloc, large enough that
 * glibc consolidates its free lists on every command; 16 levels are half
 * that, and a body nests far less.
 */
static json_object *parse_flat(const char *body)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	json_object *o = NULL;

	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, body, -1);
	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

int wow_deposit_amount(const char *body, int64_t *amount)
{
	json_object *o = parse_flat(body);
	int ret = o ? int_field(o, "amount", amount) : -EBADMSG;

	json_object_put(o);
	return ret;
}

int wow_deposited_parse(const char *body, int64_t *amount, int64_t *balance)
{
	json_object *o = parse_flat(body);
	int ret = o ? int_field(o, "amount", amount) : -EBADMSG;

	if (ret == 0)
		ret = int_field(o, "balance", balance);
	json_object_put(o);
	return ret;
}
