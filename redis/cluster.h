/* SPDX-License-Identifier: MIT */
/*
 * cluster.h - a Redis Cluster's slot map: its masters, and which one
 * serves each of the 16384 slots. Read from a CLUSTER SHARDS or CLUSTER
 * SLOTS reply and patched by MOVED redirections. The map knows nothing
 * of connections: each node carries one opaque pointer for its owner.
 */
#ifndef AGGRING_REDIS_CLUSTER_H
#define AGGRING_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

struct redisReply;
struct agr__redis_map;
struct agr__redis_node;

int agr__redis_map_new(struct agr__redis_map **out);
/* drop(node's user pointer) for every node that has one. */
void agr__redis_map_free(struct agr__redis_map *m, void (*drop)(void *user));

/* The node host:port, added if new; NULL on -ENOMEM. */
struct agr__redis_node *agr__redis_map_node(struct agr__redis_map *m,
					    const char *host, int port);
/* The master of `slot`, or NULL when none serves it. */
struct agr__redis_node *agr__redis_map_slot(const struct agr__redis_map *m,
					    unsigned slot);
void agr__redis_map_set_slot(struct agr__redis_map *m, unsigned slot,
			     struct agr__redis_node *n);
size_t agr__redis_map_count(const struct agr__redis_map *m);
struct agr__redis_node *agr__redis_map_at(const struct agr__redis_map *m,
					  size_t i);
/* Slots served by some node. */
unsigned agr__redis_map_covered(const struct agr__redis_map *m);

/*
 * Replaces the slot assignment with a CLUSTER SHARDS (shards true) or
 * CLUSTER SLOTS reply from `asked_host` (the address of a node that
 * announces none); nodes are added, none removed. Returns 0,
 * -EPROTO (a reply of another shape: the map is unchanged; logged) or
 * -ENOMEM.
 */
int agr__redis_map_load(struct agr__redis_map *m,
			const struct redisReply *reply, bool shards,
			const char *asked_host);

const char *agr__redis_node_host(const struct agr__redis_node *n);
int agr__redis_node_port(const struct agr__redis_node *n);
void *agr__redis_node_user(const struct agr__redis_node *n);
void agr__redis_node_set_user(struct agr__redis_node *n, void *user);

/*
 * Parses a "MOVED <slot> <host>:<port>" or "ASK ..." error. Returns
 * 1 (MOVED), 2 (ASK) or 0 (another error); host is copied into `host`.
 */
int agr__redis_parse_redirect(const char *err, size_t len, unsigned *slot,
			      char *host, size_t hostlen, int *port);

#endif /* AGGRING_REDIS_CLUSTER_H */
