#!/bin/sh
# SPDX-License-Identifier: MIT
# redis_client.sh - runs tests/check_redis_client (libaggring-redis)
# against a standalone redis-server and a three-master Redis Cluster
# on free loopback ports (tests/redis_cluster.sh), then stops them.
# Exit 0 pass, 1 fail, 77 skip (no redis-server or redis-cli, or the
# module was not built).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
suite=$top_builddir/tests/check_redis_client
cluster_sh=$top_srcdir/tests/redis_cluster.sh

. "$top_srcdir/tests/lib.sh"
require_tools redis-server redis-cli
require_built "$suite" "configure found no hiredis"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-redis-client.XXXXXX") || exit 1
cleanup() {
	for d in "$tmp"/c*; do
		[ -d "$d" ] && sh "$cluster_sh" stop "$d" >/dev/null 2>&1
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# A port found free may be taken before the servers bind it (other
# tests run at the same time): then try other ports, three times.
tries=0
while :; do
	base=$(sh "$cluster_sh" free-base "$tmp") || exit 1
	if sh "$cluster_sh" start "$tmp/c$tries" "$base" &&
		sh "$cluster_sh" single "$tmp/c$tries" $((base + 3)); then
		break
	fi
	sh "$cluster_sh" stop "$tmp/c$tries" >/dev/null 2>&1
	tries=$((tries + 1))
	[ $tries -lt 3 ] || { echo "FAIL: no cluster after 3 tries" >&2; exit 1; }
done
dir=$tmp/c$tries

REDIS_SINGLE_PORT=$((base + 3)) REDIS_CLUSTER_PORT=$base \
	REDIS_CLUSTER_DIR=$dir REDIS_CLUSTER_SH=$cluster_sh "$suite"
