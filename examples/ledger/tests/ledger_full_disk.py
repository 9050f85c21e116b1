# SPDX-License-Identifier: MIT
"""ledger_server whose journal runs out of room (issue #33, item 2): a
file size limit (RLIMIT_FSIZE, as a full disk: a short write, then
EFBIG) stops the journal in the middle of a batch. Every INCRBY answered
with a number must come back after a restart, and none answered with an
error: the failed batch's records that reached the file are cut off.
Before the restart INFO persistence and /metrics say the journal failed,
and count exactly the acknowledged changes.

    python3 ledger_full_disk.py SERVER DIR

Exit 0 pass, 1 fail, 77 skip (no io_uring)."""
import resource
import socket
import subprocess
import sys
import time
import urllib.request

DEADLINE = 30.0
LIMIT = 48 * 1024  # bytes the journal may grow to
INCRS = 20000      # far more than fit


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def start(server, d, limit):
    def cap():
        if limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    p = subprocess.Popen([server, "--port", "0", "--dir", d, "--workers",
                          "1", "--journal-io", "buffered",
                          "--metrics-port", "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=cap, text=True)
    end = time.monotonic() + DEADLINE
    out = []
    while time.monotonic() < end:
        line = p.stdout.readline()
        if not line:
            break
        out.append(line)
        if line.startswith("listening on 127.0.0.1:"):
            return p, int(line.rsplit(":", 1)[1]), out
    p.kill()
    text = "".join(out)
    if "io_uring" in text:
        print("SKIP: io_uring is not available")
        sys.exit(77)
    fail("the server did not start: " + text)


def stop(p, out):
    p.terminate()
    rest, _ = p.communicate(timeout=DEADLINE)
    return p.returncode, "".join(out) + rest


def replies(port, n):
    """INCRBY full 1, n times, pipelined: the replies, in order."""
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.sendall(b"*3\r\n$6\r\nINCRBY\r\n$4\r\nfull\r\n$1\r\n1\r\n" * n)
    buf = b""
    while buf.count(b"\r\n") < n:
        part = s.recv(1 << 20)
        if not part:
            fail("closed after %d replies" % buf.count(b"\r\n"))
        buf += part
    s.close()
    return buf.split(b"\r\n")[:n]


def told(port, out):
    """INFO persistence and /metrics after the failure: (status, changes)
    from each."""
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.sendall(b"INFO persistence\r\n")
    info = b""
    while not info.endswith(b"\r\n\r\n"):
        part = s.recv(65536)
        if not part:
            break
        info += part
    s.close()
    f = dict(l.split(":", 1) for l in info.decode().split("\r\n")
             if ":" in l)
    mport = [l.rsplit(":", 1)[1] for l in out if l.startswith("metrics on")]
    page = urllib.request.urlopen("http://127.0.0.1:%d/metrics"
                                  % int(mport[0]), timeout=DEADLINE)
    m = dict(l.split(" ", 1) for l in page.read().decode().splitlines()
             if l and not l.startswith("#"))
    if not f.get("journal_error"):
        fail("INFO journal_error is empty: %r" % f)
    return ((f["aof_last_write_status"], int(f["journal_changes"])),
            (m["ledger_journal_failed"],
             int(m["ledger_journal_changes_total"])))


def main():
    server, d = sys.argv[1], sys.argv[2]
    p, port, out = start(server, d, LIMIT)
    got = replies(port, INCRS)
    acked = [r for r in got if r.startswith(b":")]
    errors = [r for r in got if r.startswith(b"-")]
    if len(acked) + len(errors) != INCRS:
        fail("replies neither numbers nor errors: %r" % got[:5])
    if not errors:
        fail("the file size limit was never reached")
    print("ok: %d acknowledged, %d refused (%r)"
          % (len(acked), len(errors), errors[0]))
    info, metrics = told(port, out)
    if info != ("err", len(acked)) or metrics != ("1", len(acked)):
        fail("INFO (aof_last_write_status, journal_changes) %r, /metrics "
             "(ledger_journal_failed, ledger_journal_changes_total) %r; "
             "%d acknowledged" % (info, metrics, len(acked)))
    print("ok: INFO and /metrics say the journal failed, after %d changes"
          % len(acked))
    status, log = stop(p, out)
    if status != 1 or "JOURNAL FAILED" not in log:
        fail("exit status %d; log: %s" % (status, log))
    if "File too large" not in log:
        fail("the log does not name the cause: " + log)
    print("ok: the log says why and the exit status is 1")
    p, port, out = start(server, d, 0)
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.sendall(b"GET full\r\n")
    reply = s.recv(100)
    s.close()
    want = b"$%d\r\n%d\r\n" % (len(str(len(acked))), len(acked))
    if reply != want:
        fail("after the restart GET full is %r; %d were acknowledged"
             % (reply, len(acked)))
    print("ok: after the restart the balance is the %d acknowledged"
          % len(acked))
    stop(p, out)
    print("PASS")


if __name__ == "__main__":
    main()
