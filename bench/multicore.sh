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

# num X: X to 2 places, or ? if there is none.
num() { awk -v x="$1" 'BEGIN { if (x == "") printf "?"; else printf "%.2f", x }'; }

# The engine named aggring-batchN in a CSV.
batch_of() {
	[ -f "$1" ] || return 0
	awk -F, '$3 ~ /^aggring-batch/ { print $3; exit }' "$1"
}

# rt A B [TARGET ge|le]: A / B in seven columns, "!" after it when it
# misses TARGET, "n/a" without both.
rt() {
	awk -v a="$1" -v b="$2" -v t="${3:-}" -v how="${4:-ge}" 'BEGIN {
		if (a == "" || b == "" || b + 0 == 0) { printf "%7s", "n/a "; exit }
		r = a / b
		miss = t != "" && (how == "ge" ? r < t : r > t)
		printf "%6.2f%s", r, miss ? "!" : " "
	}'
}

# The kit whose absolute figures the summary shows: the last (new).
last_dir() { dir_of new; }
# "M/s" or, with two kits, "M/s of new".
abs_label() { if [ "$tags" = new ]; then echo "M/s"; else echo "M/s of new"; fi; }

# heads NAME...: the per-kit column heads, "| old:NAME ... | new:NAME ...".
heads() {
	for t in $tags; do
		printf ' |'
		for h in "$@"; do printf ' %7s' "$t:$h"; done
	done
}

# dispatch_row W VARIANT: per kit single and batch / best peer, then
# the last kit's medians.
dispatch_row() {
	printf '  %-7s %-5s' "$1" "$2"
	for t in $tags; do
		f=$(dir_of "$t")/dispatch-w$1.csv
		# shellcheck disable=SC2046 # "engine median", two words
		set -- "$1" "$2" $(best_peer "$f" "$2" throughput max)
		printf ' | %s %s' "$(rt "$(csv_get "$f" "$2" aggring throughput 6)" "${4:-}" 1.0)" \
			"$(rt "$(csv_get "$f" "$2" "$(batch_of "$f")" throughput 6)" "${4:-}" 1.2)"
	done
	f=$(last_dir)/dispatch-w$1.csv
	printf ' | %6s %6s  %s %s\n' "$(num "$(csv_get "$f" "$2" aggring throughput 6)")" \
		"$(num "$(csv_get "$f" "$2" "$(batch_of "$f")" throughput 6)")" "${3:-?}" "$(num "${4:-}")"
}

summary_dispatch() {
	echo "dispatch: aggring single and batch / best peer (targets >= 1.0 and >= 1.2)"
	printf '  %-7s %-5s%s | %6s %6s  %s\n' workers msgs "$(heads sgl bat)" "single" "batch" "best peer ($(abs_label))"
	for w in $workers; do
		vs=""
		for t in $tags; do [ -n "$vs" ] || vs=$(variants "$(dir_of "$t")/dispatch-w$w.csv"); done
		[ -n "$vs" ] || { echo "  $w: no result"; continue; }
		for v in $vs; do dispatch_row "$w" "$v"; done
	done
}

summary_collapse() {
	echo "no collapse: slowest run / median, worst over dispatch and producers (target >= 0.6)"
	set --
	for t in $tags; do
		set -- "$@" "tag=$t"
		for f in "$(dir_of "$t")"/dispatch-w*.csv "$(dir_of "$t")"/producers.csv; do
			[ -f "$f" ] && set -- "$@" "$f"
		done
	done
	# shellcheck disable=SC2086 # tags is a word list
	awk -F, -v tags="$tags" '
		FNR > 1 && $4 == "throughput" && $6 > 0 {
			r = $7 / $6; k = tag SUBSEP $3
			if (!($3 in known)) { known[$3] = 1; order[++n] = $3 }
			if (!(k in worst) || r < worst[k]) {
				worst[k] = r; f = FILENAME; sub(/.*\//, "", f); sub(/\.csv$/, "", f)
				at[k] = f " " $2
			}
		}
		END {
			nt = split(tags, t, " ")
			for (i = 1; i <= n; i++) {
				printf "  %-16s", order[i]
				for (j = 1; j <= nt; j++) {
					k = t[j] SUBSEP order[i]
					if (k in worst)
						printf " | %s %5.2f%s", t[j], worst[k], worst[k] < 0.6 ? "!" : " "
					else
						printf " | %s   n/a ", t[j]
				}
				printf "  (%s)\n", at[t[nt] SUBSEP order[i]]
			}
		}' "$@"
}

summary_scale() {
	echo "scale: aggring / pthread (targets >= 1.0 at 1 and 256 aggregates, the lead kept at 16)"
	printf '  %-13s%s | %s\n' aggregates "$(heads x)" "$(abs_label): aggring vs pthread"
	for v in 1 16 256; do
		printf '  %-13s' "$v"
		for t in $tags; do
			f=$(dir_of "$t")/scale.csv
			printf ' | %s' "$(rt "$(csv_get "$f" "$v" aggring throughput 6)" \
				"$(csv_get "$f" "$v" pthread throughput 6)" 1.0)"
		done
		f=$(last_dir)/scale.csv
		printf ' | %s vs %s\n' "$(num "$(csv_get "$f" "$v" aggring throughput 6)")" \
			"$(num "$(csv_get "$f" "$v" pthread throughput 6)")"
	done
}

producers_row() {
	case $1 in P4-*|P16-*) tgt=1.0 ;; *) tgt="" ;; esac
	printf '  %-12s' "$1"
	for t in $tags; do
		f=$(dir_of "$t")/producers.csv
		# shellcheck disable=SC2046 # "engine median", two words
		set -- "$1" $(best_peer "$f" "$1" throughput max)
		printf ' | %s %s' "$(rt "$(csv_get "$f" "$1" aggring throughput 6)" "${3:-}" $tgt)" \
			"$(rt "$(csv_get "$f" "$1" "$(batch_of "$f")" throughput 6)" "${3:-}" $tgt)"
	done
	f=$(last_dir)/producers.csv
	printf ' | %6s %6s  %s %s\n' "$(num "$(csv_get "$f" "$1" aggring throughput 6)")" \
		"$(num "$(csv_get "$f" "$1" "$(batch_of "$f")" throughput 6)")" "${2:-?}" "$(num "${3:-}")"
}

summary_producers() {
	echo "producers: aggring single and batch / best peer (target >= 1.0 at 4 and 16 producers)"
	printf '  %-12s%s | %6s %6s  %s\n' producers "$(heads sgl bat)" single batch "best peer ($(abs_label))"
	vs=""
	for t in $tags; do [ -n "$vs" ] || vs=$(variants "$(dir_of "$t")/producers.csv"); done
	[ -n "$vs" ] || { echo "  no result"; return 0; }
	for v in $vs; do producers_row "$v"; done
}

summary_latency() {
	echo "latency: done p99 at 50% load, aggring / best peer (target <= 1.0)"
	for t in $tags; do
		f=$(dir_of "$t")/latency.csv
		a=$(csv_get "$f" 50% aggring done_p99 6)
		# shellcheck disable=SC2046 # "engine median", two words
		set -- $(best_peer "$f" 50% done_p99 min)
		printf '  %-4s %s  (aggring %s us, %s %s us; %s)\n' "$t" "$(rt "$a" "${2:-}" 1.0 le)" \
			"$(num "$a")" "${1:-?}" "$(num "${2:-}")" \
			"$(grep -m1 -o "aggring's peak [0-9.]* M msg/s" "$(dir_of "$t")/latency.txt" 2>/dev/null || echo "no peak")"
	done
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
	for t in $tags; do echo "kit $t: $(kit_of "$t")"; done
	echo "ratios per kit; \"!\": target missed"
	echo
	summary_dispatch
	summary_collapse
	summary_scale
	summary_producers
	summary_latency
	for t in $tags; do
		grep -H "TIMED OUT\|FAILED\|SKIPPED\|is not in" "$(dir_of "$t")"/*.txt 2>/dev/null |
			sed 's/^/  no result: /' || true
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
