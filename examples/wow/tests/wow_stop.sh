#!/bin/sh
# SPDX-License-Identifier: MIT
# wow_stop.sh - issue 30: one aggregate id under two tenants, then
# SIGTERM. A Wow processor answers the second tenant's create with
# DuplicateAggregateId and acks it; wow_ledger must do the same (no
# endless reload-and-append loop) and stop within its deadline.
# Exit 0 pass, 1 fail, 77 skip (no redis-server, redis-cli or program).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
ledger=$top_builddir/examples/wow/wow_ledger
stop_s=${WOW_STOP_DEADLINE:-40}

. "$top_srcdir/tests/lib.sh"
require_tools redis-server redis-cli
require_built "$ledger" "configure found no hiredis or json-c"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-wow-stop.XXXXXX") || exit 1
rpid=
lpid=
cleanup() {
	[ -n "$lpid" ] && kill -KILL "$lpid" 2>/dev/null
	[ -n "$rpid" ] && kill -KILL "$rpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
	echo "FAIL: $*"
	echo "--- ledger log"
	tail -20 "$tmp/ledger.log"
	exit 1
}

# a free port: the kernel's, through a throwaway listener
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null) ||
	port=$((20000 + $$ % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
	--dir "$tmp" --loglevel warning >"$tmp/redis.log" 2>&1 &
rpid=$!
rc() { redis-cli -p "$port" "$@"; }
i=0
until rc PING >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "redis-server did not answer on $port"
	sleep 0.1
done

"$ledger" -p "$port" -n stop-1 -w 2 >"$tmp/ledger.log" 2>&1 &
lpid=$!
i=0
until grep -q '^ready' "$tmp/ledger.log"; do
	i=$((i + 1))
	kill -0 "$lpid" 2>/dev/null || fail "wow_ledger exited"
	[ $i -gt 300 ] && fail "wow_ledger not ready"
	sleep 0.1
done

# Wow's command document (CommandJsonSerializer's field order)
cmd() { # id tenant
	printf '{"id":"%s","contextName":"bank","aggregateName":"Account","name":"Deposit","header":{},"tenantId":"%s","aggregateId":"same-id","ownerId":"","spaceId":"","requestId":"%s","isCreate":false,"isVoid":false,"allowCreate":true,"bodyType":"bank.account.Deposit","body":{"amount":5},"createTime":1000}' "$1" "$2" "$1"
}
rc XADD bank.Account:command '*' msg "$(cmd stop-c1 tenant-a)" >/dev/null
rc XADD bank.Account:command '*' msg "$(cmd stop-c2 tenant-b)" >/dev/null

acked=yes
# both entries acked (the second as a failure, as Wow acks it)
i=0
while :; do
	pending=$(rc XPENDING bank.Account:command bank.CommandDispatcher | head -1)
	# both delivered: the group's last id is the stream's (Redis 6.2 too)
	last=$(rc XINFO STREAM bank.Account:command | sed -n '/^last-generated-id$/{n;p}')
	delivered=$(rc XINFO GROUPS bank.Account:command | sed -n '/^last-delivered-id$/{n;p}')
	[ "$pending" = 0 ] && [ -n "$last" ] && [ "$delivered" = "$last" ] && break
	i=$((i + 1))
	if [ $i -gt 300 ]; then
		acked="not both acked (pending $pending): a livelock"
		break
	fi
	sleep 0.1
done

kill -TERM "$lpid"
i=0
while kill -0 "$lpid" 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt $((stop_s * 10)) ] &&
		fail "wow_ledger did not stop within ${stop_s}s of SIGTERM; commands acked: $acked"
	sleep 0.1
done
wait "$lpid"
status=$?
lpid=
[ "$acked" = yes ] || fail "commands $acked"
[ "$status" = 0 ] || fail "wow_ledger exited with $status"
echo "PASS: one id under two tenants answered and acked; SIGTERM stopped wow_ledger"
exit 0
