#!/bin/sh
# SPDX-License-Identifier: MIT
# redis_cluster.sh - a three-master Redis Cluster on loopback ports, for
# the tests of libaggring-redis. Each node keeps its AOF, its RDB and
# its nodes.conf in DIR/node-I, so a killed node restarts as itself,
# with its data.
#
#   redis_cluster.sh start DIR BASEPORT   nodes on BASEPORT..BASEPORT+2
#                                         (bus ports +10000); waits for
#                                         cluster_state:ok on each
#   redis_cluster.sh stop DIR             shuts every node down
#   redis_cluster.sh kill DIR I           SIGKILL node I (0..2)
#   redis_cluster.sh restart DIR I        starts node I again from its
#                                         AOF; waits for cluster_state:ok
#   redis_cluster.sh wait DIR             cluster_state:ok on each node
#   redis_cluster.sh single DIR PORT      one standalone server (stop
#                                         stops it too)
#   redis_cluster.sh free-base DIR        prints a BASEPORT whose four
#                                         ports and their bus ports no
#                                         socket uses (DIR is unused)
#
# Every wait has a deadline (REDIS_CLUSTER_WAIT seconds, default 60);
# exits 0 on success, 1 (saying why) otherwise, 77 when redis-server or
# redis-cli is missing.
set -u

wait_s=${REDIS_CLUSTER_WAIT:-60}

die() {
	echo "redis_cluster.sh: $*" >&2
	exit 1
}

for tool in redis-server redis-cli; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "SKIP: $tool is not installed (apt-get install redis-server redis-tools)" >&2
		exit 77
	}
done

[ $# -ge 2 ] || die "usage: $0 start DIR BASEPORT | stop DIR | kill DIR I | restart DIR I | wait DIR | single DIR PORT"
cmd=$1
dir=$2

port_of() {
	cat "$dir/node-$1/port" 2>/dev/null || die "no node $1 in $dir"
}

# start_node I [cluster]: starts the node whose port is in DIR/node-I.
# (Its loop counter is w: the callers' is i.)
start_node() {
	n=$dir/node-$1
	p=$(cat "$n/port")
	if [ "${2:-cluster}" = cluster ]; then
		set -- --cluster-enabled yes --cluster-config-file nodes.conf \
			--cluster-node-timeout 2000
	else
		set --
	fi
	redis-server --port "$p" --bind 127.0.0.1 --dir "$n" \
		--appendonly yes --appendfsync always --save '' \
		--daemonize yes --pidfile "$n/redis.pid" \
		--logfile "$n/redis.log" "$@" ||
		die "redis-server on port $p did not start"
	w=0
	until redis-cli -p "$p" ping 2>/dev/null | grep -q PONG; do
		# a server that could not bind its ports has exited already
		if grep -q 'aborting' "$n/redis.log" 2>/dev/null; then
			tail -3 "$n/redis.log" >&2
			die "redis-server on port $p exited"
		fi
		w=$((w + 1))
		[ $w -le $((wait_s * 20)) ] || die "port $p: no PONG after $wait_s s (see $n/redis.log)"
		sleep 0.05
	done
}

# cluster_ok: cluster_state:ok on every node, each seeing all 16384 slots.
cluster_ok() {
	for n in "$dir"/node-*; do
		[ -f "$n/cluster" ] || continue
		info=$(redis-cli -p "$(cat "$n/port")" cluster info 2>/dev/null) ||
			return 1
		echo "$info" | grep -q '^cluster_state:ok' || return 1
		echo "$info" | grep -q '^cluster_slots_ok:16384' || return 1
	done
	return 0
}

wait_ok() {
	w=0
	until cluster_ok; do
		w=$((w + 1))
		[ $w -le $((wait_s * 10)) ] || die "cluster_state is not ok after $wait_s s"
		sleep 0.1
	done
}

# used_ports: every local TCP port in use, in decimal, one a line.
used_ports() {
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk 'NR > 1 { split($2, a, ":"); print a[2] }' |
		while read -r hex; do
			[ -n "$hex" ] && echo $((0x$hex))
		done | sort -u
}

case $cmd in
free-base)
	used=$(used_ports)
	# a start from the pid spreads concurrent runs over the range
	base=$((20000 + ($$ * 7) % 25000))
	tries=0
	while :; do
		clash=no
		for off in 0 1 2 3 10000 10001 10002 10003; do
			if echo "$used" | grep -qx $((base + off)); then
				clash=yes
				break
			fi
		done
		[ $clash = no ] && break
		base=$((base + 7))
		[ $base -lt 45000 ] || base=20000
		tries=$((tries + 1))
		[ $tries -lt 5000 ] || die "no free ports found"
	done
	echo "$base"
	;;
start)
	[ $# -eq 3 ] || die "usage: $0 start DIR BASEPORT"
	base=$3
	mkdir -p "$dir" || die "cannot make $dir"
	addrs=
	for i in 0 1 2; do
		mkdir -p "$dir/node-$i"
		echo $((base + i)) >"$dir/node-$i/port"
		: >"$dir/node-$i/cluster"
		addrs="$addrs 127.0.0.1:$((base + i))"
		start_node "$i"
	done
	# shellcheck disable=SC2086 # the addresses, one word each
	redis-cli --cluster create $addrs --cluster-replicas 0 \
		--cluster-yes >"$dir/create.log" 2>&1 ||
		die "redis-cli --cluster create failed: $(cat "$dir/create.log")"
	wait_ok
	;;
stop)
	for n in "$dir"/node-*; do
		[ -f "$n/port" ] || continue
		redis-cli -p "$(cat "$n/port")" shutdown nosave >/dev/null 2>&1
		if [ -f "$n/redis.pid" ]; then
			kill -KILL "$(cat "$n/redis.pid")" 2>/dev/null
		fi
	done
	exit 0
	;;
kill)
	[ $# -eq 3 ] || die "usage: $0 kill DIR I"
	n=$dir/node-$3
	pid=$(cat "$n/redis.pid" 2>/dev/null) || die "node $3 has no pid file"
	kill -KILL "$pid" || die "node $3 (pid $pid) is not running"
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le $((wait_s * 20)) ] || die "node $3 still runs after SIGKILL"
		sleep 0.05
	done
	rm -f "$n/redis.pid"
	;;
restart)
	[ $# -eq 3 ] || die "usage: $0 restart DIR I"
	port_of "$3" >/dev/null
	start_node "$3"
	wait_ok
	;;
wait)
	wait_ok
	;;
single)
	[ $# -eq 3 ] || die "usage: $0 single DIR PORT"
	mkdir -p "$dir/node-single" || die "cannot make $dir"
	echo "$3" >"$dir/node-single/port"
	start_node single standalone
	;;
*)
	die "unknown command $cmd"
	;;
esac
