#!/bin/sh
# ledger_server driven by the clients people use with Redis: redis-py
# (tests/ledger_clients.py: connect options, pipelines, the limits and
# their texts), redis-cli (-a, -n, --stat, --latency) and
# redis-benchmark (which exits 1 at the first error reply), and a
# server over --maxclients. Exit 0 pass, 1 fail, 77 skip (no
# redis-tools, or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools redis-cli redis-benchmark stdbuf
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir clients
pass=sekret
max_bulk=65536
query_limit=131072

# A python3 with the redis module: Debian's, even under a pyenv shim.
# Isolated (-I) and asking for redis.Redis: the build tree's redis/
# directory would import as an empty namespace package from the cwd.
python=
for p in python3 /usr/bin/python3; do
	if "$p" -I -c 'import redis; redis.Redis' 2>/dev/null; then
		python=$p
		break
	fi
done

cli() {
	redis-cli -p "$port" -a "$pass" --no-auth-warning "$@" 2>&1
}

expect() {
	want=$1
	shift
	got=$(cli "$@")
	[ "$got" = "$want" ] || fail "redis-cli $*: got '$got', want '$want'"
	echo "ok: $* -> $want"
}

# wait_lines FILE N: at most 20 s for FILE to have N lines.
wait_lines() {
	i=0
	# (The file may not exist yet: the redirection is the job's.)
	while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ]; do
		i=$((i + 1))
		[ $i -le 400 ] || fail "$1: fewer than $2 lines in 20 s"
		sleep 0.05
	done
}

start_server "$tmp/server.log" "$server" --port 0 --dir "$tmp/data" \
	--workers 2 --requirepass "$pass" --proto-max-bulk-len $max_bulk \
	--client-query-buffer-limit $query_limit

echo "== redis-cli: -a, -n 0, AUTH and SELECT refusals"
expect PONG PING
expect PONG -n 0 PING
got=$(redis-cli -p "$port" PING 2>&1)
[ "$got" = "NOAUTH Authentication required." ] || fail "no -a: got '$got'"
got=$(redis-cli -p "$port" -a wrong --no-auth-warning PING 2>&1)
case $got in
*"WRONGPASS invalid username-password pair or user is disabled."*) ;;
*) fail "a wrong -a: got '$got'" ;;
esac
got=$(cli -n 1 PING)
case $got in
*"ERR DB index is out of range"*) ;;
*) fail "-n 1: got '$got'" ;;
esac
expect 'NOPROTO unsupported protocol version' HELLO 3

echo "== redis-cli --stat: one sample"
# It samples forever: read its first line of numbers, then stop it.
stdbuf -oL redis-cli -p "$port" -a "$pass" --no-auth-warning --stat \
	-i 0.1 >"$tmp/stat" 2>&1 &
stat_pid=$!
pids="$pids $stat_pid"
wait_lines "$tmp/stat" 3
kill "$stat_pid"
sed -n 3p "$tmp/stat" | grep -Eq '^[0-9]+ +[0-9.]+[BKMG] +[0-9]+ +0 +[0-9]+' ||
	fail "--stat: $(cat "$tmp/stat")"
echo "ok: --stat: $(sed -n 3p "$tmp/stat")"

echo "== redis-cli --latency: a few samples"
# Not on a terminal it prints "min max avg samples" once, then exits.
got=$(cli --latency -i 1)
echo "$got" | grep -Eq '^[0-9]+ [0-9]+ [0-9.]+ [0-9]+$' ||
	fail "--latency: got '$got'"
[ "${got##* }" -ge 3 ] || fail "--latency: only ${got##* } samples"
echo "ok: --latency: $got"

echo "== redis-benchmark: exit 0 means no error reply"
bench() {
	redis-benchmark -p "$port" -a "$pass" -n 2000 -c 8 -q "$@" \
		>"$tmp/bench" 2>&1 || {
		cat "$tmp/bench" >&2
		fail "redis-benchmark $*"
	}
	echo "ok: redis-benchmark $*"
}
bench -t ping,get,incr
bench -t ping,get,incr -r 1000
bench -P 8 -t ping,get,incr -r 1000
bench INCRBY bench:one 3
bench -r 1000 INCRBY key:__rand_int__ 3
bench -r 1000 SET key:__rand_int__ 42
expect 6000 GET bench:one
expect 2000 GET counter:__rand_int__ # -t incr without -r: one key

# info_field NAME: its value in INFO.
info_field() {
	cli INFO | tr -d '\r' | sed -n "s/^$1://p"
}

echo "== redis-benchmark's own SET and GET: a 3-byte string value"
# (Its bytes are random, drawn once per run.)
changes=$(info_field journal_changes)
bench -t ping,set,get,incr
expect 3 STRLEN key:__rand_int__
expect string TYPE key:__rand_int__
expect 4000 GET counter:__rand_int__
# Every INCR a change of its own, the SETs of the same value none more
# than the first: an error reply would have left one out.
got=$(($(info_field journal_changes) - changes))
[ "$got" -eq 2001 ] || fail "journal_changes grew by $got, want 2001"
echo "ok: journal_changes +2001"
bench -t ping,set,get,incr -r 1000
bench -P 8 -t set,get -r 1000
expect 4000 GET counter:__rand_int__
# -r 1000: three runs of 2000 INCR spread over counter:000000000000..999.
sum=$(cli --scan --pattern 'counter:0*' | sed 's/^/GET /' | cli |
	awk '{ s += $1 } END { print s }')
[ "$sum" = 6000 ] || fail "the counter:0* hold $sum, want 6000"
echo "ok: the counter:0* hold 6000"
n=$(cli --scan --pattern 'key:*' | wc -l)
[ "$n" -gt 500 ] && [ "$n" -le 1001 ] || fail "--scan key:*: $n keys"
# Each key:* holds a balance of the INCRBY or SET -r runs above, or 3
# bytes of these (redis-benchmark's are printable).
bad=$(cli --scan --pattern 'key:*' | sed 's/^/GET /' | cli |
	awk 'length($0) != 3 && !/^[0-9]+$/')
[ -z "$bad" ] || fail "a key:* holds neither a balance nor 3 bytes: $bad"
echo "ok: each of the $n key:* holds a balance or 3 bytes"

echo "== redis-cli --scan: each key once; --bigkeys"
cli --scan >"$tmp/scan" || fail "--scan: $(cat "$tmp/scan")"
[ "$(wc -l <"$tmp/scan")" -eq "$(cli DBSIZE)" ] ||
	fail "--scan: $(wc -l <"$tmp/scan") keys, DBSIZE $(cli DBSIZE)"
[ -z "$(sort "$tmp/scan" | uniq -d)" ] || fail "--scan: a key twice"
echo "ok: --scan lists the $(cli DBSIZE) keys once each"
cli --bigkeys >"$tmp/bigkeys" || fail "--bigkeys: $(cat "$tmp/bigkeys")"
grep -q "^$(cli DBSIZE) strings with " "$tmp/bigkeys" ||
	fail "--bigkeys: $(cat "$tmp/bigkeys")"
grep -q "^Biggest string found " "$tmp/bigkeys" ||
	fail "--bigkeys: $(cat "$tmp/bigkeys")"
echo "ok: --bigkeys: $(grep '^Biggest string' "$tmp/bigkeys")"

if [ -n "$python" ]; then
	echo "== redis-py ($python)"
	"$python" "$top_srcdir/examples/ledger/tests/ledger_clients.py" \
		"$port" "$pass" $max_bulk $query_limit || fail "ledger_clients.py"
else
	echo "redis-py: not installed (python3-redis), its part skipped"
fi
stop_server "$tmp/server.log"

if [ -n "$python" ]; then
	echo "== a transaction is one journal record, and replays as one"
	# py:txn: 50, 30 (one record), a DEL and INCRBY 4 (another).
	n=$(cat "$tmp/data"/journal-*.log | tr '\0' '\n' | grep -c '^py:txn ')
	[ "$n" -eq 2 ] || fail "py:txn has $n records, want 2"
	start_server "$tmp/server1b.log" "$server" --port 0 \
		--dir "$tmp/data" --workers 2 --requirepass "$pass"
	expect 4 GET py:txn
	expect 7 GET py:other
	echo "== request ids survive the restart"
	expect 5 INCRBY py:id 5 REQID dep-1
	expect OK SET py:id 0 REQID set-1
	expect 90 GET py:id
	expect 70 TRANSFER py:src py:dst 30 REQID xfer-1
	printf 'MULTI REQID txn-1\nINCRBY py:src 10\nDECRBY py:src 1000\nGET py:src\nEXEC\n' |
		cli >"$tmp/multi"
	[ "$(tr '\n' ' ' <"$tmp/multi")" = \
		"OK QUEUED QUEUED QUEUED 75 ERR insufficient funds  75 " ] ||
		fail "MULTI REQID txn-1 after the restart: $(cat "$tmp/multi")"
	echo "ok: MULTI REQID txn-1 after the restart: its first reply"
	expect 75 GET py:src
	expect 35 GET py:dst
	expect v7 GET py:scan:7
	stop_server "$tmp/server1b.log"
fi

echo "== --maxclients 2: the third gets Redis's error"
if [ -z "$python" ] && command -v python3 >/dev/null 2>&1; then
	python=python3 # raw sockets only: no redis module needed
fi
[ -n "$python" ] || { echo "PASS (no python3: --maxclients untested)"; exit 0; }
start_server "$tmp/server2.log" "$server" --port 0 --dir "$tmp/data" \
	--workers 2 --maxclients 2
"$python" "$top_srcdir/examples/ledger/tests/ledger_clients.py" \
	--maxclients "$port" 2 ||
	fail "--maxclients"
stop_server "$tmp/server2.log"
grep -q 'ledger_server: stopped cleanly' "$tmp/server2.log" || fail "stop"
echo "PASS"
