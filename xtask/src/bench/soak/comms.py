"""Communicator floods as an unprivileged user (`cargo xtask bench-soak`, issue 60 item 5).

Keeps LIVE single-rank jobs of the rank program (tests/c/nccl_ranks.c) running: each
takes a fresh random unique id (ncclGetUniqueId), makes its communicator with
ncclCommInitRank, splits 63 more off it, makes 3 collectives and exits; a new one starts
as each ends. Usage: comms.py NCCL_RANKS WORKDIR SECONDS LIVE.
Prints its counts as one JSON line when it stops (SIGTERM or SECONDS).
"""

import json
import os
import subprocess
import sys
import time

from stopping import stop

exe, work, seconds, live_max = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
SPLITS = 63
stats = {"jobs": 0, "communicators": 0, "failed": 0, "cut_at_stop": 0}
env = dict(os.environ, TMPDIR=work, NCCL_RANKS_SPLITS=str(SPLITS))
live = []
end = time.monotonic() + seconds
while not stop.is_set() and time.monotonic() < end:
    for p in [p for p in live if p.poll() is not None]:
        live.remove(p)
        if p.returncode != 0:
            stats["failed"] += 1
    while len(live) < live_max:
        # 1 rank, 3 collectives, no laggard, 50 ms before its first call, 100 ms a step.
        args = [exe, "1", "3", "9", "0", "0", "50", "100"]
        live.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL))
        stats["jobs"] += 1
        stats["communicators"] += 1 + SPLITS
    time.sleep(0.02)
for p in live:
    if p.poll() is None:
        p.kill()
        stats["cut_at_stop"] += 1
    p.wait()
print(json.dumps(stats), flush=True)
