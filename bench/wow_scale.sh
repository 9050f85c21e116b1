#!/bin/sh
# SPDX-License-Identifier: MIT
# wow_scale.sh - end-to-end Wow commands/s on a three-master Redis
# Cluster: wow_produce XADDs N Deposit commands; 1 or 3 wow_ledger
# instances read them (XREADGROUP) and run them on Wow's command
# processor: append each event to Wow's event store, publish it on
# :event and the state event on :state, XACK; the figure is N over the time
# from the producer's start until the command group has nothing pending
# and no lag. The ceiling beside it: redis-benchmark's XADD rate of the
# same msg size on the master of bank.Account:command (one stream lives
# on one master). Runs alternate (ceiling, 1, 3) BENCH_RUNS times
# (default 5); prints medians with min/max and the ratios, and per run
# the Redis commands each Wow command cost, by type (INFO commandstats
# of the masters, the producer's XADDs taken out). BENCH_WOW_COMMANDS
# (20000) commands over BENCH_WOW_ACCOUNTS (1000) accounts: an account's
# commands run one after another, so the fewer accounts, the longer each
# one's chain of round trips.
#
#   sh bench/wow_scale.sh [BUILDDIR]
set -u

build=${1:-.}
src=$(dirname "$0")/..
cluster_sh=$src/tests/redis_cluster.sh
runs=${BENCH_RUNS:-5}
commands=${BENCH_WOW_COMMANDS:-20000}
groups=${BENCH_WOW_GROUPS:-1024} # dispatcher groups per instance
accounts=${BENCH_WOW_ACCOUNTS:-1000} # commands per account: commands / accounts
workers=${BENCH_WOW_WORKERS:-2} # wow_ledger's workers per instance (-w)
ex=$build/examples/wow

for tool in redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null 2>&1 ||
		{ echo "wow_scale: $tool not found (apt-get install redis-server redis-tools)" >&2; exit 77; }
done
[ -x "$ex/wow_ledger" ] ||
	{ echo "wow_scale: $ex/wow_ledger not built (libaggring-redis needs hiredis and json-c)" >&2; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-wow-bench.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	sh "$cluster_sh" stop "$tmp/cluster" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

base=$(sh "$cluster_sh" free-base "$tmp") || exit 1
sh "$cluster_sh" start "$tmp/cluster" "$base" || exit 1

flush() {
	for i in 0 1 2; do
		redis-cli -p "$(cat "$tmp/cluster/node-$i/port")" FLUSHALL >/dev/null
	done
}

group_field() {
	redis-cli -c -p "$base" XINFO GROUPS bank.Account:command 2>/dev/null |
		awk -v f="$1" '$0 == f { getline; print; exit }'
}

ms() {
	date +%s%3N
}

nodes_do() { # run a redis-cli command on each master
	for i in 0 1 2; do
		redis-cli -p "$(cat "$tmp/cluster/node-$i/port")" "$@"
	done
}

# Redis commands per Wow command, by type, summed over the masters
# (the producer's XADDs taken out): what one command costs in round
# trips. Written to $tmp/rt-N.
round_trips() {
	nodes_do INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$commands" '
		/^cmdstat_/ { c[substr($1, 9)] += $3; u[substr($1, 9)] += $5 }
		END {
			c["xadd"] -= n
			printf "per command:"
			split("zrangebyscore evalsha xadd xack xreadgroup evalsha_ro eval", k, " ")
			for (i = 1; i <= 7; i++)
				if (c[k[i]] > 0)
					printf " %s %.2f", k[i], c[k[i]] / n
			printf "; their time in Redis (us, the producer'"'"'s XADDs in):"
			for (i = 1; i <= 7; i++)
				if (c[k[i]] > 0)
					printf " %s %.1f", k[i], u[k[i]] / n
			printf "\n"
		}'
}

# CPU seconds each master has used, one line: node-0 node-1 node-2.
masters_cpu() {
	for i in 0 1 2; do
		redis-cli -p "$(cat "$tmp/cluster/node-$i/port")" INFO cpu | tr -d '\r' |
			awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%s ", s }'
	done
	echo
}

# CPU ticks (utime + stime) the given processes have used, summed.
procs_ticks() {
	for p in "$@"; do
		cut -d')' -f2 "/proc/$p/stat" 2>/dev/null
	done | awk '{ t += $12 + $13 } END { print t + 0 }'
}

# Which master holds each of the aggregate's streams: "node-0 :event ...".
stream_homes() {
	for s in command event state; do
		slot=$(redis-cli -p "$base" CLUSTER KEYSLOT "bank.Account:$s")
		for i in 0 1 2; do
			port=$(cat "$tmp/cluster/node-$i/port")
			redis-cli -p "$base" CLUSTER NODES | awk -v p="$port" -v s="$slot" '
				index($2, ":" p "@") { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (s >= r[1] && s <= (r[2] == "" ? r[1] : r[2])) print "yes" } }' |
				grep -q yes && printf "node-%s :%s, " "$i" "$s"
		done
	done | sed 's/, $//'
}

# CPU per Wow command over the run: the instances' and each master's, in
# microseconds, from the figures taken at its start ($1, $2) and end.
cpu_per_command() {
	echo "$1 $(masters_cpu)" "$2 $3" | awk -v n="$commands" -v hz="$(getconf CLK_TCK)" '{
		printf "cpu per command: instances %.0f us; masters node-0 %.0f, node-1 %.0f, node-2 %.0f us",
			($8 - $7) / hz * 1e6 / n, ($4 - $1) * 1e6 / n, ($5 - $2) * 1e6 / n, ($6 - $3) * 1e6 / n }'
	echo " ($(stream_homes))"
}

# e2e N: prints commands/s with N instances
e2e() {
	flush
	nodes_do CONFIG RESETSTAT >/dev/null
	pids=
	for i in $(seq "$1"); do
		AGR_PARALLELISM=$groups "$ex/wow_ledger" -c -p "$base" -n "b$i" -k 256 -w "$workers" \
			>"$tmp/l$i.log" 2>&1 &
		pids="$pids $!"
	done
	for i in $(seq "$1"); do
		until grep -q '^ready' "$tmp/l$i.log"; do sleep 0.05; done
	done
	m0=$(masters_cpu)
	# shellcheck disable=SC2086 # the pids, one word each
	l0=$(procs_ticks $pids)
	t0=$(ms)
	"$ex/wow_produce" -c -p "$base" -a "$accounts" -n "$commands" >"$tmp/p.log" 2>&1 ||
		{ echo "producer failed" >&2; cat "$tmp/p.log" >&2; exit 1; }
	until [ "$(group_field pending)" = 0 ] && [ "$(group_field lag)" = 0 ]; do
		sleep 0.01
	done
	t1=$(ms)
	# shellcheck disable=SC2086
	cpu_per_command "$m0" "$l0" "$(procs_ticks $pids)" >"$tmp/cpu-$1"
	round_trips >"$tmp/rt-$1"
	for p in $pids; do kill -TERM "$p"; done
	for p in $pids; do wait "$p"; done
	pids=
	echo $((commands * 1000 / (t1 - t0)))
}

# A msg of the producer's size.
json='{"id":"cmd-r1-123","contextName":"bank","aggregateName":"Account","name":"Deposit","header":{},"tenantId":"(0)","aggregateId":"acct-0123","ownerId":"","spaceId":"","requestId":"req-r1-123","isCreate":false,"isVoid":false,"allowCreate":true,"bodyType":"bank.account.Deposit","body":{"amount":24},"createTime":1796352961998}'

ceiling() {
	port=$(redis-cli -p "$base" CLUSTER NODES | awk -v s="$(redis-cli -p "$base" CLUSTER KEYSLOT bank.Account:command)" '
		{ for (i = 9; i <= NF; i++) { split($i, r, "-"); if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2]; exit } } }')
	c0=$(redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { print s }')
	redis-benchmark -p "$port" -n 200000 -c 50 -P 16 -q \
		XADD bank.Account:command '*' msg "$json" 2>/dev/null |
		tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{ printf "%d\n", $1 }'
	redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: -v c0="$c0" '
		/^used_cpu_(sys|user):/ { s += $2 } END { printf "master cpu per XADD at the ceiling: %.1f us\n", (s - c0) * 1e6 / 200000 }' >"$tmp/cpu-ceiling"
	flush
}

median() {
	sort -n | awk '{ a[NR] = $1 } END { printf "%d %d %d\n", a[int((NR + 1) / 2)], a[1], a[NR] }'
}

: >"$tmp/ceiling"; : >"$tmp/one"; : >"$tmp/three"
for r in $(seq "$runs"); do
	ceiling >>"$tmp/ceiling"
	e2e 1 >>"$tmp/one"
	e2e 3 >>"$tmp/three"
	echo "run $r: xadd $(tail -1 "$tmp/ceiling")/s, 1 instance $(tail -1 "$tmp/one")/s, 3 instances $(tail -1 "$tmp/three")/s"
	echo "run $r: 1 instance $(cat "$tmp/rt-1")"
	echo "run $r: 3 instances $(cat "$tmp/rt-3")"
	echo "run $r: $(cat "$tmp/cpu-ceiling")"
	echo "run $r: 1 instance $(cat "$tmp/cpu-1")"
	echo "run $r: 3 instances $(cat "$tmp/cpu-3")"
done
set -- $(median <"$tmp/ceiling"); c=$1; cmin=$2; cmax=$3
set -- $(median <"$tmp/one"); o=$1; omin=$2; omax=$3
set -- $(median <"$tmp/three"); t=$1; tmin=$2; tmax=$3
echo "redis-benchmark XADD (-c 50 -P 16), one master: median $c/s (min $cmin, max $cmax)"
echo "end to end, 1 instance: median $o commands/s (min $omin, max $omax), $(awk -v a="$o" -v b="$c" 'BEGIN { printf "%.3f", a / b }')x the XADD ceiling"
echo "end to end, 3 instances: median $t commands/s (min $tmin, max $tmax), $(awk -v a="$t" -v b="$c" 'BEGIN { printf "%.3f", a / b }')x the XADD ceiling, $(awk -v a="$t" -v b="$o" 'BEGIN { printf "%.2f", a / b }')x one instance"
