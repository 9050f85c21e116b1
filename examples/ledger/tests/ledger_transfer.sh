#!/bin/sh
# TRANSFER as a saga across two accounts' groups: settled, refused,
# refunded; a crash (SIGKILL, --crash-after) at each step, then a
# restart that finishes or compensates the open transfer, and the
# client's retry under the same REQID, which answers the first reply and
# applies nothing; and many concurrent transfers, after which the sum of
# the balances is what it was. Exit 0 pass, 1 fail, 77 skip (no
# redis-cli or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools redis-cli
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir transfer
big=9223372036854775800 # a credit of 8 or more would overflow it

expect() {
	want=$1
	shift
	got=$(redis-cli -p "$port" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//')
	[ "$got" = "$want" ] || fail "redis-cli $*: got '$got', want '$want'"
	echo "ok: $* -> $want"
}

# crashed: at most 20 s for the server to die by its own SIGKILL.
crashed() {
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -le 400 ] || fail "no crash within 20 s"
		sleep 0.05
	done
	wait "$pid"
	status=$?
	pids=$(echo " $pids " | sed "s/ $pid / /")
	[ $status -eq 137 ] || fail "exit status $status, not SIGKILL's"
	echo "ok: killed at the step (status $status)"
}

# verify DIR WANT: --verify's line for DIR ends with WANT.
verify() {
	got=$("$server" --verify --dir "$1")
	case $got in
	*"$2") echo "ok: $got" ;;
	*) fail "verify: got '$got', want '...$2'" ;;
	esac
}

echo "== settled, refused, refunded"
start_server "$tmp/s0.log" "$server" --port 0 --dir "$tmp/d0" --workers 2
expect OK SET a 100
expect OK SET c $big
expect 70 TRANSFER a b 30
expect 'ERR insufficient funds' TRANSFER a b 71
expect 'ERR a transfer needs two different accounts' TRANSFER a a 1
expect 'ERR transfer refused by the destination (its balance would overflow); refunded' \
	TRANSFER a c 50
expect "70 30 $big" MGET a b c
stop_server "$tmp/s0.log"
verify "$tmp/d0" "0 open transfers (0 in flight), 0 torn bytes: OK"

for step in debit credit refusal; do
	echo "== killed after the $step, then a restart"
	d=$tmp/d-$step
	start_server "$tmp/$step.log" "$server" --port 0 --dir "$d" \
		--workers 2 --crash-after $step
	expect OK SET a 100
	expect OK SET c $big
	to=b
	[ $step = refusal ] && to=c
	redis-cli -p "$port" TRANSFER a $to 30 REQID pay-$step >/dev/null 2>&1
	crashed
	case $step in
	debit) open="1 open transfers (30 in flight), 0 torn bytes" ;;
	credit) open="0 open transfers (0 in flight), 0 torn bytes" ;;
	refusal) open="1 open transfers (30 in flight), 0 torn bytes" ;;
	esac
	verify "$d" "$open: OK"
	start_server "$tmp/$step-2.log" "$server" --port 0 --dir "$d" \
		--workers 2
	case $step in
	refusal) want="100 $big" ;; # compensated: the refund
	*) want="70 30" ;;	    # finished: the credit
	esac
	# The resumed transfer ends on its own: poll for it.
	i=0
	while [ "$(redis-cli -p "$port" MGET a $to | tr '\n' ' ')" != "$want " ]
	do
		i=$((i + 1))
		[ $i -le 400 ] || fail "after the $step: $(redis-cli -p "$port" MGET a $to)"
		sleep 0.05
	done
	echo "ok: MGET a $to -> $want"
	# The client's retry after the crash: the first reply, applied once.
	case $step in
	refusal) first='ERR transfer refused by the destination; refunded' ;;
	*) first=70 ;;
	esac
	balances=$want # (expect sets want)
	expect "$first" TRANSFER a $to 30 REQID pay-$step
	expect "$balances" MGET a $to
	stop_server "$tmp/$step-2.log"
	verify "$d" "0 open transfers (0 in flight), 0 torn bytes: OK"
done
load=$top_builddir/examples/ledger/ledger_load
if [ -x "$load" ]; then
	echo "== ledger_load: concurrent transfers keep the sum of the balances"
	start_server "$tmp/load.log" "$server" --port 0 --dir "$tmp/dl" \
		--workers 2
	"$load" --port "$port" --requests 2000 --connections 8 --accounts 40 \
		--transfers 4000 --expect-out "$tmp/expected" >"$tmp/load.out" 2>&1 ||
		{ cat "$tmp/load.out" >&2; fail "ledger_load --transfers"; }
	cat "$tmp/load.out"
	grep -q '^ledger_load: 4000 transfers .*: OK$' "$tmp/load.out" ||
		fail "no transfer summary"
	stop_server "$tmp/load.log"
	verify "$tmp/dl" "0 open transfers (0 in flight), 0 torn bytes: OK"
	# The journals hold what the last GETs read.
	"$server" --verify --dir "$tmp/dl" --dump "$tmp/dump" >/dev/null
	sort "$tmp/dump" | grep -v ' 0$' >"$tmp/got"
	sort "$tmp/expected" | grep -v ' 0$' >"$tmp/want"
	cmp -s "$tmp/got" "$tmp/want" || fail "the journals hold other balances"
else
	echo "ledger_load not built (no hiredis): its part skipped"
fi
echo "PASS"
