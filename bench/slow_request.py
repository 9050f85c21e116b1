# SPDX-License-Identifier: MIT
"""The server CPU one slow request costs (issue #33, item 7): a request
of 1,048,576 one-byte arguments (7 MB) sent in 1,000-byte pieces, each
piece sent once the server has read the one before (the socket's send
queue is empty), so that every piece is one arrival. The request is
PING with 1,048,575 arguments: both servers answer it with a one-line
error ("wrong number of arguments"), so the figure is the parsing.

    python3 bench/slow_request.py PORT PID [PASSWORD]

Prints the CPU seconds (user + system, from /proc/PID/stat) the server
with that PID used while it received and answered the request."""
import fcntl
import os
import socket
import struct
import sys
import termios
import time

NARGS = 1024 * 1024
PIECE = 1000


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def unsent(s):
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ,
                                          b"\0\0\0\0"))[0]


def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    req = b"*%d\r\n$4\r\nPING\r\n" % NARGS + b"$1\r\nx\r\n" * (NARGS - 1)
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if len(sys.argv) > 3:
        s.sendall(b"AUTH %s\r\n" % sys.argv[3].encode())
        s.recv(100)
    before = cpu_seconds(pid)
    for off in range(0, len(req), PIECE):
        s.sendall(req[off:off + PIECE])
        while unsent(s):
            time.sleep(0)
    got = b""
    while not got.endswith(b"\r\n"):
        part = s.recv(4096)
        if not part:
            break
        got += part
    after = cpu_seconds(pid)
    if not got.startswith(b"-ERR wrong number of arguments"):
        print("unexpected reply: %r" % got[:80], file=sys.stderr)
        sys.exit(1)
    print("%.3f" % (after - before))


if __name__ == "__main__":
    main()
