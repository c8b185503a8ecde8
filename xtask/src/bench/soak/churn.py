"""Churns fake runtime copies as an unprivileged user (`cargo xtask bench-soak`).

Several times a second a short-lived child copies a real runtime under a fresh name
(a new inode each time: the daemon probes every copy as a file of its own), dlopens it,
holds it a moment and goes: some delete the copy while it is still mapped, some exit
abruptly (SIGKILL), some normally. Usage: churn.py LIBRARY WORKDIR SECONDS RATE.
Prints its counts as one JSON line when it stops (SIGTERM or SECONDS).
"""

import ctypes  # noqa: F401  (imported before the forks: the children only load)
import json
import os
import random
import shutil
import signal
import sys
import time

from stopping import stop

MAX_LIVE = 16

lib, work, seconds, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
stats = {"started": 0, "ended": 0, "failed": 0, "killed_at_stop": 0, "behind": 0}


def child(path, mode, hold):
    try:
        shutil.copyfile(lib, path)
        ctypes.CDLL(path)
        if mode == 0:  # deleted while mapped
            os.unlink(path)
        time.sleep(hold)
        if mode == 1:
            os.unlink(path)
        if mode == 2:  # gone without any clean-up
            os.kill(os.getpid(), signal.SIGKILL)
    except BaseException:
        os._exit(1)
    os._exit(0)


live = {}


def reap(block=False):
    while live:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            live.clear()
            return
        if pid == 0:
            return
        path = live.pop(pid, None)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
            stats["failed"] += 1
        else:
            stats["ended"] += 1
        if path and os.path.exists(path):
            os.unlink(path)


end = time.monotonic() + seconds
next_at = time.monotonic()
n = 0
while not stop.is_set() and time.monotonic() < end:
    reap()
    now = time.monotonic()
    if now >= next_at:
        if len(live) < MAX_LIVE:
            n += 1
            path = os.path.join(work, f"libamdhip64.so.5.{os.getpid()}.{n}")
            mode, hold = n % 4, random.uniform(0.2, 2.0)
            pid = os.fork()
            if pid == 0:
                child(path, mode, hold)
            live[pid] = path
            stats["started"] += 1
        else:
            stats["behind"] += 1
        next_at = max(next_at + 1.0 / rate, now - 1.0)
    time.sleep(0.01)
for pid in list(live):
    try:
        os.kill(pid, signal.SIGKILL)
        stats["killed_at_stop"] += 1
    except ProcessLookupError:
        pass
reap(block=True)
for name in os.listdir(work):
    os.unlink(os.path.join(work, name))
print(json.dumps(stats), flush=True)
