# SPDX-License-Identifier: MIT
"""ledger_server against the abuse a server reachable from a browser or
the network meets, over raw sockets (no redis module needed):

    python3 examples/ledger/tests/ledger_abuse.py open PORT      # no --requirepass
    python3 examples/ledger/tests/ledger_abuse.py auth PORT PASS # --requirepass PASS
    python3 examples/ledger/tests/ledger_abuse.py output PORT    # a small output limit

Each case ends in a clear error or a close within DEADLINE, and changes
nothing it should not. Exit 0 pass, 1 fail."""
import socket
import sys
import time

DEADLINE = 20.0  # seconds for any one reply or close


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


def main():
    global PORT
    mode, PORT = sys.argv[1], int(sys.argv[2])
    if mode == "open":
        cross_protocol()
    elif mode in ("output", "output-soft"):
        output_limits(mode == "output-soft")
    else:
        password = sys.argv[3]
        before_auth(password)
        cross_protocol(auth=password)
    print("PASS")


if __name__ == "__main__":
    main()
