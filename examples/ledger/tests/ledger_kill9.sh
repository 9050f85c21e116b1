#!/bin/sh
# ledger_server killed with SIGKILL under load, several rounds: every
# INCRBY it acknowledged is still there after the restart.
#
# Each round: redis-benchmark's INCR load on random counters, and
# alongside it tests/ledger_acked.py, which owns the kill9:* accounts,
# checks every reply and remembers what was acknowledged and what was
# sent without a reply. Once enough is acknowledged, kill -9; restart
# on the same journals; each account must hold its acknowledged
# balance plus a prefix of the unanswered amounts, exactly. The last
# round's balances are then checked offline (--verify) after a clean
# stop. KILL9_ROUNDS (default 4) sets the rounds. Loopback only.
#
# Exit 0 pass, 1 fail, 77 skip (no python3, no redis-benchmark, or no
# io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3 redis-benchmark
server=$top_builddir/examples/ledger/ledger_server
acked="python3 $top_srcdir/examples/ledger/tests/ledger_acked.py"
rounds=${KILL9_ROUNDS:-4}

use_tmpdir kill9

data=$tmp/data
: >"$tmp/base"
: >"$tmp/server0.log"
start_server "$tmp/server0.log" "$server" --port 0 --dir "$data" \
	--workers 2 --groups 256
round=1
while [ $round -le "$rounds" ]; do
	echo "== round $round: load, then kill -9"
	redis-benchmark -p "$port" -c 8 -n 100000000 -r 1000 -P 8 -t incr -q \
		>"$tmp/bench$round.log" 2>&1 &
	bench=$!
	pids="$pids $bench"
	$acked load --port "$port" --state "$tmp/state" --base "$tmp/base" \
		--progress "$tmp/progress$round" --seed "$round" \
		>"$tmp/load$round.log" 2>&1 &
	client=$!
	pids="$pids $client"
	# Some rounds kill sooner than others.
	wait_progress "$tmp/progress$round" $((round * 150)) "$client"
	kill -0 "$bench" 2>/dev/null ||
		{ cat "$tmp/bench$round.log" >&2; fail "redis-benchmark ended"; }
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	wait_gone "$client" 30 "the client"
	wait "$client" || { cat "$tmp/load$round.log" >&2; fail "client"; }
	cat "$tmp/load$round.log"
	kill "$bench" 2>/dev/null
	wait_gone "$bench" 30 "redis-benchmark"
	wait "$bench" 2>/dev/null

	echo "== round $round: restart, every acknowledged INCRBY is there"
	: >"$tmp/server$round.log"
	start_server "$tmp/server$round.log" "$server" --port 0 --dir "$data" \
		--workers 2 --groups 256
	grep 'replayed\|cut off' "$tmp/server$round.log"
	$acked check --port "$port" --state "$tmp/state" --out "$tmp/base" ||
		fail "round $round: acknowledged INCRBYs lost or wrong"
	round=$((round + 1))
done
stop_server "$tmp/server$rounds.log" >/dev/null
"$server" --verify --dir "$data" --dump "$tmp/dump" || fail "verify"
awk 'NR == FNR { bal[$1] = $2; next }
     (bal[$1] + 0) != $2 { print "  " $1 ": " (bal[$1] + 0) " != " $2; bad++ }
     END { exit bad > 0 }' "$tmp/dump" "$tmp/base" ||
	fail "the journals, replayed offline, disagree with the last check"
echo "PASS"
