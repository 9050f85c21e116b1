# SPDX-License-Identifier: MIT
"""ledger_server against the abuse a server reachable from a browser or
the network meets, over raw sockets (no redis module needed):

    python3 examples/ledger/tests/ledger_abuse.py open PORT      # no --requirepass
    python3 examples/ledger/tests/ledger_abuse.py auth PORT PASS # --requirepass PASS
    python3 examples/ledger/tests/ledger_abuse.py output PORT    # a small output limit
    python3 examples/ledger/tests/ledger_abuse.py pipeline PORT [METRICS_PORT]
    python3 examples/ledger/tests/ledger_abuse.py pipeline-unlimited PORT
    python3 examples/ledger/tests/ledger_abuse.py burst PORT MAXCLIENTS

Each case ends in a clear error or a close within DEADLINE, and changes
nothing it should not. Exit 0 pass, 1 fail."""
import resource
import socket
import sys
import threading
import time
import urllib.request

DEADLINE = 20.0  # seconds for any one reply or close
STALL = 10.0  # seconds a pipelining client's requests may go unapplied
BURST = 10000  # connections past --maxclients at once (issue 33, item 1)
UNLIMITED_TARGET = 2000000  # INCRBYs applied for a never-reading client


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(what, got, want):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))
    print("ok: %s" % what)


def connect():
    return socket.create_connection(("127.0.0.1", PORT), timeout=DEADLINE)


def until_closed(s):
    """Everything the server sends until it closes: raises on a stall."""
    got = b""
    end = time.monotonic() + DEADLINE
    while True:
        if time.monotonic() > end:
            fail("the server did not close within %.0f s (got %r)"
                 % (DEADLINE, got[:200]))
        try:
            part = s.recv(65536)
        except ConnectionResetError:
            break
        except socket.timeout:
            fail("the server neither answered nor closed (got %r)"
                 % got[:200])
        if not part:
            break
        got += part
    s.close()
    return got


def exchange(data):
    s = connect()
    try:
        s.sendall(data)
    except OSError:
        pass  # closed early: what it said is still to be read
    return until_closed(s)


def command(*args, auth=None):
    """One request on a fresh connection (QUIT after it): its reply."""
    req = b""
    if auth:
        req += b"AUTH %s\r\n" % auth.encode()
    req += b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        req += b"$%d\r\n%s\r\n" % (len(a), a)
    got = exchange(req + b"QUIT\r\n")
    if auth:
        if not got.startswith(b"+OK\r\n"):
            fail("AUTH: got %r" % got)
        got = got[5:]
    if not got.endswith(b"+OK\r\n"):
        fail("QUIT: got %r" % got)
    return got[:-5]


def cross_protocol(auth=None):
    # What a browser sends for a form posted to http://127.0.0.1:PORT/.
    body = b"INCRBY csrf 1000000\r\nSET csrf:s pwned\r\n"
    post = (b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
            % (PORT, len(body))) + body
    check("POST: closed without a reply", exchange(post), b"")
    # Host: anywhere, as after a GET line (answered as a wrong command).
    got = exchange(b"GET / HTTP/1.1\r\nHost: x\r\nINCRBY csrf 5\r\n")
    check("GET / HTTP/1.1 then Host:: one error, then closed",
          got.count(b"\r\n"), 1)
    check("  ... the error", got.startswith(b"-ERR"), True)
    check("lower case post", exchange(b"post /x HTTP/1.0\r\n\r\n"
                                      b"INCRBY csrf 7\r\n"), b"")
    check("nothing applied", command("GET", "csrf", auth=auth), b"$-1\r\n")
    check("nothing applied (SET)", command("GET", "csrf:s", auth=auth),
          b"$-1\r\n")


def before_auth(password):
    # An incomplete 15 MB bulk: refused at its header, not buffered.
    got = exchange(b"*1\r\n$15000000\r\n" + b"x" * 65536)
    check("an unauthenticated 15 MB bulk",
          got, b"-ERR Protocol error: unauthenticated bulk length\r\n")
    got = exchange(b"*11\r\n")
    check("an unauthenticated 11-argument request",
          got, b"-ERR Protocol error: unauthenticated multibulk length\r\n")
    got = exchange(b"*1\r\n$16385\r\n")
    check("an unauthenticated bulk of 16 KiB + 1",
          got, b"-ERR Protocol error: unauthenticated bulk length\r\n")
    # At the caps, and after AUTH, the same sizes are served.
    got = exchange(b"*1\r\n$4\r\nPING\r\nQUIT\r\n")
    check("PING before AUTH", got.startswith(b"-NOAUTH"), True)
    big = b"e" * 20000
    check("ECHO of 20,000 bytes after AUTH",
          command("ECHO", big, auth=password),
          b"$20000\r\n" + big + b"\r\n")
    check("12 arguments after AUTH",
          command("EXISTS", *["k%d" % i for i in range(11)], auth=password),
          b":0\r\n")


def info_field(name):
    for line in command("INFO").split(b"\r\n"):
        if line.startswith(name.encode() + b":"):
            return int(line.split(b":")[1])
    fail("INFO has no %s" % name)


def never_reads(pause):
    """MGETs of 63 values of 256 bytes, never reading a reply, `pause`
    seconds apart in chunks: seconds until the server cut us off."""
    keys = ["out:%d" % i for i in range(63)]
    for k in keys:
        command("SET", k, "v" * 256)
    req = b"*64\r\n$4\r\nMGET\r\n" + b"".join(
        b"$%d\r\n%s\r\n" % (len(k), k.encode()) for k in keys)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(DEADLINE)
    s.connect(("127.0.0.1", PORT))
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE:
        try:
            s.sendall(req * (1 if pause else 50))
        except OSError:  # EPIPE, ECONNRESET: closed
            s.close()
            return time.monotonic() - start
        if pause:
            time.sleep(pause)
    fail("a client that never reads was not closed in %.0f s" % DEADLINE)


def output_limits(soft):
    got = command("CONFIG", "GET", "client-output-buffer-limit")
    check("CONFIG GET client-output-buffer-limit", got,
          b"*2\r\n$26\r\nclient-output-buffer-limit\r\n" +
          (b"$17\r\nnormal 0 262144 1\r\n" if soft
           else b"$18\r\nnormal 1048576 0 0\r\n"))
    before = info_field("client_output_buffer_limit_disconnections")
    took = never_reads(0.02 if soft else 0)
    print("ok: a client that never reads is closed (%.2f s)" % took)
    if soft:
        check("  ... not before the soft limit's second", took >= 1.0, True)
    check("client_output_buffer_limit_disconnections",
          info_field("client_output_buffer_limit_disconnections"),
          before + 1)
    check("the server still answers", command("PING"), b"+PONG\r\n")


class Pipeliner:
    """A client with a 4 KiB receive buffer that pipelines INCRBY pipe 1
    as fast as it can and never reads (issue 33, item 10)."""

    def __init__(self):
        one = b"*3\r\n$6\r\nINCRBY\r\n$4\r\npipe\r\n$1\r\n1\r\n"
        self.batch = one * 1000
        self.sent = 0
        self.closed = False
        self.stop = False
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.s.connect(("127.0.0.1", PORT))
        self.s.settimeout(0.5)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                self.s.sendall(self.batch)
                self.sent += 1000
            except socket.timeout:
                pass  # sent in part: the count is a bound, not exact
            except OSError:  # EPIPE, ECONNRESET: closed
                self.closed = True
                return

    def end(self):
        self.stop = True
        self.thread.join()
        self.s.close()


def metric(name):
    """name's value on /metrics (the port after PORT), or None without one."""
    if len(sys.argv) < 4:
        return None
    page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[3],
                                  timeout=DEADLINE).read().decode()
    for line in page.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    fail("/metrics has no %s" % name)


def applied():
    got = command("GET", "pipe")
    return 0 if got == b"$-1\r\n" else int(got.split(b"\r\n")[1])


def pipeline(limited):
    """While the pipeliner sends, its requests keep being applied (never
    STALL seconds without progress) and other clients are served; with an
    output limit it is closed by it, without one it goes on (to
    UNLIMITED_TARGET, or for 2 * DEADLINE on a slow machine)."""
    before = info_field("client_output_buffer_limit_disconnections")
    counted = metric("ledger_client_output_buffer_limit_disconnections_total")
    p = Pipeliner()
    start = last_change = time.monotonic()
    last = 0
    while not (p.closed if limited else last >= UNLIMITED_TARGET):
        now = time.monotonic()
        if now - start > 2 * DEADLINE and not limited:
            break  # progress all along: a slow machine, not a stall
        if now - start > 3 * DEADLINE:
            fail("after %.0f s: %d applied, not closed"
                 % (now - start, last))
        time.sleep(0.1)  # a poll, not a wait for an event
        n = applied()  # on another connection: served meanwhile
        if n != last:
            last, last_change = n, now
        elif not p.closed and now - last_change > STALL:
            p.end()
            fail("the pipelining client's requests stopped being applied "
                 "for %.0f s at %d (about %d sent)" % (STALL, n, p.sent))
    closed = p.closed
    p.end()
    print("ok: %d INCRBYs applied in %.1f s, about %d sent"
          % (last, time.monotonic() - start, p.sent))
    check("closed (for the output limit) or still open", closed, limited)
    check("client_output_buffer_limit_disconnections",
          info_field("client_output_buffer_limit_disconnections"),
          before + (1 if limited else 0))
    if counted is not None:
        check("/metrics: ledger_client_output_buffer_limit_"
              "disconnections_total",
              metric("ledger_client_output_buffer_limit_disconnections_total"),
              counted + (1 if limited else 0))
    check("the server still answers", command("PING"), b"+PONG\r\n")


def burst(maxclients):
    """With --maxclients reached, BURST more connections at once (each
    refused), all closed: the server must go on accepting. Before the
    acceptor armed again after a successful last CQE it stopped for
    good, its listen queue full (a build of 171f4e6 failed this in 4 of
    4 runs; since f513ad0 it passed 20 of 20, 2026-12-05)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    n = min(BURST, hard - maxclients - 64)
    rejected = info_field("rejected_connections")
    held = []
    for _ in range(maxclients):
        s = connect()
        s.sendall(b"PING\r\n")
        if s.recv(100) != b"+PONG\r\n":
            fail("connection %d of %d not served" % (len(held) + 1,
                                                    maxclients))
        held.append(s)
    flood = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", PORT))  # EINPROGRESS: not waited for
        flood.append(s)
    for s in flood + held:
        s.close()
    print("ok: %d connections past --maxclients %d, closed" % (n, maxclients))
    end = time.monotonic() + DEADLINE
    got = b"-ERR max number of clients reached\r\n"
    # Until the server has seen the held ones close, it is still full.
    while got == b"-ERR max number of clients reached\r\n" and \
            time.monotonic() < end:
        time.sleep(0.1)  # a poll, not a wait for an event
        try:
            got = exchange(b"PING\r\nQUIT\r\n")
        except OSError as e:  # a connect timed out: nobody accepts
            fail("after the burst: %r" % e)
    check("PING after the burst", got, b"+PONG\r\n+OK\r\n")
    check("refused over --maxclients", info_field("rejected_connections") >
          rejected, True)


def main():
    global PORT
    mode, PORT = sys.argv[1], int(sys.argv[2])
    if mode == "open":
        cross_protocol()
    elif mode in ("output", "output-soft"):
        output_limits(mode == "output-soft")
    elif mode in ("pipeline", "pipeline-unlimited"):
        pipeline(mode == "pipeline")
    elif mode == "burst":
        burst(int(sys.argv[3]))
    else:
        password = sys.argv[3]
        before_auth(password)
        cross_protocol(auth=password)
    print("PASS")


if __name__ == "__main__":
    main()
