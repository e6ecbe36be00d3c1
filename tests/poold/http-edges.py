#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What poold answers to four hostile-client cases, and when, against a running
server: a TLS ClientHello on the plain port, a request target longer than
the header limit, a body trickled at 1 byte a second, and a keep-alive
connection left idle.  Usage: tests/poold/http-edges.py PORT (on 127.0.0.1);
prints one line per case with the status (or the close) and the time it
took.  The slow body and the idle case take poold's timeouts: about 10 and
15 s at the defaults.  Python 3 standard library only."""
import socket, time, sys, threading
if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
if len(sys.argv) != 2 or not sys.argv[1].isdigit() or not 0 < int(sys.argv[1]) < 65536:
    print("usage: tests/poold/http-edges.py PORT (poold listening on 127.0.0.1:PORT)", file=sys.stderr)
    sys.exit(2)
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(30); return s
def status(buf): return buf.split(b"\r\n", 1)[0].decode(errors="replace")
def read_all(s):
    out = b""
    while True:
        try: d = s.recv(65536)
        except socket.timeout: break
        if not d: break
        out += d
    return out
res = {}
def tls():
    s = conn(); t = time.monotonic()
    s.sendall(bytes.fromhex("160301 00c8 01 0000c4 0303".replace(" ", "")) + b"\x5b" * 16)
    b = read_all(s); res["tls"] = (status(b), (time.monotonic() - t) * 1000)
def longtarget():
    s = conn(); t = time.monotonic()
    s.sendall(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    b = read_all(s); res["long target"] = (status(b), (time.monotonic() - t) * 1000)
def slowbody():
    s = conn(); t = time.monotonic()
    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
    s.settimeout(1.0); b = b""
    while time.monotonic() - t < 30:
        try:
            s.send(b"x")
        except OSError:
            break
        try:
            d = s.recv(65536)
            if not d: break
            b += d
            if b"\r\n\r\n" in b: break
        except socket.timeout:
            pass
    res["slow body 1 B/s"] = (status(b), (time.monotonic() - t) * 1000)
def idle():
    s = conn(); s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"); s.settimeout(30)
    s.recv(65536); t = time.monotonic()
    while True:
        d = s.recv(65536)
        if not d: break
    res["idle keep-alive closed"] = ("close", (time.monotonic() - t) * 1000)
th = [threading.Thread(target=f) for f in (tls, longtarget, slowbody, idle)]
[x.start() for x in th]; [x.join() for x in th]
for k, v in res.items(): print(f"{k}: {v[0]} after {v[1]:.1f} ms")
