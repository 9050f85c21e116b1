#!/bin/sh
# A checkpoint built from the workers' accounts (--checkpoint-from
# tables) holds what one built by replaying the journal holds. Two
# servers take the same sequential traffic (deposits with and without
# request ids, strings, transfers settled and refused, closes): one
# copies its tables every 300 events, the other replays, once, at its
# clean stop. Their newest checkpoints must hold the same journal
# positions, accounts (balances, strings, remembered request ids) and
# open transfers. Then the copying one, killed with SIGKILL and
# restarted, answers a retry from before its checkpoint with the first
# reply. Exit 0 pass, 1 fail, 77 skip (no redis-cli or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools redis-cli
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir ckpt-tables

# The traffic: one client, each reply read before the next command, so
# that both servers journal the same records in the same order.
awk 'BEGIN {
	for (i = 1; i <= 1500; i++) {
		a = "acct:" (i % 40); b = "acct:" ((i * 7) % 40)
		if (i % 3 == 0) print "INCRBY", a, i, "REQID", "dep-" i
		else print "INCRBY", a, i % 11 + 1
		if (i % 5 == 0) print "SET", "str:" (i % 13), "v" i "x"
		if (i % 7 == 0 && a != b)
			print "TRANSFER", a, b, i % 50 + 1, "REQID", "xfer-" i
		if (i % 11 == 0 && a != b) print "TRANSFER", a, b, 1000000000
		if (i % 97 == 0) print "DEL", "acct:" (i % 40 + 1)
	}
}' >"$tmp/traffic"

# info PORT FIELD: the value of FIELD in INFO persistence.
info() {
	redis-cli -p "$1" INFO persistence | tr -d '\r' | sed -n "s/^$2://p"
}

# newest DIR: the newest checkpoint's path.
newest() {
	ls "$1"/checkpoint-*.ckpt | sort | tail -n 1
}

# body FILE: its positions, accounts and transfers, sorted.
body() {
	grep -v '^ledger-checkpoint \|^end ' "$1" | sort
}

run() { # NAME ARGS...: the traffic, then a clean stop
	name=$1
	shift
	start_server "$tmp/$name.log" "$server" --port 0 --dir "$tmp/$name" \
		--workers 2 --groups 16 "$@"
	redis-cli -p "$port" <"$tmp/traffic" >"$tmp/$name.replies" ||
		fail "$name: redis-cli failed"
}

echo "== copying the tables every 300 events"
run tables --checkpoint-events 300 --checkpoint-from tables
i=0
while :; do
	n=$(info "$port" checkpoints_from_tables)
	[ "${n:-0}" -ge 2 ] && break
	i=$((i + 1))
	[ $i -le 600 ] || fail "no two checkpoints from the tables in 30 s"
	sleep 0.05
done
echo "$n checkpoints from the tables"
stop_server "$tmp/tables.log" >/dev/null

echo "== replaying the whole journal at the stop"
run replay --checkpoint-events 0 --checkpoint-bytes 0 \
	--checkpoint-from journal
[ "$(info "$port" checkpoints_taken)" = 0 ] || fail "replay took a cycle early"
stop_server "$tmp/replay.log" >/dev/null
cmp -s "$tmp/tables.replies" "$tmp/replay.replies" ||
	fail "the two servers answered the traffic differently"

a=$(newest "$tmp/tables")
b=$(newest "$tmp/replay")
body "$a" >"$tmp/a"
body "$b" >"$tmp/b"
[ "$(grep -c '^s ' "$tmp/a")" -gt 40 ] || fail "$a holds too few accounts"
grep -q ' #c:dep-' "$tmp/a" || fail "$a remembers no request id"
grep -q '=' "$tmp/a" || fail "$a holds no string"
if ! cmp -s "$tmp/a" "$tmp/b"; then
	diff "$tmp/a" "$tmp/b" | head -20 >&2
	fail "$a and $b differ"
fi
echo "ok: $(wc -l <"$tmp/a") lines alike in $(basename "$a") and $(basename "$b")"

echo "== killed, restarted: a retry from before the checkpoint"
start_server "$tmp/tables2.log" "$server" --port 0 --dir "$tmp/tables" \
	--workers 2 --groups 16 --checkpoint-events 300 --checkpoint-from tables
first=$(sed -n 3p "$tmp/tables.replies") # INCRBY acct:3 3 REQID dep-3
got=$(redis-cli -p "$port" INCRBY acct:3 3 REQID dep-3)
[ "$got" = "$first" ] || fail "the retry of dep-3 got '$got', want '$first'"
redis-cli -p "$port" INCRBY acct:3 1 >/dev/null
kill -KILL "$pid"
wait_gone "$pid" 20 "ledger_server after SIGKILL"
pids=""
start_server "$tmp/tables3.log" "$server" --port 0 --dir "$tmp/tables" \
	--workers 2 --groups 16
got=$(redis-cli -p "$port" INCRBY acct:3 3 REQID dep-3)
[ "$got" = "$first" ] || fail "after SIGKILL, dep-3 got '$got', want '$first'"
echo "ok: dep-3 answered $first before and after a SIGKILL"
stop_server "$tmp/tables3.log" >/dev/null
exit 0
