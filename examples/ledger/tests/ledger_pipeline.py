#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ledger_pipeline.py - large pipelined requests against ledger_server,
from several connections at once: each connection writes thousands of
requests (INCRBY with long account names, ECHO of up to 64 KiB holding
CR and LF, PING) in chunks of random sizes, so that requests span many
receive buffers and arrive cut anywhere, while another thread reads and
checks every reply in order.

    ledger_pipeline.py PORT DUMP [CONNECTIONS] [REQUESTS]

Writes the balances it expects, "account balance" lines sorted, to
DUMP (what `ledger_server --verify --dump` must then print). Exit 0
when every reply was right, 1 otherwise. Standard library only.
"""
import random
import socket
import sys
import threading


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def command(*args):
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


class Reader:
    """RESP2 replies from a socket, one at a time."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.pos = 0

    def fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("the server closed the connection")
        self.buf = self.buf[self.pos:] + data
        self.pos = 0

    def line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                s = self.buf[self.pos:end]
                self.pos = end + 2
                return s
            self.fill()

    def exactly(self, n):
        while len(self.buf) - self.pos < n + 2:
            self.fill()
        s = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return s

    def reply(self):
        head = self.line()
        if head[:1] == b"$":
            n = int(head[1:])
            return None if n < 0 else self.exactly(n)
        if head[:1] == b":":
            return int(head[1:])
        return head  # +simple, -error: with their type byte


def connection(port, index, nreq, balances, lock, errors):
    rng = random.Random(index)
    reqs, want = [], []
    mine = {}
    names = [b"acct:%d:%d:" % (index, k) + b"x" * rng.randrange(20, 100)
             for k in range(40)]
    for i in range(nreq):
        kind = rng.random()
        if kind < 0.7:
            name = rng.choice(names)
            amount = rng.randrange(1, 1000)
            mine[name] = mine.get(name, 0) + amount
            reqs.append(command(b"INCRBY", name, b"%d" % amount))
            want.append(mine[name])
        elif kind < 0.9:
            size = rng.choice((1, 100, 8191, 8192, 8193, 20000, 65536))
            payload = bytes(rng.randrange(256) for _ in range(size))
            payload = payload.replace(b"\0", b"\r\n", 3)
            reqs.append(command(b"ECHO", payload))
            want.append(payload)
        else:
            reqs.append(command(b"PING"))
            want.append(b"+PONG")
    blob = b"".join(reqs)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write():
        pos = 0
        while pos < len(blob):
            n = rng.randrange(1, 40000)
            sock.sendall(blob[pos:pos + n])
            pos += n

    writer = threading.Thread(target=write)
    writer.start()
    reader = Reader(sock)
    try:
        for i, w in enumerate(want):
            got = reader.reply()
            if got != w:
                shown = got if not isinstance(got, bytes) else got[:60]
                errors.append("connection %d, reply %d: got %r, want %r"
                              % (index, i, shown,
                                 w if not isinstance(w, bytes) else w[:60]))
                break
    except (EOFError, OSError, ValueError) as e:
        errors.append("connection %d: %s" % (index, e))
    writer.join()
    sock.close()
    with lock:
        balances.update(mine)


def main():
    port = int(sys.argv[1])
    dump = sys.argv[2]
    nconn = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    nreq = int(sys.argv[4]) if len(sys.argv) > 4 else 3000
    balances, errors, lock = {}, [], threading.Lock()
    threads = [threading.Thread(target=connection,
                                args=(port, i, nreq, balances, lock, errors))
               for i in range(nconn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        print("FAIL: " + e, file=sys.stderr)
    with open(dump, "w") as f:
        for name in sorted(balances):
            f.write("%s %d\n" % (name.decode(), balances[name]))
    print("ledger_pipeline: %d connections x %d requests, %d errors"
          % (nconn, nreq, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
