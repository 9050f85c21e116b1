#!/bin/sh
# SPDX-License-Identifier: MIT
# wow_scale_out.sh - three examples/wow_ledger instances in one consumer
# group on a three-master Redis Cluster (tests/redis_cluster.sh), fed by
# examples/wow_produce, projected by examples/wow_project.
#
# Round 1: tens of thousands of commands over 1000 accounts; one ledger
# instance is SIGKILLed mid-run (its entries are claimed by the others
# after a short min-idle). Round 2: the same over another 1000
# accounts, while the master holding bank.Account:command is SIGKILLed
# and restarted from its AOF.
#
# After each round tests/wow_verify checks: each account's stream has
# contiguous versions, one per command, balances chained in version
# order; request ids unique; the projection equals the store; nothing
# pending in either group; every version published on :event.
# Every wait has a deadline; exit 0 pass, 1 fail, 77 skip.
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
cluster_sh=$top_srcdir/tests/redis_cluster.sh
ex=$top_builddir/examples/wow
commands=${WOW_SCALE_COMMANDS:-20000}
accounts=1000
deadline_s=${WOW_SCALE_DEADLINE:-180}

. "$top_srcdir/tests/lib.sh"
require_tools redis-server redis-cli
for prog in "$ex/wow_ledger" "$ex/wow_produce" "$ex/wow_project" \
	"$top_builddir/examples/wow/tests/wow_verify"; do
	require_built "$prog" "configure found no hiredis or json-c"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-wow-scale.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null
	done
	sh "$cluster_sh" stop "$tmp/cluster" >/dev/null 2>&1
	if [ "${keep:-no}" = yes ]; then
		echo "logs kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# The groups' state, so that a drain failure can be diagnosed.
groups_summary() {
	for tg in "bank.Account:command bank.CommandDispatcher" \
		"bank.Account:event bank.wow_project"; do
		set -- $tg
		echo "--- $1: last id $(last_id "$1")"
		echo "XINFO GROUPS:" $(rc XINFO GROUPS "$1")
		echo "XPENDING $2:" $(rc XPENDING "$1" "$2")
		echo "XINFO CONSUMERS $2:" $(rc XINFO CONSUMERS "$1" "$2")
		echo "oldest pending:" $(rc XPENDING "$1" "$2" - + 5)
	done
}

fail() {
	echo "FAIL: $*"
	case $* in
	*drained*) groups_summary 2>&1 ;;
	esac
	for f in "$tmp"/*.log; do
		echo "--- $f"
		tail -15 "$f"
	done
	keep=yes
	exit 1
}

now() {
	date +%s
}

# wait_for DESCRIPTION COMMAND...: polls COMMAND until it succeeds.
wait_for() {
	what=$1
	shift
	end=$(($(now) + deadline_s))
	until "$@"; do
		[ "$(now)" -lt "$end" ] || fail "no $what within $deadline_s s"
		sleep 0.1
	done
}

base=$(sh "$cluster_sh" free-base "$tmp") || exit 1
sh "$cluster_sh" start "$tmp/cluster" "$base" || fail "cluster did not start"
rc() {
	redis-cli -c -p "$base" "$@"
}

# Short min-idle and interval, so that recovery happens within the test.
start_ledger() {
	"$ex/wow_ledger" -p "$base" -c -n "$1" -m 1000 -i 500 -k 256 \
		>"$tmp/$1.log" 2>&1 &
	eval "pid_$1=$!"
	pids="$pids $!"
}

ready() {
	grep -q '^ready' "$tmp/$1.log"
}

start_ledger L1
start_ledger L2
start_ledger L3
"$ex/wow_project" -p "$base" -c -n P1 -m 1000 -i 500 >"$tmp/P1.log" 2>&1 &
pid_P1=$!
pids="$pids $pid_P1"
for n in L1 L2 L3 P1; do
	wait_for "ready line from $n" ready $n
done

# Entries of a group read so far (XINFO GROUPS's entries-read).
group_field() {
	rc XINFO GROUPS "$1" | awk -v g="$2" -v f="$3" '
		$0 == "name" { getline; cur = $0 }
		cur == g && $0 == f { getline; print; exit }'
}

# The stream's newest id (XINFO STREAM's last-generated-id).
last_id() {
	rc XINFO STREAM "$1" | awk '$0 == "last-generated-id" { getline; print; exit }'
}

# Every entry delivered to the group (Redis 6.2 has no lag field) and
# none pending, in both groups.
drained() {
	for tg in "bank.Account:command bank.CommandDispatcher" \
		"bank.Account:event bank.wow_project"; do
		set -- $tg
		[ "$(group_field "$1" "$2" pending)" = 0 ] || return 1
		[ "$(group_field "$1" "$2" last-delivered-id)" = \
			"$(last_id "$1")" ] || return 1
	done
}

read_at_least() {
	r=$(group_field bank.Account:command bank.CommandDispatcher entries-read)
	[ -n "$r" ] && [ "$r" -ge "$1" ]
}

verify() {
	"$top_builddir/examples/wow/tests/wow_verify" -p "$base" -c -e "$1" \
		>"$tmp/verify-$2.log" 2>&1
	cat "$tmp/verify-$2.log" | grep -v '^aggring: warning'
	grep -q '^verify ok' "$tmp/verify-$2.log" || fail "round $2: verify"
}

produce() {
	"$ex/wow_produce" -p "$base" -c -a $accounts -A "$1" -n "$commands" \
		-r "$2" -o "$tmp/expect-$2.txt" >"$tmp/produce-$2.log" 2>&1 &
	pid_produce=$!
	pids="$pids $pid_produce"
}

wait_producer() {
	end=$(($(now) + deadline_s))
	while kill -0 "$pid_produce" 2>/dev/null; do
		[ "$(now)" -lt "$end" ] || fail "producer did not finish"
		sleep 0.1
	done
	wait "$pid_produce" || fail "producer failed"
	cat "$tmp/produce-$1.log" | grep -v '^aggring: warning'
}

# ---- round 1: an instance dies ----
produce acct r1
wait_for "5000 commands read" read_at_least 5000
kill -KILL "$pid_L2"
echo "round 1: L2 killed at $(group_field bank.Account:command bank.CommandDispatcher entries-read) entries read"
wait_producer r1
wait_for "round 1 drained (L2's entries claimed)" drained
verify "$tmp/expect-r1.txt" r1

# ---- round 2: a Redis master dies and comes back from its AOF ----
owner=
for i in 0 1 2; do
	p=$(cat "$tmp/cluster/node-$i/port")
	if [ "$(redis-cli -p "$p" EXISTS bank.Account:command 2>/dev/null)" = 1 ]; then
		owner=$i
	fi
done
[ -n "$owner" ] || fail "no node holds bank.Account:command"
start_ledger L4
wait_for "ready line from L4" ready L4
produce racct r2
wait_for "$((commands + 5000)) commands read" read_at_least $((commands + 5000))
sh "$cluster_sh" kill "$tmp/cluster" "$owner" || fail "kill node $owner"
echo "round 2: node $owner (bank.Account:command's master) killed"
sleep 1 # the outage: a second without the node, not a synchronisation
sh "$cluster_sh" restart "$tmp/cluster" "$owner" || fail "restart node $owner"
echo "round 2: node $owner restarted from its AOF"
wait_producer r2
wait_for "round 2 drained" drained
verify "$tmp/expect-r2.txt" r2
verify "$tmp/expect-r1.txt" r1-after

# ---- graceful stop ----
for n in L1 L3 L4 P1; do
	eval "kill -TERM \$pid_$n"
done
for n in L1 L3 L4 P1; do
	eval "p=\$pid_$n"
	end=$(($(now) + 60))
	while kill -0 "$p" 2>/dev/null; do
		[ "$(now)" -lt "$end" ] || fail "$n did not stop on SIGTERM"
		sleep 0.1
	done
	grep -q '^stopped' "$tmp/$n.log" || fail "$n did not stop cleanly"
	grep '^stopped' "$tmp/$n.log" | sed "s/^/$n: /"
done
echo "PASS: wow_scale_out"
