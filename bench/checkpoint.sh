#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/checkpoint.sh - what ledger_server's checkpoints cost and buy
# (issue 32's targets), on a real disk.
#
#   checkpoint.sh BUILDDIR RESULTSDIR [RUNS]          (RUNS: 5)
#
# 1. Throughput while checkpoints are written, paired: two
#    ledger_servers (default workers), one with --no-checkpoints, one
#    with --checkpoint-events CKPT_EVENTS (100000: a cycle every tenth
#    of a run, so that every run overlaps several), alternating within
#    each round, each driven by
#      redis-benchmark -c 50 -r 10000 -n N -P 16 INCRBY key:__rand_int__ 1
#    (P16, as bench/network.sh). Prints requests/s median, min, max of
#    RUNS and the ratio with/without; the checkpointing server must have
#    taken cycles (its INFO says how many).
# 2. Recovery: for each N in CKPT_RESTART_EVENTS (1000000 10000000),
#    a fresh ledger_server (defaults: a checkpoint each 100,000 events
#    or 16 MiB) takes N INCRBYs over 10,000 accounts (P16), is killed
#    with SIGKILL (no checkpoint at a stop: the worst case), and is
#    started again; the time from exec to the first PONG is measured,
#    as are the disk use of its directory (du) and its checkpoint size.
#    The same with --no-checkpoints, where the restart replays all.
#
# Appends "checkpoint,VARIANT,ENGINE,METRIC,UNIT,median,min,max,runs"
# rows to RESULTSDIR/checkpoint.csv. Sizes: CKPT_REQUESTS (1000000 per
# P16 run), CKPT_EVENTS, CKPT_RESTART_EVENTS; CKPT_TMPDIR (where the
# data dirs go; ${TMPDIR:-/var/tmp}; must not be tmpfs). CKPT_PARTS
# ("throughput recovery") and CKPT_RESTART_MODES ("ckpt nockpt") pick
# what runs, to compare builds on one part.
# Exits 77 if redis-benchmark or redis-cli is missing.
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: checkpoint.sh BUILDDIR RESULTSDIR [RUNS]" >&2
	exit 2
fi
build=$1
results=$2
runs=${3:-5}
n=${CKPT_REQUESTS:-1000000}
ckpt_events=${CKPT_EVENTS:-100000}
restart_events=${CKPT_RESTART_EVENTS:-1000000 10000000}
parts=${CKPT_PARTS:-throughput recovery}
restart_modes=${CKPT_RESTART_MODES:-ckpt nockpt}
server=$build/examples/ledger/ledger_server
# The program itself, not libtool's wrapper script, whose start would
# count in the restart times.
if [ -x "$build/examples/ledger/.libs/ledger_server" ]; then
	server=$build/examples/ledger/.libs/ledger_server
	export LD_LIBRARY_PATH=$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

for tool in redis-benchmark redis-cli; do
	command -v $tool >/dev/null 2>&1 || {
		echo "checkpoint: $tool is not installed: skipped" >&2
		exit 77
	}
done
[ -x "$server" ] || { echo "checkpoint: build first: $server" >&2; exit 1; }

work=$(mktemp -d "${CKPT_TMPDIR:-${TMPDIR:-/var/tmp}}/aggring-ckpt-bench.XXXXXX") ||
	exit 1
declare -A pids=() ports=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "checkpoint: FAIL: $*" >&2
	exit 1
}

# start NAME ARGS...: a ledger_server on a free port; waits for it.
start() {
	local name=$1 i
	shift
	: >"$work/$name.log"
	"$server" --port 0 --dir "$work/$name" "$@" >"$work/$name.log" 2>&1 &
	pids[$name]=$!
	for ((i = 0; i < 600; i++)); do
		ports[$name]=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
			"$work/$name.log")
		[ -n "${ports[$name]}" ] && return 0
		kill -0 "${pids[$name]}" 2>/dev/null || break
		sleep 0.05
	done
	cat "$work/$name.log" >&2
	fail "$name did not start"
}

# incrby NAME N: one P16 run; prints requests/s.
incrby() {
	redis-benchmark -h 127.0.0.1 -p "${ports[$1]}" -c 50 -r 10000 -n "$2" \
		-P 16 --csv INCRBY key:__rand_int__ 1 2>&1 | tail -n 1 |
		tr -d '"' | awk -F, '$1 ~ /^INCRBY/ && $2 + 0 > 0 { print $2 }'
}

# summary FILE: "median min max".
summary() {
	sort -g "$1" | awk '{ v[NR] = $1 }
		END { printf "%s %s %s\n", v[int((NR + 1) / 2)], v[1], v[NR] }'
}

row() { # VARIANT ENGINE METRIC UNIT FILE
	echo "checkpoint,$1,$2,$3,$4,$(summary "$5" | tr ' ' ','),$runs" \
		>>"$results/checkpoint.csv"
}

mkdir -p "$results"
[ -s "$results/checkpoint.csv" ] ||
	echo "workload,variant,engine,metric,unit,median,min,max,runs" \
		>"$results/checkpoint.csv"
echo "checkpoint: $(uname -srm), $(nproc) CPUs, data in $work" \
	"($(stat -f -c %T "$work"))"

# ---- 1. throughput, paired ----
if [[ " $parts " == *" throughput "* ]]; then
	start nockpt --no-checkpoints
	start ckpt --checkpoint-events "$ckpt_events"
	for e in nockpt ckpt; do incrby $e $((n / 10)) >/dev/null; done
	: >"$work/rps.nockpt"
	: >"$work/rps.ckpt"
	for ((r = 0; r < runs; r++)); do
		if ((r % 2)); then order="ckpt nockpt"; else order="nockpt ckpt"; fi
		for e in $order; do
			v=$(incrby $e "$n")
			[ -n "$v" ] || fail "no result from $e"
			echo "$v" >>"$work/rps.$e"
		done
	done
	cycles=$(redis-cli -p "${ports[ckpt]}" INFO persistence |
		tr -d '\r' | sed -n 's/^checkpoints_taken://p')
	last=$(redis-cli -p "${ports[ckpt]}" INFO persistence | tr -d '\r' |
		sed -n 's/^checkpoint_duration_ms://p')
	[ "${cycles:-0}" -gt 0 ] || fail "the checkpointing server took none"
	read -r m0 lo0 hi0 <<<"$(summary "$work/rps.nockpt")"
	read -r m1 lo1 hi1 <<<"$(summary "$work/rps.ckpt")"
	echo "P16 INCRBY, $n requests x $runs runs, alternating:"
	echo "  --no-checkpoints             $m0 req/s (min $lo0, max $hi0)"
	echo "  --checkpoint-events $ckpt_events  $m1 req/s (min $lo1, max $hi1);" \
		"$cycles cycles taken, the last in $last ms"
	echo "  ratio with/without: $(awk -v a="$m1" -v b="$m0" \
		'BEGIN { printf "%.3f", a / b }')"
	row P16 ledger_server_nockpt throughput req/s "$work/rps.nockpt"
	row P16 ledger_server_ckpt throughput req/s "$work/rps.ckpt"
	for e in nockpt ckpt; do kill -TERM "${pids[$e]}"; wait "${pids[$e]}"; done
fi

# ---- 2. recovery after N events ----
# ping_after NAME ARGS...: starts it; sets $ms, from exec to a PONG.
ping_after() {
	local name=$1 t0 t1 i
	shift
	: >"$work/$name.restart" # before the child opens it, for sed below
	t0=$(date +%s%N)
	"$server" --port 0 --dir "$work/$name" "$@" >"$work/$name.restart" 2>&1 &
	pids[$name]=$!
	for ((i = 0; i < 60000; i++)); do
		p=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
			"$work/$name.restart")
		if [ -n "$p" ] && [ "$(redis-cli -p "$p" PING 2>/dev/null)" = PONG ]; then
			t1=$(date +%s%N)
			ms=$(((t1 - t0) / 1000000))
			return 0
		fi
		kill -0 "${pids[$name]}" 2>/dev/null || fail "$name died"
		sleep 0.01
	done
	fail "$name did not answer PING"
}

# disk_bound NAME CKPT: "(bound 2 x (checkpoint + threshold) = K KiB)",
# the threshold being the defaults' first: 16 MiB or 100,000 events at
# the mean record size (journal bytes over events, from the restart).
disk_bound() {
	local ev bytes
	[ "$2" -gt 0 ] || return 0
	ev=$(sed -n 's/^ledger_server: .* replayed \([0-9]*\) events .*/\1/p' \
		"$work/$1.restart")
	bytes=$(redis-cli -p "$p" INFO persistence | tr -d '\r' | awk -F: '
		$1 == "checkpoint_position" || $1 == "journal_bytes_since_checkpoint" {
			s += $2 } END { print s + 0 }')
	awk -v ev="${ev:-0}" -v b="$bytes" -v ck="$2" 'BEGIN {
		if (ev == 0) exit
		t = 100000 * b / ev; if (t > 16777216) t = 16777216
		printf "(bound 2 x (checkpoint + threshold) = %d KiB, at %.1f " \
			"bytes an event)\n", 2 * (ck + t) / 1024, b / ev }'
}

[[ " $parts " == *" recovery "* ]] || restart_events=
for events in $restart_events; do
	for mode in $restart_modes; do
		name=r$events.$mode
		args=()
		[ "$mode" = nockpt ] && args=(--no-checkpoints)
		start "$name" "${args[@]}"
		left=$events
		while [ "$left" -gt 0 ]; do
			step=$((left > 2000000 ? 2000000 : left))
			incrby "$name" "$step" >/dev/null
			left=$((left - step))
		done
		kill -KILL "${pids[$name]}"
		wait "${pids[$name]}" 2>/dev/null
		du_kib=$(du -sk "$work/$name" | cut -f1)
		ping_after "$name" "${args[@]}"
		rec=$(sed -n 's/^ledger_server: \(recovered .*\)/\1/p' \
			"$work/$name.restart")
		ck=$(ls -l "$work/$name"/checkpoint-*.ckpt 2>/dev/null |
			awk '{ s = $5 } END { print s + 0 }')
		bound=$(disk_bound "$name" "$ck")
		echo "restart after $events events ($mode): PONG after $ms ms;" \
			"$rec; disk $du_kib KiB, newest checkpoint $ck bytes" \
			"$bound"
		echo "checkpoint,restart$events,ledger_server_$mode,ping,ms,$ms,$ms,$ms,1" \
			>>"$results/checkpoint.csv"
		echo "checkpoint,restart$events,ledger_server_$mode,disk,KiB,$du_kib,$du_kib,$du_kib,1" \
			>>"$results/checkpoint.csv"
		kill -TERM "${pids[$name]}"
		wait "${pids[$name]}"
		rm -rf "${work:?}/$name"
	done
done
