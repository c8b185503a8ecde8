"""Floods the daemon's dynolog port as an unprivileged user (`cargo xtask bench-soak`).

dyno's framing is a native-endian i32 length, then JSON. Most requests are malformed or
refused (bad lengths, torn bodies, not JSON, deep nesting, other functions, log files
outside the state directory, control characters, too many pids, step-based windows);
a few are valid-looking: a short trace of every tracked process into the state
directory's dyno/, or one waiting for a synchronized start up to an hour ahead.
Usage: dyno.py PORT DYNO_DIR SECONDS RATE. Prints its counts as one JSON line.
"""

import json
import os
import random
import socket
import struct
import sys
import threading
import time

from stopping import stop

port, dyno_dir, seconds, rate = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
THREADS = 8
lock = threading.Lock()
sent, outcomes = {}, {}


def frame(body):
    return struct.pack("=i", len(body)) + body


def request(config, pids=None, fn="setKinetOnDemandRequest"):
    v = {"fn": fn, "config": config, "job_id": 0, "process_limit": 3}
    if pids is not None:
        v["pids"] = pids
    return frame(json.dumps(v).encode())


def log_file(tag):
    return f"{dyno_dir}/soak-{tag}-{os.getpid()}-{random.getrandbits(48):x}.json"


def valid():
    ms = random.randint(50, 200)
    return request(f"ACTIVITIES_LOG_FILE={log_file('v')}\nACTIVITIES_DURATION_MSECS={ms}", [0])


def future():
    at = int(time.time() * 1000) + random.randint(600_000, 3_500_000)
    return request(f"ACTIVITIES_LOG_FILE={log_file('f')}\nPROFILE_START_TIME={at}", [0])


KINDS = [
    # (name, weight, message bytes or None: connect and close)
    ("valid", 1, valid),
    ("future_start", 1, future),
    ("outside_state_dir", 4, lambda: request("ACTIVITIES_LOG_FILE=/tmp/soak.json", [0])),
    ("escape", 2, lambda: request(f"ACTIVITIES_LOG_FILE={dyno_dir}/../traces/x.json")),
    ("control_chars", 2, lambda: request(f"ACTIVITIES_LOG_FILE={dyno_dir}/a\x1b[31m\r\nb.json")),
    ("too_many_pids", 2, lambda: request(f"ACTIVITIES_LOG_FILE={log_file('p')}", list(range(1, 3000)))),
    ("iterations", 2, lambda: request(f"ACTIVITIES_LOG_FILE={log_file('i')}\nACTIVITIES_ITERATIONS=10")),
    ("other_fn", 2, lambda: request("", fn="getStatus")),
    ("not_json", 3, lambda: frame(os.urandom(random.randint(1, 512)))),
    ("deep_json", 1, lambda: frame(b"[" * 60000)),
    ("negative_length", 2, lambda: struct.pack("=i", -random.randint(1, 2**31 - 1))),
    ("huge_length", 2, lambda: struct.pack("=i", 2**31 - 1) + b"{" * 100),
    ("torn_body", 2, lambda: struct.pack("=i", 4000) + b'{"fn": "setKinetOnDemandRequest"'),
    ("random_bytes", 3, lambda: os.urandom(random.randint(1, 64))),
    ("connect_close", 2, None),
]
WEIGHTED = [k for k in KINDS for _ in range(k[1])]


def count(table, key):
    with lock:
        table[key] = table.get(key, 0) + 1


def one():
    name, _, make = random.choice(WEIGHTED)
    count(sent, name)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError:
        return count(outcomes, "connect_failed")
    try:
        s.settimeout(7)
        if make is not None:
            s.sendall(make())
            if name in ("torn_body", "huge_length", "random_bytes"):
                s.shutdown(socket.SHUT_WR)
        else:
            return count(outcomes, "closed_by_us")
        head = s.recv(4)
        if not head:
            return count(outcomes, "closed_unanswered")
        count(outcomes, "answered")
        s.recv(65536)
    except socket.timeout:
        count(outcomes, "timed_out")
    except OSError:
        count(outcomes, "reset")
    finally:
        s.close()


def worker():
    gap = THREADS / rate
    next_at = time.monotonic()
    while not stop.is_set():
        one()
        next_at = max(next_at + gap, time.monotonic() - 1.0)
        stop.wait(max(0.0, next_at - time.monotonic()))


threads = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in threads:
    t.start()
stop.wait(seconds)
stop.set()
for t in threads:
    t.join()
print(json.dumps({"sent": sent, "outcomes": outcomes}), flush=True)
