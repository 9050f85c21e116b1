#!/bin/sh
# ledger_server against what an exposed server meets
# (ledger_abuse.py beside it): a browser's cross-protocol POST, unauthenticated
# bulk and multibulk lengths, a client that never reads its replies
# (MGETs, and INCRBYs pipelined through a 4 KiB receive buffer), a burst
# of connections past --maxclients. Exit 0 pass, 1 fail, 77 skip (no python3
# or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir abuse
pass=sekret

echo "== no password"
start_server "$tmp/open.log" "$server" --port 0 --dir "$tmp/open" \
	--workers 2
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" open "$port" ||
	fail "ledger_abuse.py open"
stop_server "$tmp/open.log"
grep -q "possible security attack: client [0-9]* sent a 'POST' line" \
	"$tmp/open.log" || fail "the POST was not logged"
grep -q "sent a 'Host:' line" "$tmp/open.log" ||
	fail "the Host: line was not logged"

echo "== --requirepass"
start_server "$tmp/auth.log" "$server" --port 0 --dir "$tmp/auth" \
	--workers 2 --requirepass "$pass"
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" auth "$port" "$pass" ||
	fail "ledger_abuse.py auth"
stop_server "$tmp/auth.log"
echo "== --client-output-buffer-limit: hard, then soft"
start_server "$tmp/out.log" "$server" --port 0 --dir "$tmp/out" \
	--workers 2 --client-output-buffer-limit '1048576 0 0'
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" output "$port" ||
	fail "ledger_abuse.py output"
stop_server "$tmp/out.log"
grep -q 'reached the hard output limit' "$tmp/out.log" ||
	fail "the hard limit's close was not logged"
start_server "$tmp/soft.log" "$server" --port 0 --dir "$tmp/soft" \
	--workers 2 --client-output-buffer-limit '0 262144 1'
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" output-soft "$port" ||
	fail "ledger_abuse.py output-soft"
stop_server "$tmp/soft.log"
grep -q 'reached the soft output limit' "$tmp/soft.log" ||
	fail "the soft limit's close was not logged"
echo "== a client with a 4 KiB receive buffer pipelining INCRBY, never reading"
start_server "$tmp/pipe.log" "$server" --port 0 --dir "$tmp/pipe" \
	--workers 2 --client-output-buffer-limit '2097152 0 0' --metrics-port 0
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" pipeline "$port" \
	"$mport" || fail "ledger_abuse.py pipeline"
stop_server "$tmp/pipe.log"
start_server "$tmp/pipe0.log" "$server" --port 0 --dir "$tmp/pipe0" \
	--workers 2 --client-output-buffer-limit '0 0 0'
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" \
	pipeline-unlimited "$port" || fail "ledger_abuse.py pipeline-unlimited"
stop_server "$tmp/pipe0.log"
echo "== --maxclients 2 reached, then 10,000 more connections at once"
start_server "$tmp/burst.log" "$server" --port 0 --dir "$tmp/burst" \
	--workers 2 --maxclients 2
python3 "$top_srcdir/examples/ledger/tests/ledger_abuse.py" burst "$port" 2 ||
	fail "ledger_abuse.py burst"
stop_server "$tmp/burst.log"
echo "PASS"
