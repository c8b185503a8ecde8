"""Slow connections to the daemon's metrics and dynolog ports, as an unprivileged user
(`cargo xtask bench-soak`): many held at once, each silent, trickling a request a byte a
second, or (metrics) sending a whole request and never reading the answer; whenever the
daemon closes one, another is opened. The dynolog ones are held for the first half of
each minute only (one user's held connections take that user's share of the daemon's
reading slots, which the dyno flood shares). Usage: slow.py METRICS_PORT DYNO_PORT
SECONDS PER_PORT. Prints its counts and how long the daemon let connections live.
"""

import json
import random
import selectors
import socket
import struct
import sys
import time

from stopping import stop

metrics_port, dyno_port = int(sys.argv[1]), int(sys.argv[2])
seconds, per_port = float(sys.argv[3]), int(sys.argv[4])
HTTP = b"GET /metrics HTTP/1.1\r\nHost: soak\r\n\r\n"
DYNO_BODY = b'{"fn": "setKinetOnDemandRequest", "config": "X=1"}'
DYNO = struct.pack("=i", len(DYNO_BODY)) + DYNO_BODY
OPEN_PER_TURN = 5
# A whole request whose answer is never read is closed by us after this long.
UNREAD_HOLD = 10.0
sel = selectors.DefaultSelector()
stats = {"opened": 0, "connect_failed": 0, "closed_by_daemon": 0, "unread_closed_by_us": 0}
lifetimes = {"metrics": [], "dyno": []}


class Conn:
    def __init__(self, port, mode):
        self.port, self.mode = port, mode
        self.kind = "metrics" if port == metrics_port else "dyno"
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=1)
        self.sock.setblocking(False)
        self.opened = time.monotonic()
        self.sent = 0
        self.payload = HTTP if self.kind == "metrics" else DYNO
        if mode == "no_read":
            # Never read, so never watched: held UNREAD_HOLD seconds, then closed.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            self.sock.send(self.payload)
        else:
            sel.register(self.sock, selectors.EVENT_READ, self)

    def trickle(self):
        if self.mode == "trickle" and self.sent < len(self.payload) - 1:
            try:
                self.sock.send(self.payload[self.sent : self.sent + 1])
                self.sent += 1
            except OSError:
                pass

    def close(self):
        if self.mode != "no_read":
            sel.unregister(self.sock)
        self.sock.close()


def mode_for(kind):
    modes = ["silent", "trickle"] + (["no_read"] if kind == "metrics" else [])
    return random.choice(modes)


def dyno_held(now):
    return (now - start) % 60 < 30


def open_conn(port):
    kind = "metrics" if port == metrics_port else "dyno"
    try:
        c = Conn(port, mode_for(kind))
        stats["opened"] += 1
        return c
    except OSError:
        stats["connect_failed"] += 1
        return None


start = time.monotonic()
conns = []
last_trickle = 0.0
while not stop.is_set() and time.monotonic() - start < seconds:
    now = time.monotonic()
    want = {metrics_port: per_port, dyno_port: per_port if dyno_held(now) else 0}
    for port, n in want.items():
        have = [c for c in conns if c.port == port]
        for c in have[n:]:
            c.close()
            conns.remove(c)
        # Replaced at a bounded pace: those past the peer's share are closed at once.
        for _ in range(min(OPEN_PER_TURN, n - len(have))):
            c = open_conn(port)
            if c:
                conns.append(c)
    for key, _ in sel.select(timeout=0.2):
        c = key.data
        try:
            data = c.sock.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            stats["closed_by_daemon"] += 1
            lifetimes[c.kind].append(now - c.opened)
            c.close()
            conns.remove(c)
    time.sleep(0.05)
    if now - last_trickle >= 1.0:
        last_trickle = now
        for c in conns:
            c.trickle()
        for c in [c for c in conns if c.mode == "no_read" and now - c.opened > UNREAD_HOLD]:
            stats["unread_closed_by_us"] += 1
            c.close()
            conns.remove(c)
for c in conns:
    c.close()


def summary(xs):
    if not xs:
        return None
    xs = sorted(xs)
    return {"n": len(xs), "median_s": round(xs[len(xs) // 2], 2), "max_s": round(xs[-1], 2)}


stats["daemon_closed_after"] = {k: summary(v) for k, v in lifetimes.items()}
print(json.dumps(stats), flush=True)
