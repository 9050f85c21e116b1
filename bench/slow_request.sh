#!/bin/sh
# SPDX-License-Identifier: MIT
# slow_request.sh - server CPU for one 7 MB request (1,048,576
# arguments) arriving in 1,000-byte pieces (bench/slow_request.py), on
# ledger_server (one worker) and redis-server, alternating, BENCH_RUNS
# times each (default 5); prints median, min and max CPU seconds and
# the ratio of the medians. Issue #33 asks for at most 2x Redis.
#
#   sh bench/slow_request.sh [BUILDDIR]
set -u

build=${1:-.}
src=$(dirname "$0")/..
runs=${BENCH_RUNS:-5}
command -v redis-server >/dev/null 2>&1 ||
	{ echo "slow_request: redis-server not found" >&2; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-slow-request.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# wait_port LOG: the port its "listening on 127.0.0.1:PORT" line names.
wait_port() {
	i=0
	while :; do
		p=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$1")
		[ -n "$p" ] && { echo "$p"; return 0; }
		i=$((i + 1))
		[ $i -le 200 ] || { cat "$1" >&2; exit 1; }
		sleep 0.05
	done
}

redis_port=$((20000 + $$ % 20000))
redis-server --port $redis_port --save '' --appendonly no \
	--dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids="$pids $redis_pid"
"$build/examples/ledger/ledger_server" --port 0 --dir "$tmp/ledger" \
	--workers 1 >"$tmp/ledger.log" 2>&1 &
ledger_pid=$!
pids="$pids $ledger_pid"
ledger_port=$(wait_port "$tmp/ledger.log")
i=0
until redis-cli -p $redis_port ping >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 200 ] || { cat "$tmp/redis.log" >&2; exit 1; }
	sleep 0.05
done

: >"$tmp/ledger.cpu"
: >"$tmp/redis.cpu"
for r in $(seq "$runs"); do
	python3 "$src/bench/slow_request.py" "$ledger_port" "$ledger_pid" \
		>>"$tmp/ledger.cpu" || exit 1
	python3 "$src/bench/slow_request.py" "$redis_port" "$redis_pid" \
		>>"$tmp/redis.cpu" || exit 1
	echo "run $r: ledger_server $(tail -n 1 "$tmp/ledger.cpu") s," \
		"redis-server $(tail -n 1 "$tmp/redis.cpu") s"
done

# stats FILE: "median min max" of its numbers.
stats() {
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}
set -- $(stats "$tmp/ledger.cpu") $(stats "$tmp/redis.cpu")
echo "slow request, server CPU s (median [min, max] of $runs):"
echo "  ledger_server $1 [$2, $3]   redis-server $4 [$5, $6]"
awk -v l="$1" -v r="$4" 'BEGIN { printf "  ledger/redis: %.2fx\n", (r > 0 ? l / r : 0) }'
