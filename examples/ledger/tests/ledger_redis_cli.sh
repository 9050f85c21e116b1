#!/bin/sh
# ledger_server driven by stock redis-cli (Debian's redis-tools): every
# command, a pipeline, a malformed frame, an overdraft, and a restart
# that replays the journal. Exit 0 pass, 1 fail, 77 skip (no redis-cli
# or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools redis-cli
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir redis-cli

# start LOG: the server on a free port.
start() {
	start_server "$1" "$server" --port 0 --dir "$tmp/data" --workers 2
}

# expect WANT ARGS...: `redis-cli ARGS` prints WANT (an error reply
# prints its text; nil prints nothing).
expect() {
	want=$1
	shift
	got=$(redis-cli -p "$port" "$@" 2>&1)
	[ "$got" = "$want" ] || fail "redis-cli $*: got '$got', want '$want'"
	echo "ok: $* -> ${want:-(nil)}"
}

# pipe_expect FILE WANT: the raw requests in FILE through `redis-cli
# --pipe`, whose last line counts the errors and the replies (not those
# of the ECHO it adds to find the end).
pipe_expect() {
	got=$(redis-cli -p "$port" --pipe <"$1" 2>/dev/null | tail -n 1)
	[ "$got" = "$2" ] || fail "redis-cli --pipe: got '$got', want '$2'"
	echo "ok: --pipe -> $2"
}

start "$tmp/server1.log"

echo "== every command"
expect PONG PING
expect 'hello world' PING 'hello world'
expect 'hello' ECHO hello
expect '' GET alice
expect 100 INCRBY alice 100
expect 70 DECRBY alice 30
expect 71 INCR alice
expect 70 DECR alice
expect 70 GET alice
# redis-benchmark asks for these two before it starts.
expect 'appendonly
yes
save' CONFIG GET save appendonly

echo "== an overdraft is refused and changes nothing"
expect 'ERR insufficient funds' DECRBY alice 71
expect 'ERR insufficient funds' DECR nobody
expect 70 GET alice
expect '' GET nobody

echo "== bad requests get errors"
expect "ERR unknown command 'FLUSHALL', with args beginning with: " FLUSHALL
expect "ERR wrong number of arguments for 'get' command" GET
expect "ERR wrong number of arguments for 'incrby' command" INCRBY alice
expect 'ERR value is not an integer or out of range' INCRBY alice ten
expect 'ERR value is not an integer or out of range' INCRBY alice 1.5
expect 'ERR amount must be positive' DECRBY alice -5
expect 'ERR amount must be positive' INCRBY alice 0
expect 'ERR invalid account name: 1 to 128 printable characters, no spaces' \
	INCRBY 'two words' 1

echo "== a pipeline of 1000 deposits, then a malformed frame"
awk 'BEGIN {
	for (i = 0; i < 1000; i++)
		printf "*3\r\n$6\r\nINCRBY\r\n$3\r\nbob\r\n$1\r\n%d\r\n",
			i % 9 + 1
}' >"$tmp/deposits"
pipe_expect "$tmp/deposits" 'errors: 0, replies: 1000'
expect 4996 GET bob
# A request before a protocol error is served; after it, the
# connection is closed, as Redis does (redis-cli --pipe then reports
# the error and gives up).
printf 'INCRBY bob 4\r\nGET "bob\r\nINCRBY bob 1\r\n' >"$tmp/inline"
redis-cli -p "$port" --pipe <"$tmp/inline" >"$tmp/pipe.out" 2>&1
grep -q 'ERR Protocol error: unbalanced quotes in request' "$tmp/pipe.out" ||
	fail "--pipe: $(cat "$tmp/pipe.out")"
expect 5000 GET bob

echo "== SET sets a balance, DEL closes an account"
expect OK SET carol 42
expect OK SET dave 7
expect 1 DEL dave nobody
expect 0 EXISTS dave
expect 'ERR a balance cannot be negative' SET carol -1

echo "== a string value: SET, GET, TYPE, STRLEN; no arithmetic on it"
expect OK SET greeting 'hello world'
expect 'hello world' GET greeting
expect string TYPE greeting
expect 11 STRLEN greeting
expect none TYPE nobody
expect 'ERR value is not an integer or out of range' INCR greeting
expect 'ERR value is not an integer or out of range' TRANSFER greeting bob 1
expect 'hello world' GET greeting
expect 5000 GET bob

echo "== MULTI/EXEC on one account; over two, refused with nothing applied"
printf 'MULTI\nINCRBY erin 10\nDECRBY erin 3\nGET erin\nEXEC\n' |
	redis-cli -p "$port" >"$tmp/multi" 2>&1
[ "$(tr '\n' ' ' <"$tmp/multi")" = "OK QUEUED QUEUED QUEUED 10 7 7 " ] ||
	fail "MULTI on erin: $(cat "$tmp/multi")"
printf 'MULTI\nINCRBY erin 1\nINCRBY carol 1\nEXEC\n' |
	redis-cli -p "$port" >"$tmp/multi" 2>&1
grep -q '^CROSSSLOT ' "$tmp/multi" || fail "cross MULTI: $(cat "$tmp/multi")"
expect 7 GET erin
expect 42 GET carol

echo "== a graceful stop, then a restart replays the journal"
stop_server "$tmp/server1.log"
start "$tmp/server2.log"
cat "$tmp/server2.log"
grep -q 'replayed 1010 events' "$tmp/server2.log" ||
	fail "expected 1010 events replayed"
expect 70 GET alice
expect 5000 GET bob
expect '' GET nobody
expect 42 GET carol
expect 7 GET erin
expect 'hello world' GET greeting
expect '' GET dave
expect 5001 INCRBY bob 1
stop_server "$tmp/server2.log"
"$server" --verify --dir "$tmp/data" --dump "$tmp/dump" || fail "verify"
sort "$tmp/dump" | tr '\n' ' ' | grep -qx 'alice 70 bob 5001 carol 42 erin 7 greeting 0 ' ||
	fail "journal holds: $(tr '\n' ' ' <"$tmp/dump")"
echo "PASS"
