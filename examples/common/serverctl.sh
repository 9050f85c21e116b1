# SPDX-License-Identifier: MIT
# serverctl.sh - starting a server that prints "listening on
# 127.0.0.1:PORT" and stopping it with SIGTERM, for the demo
# (examples/ledger/demo.sh) and the shell tests (tests/lib.sh), which
# say what a failure means to them. Sourced (not run); POSIX sh.

# serverctl_start LOG CMD...: runs CMD in the background, its output to
# LOG, and waits at most 10 s for its "listening on 127.0.0.1:PORT"
# line. Sets $pid, $port, and $mport from a "metrics on 127.0.0.1:PORT"
# line before it (empty without one). Returns 0 once it listens, 1 if
# it exited first, 2 if it was not listening after 10 s (still running).
serverctl_start() {
	_log=$1
	shift
	"$@" >"$_log" 2>&1 &
	pid=$!
	_i=0
	while :; do
		port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
			"$_log")
		if [ -n "$port" ]; then
			mport=$(sed -n \
				's/^metrics on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
				"$_log")
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		_i=$((_i + 1))
		[ $_i -le 200 ] || return 2
		sleep 0.05
	done
}

# serverctl_wait_gone PID SECONDS: polls until PID has exited; returns
# 0 then, or 1 if it is still running after SECONDS.
serverctl_wait_gone() {
	_i=0
	while kill -0 "$1" 2>/dev/null; do
		_i=$((_i + 1))
		[ $_i -le $(($2 * 20)) ] || return 1
		sleep 0.05
	done
}

# serverctl_stop SECONDS: SIGTERM to $pid, then at most SECONDS for it
# to exit. Returns its exit status, or 124 if it had not exited by then
# (it is then killed with SIGKILL).
serverctl_stop() {
	kill -TERM "$pid"
	if ! serverctl_wait_gone "$pid" "$1"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid"
}

# serverctl_stop_clean SECONDS LOG: serverctl_stop, then checks that the
# stop was clean: exit status 0 and "stopped cleanly" in LOG. Returns 0,
# or 1 with $why saying what was wrong; $status is the exit status.
serverctl_stop_clean() {
	serverctl_stop "$1"
	status=$?
	why=
	if [ $status -eq 124 ]; then
		why="no graceful stop within $1 s"
	elif [ $status -ne 0 ]; then
		why="exit status $status after SIGTERM"
	elif ! grep -q 'stopped cleanly' "$2"; then
		why="the stop was not clean"
	fi
	[ -z "$why" ]
}
