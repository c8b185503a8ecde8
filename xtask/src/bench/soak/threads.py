"""Thread churn as an unprivileged user (`cargo xtask bench-soak`, issue 60 item 1).

Runs the scenario program's `churn` mode again and again: batches of 32 short-lived
threads, each making one hipStreamSynchronize(0) through the simulated runtime and
exiting, as fast as it can for BURST_MS, then a pause of a quarter of that (the machine
is shared). Usage: threads.py SCENARIO SECONDS BURST_MS.
Prints its counts as one JSON line when it stops (SIGTERM or SECONDS).
"""

import json
import subprocess
import sys
import time

from stopping import stop

exe, seconds, burst = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
stats = {"runs": 0, "threads": 0, "failed": 0, "cut_at_stop": 0}
end = time.monotonic() + seconds
while not stop.is_set() and time.monotonic() < end:
    p = subprocess.Popen([exe, "churn", str(burst)], stdout=subprocess.PIPE, text=True)
    while p.poll() is None and not stop.is_set():
        time.sleep(0.05)
    if p.poll() is None:
        p.terminate()
        stats["cut_at_stop"] += 1
    out, _ = p.communicate()
    stats["runs"] += 1
    if p.returncode != 0:
        stats["failed"] += 1
    for line in out.splitlines():
        if line.startswith("threads "):
            stats["threads"] += int(line.split()[1])
    time.sleep(burst / 4000.0)
print(json.dumps(stats), flush=True)
