#!/bin/sh
# ledger_server whose journal file is removed or replaced while it runs
# (issue #33): the next change is refused ("-ERR journal write failed")
# rather than acknowledged into a file a restart would not replay, the
# log and INFO persistence name the cause, /metrics shows
# ledger_journal_failed 1, and the exit status says the journal failed.
# Exit 0 pass, 1 fail, 77 skip (no redis-cli, no python3 or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools redis-cli python3
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir journal-gone

expect() {
	want=$1
	shift
	got=$(redis-cli -p "$port" "$@" 2>&1)
	[ "$got" = "$want" ] || fail "redis-cli $*: got '$got', want '$want'"
	echo "ok: $* -> $want"
}

info_field() {
	redis-cli -p "$port" INFO persistence | tr -d '\r' | sed -n "s/^$1://p"
}

# metric NAME: its value on /metrics ($mport).
metric() {
	python3 - "$mport" "$1" <<'PY'
import sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1],
                              timeout=20).read().decode()
for line in page.splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[1])
PY
}

# stop_failed LOG: SIGTERM; the server must exit 1, saying JOURNAL FAILED.
stop_failed() {
	kill -TERM "$pid"
	wait "$pid"
	status=$?
	pids=$(echo " $pids " | sed "s/ $pid / /")
	cat "$1"
	[ $status -eq 1 ] || fail "exit status $status, want 1"
	grep -q 'JOURNAL FAILED' "$1" || fail "the summary hides the failure"
}

# run CASE WHAT-TO-DO-TO-THE-FILE WANT-IN-THE-LOG
run() {
	dir=$tmp/$1
	start_server "$tmp/$1.log" "$server" --port 0 --dir "$dir" --workers 1 \
		--metrics-port 0
	[ "$(info_field aof_last_write_status)" = ok ] ||
		fail "aof_last_write_status before: $(info_field aof_last_write_status)"
	[ "$(metric ledger_journal_failed)" = 0 ] ||
		fail "/metrics before: ledger_journal_failed $(metric ledger_journal_failed)"
	expect 5 INCRBY gone 5
	eval "$2"
	expect 'ERR journal write failed' INCRBY gone 1
	expect 'ERR journal write failed' INCRBY other 1
	[ "$(info_field aof_last_write_status)" = err ] ||
		fail "aof_last_write_status: $(info_field aof_last_write_status)"
	info_field journal_error | grep -q "$3" ||
		fail "journal_error: $(info_field journal_error)"
	echo "ok: INFO: journal_error:$(info_field journal_error)"
	[ "$(metric ledger_journal_failed)" = 1 ] ||
		fail "/metrics: ledger_journal_failed $(metric ledger_journal_failed)"
	echo "ok: /metrics: ledger_journal_failed 1"
	stop_failed "$tmp/$1.log"
	grep -q "journal failed: .*$3" "$tmp/$1.log" ||
		fail "the log does not say '$3'"
}

echo "== the journal unlinked"
run unlinked 'rm "$dir/journal-0.log"' 'was unlinked'
echo "== the journal replaced"
run replaced 'cp "$dir/journal-0.log" "$dir/copy" &&
	mv "$dir/copy" "$dir/journal-0.log"' 'was replaced'
echo "== the journal moved away"
run moved 'ln "$dir/journal-0.log" "$dir/kept" &&
	rm "$dir/journal-0.log"' 'moved or removed'
echo "PASS"
