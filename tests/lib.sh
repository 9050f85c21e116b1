# SPDX-License-Identifier: MIT
# lib.sh - what the shell tests share: failing, and starting and
# stopping a server that prints "listening on 127.0.0.1:PORT".
# Sourced (not run); the sourcing script keeps `set -u` and its traps
# kill $pids on exit.

pids=

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# kill_servers: for the sourcing script's EXIT trap.
kill_servers() {
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null
	done
}

# start_server LOG CMD...: runs a server in the background and waits,
# at most 10 s, for its "listening on 127.0.0.1:PORT" line. Sets $pid
# and $port. Exits 77 (skip) when the server says io_uring is missing.
#
# LEDGER_RECV=single|multishot: every ledger_server started here gets
# --recv LEDGER_RECV (examples/ledger/tests/ledger_recv.sh runs the
# ledger tests in the mode that is not the default).
start_server() {
	log=$1
	shift
	case $1 in
	*/ledger_server)
		[ -z "${LEDGER_RECV:-}" ] || set -- "$@" --recv "$LEDGER_RECV"
		;;
	esac
	"$@" >"$log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	i=0
	while :; do
		port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
			"$log")
		[ -n "$port" ] && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$log" >&2
			if grep -q 'io_uring' "$log"; then
				echo "SKIP: io_uring is not available" >&2
				exit 77
			fi
			fail "$* exited before listening"
		fi
		i=$((i + 1))
		[ $i -le 200 ] || fail "$* not listening after 10 s"
		sleep 0.05
	done
}

# stop_server LOG: SIGTERM to $pid, then at most 20 s for an exit with
# status 0 that LOG calls clean.
stop_server() {
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 400 ]; then
			kill -KILL "$pid"
			fail "no graceful stop within 20 s"
		fi
		sleep 0.05
	done
	wait "$pid"
	status=$?
	pids=$(echo " $pids " | sed "s/ $pid / /")
	cat "$1"
	[ $status -eq 0 ] || fail "exit status $status after SIGTERM"
	grep -q 'stopped cleanly' "$1" || fail "the stop was not clean"
}
