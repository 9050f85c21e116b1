#!/bin/sh
# SIGTERM under load: clients keep pipelining INCRBYs while the server
# is told to stop. Its runtime (agr_runtime) stops the network reading,
# answers what was read, closes admission, drains the sockets and stops
# the dispatcher: every reply is a balance or "-ERR server is shutting
# down", the stop is clean, and after it the journals hold exactly the
# changes acknowledged. Exit 0 pass, 1 fail, 77 skip (no python3, or no
# io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
server=$top_builddir/examples/ledger/ledger_server
use_tmpdir sigterm

start_server "$tmp/server.log" "$server" --port 0 --dir "$tmp/data" \
	--workers 2 --shutdown-timeout 30
# Four connections, one account each, batches of 16 INCRBYs; once each
# has 300 balances back, SIGTERM; then every reply until the server
# closes. Writes "account acknowledged" lines.
python3 - "$port" "$pid" "$tmp/acked" <<'PY' || fail "the clients"
import os, signal, socket, sys, threading, time

port, pid, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conns, batch = 4, 16
acked, refused, bad = [0] * conns, [0] * conns, []
going = [threading.Event() for _ in range(conns)]

def client(c):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    f = s.makefile("rb")
    frame = b"*3\r\n$6\r\nINCRBY\r\n$%d\r\nsig:%d\r\n$1\r\n1\r\n" % (
        len(b"sig:%d" % c), c)
    while True:
        try:
            s.sendall(frame * batch)
        except OSError:
            break  # closed while sending: nothing more is read
        for _ in range(batch):
            line = f.readline()
            if not line:
                s.close()
                return
            if line.startswith(b":"):
                acked[c] += 1
                if int(line[1:]) != acked[c]:
                    bad.append("sig:%d: %r after %d" % (c, line, acked[c] - 1))
            elif line == b"-ERR server is shutting down\r\n":
                refused[c] += 1
            else:
                bad.append("sig:%d: unexpected %r" % (c, line))
        if acked[c] >= 300:
            going[c].set()  # and go on sending: SIGTERM comes under load
    s.close()

threads = [threading.Thread(target=client, args=(c,)) for c in range(conns)]
for t in threads:
    t.start()
for e in going:
    if not e.wait(60):
        sys.exit("no 300 balances on a connection within 60 s")
os.kill(pid, signal.SIGTERM)
for t in threads:
    t.join(60)
    if t.is_alive():
        sys.exit("a connection was still open 60 s after SIGTERM")
with open(out, "w") as f:
    for c in range(conns):
        f.write("sig:%d %d\n" % (c, acked[c]))
print("acknowledged", acked, "refused (shutting down)", refused)
if bad:
    sys.exit("\n".join(bad[:10]))
PY

# The server stops by itself (a second SIGTERM changes nothing): clean,
# exit status 0.
stop_server "$tmp/server.log"

"$server" --verify --dir "$tmp/data" --dump "$tmp/dump" >/dev/null ||
	fail "--verify"
sort "$tmp/dump" >"$tmp/got"
sort "$tmp/acked" >"$tmp/want"
cmp -s "$tmp/got" "$tmp/want" || {
	diff "$tmp/want" "$tmp/got" >&2
	fail "the journals do not hold exactly the acknowledged changes"
}
echo "PASS"
