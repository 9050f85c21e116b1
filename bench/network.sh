#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/network.sh - the "network" workload: examples/ledger/ledger_server
# against a real Redis 7 at equal durability, and examples/basic/echo_server
# against a libuv echo server (bench/uv_echo), every server driven by
# the same stock client, alternating servers within each round.
#
#   network.sh BUILDDIR RESULTSDIR [RUNS]          (RUNS: 5)
#
# 1. Durable INCRBY. ledger_server (default workers: half the CPUs, and
#    with --workers 1, the thread count of Redis's event loop, which
#    --worker-cpus auto places on the CPU of the disk's interrupts; and
#    the same with --worker-cpus none, left to the kernel),
#    redis-server --appendonly yes --appendfsync always, and the same
#    with --appendfsync everysec,
#    each with its data in its own temp dir on a real disk, on a free
#    port. The ledger_servers' receive path is paired too: ledger_server
#    and ledger_server_w1 run with --recv multishot (a multishot recv
#    per connection into a per-worker provided buffer ring, sockets as
#    fixed files), ledger_server_single and ledger_server_w1_single
#    with --recv single (a recv per completion, plain fds); the others
#    with ledger_server's default. Every one driven by
#      redis-benchmark -c 50 -r 10000 -n N [-P 16] --csv \
#          INCRBY key:__rand_int__ 1
#    without pipelining (variant P1) and with -P 16 (P16); and P16r1,
#    -P 16 with -r 1: every INCRBY on one account (one hot key).
#    Equal durability: ledger_server replies to an INCRBY only once its
#    record is durable (examples/ledger/ledger_accounts.c: run_steps() queues
#    the record with journal_append(), and bank_completed() holds the
#    message's completion; the journal (examples/ledger/ledger_journal.c)
#    writes the batch with RWF_DSYNC, or writes it and issues
#    agr_io_fsync(AGR_IO_DATASYNC); only journal_synced() ->
#    finish_batch() -> entry_durable() passes the completion on, and
#    requests_completed() then hands the reply to the connection).
#    Redis with appendfsync always writes and fdatasyncs the AOF in
#    beforeSleep, before it writes any reply of that event loop turn.
#    everysec is shown for orientation: it acknowledges before the data
#    is durable.
#    Pinned: ledger_server --workers 1 and redis-server always again,
#    each under `taskset -c CPU`, CPU the one that takes the interrupts
#    of the data's disk (from /proc/interrupts; skipped if that cannot be
#    told): where the disk's completions are handled decides how long a
#    durable write takes to come back, and both servers get the same
#    place. The client is never pinned.
#    After the runs, each ledger_server must stop cleanly and must have
#    journaled exactly the INCRBYs sent to it (so none failed unseen:
#    redis-benchmark does not count error replies).
# 2. Echo. examples/basic/echo_server (default workers: one per CPU, and with
#    --workers 1 for the same thread count as libuv's one loop) and
#    bench/uv_echo, driven by bench/echo_load: 64 connections, 64-byte
#    messages, request/response, every byte checked.
#
# Prints requests/s, p50 and p99 (median, min, max of RUNS) per server
# and the ratios the issue's targets are about; appends rows
# "network,VARIANT,ENGINE,METRIC,UNIT,median,min,max,runs" to
# RESULTSDIR/network.csv (created with its header if missing).
#
# Sizes from the environment: NETWORK_REQUESTS (requests per P1 run,
# 100000), NETWORK_REQUESTS_P16 (1000000), NETWORK_ECHO_SECONDS (5),
# NETWORK_QUICK=1 (a smoke run: 10000, 100000, 1 s), NETWORK_ECHO=0
# (no echo part: only the INCRBY servers), NETWORK_TMPDIR
# (where the data dirs go; ${TMPDIR:-/var/tmp}; must not be tmpfs).
# Exits 77 if redis-server or redis-benchmark is missing.
set -u

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: network.sh BUILDDIR RESULTSDIR [RUNS]" >&2
	exit 2
fi
build=$1
results=$2
runs=${3:-5}
case $runs in
'' | *[!0-9]* | 0)
	echo "network: RUNS must be a positive number" >&2
	exit 2
	;;
esac

if [ "${NETWORK_QUICK:-0}" = 1 ]; then
	n_p1=${NETWORK_REQUESTS:-10000}
	n_p16=${NETWORK_REQUESTS_P16:-100000}
	echo_seconds=${NETWORK_ECHO_SECONDS:-1}
else
	n_p1=${NETWORK_REQUESTS:-100000}
	n_p16=${NETWORK_REQUESTS_P16:-1000000}
	echo_seconds=${NETWORK_ECHO_SECONDS:-5}
fi
with_echo=true
[ "${NETWORK_ECHO:-1}" = 0 ] && with_echo=false
clients=50
keys=10000
echo_conns=64
echo_size=64
stop_timeout=30

for tool in redis-server redis-benchmark; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "network: $tool is not installed (apt-get install" \
			"redis-server redis-tools): skipped" >&2
		exit 77
	fi
done

ex=$build/examples
for prog in "$ex/ledger/ledger_server" "$ex/basic/echo_server"; do
	if [ ! -x "$prog" ]; then
		echo "network: build first: $prog" >&2
		exit 1
	fi
done
# Not part of `make bench`'s prerequisites: build them here.
if [ ! -x "$build/bench/echo_load" ] || [ ! -x "$build/bench/uv_echo" ]; then
	make -C "$build" bench/echo_load >/dev/null || exit 1
	make -C "$build" bench/uv_echo >/dev/null 2>&1 ||
		echo "network: bench/uv_echo cannot be built (no libuv?):" \
			"echo_server is measured alone" >&2
fi
have_uv=false
[ -x "$build/bench/uv_echo" ] && have_uv=true

mkdir -p "$results" || exit 1
tmp=${NETWORK_TMPDIR:-${TMPDIR:-/var/tmp}}
work=$(mktemp -d "$tmp/aggring-network.XXXXXX") || exit 1

# name -> pid of the servers still running; cleanup() ends them all.
declare -A pids=()

cleanup() {
	local name pid i
	for name in "${!pids[@]}"; do
		pid=${pids[$name]}
		kill -TERM "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

fail() {
	echo "network: FAILED: $*" >&2
	exit 1
}

fstype=$(stat -f -c %T "$work")
case $fstype in
tmpfs | ramfs)
	fail "$work is on $fstype: fdatasync is free there; set" \
		"NETWORK_TMPDIR to a directory on a real disk"
	;;
esac

# wait_ready NAME LOG PATTERN: until LOG has PATTERN (10 s at most);
# fails if the server exits first.
wait_ready() {
	local i=0
	while ! grep -q "$3" "$2"; do
		if ! kill -0 "${pids[$1]}" 2>/dev/null; then
			wait "${pids[$1]}" 2>/dev/null
			unset "pids[$1]"
			return 1
		fi
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			cat "$2" >&2
			fail "$1 is not ready after 10 s"
		fi
		sleep 0.05
	done
}

# listen_port LOG: the port of "listening on 127.0.0.1:PORT".
listen_port() {
	sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$1" |
		head -n 1
}

declare -A ports=()

# start_ours NAME LOG PROGRAM ARGS...: a server that picks its own free
# port (--port 0) and prints it.
start_ours() {
	local name=$1 log=$2
	shift 2
	: >"$log" # wait_ready may look before the server has opened it
	"$@" >"$log" 2>&1 &
	pids[$name]=$!
	if ! wait_ready "$name" "$log" 'listening on 127\.0\.0\.1:'; then
		cat "$log" >&2
		fail "$name did not start"
	fi
	ports[$name]=$(listen_port "$log")
}

# start_redis NAME FSYNC: redis-server with the AOF fsynced per FSYNC,
# its data in its own dir. Redis has no "pick a free port": try unused
# ones until one binds.
start_redis() {
	local name=$1 fsync=$2 dir=$work/$1 log=$work/$1.log port try
	mkdir -p "$dir" || exit 1
	for try in 1 2 3 4 5 6 7 8 9 10; do
		port=$((20000 + RANDOM % 30000))
		ss -Htln "sport = :$port" 2>/dev/null | grep -q . && continue
		# No RDB snapshots, no automatic AOF rewrites (a fork on
		# 2 CPUs mid-run would be noise, and ledger_server never
		# compacts either).
		${pin:-} redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
			--save '' --appendonly yes --appendfsync "$fsync" \
			--auto-aof-rewrite-percentage 0 --daemonize no \
			--logfile '' >"$log" 2>&1 &
		pids[$name]=$!
		if wait_ready "$name" "$log" 'Ready to accept connections'
		then
			ports[$name]=$port
			return 0
		fi
		grep -q 'Address already in use' "$log" || break
		echo "network: port $port was taken (try $try)" >&2
	done
	cat "$log" >&2
	fail "redis-server ($name) did not start"
}

# stop NAME LOG: SIGTERM and wait (stop_timeout s); echoes the status.
stop() {
	local name=$1 pid=${pids[$1]} i=0 status
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le $((stop_timeout * 20)) ] ||
			fail "$name did not stop within $stop_timeout s"
		sleep 0.05
	done
	wait "$pid"
	status=$?
	unset "pids[$name]"
	return $status
}

# incrby ENGINE PIPELINE N [KEYS]: one redis-benchmark run; prints
# "rps p50 p99".
incrby() {
	local out=$work/bench.out line
	# --csv: "test","rps","avg","min","p50","p95","p99","max" (ms)
	if ! redis-benchmark -h 127.0.0.1 -p "${ports[$1]}" -c "$clients" \
		-n "$3" -r "${4:-$keys}" -P "$2" --csv INCRBY key:__rand_int__ 1 \
		>"$out" 2>&1; then
		cat "$out" >&2
		fail "redis-benchmark against $1"
	fi
	line=$(tail -n 1 "$out" | tr -d '"' |
		awk -F, '$1 ~ /^INCRBY/ && $2 + 0 > 0 { print $2, $5, $7 }')
	[ -n "$line" ] || { cat "$out" >&2; fail "no result from $1"; }
	echo "$line"
}

# echo_run ENGINE: one echo_load run; prints "rps p50 p99".
echo_run() {
	local out=$work/echo.out line
	if ! "$build/bench/echo_load" -p "${ports[$1]}" -c "$echo_conns" \
		-s "$echo_size" -d "$echo_seconds" >"$out" 2>&1; then
		cat "$out" >&2
		fail "echo_load against $1"
	fi
	line=$(sed -n 's/^echo_load: \([0-9.]*\) requests\/s, p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms.*/\1 \2 \3/p' "$out")
	[ -n "$line" ] || { cat "$out" >&2; fail "no result from $1"; }
	echo "$line"
}

# summary FILE COLUMN: "median min max" of that column.
summary() {
	awk -v c="$2" '{ print $c }' "$1" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%.6g %.6g %.6g\n", m, v[1], v[NR]
		}'
}

median() {
	summary "$1" "$2" | cut -d' ' -f1
}

# ---- start every server once; they stay up, idle between their runs ----
# disk_irq_cpu DIR: the CPU that took most interrupts of the disk that
# holds DIR (virtio-blk, NVMe, SCSI host...); empty if unknown.
disk_irq_cpu() {
	local src disk parent dev
	src=$(df --output=source "$1" 2>/dev/null | tail -n 1)
	disk=${src#/dev/}
	parent=$(lsblk -no pkname "$src" 2>/dev/null | head -n 1)
	[ -n "$parent" ] && disk=$parent
	[ -e "/sys/block/$disk/device" ] || return 0
	dev=$(basename "$(readlink -f "/sys/block/$disk/device")")
	case $disk in nvme*) dev=${disk%n*} ;; esac
	awk -v dev="$dev" -v ncpu="$(nproc)" '
		$0 ~ dev && $0 !~ /config/ {
			for (c = 0; c < ncpu; c++) n[c] += $(c + 2)
		}
		END {
			best = -1
			for (c = 0; c < ncpu; c++)
				if (n[c] > 0 && (best < 0 || n[c] > n[best]))
					best = c
			if (best >= 0) print best
		}' /proc/interrupts
}

irq_cpu=$(disk_irq_cpu "$work")
incr_engines=(ledger_server ledger_server_single ledger_server_w1
	ledger_server_w1_single ledger_server_w1_unpinned redis_always
	redis_everysec)
ledgers=(ledger_server ledger_server_single ledger_server_w1
	ledger_server_w1_single ledger_server_w1_unpinned)
if [ -n "$irq_cpu" ] && command -v taskset >/dev/null 2>&1; then
	incr_engines+=(ledger_server_w1_pin redis_always_pin)
	ledgers+=(ledger_server_w1_pin)
else
	echo "network: the CPU of the disk's interrupts is unknown (or no" \
		"taskset): no pinned variants" >&2
fi
echo_engines=()
if $with_echo; then
	echo_engines=(echo_server echo_server_w1)
	$have_uv && echo_engines+=(uv_echo)
fi

start_ours ledger_server "$work/ledger_server.log" "$ex/ledger/ledger_server" \
	--port 0 --dir "$work/ledger_server" --recv multishot \
	--shutdown-timeout "$stop_timeout"
start_ours ledger_server_single "$work/ledger_server_single.log" \
	"$ex/ledger/ledger_server" --port 0 --dir "$work/ledger_server_single" \
	--recv single --shutdown-timeout "$stop_timeout"
start_ours ledger_server_w1 "$work/ledger_server_w1.log" "$ex/ledger/ledger_server" \
	--port 0 --dir "$work/ledger_server_w1" --workers 1 --recv multishot \
	--shutdown-timeout "$stop_timeout"
start_ours ledger_server_w1_single "$work/ledger_server_w1_single.log" \
	"$ex/ledger/ledger_server" --port 0 --dir "$work/ledger_server_w1_single" \
	--workers 1 --recv single --shutdown-timeout "$stop_timeout"
start_ours ledger_server_w1_unpinned "$work/ledger_server_w1_unpinned.log" \
	"$ex/ledger/ledger_server" --port 0 --dir "$work/ledger_server_w1_unpinned" \
	--workers 1 --worker-cpus none --shutdown-timeout "$stop_timeout"
start_redis redis_always always
start_redis redis_everysec everysec
if [ -n "${irq_cpu:-}" ]; then
	start_ours ledger_server_w1_pin "$work/ledger_server_w1_pin.log" \
		taskset -c "$irq_cpu" "$ex/ledger/ledger_server" --port 0 \
		--dir "$work/ledger_server_w1_pin" --workers 1 \
		--shutdown-timeout "$stop_timeout"
	pin="taskset -c $irq_cpu" start_redis redis_always_pin always
fi
if $with_echo; then
	start_ours echo_server "$work/echo_server.log" "$ex/basic/echo_server" \
		--port 0
	start_ours echo_server_w1 "$work/echo_server_w1.log" \
		"$ex/basic/echo_server" --port 0 --workers 1
	$have_uv && start_ours uv_echo "$work/uv_echo.log" \
		"$build/bench/uv_echo" 0
fi

[ -n "${irq_cpu:-}" ] &&
	echo "network: pinned variants under taskset -c $irq_cpu (the CPU that" \
		"takes the interrupts of the disk under $work)"
uname_line=$(uname -srm)
echo "network: $uname_line, $(nproc) CPUs, $(redis-server --version |
	sed 's/ sha=.*//'), data in $work ($fstype)"
echo "network: INCRBY: redis-benchmark -c $clients -r $keys, $n_p1" \
	"requests (P1), $n_p16 (P16); echo: $echo_conns connections," \
	"$echo_size-byte messages, $echo_seconds s; $runs runs, servers" \
	"alternating"
echo "network: ledger_server replies only once the event is durable" \
	"(run_steps -> journal_append; a write with RWF_DSYNC, or write +" \
	"fdatasync, -> journal_synced -> entry_durable releases the reply);" \
	"$(sed -n 's/^ledger_server: \(journal I\/O .*\)/\1/p' \
		"$work/ledger_server.log")"
echo "network: ledger_server_w1: $(sed -n \
	's/^ledger_server: \(workers .*\)/\1/p' "$work/ledger_server_w1.log")"

# ---- warm-up (not reported), then the rounds ----
# INCRBYs sent to each ledger_server (redis-benchmark -P p sends whole
# pipelines).
declare -A sent=()
for e in "${incr_engines[@]}"; do
	incrby "$e" 1 $((n_p1 / 10)) >/dev/null
	incrby "$e" 16 $((n_p16 / 10)) >/dev/null
done
for e in "${ledgers[@]}"; do
	sent[$e]=$((n_p1 / 10 + (n_p16 / 10 + 15) / 16 * 16))
done
for e in "${echo_engines[@]}"; do
	"$build/bench/echo_load" -p "${ports[$e]}" -c "$echo_conns" \
		-s "$echo_size" -d 1 -w 0 >/dev/null ||
		fail "echo_load warm-up against $e"
done

mkdir -p "$work/res"
nincr=${#incr_engines[@]}
necho=${#echo_engines[@]}
for ((r = 0; r < runs; r++)); do
	# Rotate who goes first, so that no server always follows another.
	for variant in P1 P16 P16r1; do
		case $variant in
		P1) p=1 n=$n_p1 nk=$keys ;;
		P16) p=16 n=$n_p16 nk=$keys ;;
		P16r1) p=16 n=$n_p16 nk=1 ;;
		esac
		for ((k = 0; k < nincr; k++)); do
			e=${incr_engines[(k + r) % nincr]}
			incrby "$e" "$p" "$n" "$nk" >>"$work/res/$variant.$e"
			[ -n "${sent[$e]:-}" ] &&
				sent[$e]=$((sent[$e] + (n + p - 1) / p * p))
		done
	done
	for ((k = 0; k < necho; k++)); do
		e=${echo_engines[(k + r) % necho]}
		echo_run "$e" >>"$work/res/echo64.$e"
	done
	echo "network: round $((r + 1)) of $runs done"
done

# ---- stop; each ledger_server must have journaled every INCRBY sent ----
declare -A events=() syncs=()
for e in "${ledgers[@]}"; do
	log=$work/$e.log
	stop "$e" || fail "$e exited with an error ($(tail -n 3 "$log"))"
	grep -q 'stopped cleanly' "$log" || fail "$e did not stop cleanly"
	events[$e]=$(sed -n 's/.*: \([0-9]*\) events journaled in.*/\1/p' \
		"$log")
	syncs[$e]=$(sed -n \
		's/.*journaled in \([0-9]*\) durable writes.*/\1/p' "$log")
	[ "${events[$e]}" = "${sent[$e]}" ] ||
		fail "$e journaled ${events[$e]} events, ${sent[$e]}" \
			"INCRBYs were sent"
done
redis_engines=(redis_always redis_everysec)
[ -n "${pids[redis_always_pin]:-}" ] && redis_engines+=(redis_always_pin)
for e in "${redis_engines[@]}" "${echo_engines[@]}"; do
	[ "$e" = uv_echo ] && continue
	stop "$e" || fail "$e exited with status $?"
done
if $with_echo && $have_uv; then
	stop uv_echo || fail "uv_echo exited with status $?"
fi

# ---- report ----
csv=$results/network.csv
[ -s "$csv" ] ||
	echo "workload,variant,engine,metric,unit,median,min,max,runs" >"$csv"

# report VARIANT ENGINE: a table row and the CSV rows.
report() {
	local f=$work/res/$1.$2 rps p50 p99
	read -r -a rps <<<"$(summary "$f" 1)"
	read -r -a p50 <<<"$(summary "$f" 2)"
	read -r -a p99 <<<"$(summary "$f" 3)"
	set -- "$1" "$2" "${rps[@]}" "${p50[@]}" "${p99[@]}"
	printf '  %-25s %10.0f  %10.0f %10.0f  %8.3f  %8.3f %8.3f %8.3f\n' \
		"$2" "$3" "$4" "$5" "$6" "$9" "${10}" "${11}"
	{
		echo "network,$1,$2,rps,req/s,$3,$4,$5,$runs"
		echo "network,$1,$2,p50,ms,$6,$7,$8,$runs"
		echo "network,$1,$2,p99,ms,$9,${10},${11},$runs"
	} >>"$csv"
}

header() {
	echo "$1"
	printf '  %-25s %10s  %10s %10s  %8s  %8s %8s %8s\n' engine \
		'req/s' min max 'p50 ms' 'p99 ms' min max
}

header "INCRBY, no pipelining (P1), $clients clients:"
for e in "${incr_engines[@]}"; do report P1 "$e"; done
header "INCRBY, -P 16 (P16), $clients clients:"
for e in "${incr_engines[@]}"; do report P16 "$e"; done
header "INCRBY, -P 16 -r 1 (P16r1, one account), $clients clients:"
for e in "${incr_engines[@]}"; do report P16r1 "$e"; done
if $with_echo; then
	header "echo, $echo_conns connections, $echo_size-byte messages (echo64):"
	for e in "${echo_engines[@]}"; do report echo64 "$e"; done
fi

# ratio A B VARIANT COLUMN: median(A) / median(B).
ratio() {
	awk -v a="$(median "$work/res/$3.$1" "$4")" \
		-v b="$(median "$work/res/$3.$2" "$4")" \
		'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'
}

echo "ratios (medians; targets: INCRBY req/s >= 1.0 and p99 ratio <= 1.0" \
	"vs redis_always; echo req/s >= 1.0 vs uv_echo):"
for v in P1 P16 P16r1; do
	for e in "${ledgers[@]}"; do
		[ "$e" = ledger_server_w1_pin ] && continue
		echo "  $v: $e / redis_always: req/s" \
			"$(ratio "$e" redis_always $v 1), p99" \
			"$(ratio "$e" redis_always $v 3) (lower is better);" \
			"/ redis_everysec req/s" \
			"$(ratio "$e" redis_everysec $v 1)"
	done
	echo "  $v: --recv multishot / --recv single: ledger_server" \
		"req/s $(ratio ledger_server ledger_server_single $v 1), p99" \
		"$(ratio ledger_server ledger_server_single $v 3);" \
		"ledger_server_w1 req/s" \
		"$(ratio ledger_server_w1 ledger_server_w1_single $v 1), p99" \
		"$(ratio ledger_server_w1 ledger_server_w1_single $v 3)"
	if [ -n "${irq_cpu:-}" ]; then
		echo "  $v, both pinned to CPU $irq_cpu (the disk's" \
			"interrupts): ledger_server_w1_pin / redis_always_pin:" \
			"req/s $(ratio ledger_server_w1_pin redis_always_pin $v 1)," \
			"p99 $(ratio ledger_server_w1_pin redis_always_pin $v 3)"
	fi
done
if $with_echo && $have_uv; then
	echo "  echo64: echo_server / uv_echo req/s" \
		"$(ratio echo_server uv_echo echo64 1)," \
		"echo_server --workers 1 / uv_echo req/s" \
		"$(ratio echo_server_w1 uv_echo echo64 1)"
fi
for e in "${ledgers[@]}"; do
	echo "  $e journaled all ${events[$e]} INCRBYs sent to it in" \
		"${syncs[$e]} durable writes ($(awk -v e="${events[$e]}" \
		-v s="${syncs[$e]}" 'BEGIN { printf "%.1f", (s ? e / s : 0) }')" \
		"per write)"
done
echo "network: rows appended to $csv"
