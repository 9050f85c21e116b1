#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ledger_disk_bound.py - ledger_server's disk use at every moment of a
checkpoint cycle, its end included (examples/ledger/tests/
ledger_checkpoint_disk.sh runs it).

  ledger_disk_bound.py --port P --dir DATA --threshold T [--crossings N]
  ledger_disk_bound.py --port P --kept    (prints INFO's journal_bytes_kept
                                          and _since_checkpoint)

The server runs with --checkpoint-bytes T --checkpoint-events 0; this is
its only client. It sends INCRBYs in small steps, each acknowledged
(so durable) before the next, and after each waits, polling INFO, until
no cycle runs and none is due: INFO's journal_bytes_kept (the journal
from the fallback checkpoint) is under T and journal_bytes_since_checkpoint
under T / 2 (a server without the first field counts the second against
T). No ordering rests on a
delay: the next sample is taken only then, and the server cannot start
a cycle before the test's next step.

Each such moment, the data directory's disk use (du: its files'
allocated blocks) must be under 2 x (checkpoint + T) plus block slack.
The moment that matters is the last small step before the threshold:
that is where the journal the server keeps is longest. The step that
crosses it is a large one (T / 4), standing for the load that arrives
while the checkpointer notices: the overshoot a real server has.
Samples before the second crossing are shown, not judged (no fallback
checkpoint yet). Exit 0 pass, 1 fail.
"""
import argparse
import os
import random
import socket
import sys
import time


def info(sock):
    sock.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n")
    buf = b""
    while not buf.endswith(b"\r\n\r\n"):
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("the server closed the connection")
        buf += chunk
    return dict(l.split(":", 1) for l in buf.decode().split("\r\n")
                if ":" in l)


def counted(f):
    """The journal bytes the server counts toward its threshold."""
    if "journal_bytes_kept" in f:
        return int(f["journal_bytes_kept"])
    return int(f["journal_bytes_since_checkpoint"])


def incrby(sock, rng, n):
    """n INCRBYs over 1,000 accounts, pipelined; every reply read."""
    out = b"".join(b"*3\r\n$6\r\nINCRBY\r\n$%d\r\n%s\r\n$1\r\n1\r\n" %
                   (len(k), k) for k in
                   (b"disk:%d" % rng.randrange(1000) for _ in range(n)))
    sock.sendall(out)
    got = 0
    buf = b""
    while got < n:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("the server closed the connection")
        buf += chunk
        lines = buf.split(b"\r\n")
        buf = lines.pop()
        for line in lines:
            if not line.startswith(b":"):
                sys.exit("INCRBY: %r" % line)
            got += 1


def settle(sock, threshold):
    """INFO once no cycle runs and none is due (polls; at most 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        f = info(sock)
        since = int(f["journal_bytes_since_checkpoint"])
        halves = "journal_bytes_kept" not in f or 2 * since < threshold
        if (f["aof_rewrite_in_progress"] == "0" and
                counted(f) < threshold and halves):
            return f
        time.sleep(0.01)  # polls for a state; no ordering rests on it
    sys.exit("no checkpoint cycle brought the journal under the "
             "threshold in 60 s")


def disk_use(d):
    """What du counts: the directory's and its files' blocks, bytes."""
    used = os.stat(d).st_blocks * 512
    for name in os.listdir(d):
        try:
            used += os.stat(os.path.join(d, name)).st_blocks * 512
        except FileNotFoundError:
            pass  # a checkpoint the server removed meanwhile
    return used


def checkpoint_bytes(d):
    sizes = [os.stat(os.path.join(d, n)).st_size for n in os.listdir(d)
             if n.endswith(".ckpt")]
    return max(sizes) if sizes else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir")
    ap.add_argument("--threshold", type=int)
    ap.add_argument("--kept", action="store_true")
    ap.add_argument("--crossings", type=int, default=4)
    ap.add_argument("--slack", type=int, default=4096 * 7)
    a = ap.parse_args()
    sock = socket.create_connection(("127.0.0.1", a.port))
    if a.kept:
        f = info(sock)
        print(f["journal_bytes_kept"], f["journal_bytes_since_checkpoint"])
        return 0
    rng = random.Random(1)
    small, per = 100, 40  # INCRBYs a small step; bytes each, a guess
    crossings = worst = 0
    f = settle(sock, a.threshold)
    while crossings < a.crossings:
        before = counted(f)
        if a.threshold - before > 2 * small * per:
            incrby(sock, rng, small)
            f = settle(sock, a.threshold)
            if counted(f) > before:  # learn the record size
                per = max(per, (counted(f) - before) // small + 1)
            continue
        # The last small step before the threshold: the longest journal.
        used = disk_use(a.dir)
        ckpt = checkpoint_bytes(a.dir)
        bound = 2 * (ckpt + a.threshold) + a.slack
        judged = crossings >= 2
        print("cycle %s: journal counted %d of %d; disk %d KiB, bound 2 x "
              "(%d + %d) + %d = %d KiB%s" %
              (f["checkpoint_seq"], before, a.threshold, used // 1024, ckpt,
               a.threshold, a.slack, bound // 1024,
               "" if judged else " (not judged: no fallback yet)"))
        sys.stdout.flush()
        if judged and used > bound:
            worst = max(worst, used - bound)
        incrby(sock, rng, a.threshold // 4 // per)  # the crossing
        f = settle(sock, a.threshold)
        crossings += 1
    for _ in range(5):  # some journal after the last checkpoint
        incrby(sock, rng, small)
        f = settle(sock, a.threshold)
    print("checkpoints taken: %s; journal kept: %d bytes; after the "
          "checkpoint: %s bytes" % (f["checkpoints_taken"], counted(f),
                                    f["journal_bytes_since_checkpoint"]))
    if worst:
        print("FAIL: the disk went %d KiB over the bound" % (worst // 1024))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
