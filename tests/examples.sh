#!/bin/sh
# End-to-end runs of the examples at small sizes: journal, echo_server,
# and ledger_server driven by ledger_load, with clients that vanish
# mid-request, GET /metrics, a graceful stop, an offline check of the
# journals, a torn journal batch, a restart that must serve the same
# balances, both journal I/O modes on the same files, and a journal that
# outgrows the zeros it wrote ahead.
#
# Every example's --help prints its usage on stdout and exits 0.
#
# Run by `make check` (top_builddir and top_srcdir set), or by hand from
# the build directory. Exit 0 pass, 1 fail, 77 skip (no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
. "$top_srcdir/tests/lib.sh"
ex=$top_builddir/examples
require_built "$ex/ledger/ledger_load" "configure found no hiredis"
use_tmpdir examples

step() {
	echo "== $*"
}

# The clients below need bash (/dev/tcp) and timeout(1). BYTES is a
# printf format.

# request PORT BYTES: sends BYTES on a new connection and prints what
# comes back until the server closes it (so BYTES ends with QUIT).
request() {
	bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "$2" >&3
		timeout 10 cat <&3' request "$1" "$2"
}

# read_lines PORT N BYTES: sends BYTES, prints the first N lines back.
read_lines() {
	bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "$3" >&3
		timeout 10 head -n "$2" <&3' read_lines "$1" "$2" "$3"
}

# http_raw PORT BYTES: sends BYTES, prints the response until closed.
http_raw() {
	bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "$2" >&3
		timeout 10 cat <&3' http_raw "$1" "$2"
}

# status_of PORT BYTES: the status line of the response, CR dropped.
status_of() {
	http_raw "$1" "$2" | head -n 1 | tr -d '\r'
}

# send_and_close PORT BYTES: sends BYTES and hangs up without a reply.
send_and_close() {
	bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "$2" >&3' send_and_close "$1" "$2"
}

# wait_for_reply PORT BYTES WANT: repeats a request (for at most 10 s)
# until its replies, CRs dropped and lines joined by '|', are WANT.
wait_for_reply() {
	i=0
	while :; do
		got=$(request "$1" "$2" | tr -d '\r' | tr '\n' '|')
		[ "$got" = "$3" ] && return 0
		i=$((i + 1))
		[ $i -le 100 ] || fail "got '$got', want '$3'"
		sleep 0.1
	done
}

# same_balances DUMP EXPECTED: every account of EXPECTED ("name
# balance" lines) holds that balance in DUMP (absent means 0).
same_balances() {
	awk 'NR == FNR { bal[$1] = $2; next }
	     (bal[$1] + 0) != $2 {
		print "  " $1 ": journal has " (bal[$1] + 0) ", expected " $2
		bad++
	     }
	     END { exit bad > 0 }' "$1" "$2"
}

# journal_holds EXPECTED WHAT: the journals in $data, replayed offline
# (ledger_server --verify), give exactly EXPECTED's balances. WHAT names
# the stage in failures.
journal_holds() {
	"$ex/ledger/ledger_server" --verify --dir "$data" --dump "$1.dump" ||
		fail "verify $2"
	same_balances "$1.dump" "$1" || fail "journal != expected $2"
}

# serves_and_goes_on EXPECTED SEED NEXT LOG WHAT: the running server
# serves EXPECTED's balances and takes another ledger_load run (SEED),
# whose balances go to NEXT; stopped (LOG), its journals hold them.
serves_and_goes_on() {
	"$ex/ledger/ledger_load" --port "$port" --check "$1" || fail "balances $5"
	"$ex/ledger/ledger_load" --port "$port" --requests 2000 --connections 4 \
		--accounts 40 --pipeline 4 --seed "$2" --expect-out "$3" ||
		fail "ledger_load $5"
	stop_server "$4"
	journal_holds "$3" "$5"
}

have_bash=false
command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1 &&
	have_bash=true

step "--help: the usage on stdout, exit 0; a bad option: stderr, exit 2"
for path in basic/journal basic/echo_server ledger/ledger_server \
	ledger/ledger_load; do
	prog=${path##*/}
	"$ex/$path" --help >"$tmp/help.out" 2>"$tmp/help.err"
	status=$?
	[ $status -eq 0 ] || fail "$prog --help: exit status $status, not 0"
	grep -q "^usage: $prog " "$tmp/help.out" ||
		fail "$prog --help: no usage on stdout"
	[ ! -s "$tmp/help.err" ] ||
		fail "$prog --help wrote on stderr: $(cat "$tmp/help.err")"
	"$ex/$path" --no-such-option >"$tmp/help.out" 2>"$tmp/help.err"
	status=$?
	[ $status -eq 2 ] || fail "$prog --no-such-option: exit status $status"
	grep -q "^usage: $prog " "$tmp/help.err" ||
		fail "$prog --no-such-option: no usage on stderr"
	[ ! -s "$tmp/help.out" ] ||
		fail "$prog --no-such-option wrote on stdout"
done
sh "$top_srcdir/examples/ledger/demo.sh" --help >"$tmp/help.out" 2>"$tmp/help.err" ||
	fail "demo.sh --help: exit status $?"
grep -q '^usage: demo.sh ' "$tmp/help.out" && [ ! -s "$tmp/help.err" ] ||
	fail "demo.sh --help: no usage on stdout, or something on stderr"

step "journal: append, fdatasync, acknowledge; then --verify"
if ! "$ex/basic/journal" -d "$tmp/journal" -n 3000 -i 100 -p 2 -w 2 -g 16 \
	>"$tmp/journal.log" 2>&1; then
	cat "$tmp/journal.log" >&2
	if grep -q 'io_uring' "$tmp/journal.log"; then
		echo "SKIP: io_uring is not available" >&2
		exit 77
	fi
	fail "journal"
fi
cat "$tmp/journal.log"
"$ex/basic/journal" --verify -d "$tmp/journal" || fail "journal --verify"

step "echo_server"
start_server "$tmp/echo.log" "$ex/basic/echo_server" --port 0 --workers 2
if $have_bash; then
	got=$(read_lines "$port" 1 'hello, aggring\n')
	[ "$got" = "hello, aggring" ] || fail "echo: got '$got'"
	got=$(read_lines "$port" 2 'one\ntwo\n' | tr '\n' ' ')
	[ "$got" = "one two " ] || fail "echo: got '$got'"
else
	echo "  (no bash: the echo itself is not checked)"
fi
stop_server "$tmp/echo.log"

step "ledger_server + ledger_load"
data=$tmp/ledger
start_server "$tmp/server1.log" "$ex/ledger/ledger_server" --port 0 --dir "$data" \
	--workers 2 --groups 64 --metrics-port 0 --watchdog-ms 1000
mport=$(sed -n 's/^metrics on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
	"$tmp/server1.log")
[ -n "$mport" ] || fail "no 'metrics on' line"
"$ex/ledger/ledger_load" --port "$port" --requests 3000 --connections 8 \
	--accounts 40 --pipeline 8 --seed 3 --expect-out "$tmp/expected" \
	--metrics-port "$mport" >"$tmp/load1.log" 2>&1 ||
	{ cat "$tmp/load1.log" >&2; fail "ledger_load"; }
cat "$tmp/load1.log"
grep -q '^ledger_load: server queue latency p50 [0-9.]* ms' \
	"$tmp/load1.log" || fail "ledger_load printed no server latency"

if $have_bash; then
	step "clients that disconnect mid-request"
	# A request cut off mid-frame is never applied; whole ones are,
	# even when their client has gone before the reply.
	send_and_close "$port" '*3\r\n$6\r\nINCRBY\r\n$4\r\ntorn\r\n$2\r\n1'
	send_and_close "$port" 'INCRBY gone 7\r\nINCRBY gone 5\r\n'
	wait_for_reply "$port" 'GET gone\r\nQUIT\r\n' '$2|12|+OK|'
	wait_for_reply "$port" 'GET torn\r\nQUIT\r\n' '$-1|+OK|'
	echo "gone 12" >>"$tmp/expected"

	step "a protocol error is answered once, then the connection closes"
	bad='NOPE\r\n*1\r\n$x\r\nPING\r\n*1\r\n$4\r\nPING\r\n'
	got=$(request "$port" "$bad" | tr -d '\r' | tr '\n' '|')
	want="-ERR unknown command 'NOPE', with args beginning with: |"
	want="$want-ERR Protocol error: invalid bulk length|"
	[ "$got" = "$want" ] || fail "malformed: got '$got'"
	got=$(request "$port" 'GET "a\r\nPING\r\n' | tr -d '\r' | tr '\n' '|')
	want="-ERR Protocol error: unbalanced quotes in request|"
	[ "$got" = "$want" ] || fail "unbalanced quotes: got '$got'"

	step "GET /metrics on the engine's ring; 404, 405, 400 otherwise"
	http_raw "$mport" 'GET /metrics HTTP/1.0\r\n\r\n' >"$tmp/metrics"
	got=$(head -n 1 "$tmp/metrics" | tr -d '\r')
	[ "$got" = "HTTP/1.1 200 OK" ] || fail "/metrics: got '$got'"
	# Content-Length is the body's length (the head ends at "\r\n\r\n").
	len=$(sed -n 's/^Content-Length: \([0-9]*\)\r$/\1/p' "$tmp/metrics")
	head_len=$(sed '/^\r$/q' "$tmp/metrics" | wc -c)
	[ "$len" -eq $(($(wc -c <"$tmp/metrics") - head_len)) ] ||
		fail "/metrics: Content-Length $len is not the body's"
	series='aggring_messages_total{context="bank",aggregate="Account"'
	handled=$(grep -F "$series" "$tmp/metrics" |
		sed -n 's/.*outcome="handled"} \([0-9]*\)\r*$/\1/p')
	[ "${handled:-0}" -gt 0 ] || fail "/metrics: no handled messages"
	grep -q '^aggring_processing_latency_seconds_bucket{.*le="+Inf"}' \
		"$tmp/metrics" || fail "/metrics: no processing latency"
	echo "  /metrics: $handled messages handled"
	got=$(status_of "$mport" 'GET /nope HTTP/1.0\r\n\r\n')
	[ "$got" = "HTTP/1.1 404 Not Found" ] || fail "/nope: got '$got'"
	got=$(status_of "$mport" 'POST /metrics HTTP/1.0\r\n\r\n')
	[ "$got" = "HTTP/1.1 405 Method Not Allowed" ] ||
		fail "POST: got '$got'"
	got=$(status_of "$mport" 'garbage\r\n')
	[ "$got" = "HTTP/1.1 400 Bad Request" ] || fail "garbage: got '$got'"

	# A scrape that never ends its request must not hold up the stop.
	# Accepts are in order: once a later scrape is answered, the idle
	# one has been accepted and its recv is armed.
	bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "GET /metrics HTTP/1.0\r\n" >&3
		: >"$2"
		exec sleep 60' idle "$mport" "$tmp/idle" &
	idle=$!
	pids="$pids $idle"
	i=0
	until [ -e "$tmp/idle" ]; do
		i=$((i + 1))
		[ $i -le 200 ] || fail "the idle scrape did not connect"
		sleep 0.05
	done
	got=$(status_of "$mport" 'GET /metrics HTTP/1.0\r\n\r\n')
	[ "$got" = "HTTP/1.1 200 OK" ] || fail "/metrics: got '$got'"
fi
stop_server "$tmp/server1.log"
[ -n "${idle:-}" ] && kill "$idle" 2>/dev/null

step "the journals hold exactly the acknowledged balances"
journal_holds "$tmp/expected" "after the first run"

# worker_cpus PID: the CPUs each worker thread of ledger_server PID
# may run on (Cpus_allowed_list), space-separated, in thread order.
worker_cpus() {
	for t in /proc/"$1"/task/*; do
		case $(cat "$t/comm") in
		ledger-Account*)
			printf '%s ' "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' \
				"$t/status")" ;;
		esac
	done
}

# data_end FILE: the bytes before the zeros a direct journal writes
# ahead (records never hold a NUL byte).
data_end() {
	tr -d '\000' <"$1" | wc -c
}

if grep -q '^ledger_server: journal I/O direct' "$tmp/server1.log"; then
	step "a direct journal writes zeros ahead, not counted as torn"
	size=$(wc -c <"$data/journal-0.log")
	# at least one chunk of zeros: 64 KiB, the smallest (ledger_journal.h)
	[ "$size" -ge 65536 ] ||
		fail "journal-0.log holds $size bytes: no zeros ahead"
	[ "$(data_end "$data/journal-0.log")" -lt "$size" ] ||
		fail "journal-0.log: no zeros after the records"
	"$ex/ledger/ledger_server" --verify --dir "$data" >"$tmp/verify1" ||
		fail "verify"
	grep -q ' 0 torn bytes: OK$' "$tmp/verify1" ||
		fail "zeros ahead taken for a torn write: $(cat "$tmp/verify1")"
fi

step "a torn batch is cut off on restart, with the records after it"
# A crash mid-batch: a record cut short where the records end, and a
# whole record (valid CRC) two blocks on that the same batch wrote. It
# was never acknowledged, so it must not count, now or later.
j1=$data/journal-1.log
end=$(data_end "$j1")
stale=$(head -n 1 "$j1")
printf 'acct:1 +5 00' |
	dd of="$j1" bs=1 seek="$end" conv=notrunc 2>/dev/null
printf '%s\n' "$stale" |
	dd of="$j1" bs=1 seek=$((end + 8192)) conv=notrunc 2>/dev/null
start_server "$tmp/server2.log" "$ex/ledger/ledger_server" --port 0 --dir "$data" \
	--workers 2 --groups 64 --journal-sync fdatasync --worker-cpus none
grep -q '^ledger_server: workers not pinned (--worker-cpus none)$' \
	"$tmp/server2.log" || fail "no 'workers not pinned' line"
all=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status")
[ "$(worker_cpus "$pid")" = "$all $all " ] ||
	fail "--worker-cpus none: workers on '$(worker_cpus "$pid")', not $all"
grep -q 'cut off' "$tmp/server2.log" || fail "torn tail not reported"
grep -q '^ledger_server: journal I/O .*, write + fdatasync$' \
	"$tmp/server2.log" || fail "no 'write + fdatasync' line"
events=$(sed -n 's/^ledger_server: \([0-9]*\) events journaled.*/\1/p' \
	"$tmp/server1.log")
grep -q "replayed $events events" "$tmp/server2.log" ||
	fail "expected $events events replayed"

step "the restarted server (write + fdatasync) serves the same balances, and goes on"
serves_and_goes_on "$tmp/expected" 4 "$tmp/expected2" "$tmp/server2.log" \
	"after restart"

step "ledger_server refuses a --worker-cpus that is not auto, none or a list"
"$ex/ledger/ledger_server" --worker-cpus some --dir "$tmp/never" >/dev/null 2>&1
status=$?
[ $status -eq 2 ] || fail "--worker-cpus some: exit status $status, not 2"
[ ! -e "$tmp/never" ] || fail "--worker-cpus some: the server went on"

step "--journal-io buffered on the same journals: writes after the records"
# Both workers on one CPU: the first this test may use (not always 0).
cpu=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' \
	/proc/self/status)
start_server "$tmp/server3.log" "$ex/ledger/ledger_server" --port 0 --dir "$data" \
	--workers 2 --groups 64 --journal-io buffered --worker-cpus "$cpu"
grep -q "^ledger_server: workers pinned to CPUs $cpu (--worker-cpus)\$" \
	"$tmp/server3.log" || fail "no 'workers pinned to CPUs $cpu' line"
[ "$(worker_cpus "$pid")" = "$cpu $cpu " ] ||
	fail "--worker-cpus $cpu: workers may run on '$(worker_cpus "$pid")'"
grep -q '^ledger_server: journal I/O buffered, RWF_DSYNC writes$' \
	"$tmp/server3.log" || fail "no 'journal I/O buffered' line"
serves_and_goes_on "$tmp/expected2" 5 "$tmp/expected3" "$tmp/server3.log" \
	"in buffered mode"

step "one worker (placed by --worker-cpus auto), more records than the first zeros"
# Less than 2 MiB left ahead starts the next 4 MiB of zeros: some
# 130000 records of about 22 bytes pass that in one journal. No
# checkpoints: their compaction would free the records counted below.
data4=$tmp/ledger4
start_server "$tmp/server4.log" "$ex/ledger/ledger_server" --port 0 \
	--dir "$data4" --workers 1 --groups 256 --no-checkpoints
# --worker-cpus auto: with fewer workers than CPUs, the worker runs on
# the first CPU of the list the server prints (the disk's interrupts'),
# or the server says why it is not pinned.
placed=$(sed -n 's/^ledger_server: workers pinned to CPUs \([0-9]*\).*'\
'interrupts go to CPU.*/\1/p' "$tmp/server4.log")
if [ -n "$placed" ]; then
	[ "$(worker_cpus "$pid")" = "$placed " ] ||
		fail "auto: worker may run on '$(worker_cpus "$pid")', not $placed"
else
	grep -q '^ledger_server: workers not pinned (' "$tmp/server4.log" ||
		fail "auto: no worker placement line"
fi
"$ex/ledger/ledger_load" --port "$port" --requests 150000 --connections 16 \
	--accounts 1000 --pipeline 16 --seed 6 --expect-out "$tmp/expected4" \
	>"$tmp/load4.log" 2>&1 || { cat "$tmp/load4.log" >&2; fail "ledger_load"; }
stop_server "$tmp/server4.log"
"$ex/ledger/ledger_server" --verify --dir "$data4" --dump "$tmp/dump4" \
	>"$tmp/verify4" || fail "verify"
cat "$tmp/verify4"
grep -q ' 0 torn bytes: OK$' "$tmp/verify4" || fail "verify: torn bytes"
same_balances "$tmp/dump4" "$tmp/expected4" || fail "journal != expected"
if grep -q '^ledger_server: journal I/O direct' "$tmp/server4.log"; then
	size=$(wc -c <"$data4/journal-0.log")
	end=$(data_end "$data4/journal-0.log")
	[ "$end" -gt 2097152 ] || fail "only $end bytes of records"
	[ "$size" -ge 8388608 ] ||
		fail "journal-0.log: $size bytes, $end of records: no more zeros"
fi
echo "PASS"
