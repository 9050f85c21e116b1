# SPDX-License-Identifier: MIT
"""ledger_server driven by redis-py (Debian's python3-redis), and by raw
sockets where the exact bytes matter: the connect options, pipelines,
the limits and their Redis error texts.

    python3 ledger_clients.py PORT PASSWORD MAX_BULK QUERY_LIMIT
    python3 ledger_clients.py --maxclients PORT N

Exit 0 pass, 1 fail, 77 skip (no redis module; --maxclients needs
none)."""
import socket
import sys
import time

DEADLINE = 20.0  # seconds for any one reply or close


def check(what, got, want):
    if got != want:
        print("FAIL: %s: got %r, want %r" % (what, got, want))
        sys.exit(1)
    print("ok: %s" % what)


def raises(what, exc, fn, text=None):
    try:
        fn()
    except exc as e:
        if text is not None and text not in str(e):
            print("FAIL: %s: %r does not say %r" % (what, e, text))
            sys.exit(1)
        print("ok: %s raises %s" % (what, type(e).__name__))
        return
    print("FAIL: %s: no %s" % (what, exc))
    sys.exit(1)


def client(**kw):
    kw.setdefault("password", PASSWORD)
    return redis.Redis(port=PORT, socket_timeout=DEADLINE, **kw)


def raw_exchange(data, port=None):
    """Sends data, then reads until the server closes (with a deadline):
    what it answered."""
    s = socket.create_connection(("127.0.0.1", port or PORT),
                                 timeout=DEADLINE)
    try:
        s.sendall(data)
    except OSError:
        pass  # closed early: what it said is still to be read
    got = b""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        try:
            part = s.recv(65536)
        except ConnectionResetError:
            break
        if not part:
            break
        got += part
    s.close()
    return got


def connect_options():
    r = client(db=0, client_name="tester")
    check("PING with db, password, client_name", r.ping(), True)
    check("CLIENT GETNAME", r.client_getname(), "tester")
    check("CLIENT ID is an integer", isinstance(r.client_id(), int), True)
    check("CLIENT LIST names us",
          "name=tester" in r.execute_command("CLIENT", "LIST").decode(),
          True)
    check("CLIENT SETINFO", r.execute_command("CLIENT", "SETINFO",
                                              "LIB-NAME", "redis-py"), b"OK")
    raises("db=1", redis.ResponseError, lambda: client(db=1).ping(),
           "DB index is out of range")
    # redis-py's class for these depends on its version; the text is
    # Redis's.
    raises("a wrong password", (redis.AuthenticationError,
                                redis.ResponseError),
           lambda: client(password="wrong").ping(),
           "invalid username-password pair or user is disabled.")
    raises("no password", (redis.AuthenticationError, redis.ResponseError),
           lambda: client(password=None).ping(), "Authentication required")
    check("COMMAND COUNT", r.command_count() > 10, True)
    info = r.info()
    check("INFO connected_clients", info["connected_clients"] >= 1, True)
    check("INFO aof_enabled", info["aof_enabled"], 1)
    hello = r.execute_command("HELLO", "2")
    check("HELLO 2 proto", hello[hello.index(b"proto") + 1], 2)
    raises("HELLO 3", redis.ResponseError,
           lambda: r.execute_command("HELLO", "3"),
           "unsupported protocol version")
    return r


def data_commands(r):
    check("SET", r.set("py:a", 10), True)
    check("GET", r.get("py:a"), b"10")
    check("INCRBY", r.incrby("py:a", 5), 15)
    check("EXISTS", r.exists("py:a", "py:none", "py:a"), 2)
    check("MGET", r.mget("py:a", "py:none"), [b"15", None])
    n = r.dbsize()
    check("DEL", r.delete("py:a", "py:none"), 1)
    check("DEL closed it", (r.get("py:a"), r.exists("py:a")), (None, 0))
    check("DBSIZE", r.dbsize(), n - 1)
    check("SET a string", r.set("py:b", "x y\r\nz"), True)
    check("GET it", r.get("py:b"), b"x y\r\nz")
    raises("INCRBY a string", redis.ResponseError,
           lambda: r.incrby("py:b", 1), "value is not an integer")
    check("the string unchanged", r.get("py:b"), b"x y\r\nz")
    raises("a string over 256 bytes", redis.ResponseError,
           lambda: r.set("py:b", "s" * 257), "string value too long")
    check("SET a balance over a string", r.set("py:b", 3), True)
    check("an account again", r.incrby("py:b", 1), 4)
    big = "e" * (MAX_BULK - 100)
    check("ECHO near the bulk limit", r.echo(big), big.encode())


def pipelines(r):
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.incrby("py:pipe", i + 1)
    got = p.execute()
    check("a pipeline without a transaction", got[-1], 5050)


def authed_exchange(data):
    """raw_exchange() after an AUTH, whose +OK is checked and dropped."""
    got = raw_exchange(b"AUTH %s\r\n" % PASSWORD.encode() + data)
    if not got.startswith(b"+OK\r\n"):
        print("FAIL: AUTH: got %r" % got)
        sys.exit(1)
    return got[5:]


def transactions(r):
    p = r.pipeline(transaction=True)
    p.incrby("py:txn", 50).decrby("py:txn", 20).get("py:txn").exists("py:txn")
    p.decrby("py:txn", 1000)  # refused inside; the others still apply
    got = p.execute(raise_on_error=False)
    check("a transaction's replies", got[:4], [50, 30, b"30", 1])
    check("an overdraft inside it", isinstance(got[4], redis.ResponseError)
          and "insufficient funds" in str(got[4]), True)
    r.set("py:other", 7)
    p = r.pipeline(transaction=True)
    p.incrby("py:txn", 1).incrby("py:other", 1)
    raises("a transaction over two accounts", redis.ResponseError,
           p.execute, "CROSSSLOT")
    check("nothing of it applied", r.mget("py:txn", "py:other"),
          [b"30", b"7"])
    p = r.pipeline(transaction=True)
    p.incrby("py:txn", 1).execute_command("PING")
    raises("a transaction with PING", redis.ResponseError, p.execute,
           "is not allowed in a transaction")
    check("nothing of that either", r.get("py:txn"), b"30")
    check("a transaction that closes and reopens",
          r.pipeline(transaction=True).delete("py:txn").incrby("py:txn", 4)
          .execute(), [1, 4])
    check("DISCARD", authed_exchange(b"MULTI\r\nINCRBY py:txn 9\r\n"
                                     b"DISCARD\r\nGET py:txn\r\nQUIT\r\n"),
          b"+OK\r\n+QUEUED\r\n+OK\r\n$1\r\n4\r\n+OK\r\n")


def retries(r):
    def deposit(amount, rid):
        return r.execute_command("INCRBY", "py:id", amount, "REQID", rid)
    check("a deposit with a request id", deposit(5, "dep-1"), 5)
    check("its retry: the first reply", deposit(5, "dep-1"), 5)
    check("another id applies", deposit(7, "dep-2"), 12)
    check("a retry answers its first reply still", deposit(5, "dep-1"), 5)
    check("SET with a request id", r.execute_command(
        "SET", "py:id", 100, "REQID", "set-1"), True)
    check("its retry", r.execute_command("SET", "py:id", 1, "REQID",
                                         "set-1"), True)
    check("applied once", r.get("py:id"), b"100")
    # In a pipeline, as a client resends a batch after a lost reply.
    p = r.pipeline(transaction=False)
    for i in range(10):
        p.execute_command("DECRBY", "py:id", 1, "REQID", "w-%d" % i)
    first = p.execute()
    p = r.pipeline(transaction=False)
    for i in range(10):
        p.execute_command("DECRBY", "py:id", 1, "REQID", "w-%d" % i)
    check("a resent pipeline: the first replies", p.execute(), first)
    check("applied once each", r.get("py:id"), b"90")


def raw_client():
    """A connection of redis-py's own, for commands its API lacks
    (MULTI REQID): replies read in order, errors returned, not raised."""
    c = client().connection_pool.get_connection("_")

    def cmd(*args):
        c.send_command(*args)
        try:
            return c.read_response()
        except redis.ResponseError as e:
            return e
    return cmd


def id_retries(r):
    """TRANSFER and MULTI with a request id: a retry answers the first
    reply and applies nothing."""
    r.set("py:src", 100)
    r.set("py:dst", 0)

    def transfer(amount, rid):
        return r.execute_command("TRANSFER", "py:src", "py:dst", amount,
                                 "REQID", rid)
    check("a transfer with a request id", transfer(30, "xfer-1"), 70)
    check("its retry: the first reply", transfer(30, "xfer-1"), 70)
    check("another id applies", transfer(5, "xfer-2"), 65)
    check("applied once each", r.mget("py:src", "py:dst"), [b"65", b"35"])
    raises("a transfer's id with ':'", redis.ResponseError,
           lambda: transfer(1, "a:b"), "no ':'")
    cmd = raw_client()
    txn = [("MULTI", "REQID", "txn-1"), ("INCRBY", "py:src", 10),
           ("DECRBY", "py:src", 1000), ("GET", "py:src"), ("EXEC",)]
    first = [cmd(*c) for c in txn]
    check("MULTI REQID: queued", first[:4],
          [b"OK", b"QUEUED", b"QUEUED", b"QUEUED"])
    check("its EXEC", first[4][0::2], [75, b"75"])
    check("its refused step", "insufficient funds" in str(first[4][1]), True)
    again = [cmd(*c) for c in txn]
    check("the retried transaction: the first reply",
          [again[4][0], str(again[4][1]), again[4][2]],
          [first[4][0], str(first[4][1]), first[4][2]])
    check("applied once", r.get("py:src"), b"75")
    other = [cmd(*c) for c in [("MULTI", "REQID", "txn-1"),
                               ("INCRBY", "py:src", 1), ("EXEC",)]]
    check("the id of another transaction: refused",
          "names another request" in str(other[2]), True)
    check("nothing applied", r.get("py:src"), b"75")


def watches(r):
    """WATCH as redis-py's optimistic locking uses it."""
    r.set("py:w", 10)
    other = client()
    with r.pipeline() as p:
        p.watch("py:w")
        v = int(p.get("py:w"))
        other.incrby("py:w", 1)  # a change after WATCH
        p.multi()
        p.set("py:w", v * 2)
        raises("EXEC after a watched change", redis.WatchError, p.execute)
    check("nothing of it applied", r.get("py:w"), b"11")
    with r.pipeline() as p:
        p.watch("py:w")
        v = int(p.get("py:w"))
        p.multi()
        p.set("py:w", v * 2)
        check("EXEC with the watched key unchanged", p.execute(), [True])
    check("applied", r.get("py:w"), b"22")
    with r.pipeline() as p:  # a key that does not exist yet
        p.watch("py:w:new")
        other.set("py:w:new", 1)
        p.multi()
        p.incrby("py:w:new", 5)
        raises("a watched key created", redis.WatchError, p.execute)
    cmd = raw_client()
    got = [cmd(*c) for c in [("WATCH", "py:w"), ("UNWATCH",),
                             ("INCR", "py:w"), ("MULTI",), ("INCR", "py:w"),
                             ("EXEC",)]]
    check("UNWATCH: EXEC runs", got[5], [24])
    # Pipelined in one write: the WATCH is read on the key's group
    # before the EXEC that follows it on the same connection.
    check("WATCH, MULTI, INCR, EXEC in one write",
          authed_exchange(b"WATCH py:w\r\nMULTI\r\nINCR py:w\r\n"
                          b"EXEC\r\nQUIT\r\n"),
          b"+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n:25\r\n+OK\r\n")
    check("a pipelined write after WATCH aborts EXEC",
          authed_exchange(b"WATCH py:w\r\nINCR py:w\r\nMULTI\r\n"
                          b"INCR py:w\r\nEXEC\r\nGET py:w\r\nQUIT\r\n"),
          b"+OK\r\n:26\r\n+OK\r\n+QUEUED\r\n*-1\r\n$2\r\n26\r\n"
          b"+OK\r\n")
    got = [cmd(*c) for c in [("WATCH", "py:w", "py:other"), ("MULTI",),
                             ("INCR", "py:w"), ("EXEC",)]]
    check("watching another account: CROSSSLOT",
          "CROSSSLOT" in str(got[3]), True)
    check("nothing applied", r.get("py:w"), b"26")


def scans(r):
    for i in range(50):
        r.set("py:scan:%d" % i, "v%d" % i)
    keys = sorted(r.scan_iter(match="py:scan:*", count=10))
    check("SCAN MATCH: each key once",
          keys, sorted(b"py:scan:%d" % i for i in range(50)))
    check("SCAN TYPE hash: none", list(r.scan_iter(match="py:scan:*",
                                                   _type="hash")), [])
    check("TYPE", (r.type("py:scan:1"), r.type("py:none")),
          (b"string", b"none"))
    check("STRLEN", (r.strlen("py:scan:10"), r.strlen("py:w")), (3, 2))
    check("the keys' values", r.mget("py:scan:7", "py:scan:49"),
          [b"v7", b"v49"])


def window(r):
    """The ids of an account's last 32 changes are remembered: a 33rd
    change makes it forget the oldest, which then applies again."""
    for i in range(32):
        r.execute_command("INCRBY", "py:win", 1, "REQID", "win-%d" % i)
    check("32 ids, retried: nothing applied", r.execute_command(
        "INCRBY", "py:win", 1, "REQID", "win-0"), 1)
    r.execute_command("INCRBY", "py:win", 1, "REQID", "win-32")
    check("past the window the oldest id applies again",
          r.execute_command("INCRBY", "py:win", 1, "REQID", "win-0"), 34)


def limits():
    over = b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (MAX_BULK + 1)
    check("a bulk over --proto-max-bulk-len",
          authed_exchange(b"PING\r\n" + over),
          b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n")
    check("a protocol error closes the connection",
          authed_exchange(b"*1\r\n$x\r\nPING\r\n*1\r\n$4\r\nPING\r\n"),
          b"-ERR Protocol error: invalid bulk length\r\n")
    check("expected '$'", authed_exchange(b"*1\r\n:4\r\nPING\r\n"),
          b"-ERR Protocol error: expected '$', got ':'\r\n")
    # An incomplete request past the query buffer limit: Redis closes
    # the connection without a word.
    words = QUERY_LIMIT // 16 + 100
    req = b"*%d\r\n" % (words + 10) + b"$10\r\n0123456789\r\n" * words
    check("a request over --client-query-buffer-limit", authed_exchange(req),
          b"")


def read_line(s):
    got = b""
    while not got.endswith(b"\r\n"):
        part = s.recv(1)
        if not part:
            break
        got += part
    return got


def maxclients(port, n):
    """n connections held open (each answered a PING), then one more."""
    held = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        s.sendall(b"PING\r\n")
        check("connection %d of %d" % (len(held) + 1, n), read_line(s),
              b"+PONG\r\n")
        held.append(s)
    check("connection %d" % (n + 1), raw_exchange(b"PING\r\n", port),
          b"-ERR max number of clients reached\r\n")
    for s in held:
        s.close()


def main():
    r = connect_options()
    data_commands(r)
    pipelines(r)
    transactions(r)
    retries(r)
    id_retries(r)
    watches(r)
    scans(r)
    window(r)
    limits()
    print("PASS")


if len(sys.argv) == 4 and sys.argv[1] == "--maxclients":
    maxclients(int(sys.argv[2]), int(sys.argv[3]))
    print("PASS")
    sys.exit(0)
try:
    import redis
except ImportError:
    print("SKIP: python3-redis is not installed")
    sys.exit(77)
PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
MAX_BULK, QUERY_LIMIT = int(sys.argv[3]), int(sys.argv[4])
main()
