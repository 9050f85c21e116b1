#!/bin/sh
# The README's main job: ledger_server, a durable bank ledger speaking
# RESP2, under load from ledger_load and then redis-benchmark (when it is
# installed); a graceful stop under a deadline; an offline check of the
# journals against every acknowledged balance; a restart that must serve
# the same balances; then the journal example. Ends with a one-screen
# summary and exits 0 only if nothing acknowledged was lost.
#
# usage: demo.sh BUILDDIR DATADIR      (`make demo` runs it)
# Sizes from the environment: DEMO_REQUESTS (200000), DEMO_CONNECTIONS
# (32), DEMO_PIPELINE (16), DEMO_ACCOUNTS (1000), DEMO_BENCH_REQUESTS
# (200000), DEMO_BENCH_CLIENTS (50), DEMO_JOURNAL_EVENTS (50000).
set -u

if [ "${1:-}" = --help ]; then
	echo "usage: demo.sh BUILDDIR DATADIR"
	exit 0
fi
if [ $# -ne 2 ]; then
	echo "usage: demo.sh BUILDDIR DATADIR" >&2
	exit 2
fi
build=$1
data=$2
ex=$build/examples/ledger
basic=$build/examples/basic
requests=${DEMO_REQUESTS:-200000}
conns=${DEMO_CONNECTIONS:-32}
pipeline=${DEMO_PIPELINE:-16}
accounts=${DEMO_ACCOUNTS:-1000}
bench_requests=${DEMO_BENCH_REQUESTS:-200000}
bench_clients=${DEMO_BENCH_CLIENTS:-50}
bench_keys=10000
journal_events=${DEMO_JOURNAL_EVENTS:-50000}
stop_deadline=30
pid=

cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
	echo "demo: FAILED: $*" >&2
	echo "demo: logs are in $data" >&2
	exit 1
}

say() {
	echo "demo: $*"
}

# field FILE BEFORE [AFTER]: the first number in FILE right after the
# text BEFORE and right before AFTER (both sed regexes, not anchored).
field() {
	sed -n "s|.*$2\([0-9][0-9.]*\)${3:-}.*|\1|p" "$1" | head -n 1
}

. "$(dirname "$0")/../common/serverctl.sh"

# start_server LOG: ledger_server on a free port, with /metrics on
# another ($mport); waits at most 10 s.
start_server() {
	serverctl_start "$1" "$ex/ledger_server" --port 0 --metrics-port 0 \
		--dir "$data/ledger" --shutdown-timeout "$stop_deadline"
	case $? in
	0) ;;
	1) cat "$1" >&2; fail "ledger_server did not start" ;;
	*) fail "the server is not listening after 10 s" ;;
	esac
}

# stop_server LOG: SIGTERM; the server has $stop_deadline seconds to
# finish every admitted request and exit 0 (then 5 s of grace).
stop_server() {
	serverctl_stop_clean $((stop_deadline + 5)) "$1"
	clean=$?
	pid=
	[ $clean -eq 0 ] || fail "$why (see $1)"
}

[ -x "$ex/ledger_server" ] || fail "build first: $ex/ledger_server"
mkdir -p "$data" || exit 1
rm -rf "$data/ledger" "$data/journal"

# ---- 1. load: ledger_load, then redis-benchmark ----
start_server "$data/server.log"
say "ledger_server listening on 127.0.0.1:$port (data in $data/ledger)," \
	"metrics on http://127.0.0.1:$mport/metrics"
say "ledger_load: $requests requests, $conns connections, pipeline $pipeline"
"$ex/ledger_load" --port "$port" --requests "$requests" \
	--connections "$conns" --pipeline "$pipeline" --accounts "$accounts" \
	--expect-out "$data/expected.txt" --metrics-port "$mport" \
	>"$data/load.log" 2>&1 ||
	{ cat "$data/load.log" >&2; fail "ledger_load"; }
cat "$data/load.log"

bench=false
if command -v redis-benchmark >/dev/null 2>&1; then
	bench=true
	say "redis-benchmark: $bench_requests INCRBY over $bench_keys keys," \
		"$bench_clients connections, pipeline $pipeline"
	redis-benchmark -p "$port" -n "$bench_requests" -c "$bench_clients" \
		-r "$bench_keys" -P "$pipeline" --csv \
		INCRBY key:__rand_int__ 1 >"$data/bench.csv" 2>&1 ||
		{ cat "$data/bench.csv" >&2; fail "redis-benchmark"; }
	cat "$data/bench.csv"
else
	say "redis-benchmark is not installed (apt-get install redis-tools):" \
		"skipped"
fi

# ---- 2. a graceful stop under a deadline ----
say "SIGTERM: graceful stop (deadline $stop_deadline s)"
stop_server "$data/server.log"
cat "$data/server.log"
events=$(field "$data/server.log" 'ledger_server: ' ' events journaled')
syncs=$(field "$data/server.log" 'events journaled in ' ' durable writes')
refused=$(field "$data/server.log" ' commands, ' ' overdrafts refused')
journal_io=$(sed -n 's/^ledger_server: journal I\/O //p' "$data/server.log")
stop_ms=$(field "$data/server.log" 'stopped cleanly in ' ' ms')

# ---- 3. the journals, read back offline ----
"$ex/ledger_server" --verify --dir "$data/ledger" \
	--dump "$data/balances.txt" >"$data/verify.log" 2>&1 ||
	{ cat "$data/verify.log"; fail "ledger_server --verify"; }
cat "$data/verify.log"
# The clean stop took a checkpoint of everything: --verify uses it and
# finds nothing after it to replay.
ckpt_seq=$(field "$data/verify.log" 'verify: checkpoint ' ' (')
[ -n "$ckpt_seq" ] || fail "--verify found no checkpoint of the clean stop"
after_ckpt=$(field "$data/verify.log" 'valid and used; ' ' events after it')
[ "$after_ckpt" = 0 ] ||
	fail "$after_ckpt events left after the checkpoint of the clean stop"
ckpt_line=$(sed -n 's/^ledger_server: \([0-9]* checkpoints taken.*\)/\1/p' \
	"$data/server.log")
ckpt_taken=$(field "$data/server.log" 'ledger_server: ' ' checkpoints taken')
ckpt_pos=$(field "$data/server.log" 'at journal position ')
ckpt_size=$(field "$data/server.log" 'at journal position [0-9]*, ' ' bytes')
ckpt_ms=$(field "$data/server.log" 'bytes, written in ' ' ms')
ckpt_after=$(field "$data/server.log" ' ms, ' ' journal bytes after it')
ckpt_freed=$(field "$data/server.log" 'after it; ' ' journal bytes freed')
[ -n "$ckpt_line" ] || fail "the server did not report its checkpoints"
journaled=$(field "$data/verify.log" ' journals, ' ' events')
[ "$journaled" = "$events" ] ||
	fail "the journals hold $journaled events, the server journaled $events"
# Every balance ledger_load saw acknowledged is the journal's balance.
awk 'NR == FNR { bal[$1] = $2; next }
     { n++; if ((bal[$1] + 0) == $2) ok++ }
     END { printf "%d %d\n", ok, n; exit ok != n }' \
	"$data/balances.txt" "$data/expected.txt" >"$data/compare.txt" ||
	fail "journal balances differ from ledger_load's:" \
		"$(cat "$data/compare.txt")"
load_ok=$(cut -d' ' -f1 "$data/compare.txt")
if $bench; then
	# redis-benchmark sends whole pipelines: n rounded up to P.
	bench_sent=$(((bench_requests + pipeline - 1) / pipeline * pipeline))
	bench_sum=$(awk '/^key:/ { s += $2 } END { print s + 0 }' \
		"$data/balances.txt")
	[ "$bench_sum" -eq "$bench_sent" ] ||
		fail "the key:* balances add up to $bench_sum, not $bench_sent"
	grep '^key:' "$data/balances.txt" >"$data/bench_expected.txt"
fi

# ---- 4. a restart replays the journals and serves the same balances ----
start_server "$data/server2.log"
replayed=$(field "$data/server2.log" 'replayed ' ' events')
[ "$replayed" = "$events" ] ||
	fail "the restart replayed $replayed events, not $events"
past_ckpt=$(field "$data/server2.log" ' and the ' ' events after it')
[ "$past_ckpt" = 0 ] ||
	fail "the restart replayed $past_ckpt events past the checkpoint"
recovery_ms=$(field "$data/server2.log" 'recovered in ' ' ms')
grep -q "from checkpoint $ckpt_seq " "$data/server2.log" ||
	fail "the restart did not start from checkpoint $ckpt_seq"
"$ex/ledger_load" --port "$port" --check "$data/expected.txt" \
	>"$data/check.log" 2>&1 ||
	{ cat "$data/check.log"; fail "balances after the restart"; }
served=$(field "$data/check.log" 'check: ' ' of')
if $bench; then
	if ! "$ex/ledger_load" --port "$port" \
		--check "$data/bench_expected.txt" >"$data/check2.log" 2>&1; then
		cat "$data/check2.log"
		fail "key:* balances after the restart"
	fi
	served=$((served + $(field "$data/check2.log" 'check: ' ' of')))
fi
stop_server "$data/server2.log"
say "restart: recovered in $recovery_ms ms from checkpoint $ckpt_seq;" \
	"served $served balances again"

# ---- 5. the journal example ----
say "journal example: $journal_events events, one fdatasync each"
if ! "$basic/journal" -d "$data/journal" -n "$journal_events" -i 10000 -p 2 \
	>"$data/journal.log" 2>&1; then
	cat "$data/journal.log"
	fail "journal"
fi
"$basic/journal" --verify -d "$data/journal" >>"$data/journal.log" 2>&1 ||
	{ cat "$data/journal.log"; fail "journal --verify"; }
cat "$data/journal.log"

# ---- the summary ----
load_rps=$(field "$data/load.log" 'ledger_load: ' ' requests/s')
load_p50=$(field "$data/load.log" ' p50 ' ' ms')
load_p99=$(field "$data/load.log" ' p99 ' ' ms')
journal_rate=$(field "$data/journal.log" 'journal: ' ' durable events/s')
# The server's side of ledger_load's run (/metrics, bucket upper bounds).
queue_p50=$(field "$data/load.log" 'server queue latency p50 ' ' ms')
queue_p99=$(field "$data/load.log" 'queue latency p50 [0-9.]* ms, p99 ' ' ms')
proc_p50=$(field "$data/load.log" 'processing latency p50 ' ' ms')
proc_p99=$(field "$data/load.log" \
	'processing latency p50 [0-9.]* ms, p99 ' ' ms')

line="-----------------------------------------------------------------------"
echo
echo "$line"
echo " aggring demo: ledger_server, a durable RESP2 bank ledger on io_uring"
echo "$line"
printf ' %-16s %8s %6s %8s %11s %8s %8s\n' client requests conns pipeline \
	'requests/s' 'p50 ms' 'p99 ms'
printf ' %-16s %8s %6s %8s %11s %8s %8s\n' ledger_load "$requests" \
	"$conns" "$pipeline" "$load_rps" "$load_p50" "$load_p99"
if $bench; then
	# "test","rps","avg","min","p50","p95","p99","max"
	tail -n 1 "$data/bench.csv" | tr -d '"' | awk -F, -v n="$bench_sent" \
		-v c="$bench_clients" -v p="$pipeline" '{
		printf " %-16s %8s %6s %8s %11.0f %8s %8s\n",
			"redis-benchmark", n, c, p, $2, $5, $7 }'
else
	echo " redis-benchmark  (not installed: apt-get install redis-tools)"
fi
printf ' %-16s queue p50/p99 %s/%s ms, processing p50/p99 %s/%s ms\n' \
	'server /metrics' "$queue_p50" "$queue_p99" "$proc_p50" "$proc_p99"
echo
echo " every INCRBY/DECRBY was answered only after its event was durable"
echo " (one durable journal write per batch of events: group commit;"
echo "  journal I/O: $journal_io):"
printf '   %s events journaled in %s durable writes, %s per write\n' \
	"$events" "$syncs" "$(awk -v e="$events" -v s="$syncs" \
	'BEGIN { printf "%.1f", s ? e / s : 0 }')"
printf '   %s withdrawals refused (insufficient funds), never journaled\n' \
	"$refused"
printf ' %-16s SIGTERM -> stopped cleanly in %s ms (deadline %s s)\n' \
	'graceful stop' "$stop_ms" "$stop_deadline"
printf ' %-16s %s taken (the last at the stop): checkpoint %s covers journal\n' \
	checkpoints "$ckpt_taken" "$ckpt_seq"
printf ' %-16s position %s, %s bytes, written in %s ms; %s journal bytes after\n' \
	'' "$ckpt_pos" "$ckpt_size" "$ckpt_ms" "$ckpt_after"
printf ' %-16s it; %s journal bytes freed\n' '' "$ckpt_freed"
printf ' %-16s %s events in checkpoint %s, 0 after it; %s of %s ledger_load\n' \
	journals "$journaled" "$ckpt_seq" "$load_ok" \
	"$(wc -l <"$data/expected.txt" | tr -d ' ')"
printf ' %-16s balances match\n' ''
if $bench; then
	printf ' %-16s key:* balances add up to the %s INCRBYs sent\n' '' \
		"$bench_sent"
fi
printf ' %-16s recovered in %s ms: checkpoint %s (%s events), 0 after it,\n' \
	restart "$recovery_ms" "$ckpt_seq" "$replayed"
printf ' %-16s served the same %s balances\n' '' "$served"
printf ' %-16s %s events, %s durable events/s, verify OK\n' \
	'journal example' "$journal_events" "$journal_rate"
echo "$line"
echo " RESULT: PASS - nothing acknowledged was lost (logs: $data)"
echo "$line"
