#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run.sh BUILDDIR RESULTSDIR - every workload of bench/, one after the
# other, each comparing aggring with its peers in the same run; writes
# RESULTSDIR/<workload>.csv, .txt (what the program printed) and .png,
# and RESULTSDIR/tables.md. Before the first workload and after the last
# it measures how often the machine stalls a running thread
# (RESULTSDIR/stalls.txt): the noise the figures carry. `make bench`
# calls it.
#
# Environment:
#   BENCH_RUNS=N     runs per figure (default 5; the median is reported)
#   BENCH_QUICK=1    tiny sizes, to check that everything works (CI)
#   BENCH_DATA=DIR   where the 1 GiB read file and the journals go
#                    (default BUILDDIR/bench-data; must be a real disk,
#                    not tmpfs, for O_DIRECT)
#   BENCH_ONLY="dispatch journal ..."   run only these workloads
set -eu

build=${1:?usage: run.sh BUILDDIR RESULTSDIR}
results=${2:?usage: run.sh BUILDDIR RESULTSDIR}
here=$(cd "$(dirname "$0")" && pwd)
runs=${BENCH_RUNS:-5}
data=${BENCH_DATA:-$build/bench-data}
only=${BENCH_ONLY:-dispatch producers latency direct_read journal scale network wow}
quick=${BENCH_QUICK:-0}
failed=""

mkdir -p "$results" "$data"

# quick_args WORKLOAD: the tiny sizes BENCH_QUICK=1 uses.
quick_args() {
	[ "$quick" = 1 ] || return 0
	case $1 in
	dispatch) echo "-q" ;;
	latency) echo "-q" ;;
	direct_read) echo "-q" ;;
	journal) echo "-q" ;;
	scale) echo "-q" ;;
	producers) echo "-q" ;;
	esac
}

run() {
	workload=$1
	shift
	echo "== $workload"
	set +e
	# shellcheck disable=SC2046 # quick_args is a word list on purpose
	"$build/bench/$workload" $(quick_args "$workload") -r "$runs" -o "$results" "$@" \
		>"$results/$workload.txt" 2>&1
	rc=$?
	set -e
	cat "$results/$workload.txt"
	case $rc in
	0) ;;
	77) echo "$workload: skipped (io_uring unavailable)" ;;
	*) echo "$workload: FAILED (exit $rc)"; failed="$failed $workload" ;;
	esac
}

# stalls WHEN: the machine's stalls now, appended to stalls.txt.
stalls() {
	seconds=5
	[ "$quick" = 1 ] && seconds=1
	echo "== stalls ($1)"
	{
		echo "$1:"
		"$build/bench/stalls" -s "$seconds" || echo "stalls: FAILED"
	} | tee -a "$results/stalls.txt"
}

rm -f "$results/stalls.txt"
stalls "before the workloads"

for w in $only; do
	case $w in
	direct_read|journal) run "$w" -d "$data" ;;
	# One worker: on a 2-CPU machine a paced producer and two workers
	# oversubscribe the CPUs, and every engine's tail would measure the
	# kernel's scheduler. More CPUs: BENCH_LATENCY_WORKERS.
	latency) run "$w" -w "${BENCH_LATENCY_WORKERS:-1}" ;;
	network)
		echo "== network"
		rm -f "$results/network.csv" # network.sh appends
		set +e
		NETWORK_QUICK=$quick bash "$here/network.sh" "$build" "$results" "$runs" \
			>"$results/network.txt" 2>&1
		rc=$?
		cat "$results/network.txt"
		set -e
		case $rc in
		0) ;;
		77) echo "network: skipped (no redis-server or redis-benchmark)" ;;
		*) failed="$failed network" ;;
		esac ;;
	wow)
		echo "== wow"
		set +e
		wow_commands=${BENCH_WOW_COMMANDS:-20000}
		[ "$quick" = 1 ] && wow_commands=2000
		BENCH_RUNS=$runs BENCH_WOW_COMMANDS=$wow_commands \
			sh "$here/wow_scale.sh" "$build" >"$results/wow.txt" 2>&1
		rc=$?
		cat "$results/wow.txt"
		set -e
		case $rc in
		0) ;;
		77) echo "wow: skipped (no Redis tools or no libaggring-redis)" ;;
		*) failed="$failed wow" ;;
		esac ;;
	*) run "$w" ;;
	esac
done

stalls "after the workloads"

sh "$here/plot.sh" "$results"
sh "$here/tables.sh" "$results" >"$results/tables.md"
echo "results: $results (CSV, PNG, tables.md)"
if [ -n "$failed" ]; then
	echo "bench: failed:$failed" >&2
	exit 1
fi
