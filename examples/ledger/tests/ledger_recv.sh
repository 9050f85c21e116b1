#!/bin/sh
# ledger_server's two ways of receiving (--recv multishot|single):
# 1. In each mode, 8 connections pipeline thousands of requests, many
#    longer than a receive buffer, written in chunks of random sizes
#    (tests/ledger_pipeline.py); every reply is checked in order, the
#    stop is clean, and the journals replayed offline hold exactly the
#    balances sent. multishot runs twice: with a provided buffer ring of
#    only 2 buffers, so that the receive keeps running out of them
#    (ENOBUFS), and with the default 256, where input outruns the
#    journal and connections pause their receive for room.
# 2. The ledger tests (ledger_redis_cli.sh, ledger_transfer.sh,
#    ledger_clients.sh, examples.sh) again, with every ledger_server
#    in the mode that is not the default (LEDGER_RECV, tests/lib.sh).
# Exit 0 pass, 1 fail, 77 skip (no python3, or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
server=$top_builddir/examples/ledger/ledger_server
python=
for p in python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1; then
		python=$p
		break
	fi
done
if [ -z "$python" ]; then
	echo "SKIP: no python3"
	exit 77
fi
use_tmpdir recv

# The default --recv, as --help states it.
default=$("$server" --help | sed -n 's/.*--recv \([a-z]*\) --recv-buffers.*/\1/p')
case $default in
multishot) other=single ;;
single) other=multishot ;;
*) fail "ledger_server --help states no default --recv" ;;
esac
echo "default --recv $default; the ledger tests run again with $other"

"$server" --recv-buffers 3 --help >/dev/null 2>&1 &&
	fail "--recv-buffers 3 (not a power of two) was accepted"
"$server" --recv sometimes --help >/dev/null 2>&1 &&
	fail "--recv sometimes was accepted"

for run in multishot:2 multishot:256 single:2; do
	mode=${run%:*}
	bufs=${run#*:}
	echo "== --recv $mode, $bufs receive buffers per worker"
	data=$tmp/data-$mode-$bufs
	# A log of its own: start_server could read a previous run's port
	# before the shell has truncated a reused one.
	LEDGER_RECV= start_server "$tmp/$mode-$bufs.log" "$server" --port 0 \
		--dir "$data" --workers 2 --recv "$mode" --recv-buffers "$bufs"
	grep -q "^ledger_server: recv $mode" "$tmp/$mode-$bufs.log" ||
		fail "the server does not say it receives with $mode"
	"$python" "$top_srcdir/examples/ledger/tests/ledger_pipeline.py" \
		"$port" "$tmp/want-$mode" 8 3000 || fail "pipelined replies ($mode)"
	stop_server "$tmp/$mode-$bufs.log"
	[ $mode = single ] ||
		grep -q '^ledger_server: multishot recvs re-armed' \
			"$tmp/$mode-$bufs.log" || fail "no count of the re-arms"
	"$server" --verify --dir "$data" --dump "$tmp/got-$mode" >/dev/null ||
		fail "verify ($mode)"
	sort "$tmp/got-$mode" | cmp -s - "$tmp/want-$mode" ||
		fail "the journals do not hold the balances sent ($mode)"
	echo "ok: every reply, every balance ($mode)"
done

for path in examples/ledger/tests/ledger_redis_cli.sh \
	examples/ledger/tests/ledger_transfer.sh \
	examples/ledger/tests/ledger_clients.sh tests/examples.sh; do
	t=${path##*/}
	echo "== $t with --recv $other"
	LEDGER_RECV=$other sh "$top_srcdir/$path" >"$tmp/$t.out" 2>&1
	status=$?
	case $status in
	0) echo "ok: $t" ;;
	77) echo "skipped: $t ($(tail -n 1 "$tmp/$t.out"))" ;;
	*)
		tail -n 30 "$tmp/$t.out" >&2
		fail "$t with --recv $other (exit status $status)"
		;;
	esac
done
echo "PASS"
