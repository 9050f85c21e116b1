#!/bin/sh
# SPDX-License-Identifier: MIT
# append_store end to end: a client sends 2 MiB in pieces of random
# sizes over two connections; every byte comes back acknowledged as
# durable ("ACK <bytes>"), and after a graceful stop the workers' logs
# hold exactly what each connection sent, in order.
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
. "$top_srcdir/tests/lib.sh"
require_tools python3
ex=$top_builddir/examples/basic
use_tmpdir store

"$ex/append_store" --help >"$tmp/help.out" 2>&1 ||
	fail "append_store --help: exit status $?"
grep -q '^usage: append_store ' "$tmp/help.out" || fail "no usage on stdout"

start_server "$tmp/server.log" "$ex/append_store" --port 0 \
	--dir "$tmp/data" --workers 2
python3 - "$port" "$tmp" <<'PY' || fail "the client's check"
import os, random, socket, sys

port, tmp = int(sys.argv[1]), sys.argv[2]
rng = random.Random(7)
sent = []
socks = [socket.create_connection(("127.0.0.1", port), timeout=30)
         for _ in range(2)]
for i, s in enumerate(socks):
    data = bytes(rng.getrandbits(8) for _ in range(1 << 20))
    sent.append(data)
    off = 0
    while off < len(data):
        n = rng.randint(1, 40000)
        s.sendall(data[off:off + n])
        off += n
for i, s in enumerate(socks):
    want, buf, got = len(sent[i]), b"", 0
    while got < want:
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("connection %d closed at ACK %d of %d" % (i, got, want))
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            assert line.startswith(b"ACK "), line
            n = int(line[4:])
            assert n >= got, "ACK went back: %d after %d" % (n, got)
            got = n
    assert got == want, (got, want)
    s.close()
open(os.path.join(tmp, "sent0"), "wb").write(sent[0])
open(os.path.join(tmp, "sent1"), "wb").write(sent[1])
print("  2 connections, 2 MiB acknowledged as durable")
PY
stop_server "$tmp/server.log"
grep -q "stopped cleanly" "$tmp/server.log" || fail "not a clean stop"
# One connection per worker (dealt round-robin): each log is its data.
for w in 0 1; do
	cmp -s "$tmp/data/log-$w" "$tmp/sent0" ||
		cmp -s "$tmp/data/log-$w" "$tmp/sent1" ||
		fail "log-$w does not hold what a connection sent"
done
cmp -s "$tmp/data/log-0" "$tmp/data/log-1" && fail "both logs are the same"
echo PASS
