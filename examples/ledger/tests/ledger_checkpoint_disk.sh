#!/bin/sh
# ledger_server's disk use stays under 2 x (checkpoint + threshold) at
# every moment of its checkpoint cycles, the end of a cycle included:
# just before the journal reaches the threshold again, with the
# previous checkpoint and its journal kept as the fallback for a
# damaged newest one (issue 32's target). examples/ledger/tests/
# ledger_disk_bound.py drives the load in acknowledged steps and
# samples the disk between them (see there); the threshold here is
# 1 MiB of journal (--checkpoint-bytes), over two workers.
#
# Exit 0 pass, 1 fail, 77 skip (no python3, or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
server=$top_builddir/examples/ledger/ledger_server

use_tmpdir ckptdisk

limit=1048576
: >"$tmp/server.log"
start_server "$tmp/server.log" "$server" --port 0 --dir "$tmp/data" \
	--workers 2 --groups 256 --checkpoint-bytes $limit \
	--checkpoint-events 0
bound="python3 $top_srcdir/examples/ledger/tests/ledger_disk_bound.py"
$bound --port "$port" --dir "$tmp/data" --threshold $limit --crossings 5 \
	>"$tmp/bound.log" || {
	cat "$tmp/bound.log"
	ls -ls "$tmp/data"
	fail "the disk went over the bound"
}
cat "$tmp/bound.log"

# A restart knows the fallback from the checkpoints on disk. A clean
# stop takes a last checkpoint, of everything: the one before it, the
# server's current one, is the fallback, so the journal kept after the
# restart is what was after the current checkpoint before the stop,
# and none is after the new one.
echo "== a clean stop, a restart: the journal kept is counted from the fallback"
kept=$(sed -n 's/.*; after the checkpoint: \([0-9]*\) bytes$/\1/p' \
	"$tmp/bound.log")
stop_server "$tmp/server.log" >/dev/null
grep 'the last at this stop' "$tmp/server.log" ||
	fail "no checkpoint at the stop"
: >"$tmp/restart.log"
start_server "$tmp/restart.log" "$server" --port 0 --dir "$tmp/data" \
	--workers 2 --groups 256 --checkpoint-bytes $limit \
	--checkpoint-events 0
again=$($bound --port "$port" --kept) || fail "INFO"
echo "journal after the checkpoint: $kept bytes before the stop; after" \
	"the restart, kept and after the checkpoint: $again"
if [ "${kept:-0}" -eq 0 ] || [ "$again" != "$kept 0" ]; then
	fail "the restart counts the journal kept from elsewhere"
fi
stop_server "$tmp/restart.log" >/dev/null
echo "PASS"
