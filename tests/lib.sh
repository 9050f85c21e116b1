# SPDX-License-Identifier: MIT
# lib.sh - what the shell tests share: skipping, a scratch directory
# cleaned up on exit, failing, and starting and stopping a server that
# prints "listening on 127.0.0.1:PORT" (examples/common/serverctl.sh,
# which the demo uses too). Sourced (not run); the sourcing script
# keeps `set -u` and defines top_srcdir.

pids=
. "$top_srcdir/examples/common/serverctl.sh"

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# require_tools TOOL...: exits 77 (skip), naming the first TOOL that is
# not installed (and the Debian package of the Redis tools).
require_tools() {
	for _tool in "$@"; do
		command -v "$_tool" >/dev/null 2>&1 && continue
		case $_tool in
		redis-server) _hint=" (apt-get install redis-server)" ;;
		redis-*) _hint=" (apt-get install redis-tools)" ;;
		*) _hint= ;;
		esac
		echo "SKIP: $_tool is not installed$_hint"
		exit 77
	done
}

# require_built FILE WHY: exits 77 (skip) if FILE is not an executable,
# saying that it was not built and WHY (what configure did not find).
require_built() {
	[ -x "$1" ] && return 0
	echo "SKIP: $1 was not built ($2)"
	exit 77
}

# kill_servers: SIGKILL to every server still in $pids.
kill_servers() {
	for p in $pids; do
		kill -KILL "$p" 2>/dev/null
	done
}

# use_tmpdir NAME: sets $tmp to a new directory and traps the exit (and
# INT, TERM, HUP) to kill the servers still running and remove $tmp
# (kept when KEEP_TMP is set, to look at after a failure).
use_tmpdir() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/aggring-$1.XXXXXX") || exit 1
	trap remove_tmpdir EXIT
	trap 'exit 1' INT TERM HUP
}

remove_tmpdir() {
	kill_servers
	[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}

# wait_gone PID SECONDS WHAT: polls until PID has exited; fails if WHAT
# is still running after SECONDS.
wait_gone() {
	serverctl_wait_gone "$1" "$2" || fail "$3 still running after $2 s"
}

# wait_progress FILE N PID: polls until FILE counts N acknowledgements
# (at most 30 s; examples/ledger/tests/ledger_acked.py writes it),
# failing early if PID (the client) has ended.
wait_progress() {
	_i=0
	while :; do
		n=$(cat "$1" 2>/dev/null || echo 0)
		[ "${n:-0}" -ge "$2" ] && return 0
		kill -0 "$3" 2>/dev/null || fail "the client ended after $n acks"
		_i=$((_i + 1))
		[ $_i -le 600 ] || fail "only $n INCRBYs acknowledged in 30 s"
		sleep 0.05
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
	serverctl_start "$log" "$@"
	case $? in
	0) pids="$pids $pid" ;;
	1)
		cat "$log" >&2
		if grep -q 'io_uring' "$log"; then
			echo "SKIP: io_uring is not available" >&2
			exit 77
		fi
		fail "$* exited before listening"
		;;
	*)
		pids="$pids $pid"
		fail "$* not listening after 10 s"
		;;
	esac
}

# stop_server LOG: SIGTERM to $pid, then at most 20 s for an exit with
# status 0 that LOG calls clean.
stop_server() {
	serverctl_stop_clean 20 "$1"
	clean=$?
	pids=$(echo " $pids " | sed "s/ $pid / /")
	cat "$1"
	[ $clean -eq 0 ] || fail "$why"
}
