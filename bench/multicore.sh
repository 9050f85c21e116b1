#!/bin/sh
# SPDX-License-Identifier: MIT
#
# multicore.sh KITDIR OUTDIR
# multicore.sh --old KIT_OLD --new KIT_NEW OUTDIR
# multicore.sh --summary OUTDIR
#
# Everything issue 28 targets, on whatever machine this runs on, with
# programs packed by portable-kit.sh (run as KITDIR/wrap/NAME; pack
# bench/producers too: portable-kit.sh BUILDDIR KITDIR
# BUILDDIR/bench/dispatch BUILDDIR/bench/scale BUILDDIR/bench/latency
# BUILDDIR/bench/producers): bench/dispatch at 1, 2, 4, 8 and 16 workers
# (capped at the CPUs), bench/scale, bench/latency and bench/producers
# (1, 4 and 16 producers, foreign and worker threads). Each program
# alternates its engines within every round; every run is checked for
# per-id order and exactly-once completion by the program itself.
#
# Writes OUTDIR/<config>.txt (what the program printed) and
# OUTDIR/<config>.csv, OUTDIR/machine.txt (CPUs, model, kernel, load),
# OUTDIR/log.txt (what ran when),
# OUTDIR/summary.txt (one page: the targets' ratios) and, next to
# OUTDIR, OUTDIR.tar.gz with all of it. With two kits, each
# configuration runs old then new (new first every other one), into
# OUTDIR/old and OUTDIR/new, and the summary adds the paired new / old
# ratios. If perf exists, OUTDIR[/KIT]/perf-dispatch.txt is a perf stat
# of one dispatch run at 8 workers. --summary OUTDIR writes the summary
# again from what a run left in OUTDIR.
#
# Sizes fit both kits in under 7 minutes on 16 CPUs; the summary and
# machine.txt print them. Environment:
#   MC_QUICK=1       tiny sizes, to check that the script works
#   MC_RUNS=N        runs per figure (default 5; quick 3)
#   MC_WORKERS="1 2 4 8 16"   dispatch's worker counts (capped at CPUs)
#   MC_LATENCY_WORKERS=N      latency's workers (default CPUs / 2)
#   MC_TIMEOUT=S     give one program up after S seconds (default 240)
set -eu

usage() {
	echo "usage: multicore.sh KITDIR OUTDIR" >&2
	echo "       multicore.sh --old KIT_OLD --new KIT_NEW OUTDIR" >&2
	echo "       multicore.sh --summary OUTDIR" >&2
	exit 2
}

# ---- the summary: ratios out of the CSVs ----

# csv_get FILE VARIANT ENGINE METRIC COLUMN (6 median, 7 min, 8 max)
csv_get() {
	[ -f "$1" ] || return 0
	awk -F, -v v="$2" -v e="$3" -v m="$4" -v c="$5" \
		'$2 == v && $3 == e && $4 == m { print $c; exit }' "$1"
}

# best_peer FILE VARIANT METRIC max|min: "engine median" of the best
# engine that is not aggring.
best_peer() {
	[ -f "$1" ] || return 0
	awk -F, -v v="$2" -v m="$3" -v want="$4" '
		NR > 1 && $2 == v && $4 == m && $3 !~ /^aggring/ {
			x = $6 + 0
			if (name == "" || (want == "max" ? x > b : x < b)) {
				b = x; name = $3
			}
		}
		END { if (name != "") print name, b }' "$1"
}

# variants FILE: the variants in the order the program wrote them.
variants() {
	[ -f "$1" ] || return 0
	awk -F, 'NR > 1 && !seen[$2]++ { print $2 }' "$1"
}

# ratio A B [TARGET ge|le]: A / B to 2 places, and met / MISSED.
ratio() {
	awk -v a="$1" -v b="$2" -v t="${3:-}" -v how="${4:-ge}" 'BEGIN {
		if (a == "" || b == "" || b + 0 == 0) { printf "n/a"; exit }
		r = a / b
		printf "%.2f", r
		if (t != "") {
			ok = how == "ge" ? r >= t : r <= t
			printf "%s", ok ? " met" : " MISSED"
		}
	}'
}

# why TXT: why a program left no CSV, as the last line of its output.
why() {
	echo "no result ($(basename "$1"): $(tail -n 1 "$1" 2>/dev/null || echo "not run"))"
}

# num X: X to 2 places, or ? if there is none.
num() { awk -v x="$1" 'BEGIN { if (x == "") printf "?"; else printf "%.2f", x }'; }

# The engine named aggring-batchN in a CSV.
batch_of() {
	[ -f "$1" ] || return 0
	awk -F, '$3 ~ /^aggring-batch/ { print $3; exit }' "$1"
}

summary_dispatch() {
	d=$1
	echo "dispatch, M msg/s medians (targets: single / best peer >= 1.0, batch / best peer >= 1.2)"
	printf '  %-7s %-6s %8s %8s  %-16s %-14s %-14s\n' workers msgs single batch "best peer" single/best batch/best
	for w in $workers; do
		f=$d/dispatch-w$w.csv
		[ -f "$f" ] || { echo "  $w: $(why "$d/dispatch-w$w.txt")"; continue; }
		b=$(batch_of "$f")
		for v in $(variants "$f"); do
			s=$(csv_get "$f" "$v" aggring throughput 6)
			bt=$(csv_get "$f" "$v" "$b" throughput 6)
			# shellcheck disable=SC2046 # "engine median", two words
			set -- $(best_peer "$f" "$v" throughput max)
			printf '  %-7s %-6s %8.2f %8.2f  %-8s %7.2f %-14s %-14s\n' "$w" "$v" "${s:-0}" "${bt:-0}" \
				"${1:-?}" "${2:-0}" "$(ratio "$s" "${2:-}" 1.0)" "$(ratio "$bt" "${2:-}" 1.2)"
		done
	done
}

summary_collapse() {
	d=$1
	echo "no collapse: each engine's slowest run / its median, worst over dispatch and producers (target >= 0.6)"
	set --
	for f in "$d"/dispatch-w*.csv "$d"/producers.csv; do
		[ -f "$f" ] && set -- "$@" "$f"
	done
	[ $# -gt 0 ] || { echo "  no results"; return 0; }
	awk -F, '
		FNR > 1 && $4 == "throughput" && $6 > 0 {
			r = $7 / $6; e = $3
			if (!(e in worst)) order[++n] = e
			if (!(e in worst) || r < worst[e]) {
				worst[e] = r; f = FILENAME; sub(/.*\//, "", f); sub(/\.csv$/, "", f)
				at[e] = f " " $2
			}
		}
		END {
			for (i = 1; i <= n; i++)
				printf "  %-16s %.2f %-6s (%s)\n", order[i], worst[order[i]],
					(worst[order[i]] >= 0.6 ? "met" : "MISSED"), at[order[i]]
		}' "$@"
}

summary_scale() {
	f=$1/scale.csv
	echo "scale, aggring / pthread throughput (targets: >= 1.0 at 1 and 256 aggregates, > 1 at 16)"
	[ -f "$f" ] || { echo "  $(why "$1/scale.txt")"; return 0; }
	line=" "
	for v in 1 16 256; do
		a=$(csv_get "$f" "$v" aggring throughput 6)
		p=$(csv_get "$f" "$v" pthread throughput 6)
		line="$line $v: $(ratio "$a" "$p" 1.0) ($(num "$a") vs $(num "$p") M/s);"
	done
	echo "$line"
}

summary_producers() {
	f=$1/producers.csv
	echo "producers, M msg/s medians (target at 4 and 16 producers: >= 1.0 the best peer)"
	[ -f "$f" ] || { echo "  $(why "$1/producers.txt")"; return 0; }
	b=$(batch_of "$f")
	for v in $(variants "$f"); do
		s=$(csv_get "$f" "$v" aggring throughput 6)
		bt=$(csv_get "$f" "$v" "$b" throughput 6)
		# shellcheck disable=SC2046 # "engine median", two words
		set -- $(best_peer "$f" "$v" throughput max)
		case $v in P4-*|P16-*) tgt=1.0 ;; *) tgt="" ;; esac
		printf '  %-11s single %7.2f batch %7.2f  best %-7s %7.2f  single/best %-12s batch/best %s\n' \
			"$v" "${s:-0}" "${bt:-0}" "${1:-?}" "${2:-0}" "$(ratio "$s" "${2:-}" $tgt)" "$(ratio "$bt" "${2:-}" $tgt)"
	done
}

summary_latency() {
	f=$1/latency.csv
	echo "latency, done p99 at 50% load, us (target: aggring <= the best peer)"
	[ -f "$f" ] || { echo "  $(why "$1/latency.txt")"; return 0; }
	a=$(csv_get "$f" 50% aggring done_p99 6)
	# shellcheck disable=SC2046 # "engine median", two words
	set -- $(best_peer "$f" 50% done_p99 min)
	echo "  aggring $(num "$a"), best peer ${1:-?} $(num "${2:-}"): $(ratio "$a" "${2:-}" 1.0 le)"
	grep -m1 "peak" "$(dirname "$f")/latency.txt" 2>/dev/null | sed 's/^/  /' || true
}

# paired NAME OLDFILE NEWFILE VARIANT METRIC: new / old of aggring's
# and the batch engine's medians.
paired() {
	b=$(batch_of "$3")
	a_old=$(csv_get "$2" "$4" aggring "$5" 6)
	a_new=$(csv_get "$3" "$4" aggring "$5" 6)
	line="  $(printf '%-22s' "$1") aggring $(ratio "$a_new" "$a_old")"
	if [ -n "$b" ]; then
		b_old=$(csv_get "$2" "$4" "$b" "$5" 6)
		b_new=$(csv_get "$3" "$4" "$b" "$5" 6)
		line="$line   $b $(ratio "$b_new" "$b_old")"
	fi
	# The same peer in both kits: how far the machine drifted.
	p_old=$(csv_get "$2" "$4" pthread "$5" 6)
	p_new=$(csv_get "$3" "$4" pthread "$5" 6)
	echo "$line   pthread (drift) $(ratio "$p_new" "$p_old")"
}

summary_paired() {
	o=$out/old n=$out/new
	echo "== new / old, paired (medians; throughput: > 1 is faster; latency: < 1 is better;"
	echo "   pthread is the same code in both kits: its ratio is the noise)"
	for w in $workers; do
		for v in $(variants "$n/dispatch-w$w.csv"); do
			paired "dispatch w$w $v" "$o/dispatch-w$w.csv" "$n/dispatch-w$w.csv" "$v" throughput
		done
	done
	for v in 1 16 256; do
		paired "scale $v aggregates" "$o/scale.csv" "$n/scale.csv" "$v" throughput
	done
	for v in $(variants "$n/producers.csv"); do
		paired "producers $v" "$o/producers.csv" "$n/producers.csv" "$v" throughput
	done
	paired "latency done p99 50%" "$o/latency.csv" "$n/latency.csv" 50% done_p99
}

summary() {
	m=$out/machine.txt
	echo "multicore: $(sed -n 's/^cpus: //p' "$m") CPUs," \
		"$(grep -m1 -E 'Model name|model name' "$m" | sed 's/.*: *//')," \
		"kernel $(sed -n 's/^kernel: //p' "$m"), $(sed -n 's/^date: //p' "$m")"
	grep '^sizes:' "$m"
	for t in $tags; do
		d=$(dir_of "$t")
		echo
		echo "== kit $t: $(kit_of "$t")"
		summary_dispatch "$d"
		summary_collapse "$d"
		summary_scale "$d"
		summary_producers "$d"
		summary_latency "$d"
		grep -l "TIMED OUT\|FAILED" "$d"/*.txt 2>/dev/null | sed 's/^/  failed or timed out: /' || true
	done
	if [ "$tags" != new ]; then
		echo
		summary_paired
	fi
}

old="" new="" again=""
while [ $# -gt 0 ]; do
	case $1 in
	--summary) [ $# -eq 2 ] || usage; again=$2; shift 2 ;;
	--old) [ $# -ge 2 ] || usage; old=$2; shift 2 ;;
	--new) [ $# -ge 2 ] || usage; new=$2; shift 2 ;;
	-h|--help) sed -n '4,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) usage ;;
	*) break ;;
	esac
done
if [ -n "$again" ]; then
	out=$again
	tags="new"
	[ -d "$out/old" ] && [ -d "$out/new" ] && tags="old new"
	old=$(sed -n 's/^kit old: //p' "$out/machine.txt")
	new=$(sed -n 's/^kit new: //p' "$out/machine.txt")
elif [ -n "$old$new" ]; then
	if [ -z "$old" ] || [ -z "$new" ] || [ $# -ne 1 ]; then usage; fi
	out=$1
	tags="old new"
else
	[ $# -eq 2 ] || usage
	new=$1
	out=$2
	tags="new"
fi

kit_of() { if [ "$1" = old ]; then echo "$old"; else echo "$new"; fi; }
# Where a kit's files go: OUTDIR itself with one kit.
dir_of() { if [ "$tags" = new ]; then echo "$out"; else echo "$out/$1"; fi; }

# --summary OUTDIR: the summary again, from what a run left there.
if [ -n "$again" ]; then
	d=$(dir_of new)
	workers=$(for f in "$d"/dispatch-w*.csv; do
		[ -f "$f" ] && basename "$f" .csv | sed 's/^dispatch-w//'
	done | sort -n | tr '\n' ' ')
	summary >"$out/summary.txt" || true
	cat "$out/summary.txt"
	exit 0
fi

for t in $tags; do
	k=$(kit_of "$t")
	[ -x "$k/wrap/dispatch" ] || {
		echo "multicore.sh: $k/wrap/dispatch not found: pack the kit with portable-kit.sh" >&2
		exit 2
	}
done

cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
quick=${MC_QUICK:-0}
timeout_s=${MC_TIMEOUT:-240}
if [ "$quick" = 1 ]; then
	runs=${MC_RUNS:-3}
	dispatch_args="-n 100000 -s 20000 -R 3"
	scale_args="-n 50000"
	latency_args="-d 100"
	producers_args="-n 100000 -P 1,4,16"
else
	runs=${MC_RUNS:-5}
	dispatch_args="-n 1000000 -s 100000 -R 10"
	scale_args="-n 500000"
	latency_args="-d 200"
	producers_args="-n 500000 -P 1,4,16"
fi
lat_workers=${MC_LATENCY_WORKERS:-$((cpus / 2 > 0 ? cpus / 2 : 1))}

# dispatch's worker counts: the list, capped at the CPUs, no repeats.
workers=""
for w in ${MC_WORKERS:-1 2 4 8 16}; do
	[ "$w" -gt "$cpus" ] && w=$cpus
	case " $workers " in *" $w "*) ;; *) workers="$workers $w" ;; esac
done
workers=${workers# }

mkdir -p "$out"
for t in $tags; do mkdir -p "$(dir_of "$t")"; done
start=$(date +%s)
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$out/log.txt"; }
rm -f "$out/log.txt"

if command -v timeout >/dev/null 2>&1; then
	limit() { timeout "$timeout_s" "$@"; }
else
	limit() { "$@"; }
fi

# run TAG CONFIG PROGRAM ARGS...: KIT/wrap/PROGRAM ARGS -o TMP into
# DIR/CONFIG.txt and DIR/CONFIG.csv; a failure is recorded, not fatal.
run() {
	tag=$1 config=$2 prog=$3
	shift 3
	kit=$(kit_of "$tag")
	dir=$(dir_of "$tag")
	if [ ! -x "$kit/wrap/$prog" ]; then
		echo "$prog is not in $kit: pack it with portable-kit.sh" >"$dir/$config.txt"
		log "$tag $config: SKIPPED ($prog not in the kit)"
		return 0
	fi
	tmp="$dir/.csv-$config"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "$tag $config: $prog $*"
	set +e
	limit "$kit/wrap/$prog" "$@" -o "$tmp" >"$dir/$config.txt" 2>&1
	rc=$?
	set -e
	[ -f "$tmp/$prog.csv" ] && mv "$tmp/$prog.csv" "$dir/$config.csv"
	rm -rf "$tmp"
	case $rc in
	0) ;;
	77) echo "multicore.sh: SKIPPED (exit 77: no io_uring)" >>"$dir/$config.txt"
	    log "$tag $config: SKIPPED (no io_uring)" ;;
	124) echo "multicore.sh: TIMED OUT after $timeout_s s" >>"$dir/$config.txt"
	     log "$tag $config: TIMED OUT" ;;
	*) echo "multicore.sh: FAILED (exit $rc)" >>"$dir/$config.txt"
	   log "$tag $config: FAILED (exit $rc)" ;;
	esac
}

# pair N CONFIG PROGRAM ARGS...: each kit once, the order alternating
# with N so that neither kit always runs on a machine the other warmed.
pair() {
	turn=$1
	shift
	order=$tags
	[ "$tags" != new ] && [ $((turn % 2)) -eq 1 ] && order="new old"
	for t in $order; do run "$t" "$@"; done
}

machine() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "cpus: $cpus"
	if command -v lscpu >/dev/null 2>&1; then
		lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA node\(s\))' || true
	else
		grep -m1 'model name' /proc/cpuinfo || true
	fi
	echo "kernel: $(uname -r) $(uname -m)"
	grep -m1 MemTotal /proc/meminfo || true
	echo "load: $(cat /proc/loadavg 2>/dev/null)"
	g=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
	if [ -r "$g" ]; then echo "governor: $(cat "$g")"; fi
	echo "perf: $(command -v perf || echo none)"
	for t in $tags; do echo "kit $t: $(kit_of "$t")"; done
	echo "sizes: runs $runs; dispatch $dispatch_args at workers $workers;" \
		"scale $scale_args; latency $latency_args -w $lat_workers;" \
		"producers $producers_args -w $cpus"
}
machine >"$out/machine.txt"
cat "$out/machine.txt"

n=0
for w in $workers; do
	# shellcheck disable=SC2086 # the args are word lists on purpose
	pair $n "dispatch-w$w" dispatch $dispatch_args -r "$runs" -w "$w"
	n=$((n + 1))
done
# shellcheck disable=SC2086
pair $n scale scale $scale_args -r "$runs"
n=$((n + 1))
# shellcheck disable=SC2086
pair $n latency latency $latency_args -r "$runs" -w "$lat_workers"
n=$((n + 1))
# shellcheck disable=SC2086
pair $n producers producers $producers_args -r "$runs" -w "$cpus"

# perf_dispatch TAG WORKERS: perf stat of one dispatch run (aggring
# single and batched, and the pthread peer), with the syscalls that
# explain a hand-off where the kernel lets perf count them.
perf_dispatch() {
	f=$(dir_of "$1")/perf-dispatch.txt
	base=task-clock,context-switches,cpu-migrations,cycles,instructions,cache-misses
	calls=syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex
	log "$1 perf stat: dispatch -w $2"
	for events in "$base,$calls" "$base"; do
		echo "perf stat -e $events: dispatch -n 1000000 -s 0 -r 1 -p pthread -w $2" >"$f"
		if limit perf stat -e "$events" "$(kit_of "$1")/wrap/dispatch" \
			-n 1000000 -s 0 -r 1 -p pthread -w "$2" >>"$f" 2>&1; then
			return 0
		fi
	done
	echo "multicore.sh: perf stat FAILED" >>"$f"
}

if command -v perf >/dev/null 2>&1; then
	pw=8
	[ "$pw" -gt "$cpus" ] && pw=$cpus
	for t in $tags; do perf_dispatch "$t" "$pw"; done
fi

log "done; summary"
# shellcheck disable=SC2086 # tags is a word list
summary >"$out/summary.txt" || true
echo "total: $(($(date +%s) - start)) s for everything" >>"$out/summary.txt"
cat "$out/summary.txt"
(cd "$(dirname "$out")" && tar czf "$(basename "$out").tar.gz" "$(basename "$out")") &&
	echo "archive: $out.tar.gz"
