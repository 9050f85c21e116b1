#!/bin/sh
# SIGTERM while ledger_server replays a long journal (issue #33): it
# stops within the deadline, says so, and leaves the journal as it was
# (not cut, not appended). Exit 0 pass, 1 fail, 77 skip (no python3).
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir replay-stop

# 3,000,000 valid records on 1,000 accounts, and a torn tail that a
# finished replay would cut off.
mkdir -p "$tmp/data"
python3 - "$tmp/data/journal-0.log" <<'PY' || fail "writing the journal"
import sys, zlib
with open(sys.argv[1], "wb") as f:
    chunk = []
    for i in range(3000000):
        body = b"acct:%d +1" % (i % 1000)
        chunk.append(b"%s %08x\n" % (body, zlib.crc32(body)))
        if len(chunk) == 100000:
            f.write(b"".join(chunk))
            chunk = []
    f.write(b"".join(chunk) + b"acct:1 +5 torn")
PY
before=$(cksum <"$tmp/data/journal-0.log")
"$server" --port 0 --dir "$tmp/data" --workers 1 >"$tmp/log" 2>&1 &
pid=$!
pids="$pids $pid"
# Wait for the process, then signal it at once: the replay takes seconds.
i=0
until [ -s "$tmp/log" ] || [ $i -ge 20 ]; do
	i=$((i + 1))
	sleep 0.01
done
kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 400 ] || fail "still running 20 s after SIGTERM"
	sleep 0.05
done
wait "$pid"
status=$?
pids=
cat "$tmp/log"
# 3,000,000 records take seconds to replay; the signal came within the
# first 0.2 s. Listening means the replay ignored it (it was blocked).
grep -q '^listening on' "$tmp/log" &&
	fail "SIGTERM waited for the whole replay"
[ $status -eq 0 ] || fail "exit status $status"
grep -q 'stopped during replay by a signal' "$tmp/log" ||
	fail "it did not say it stopped during the replay"
[ "$(cksum <"$tmp/data/journal-0.log")" = "$before" ] ||
	fail "the journal changed"
echo "ok: stopped during the replay, the journal untouched"
echo "PASS"
