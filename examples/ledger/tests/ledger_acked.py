#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ledger_acked.py - a ledger_server client that remembers what was
acknowledged, for tests/ledger_kill9.sh.

  ledger_acked.py load --port P --state FILE --base FILE [--accounts N]
                       [--connections C] [--pipeline D] [--progress FILE]
                       [--seconds S]
  ledger_acked.py check --port P --state FILE --out FILE

load: C connections (plain sockets, RESP2) each own the accounts
kill9:I with I mod C == their index and send INCRBY with amounts
1..1000, up to D in flight. Every reply must be the balance the client
computes (each account has one writer, the server applies its events in
arrival order): a mismatch exits 1. When the server goes away (kill -9)
each connection stops; the state FILE then holds, per account, the
last acknowledged balance and the amounts sent after it without a
reply, in order. --base FILE ("name balance" lines, from the last
check) gives the balances to start from. --progress FILE is rewritten
with the number of acknowledged INCRBYs as they come.

check: after the restart, GET every account of the state FILE. The
balance must be the acknowledged one plus a prefix of the unanswered
amounts (each may or may not have been journaled; never a later one
without the earlier, never one twice). Writes the balances found to
--out, the next round's --base. Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        """An integer, None for nil, or a str for an error."""
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed")
                self.buf += data
            value, self.buf = self.buf[:n], self.buf[n + 2:]
            return int(value)
        return line.decode(errors="replace")


def read_base(path):
    base = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, balance = line.split()
                base[name] = int(balance)
    return base


class Loader:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.acked_count = 0
        self.failed = None
        base = read_base(args.base)
        self.names = ["kill9:%d" % i for i in range(args.accounts)]
        self.acked = {n: base.get(n, 0) for n in self.names}
        self.unacked = {n: [] for n in self.names}

    def run_conn(self, index):
        a = self.args
        rng = random.Random(a.seed * 1000 + index)
        mine = [n for i, n in enumerate(self.names)
                if i % a.connections == index]
        sent = {n: self.acked[n] for n in mine}  # balance after all sent
        inflight = []  # (name, amount, expected balance), in send order
        try:
            conn = Conn(a.port)
            deadline = time.monotonic() + a.seconds
            while time.monotonic() < deadline:
                batch = []
                while len(inflight) < a.pipeline:
                    name = rng.choice(mine)
                    amount = rng.randint(1, 1000)
                    sent[name] += amount
                    inflight.append((name, amount, sent[name]))
                    self.unacked[name].append(amount)
                    batch.append(encode("INCRBY", name, amount))
                conn.sock.sendall(b"".join(batch))
                name, amount, want = inflight[0]
                got = conn.reply()
                if got != want:
                    self.failed = "INCRBY %s %d: got %r, want %d" % (
                        name, amount, got, want)
                    return
                inflight.pop(0)
                with self.lock:
                    self.unacked[name].pop(0)
                    self.acked[name] = want
                    self.acked_count += 1
        except (ConnectionError, OSError):
            pass  # the server was killed: what is in flight stays unacked

    def report_progress(self):
        tmp = self.args.progress + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % self.acked_count)
        os.replace(tmp, self.args.progress)

    def run(self):
        threads = [threading.Thread(target=self.run_conn, args=(i,))
                   for i in range(self.args.connections)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            if self.args.progress:
                self.report_progress()
            for t in threads:
                t.join(0.02)
        if self.args.progress:
            self.report_progress()
        with open(self.args.state, "w") as f:
            json.dump({"acked": self.acked, "unacked": self.unacked}, f)
        if self.failed:
            print("ledger_acked: FAIL: " + self.failed, file=sys.stderr)
            return 1
        print("ledger_acked: %d INCRBY acknowledged, %d unanswered" % (
            self.acked_count, sum(len(v) for v in self.unacked.values())))
        return 0


def check(args):
    with open(args.state) as f:
        state = json.load(f)
    conn = Conn(args.port)
    bad = landed = 0
    found = {}
    for name, acked in sorted(state["acked"].items()):
        conn.sock.sendall(encode("GET", name))
        got = conn.reply()
        got = 0 if got is None else got
        found[name] = got
        allowed = [acked]
        for amount in state["unacked"][name]:
            allowed.append(allowed[-1] + amount)
        if got not in allowed:
            bad += 1
            if bad <= 5:
                print("ledger_acked: %s: balance %r, acknowledged %d, "
                      "unanswered %s" % (name, got, acked,
                                         state["unacked"][name]),
                      file=sys.stderr)
        elif got != acked:
            landed += 1
    with open(args.out, "w") as f:
        for name, balance in sorted(found.items()):
            f.write("%s %d\n" % (name, balance))
    print("ledger_acked: check: %d accounts, %d wrong, %d with unanswered "
          "INCRBYs journaled" % (len(found), bad, landed))
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["load", "check"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--base")
    p.add_argument("--out")
    p.add_argument("--progress")
    p.add_argument("--accounts", type=int, default=200)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--pipeline", type=int, default=8)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.mode == "load":
        return Loader(args).run()
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
