#!/bin/sh
# The replay's peak memory follows the transfers left open, not every
# transfer ever journaled (issue #33, item 8): --verify replays 300,000
# transfers, 300 of them open, with each transfer's debit and credit in
# one journal, then in two journals (all the debits read first), and
# its peak RSS must stay far below what holding each debit took (about
# 200 MB for these). Exit 0 pass, 1 fail, 77 skip (no python3).
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir replay-memory

# Journals of N transfers a<i> -> b<j>, every 1000th left open: each
# debit and its credit in journal-0.log (one/), or the credits in
# journal-1.log (two/), read after every debit.
python3 - "$tmp" <<'PY' || fail "writing the journals"
import os, sys, zlib

N = 300000


def rec(body):
    return b"%s %08x\n" % (body, zlib.crc32(body))


for name, split in (("one", False), ("two", True)):
    d = os.path.join(sys.argv[1], name)
    os.makedirs(d)
    debits, credits = [], []
    for i in range(N):
        a, b = i % 1000, (i * 7) % 1000
        debits.append(rec(b"a%d -1 #d:x%d:b%d" % (a, i, b)))
        if i % 1000 != 999:
            (credits if split else debits).append(
                rec(b"b%d +1 #t:x%d:a%d" % (b, i, a)))
    with open(os.path.join(d, "journal-0.log"), "wb") as f:
        f.write(b"".join(rec(b"a%d +1000000" % i) for i in range(1000)))
        f.write(b"".join(debits))
    with open(os.path.join(d, "journal-1.log"), "wb") as f:
        f.write(b"".join(credits))
PY

# peak DIR LIMIT_MIB: --verify on DIR, 300 transfers open, its peak RSS
# under LIMIT_MIB. Measured by a fresh python3 (small: a child's peak
# counts what its parent held when it forked).
peak() {
	python3 - "$server" "$1" "$2" <<'PY'
import resource, subprocess, sys

server, d, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = subprocess.run([server, "--verify", "--dir", d], check=True,
                     capture_output=True, text=True).stdout
mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
if "300 open transfers (300 in flight)" not in out:
    sys.exit("FAIL: %s: --verify said %r" % (d, out))
print("%s: 300,000 transfers replayed, 300 open, peak RSS %.1f MiB"
      % (d, mib))
if mib > limit:
    sys.exit("FAIL: peak RSS %.1f MiB over %d MiB: the replay holds "
             "transfers that have ended" % (mib, limit))
PY
}

# Under ASan a freed block waits in its quarantine (256 MiB) before it
# is reused, which would make the peak follow every transfer again.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
export ASAN_OPTIONS

# A sanitizer's allocator multiplies what each held block costs (held
# debits under TSan: about 5x); the limits stay far below what holding
# every debit costs in that build.
case $(sed -n 's/^AGR_SAN_CFLAGS = //p' "$top_builddir/Makefile" 2>/dev/null) in
*thread*) scale=6 ;;
*address*) scale=2 ;;
*) scale=1 ;;
esac
peak "$tmp/one" $((32 * scale)) || exit 1
peak "$tmp/two" $((64 * scale)) || exit 1
echo "PASS"
