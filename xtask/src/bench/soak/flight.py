"""Flight-recorder dumps asked in a loop by an unprivileged member of the daemon's group
(`cargo xtask bench-soak`, issue 60 items 4 and 8): `rocsync trace --flight` over the
socket, again PAUSE seconds after each answer came; the dumps are left to the daemon's
retention (they are written in its state folder). Usage: flight.py ROCSYNC SOCKET SECONDS PAUSE.
Prints its counts as one JSON line when it stops (SIGTERM or SECONDS).
"""

import json
import subprocess
import sys
import time

from stopping import stop

rocsync, sock, seconds, pause = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
stats = {"asked": 0, "answered": 0, "files": 0, "refused": {}}
end = time.monotonic() + seconds
while not stop.is_set() and time.monotonic() < end:
    stats["asked"] += 1
    try:
        p = subprocess.run(
            [rocsync, "trace", "--flight", "--socket", sock],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        stats["refused"]["no answer within 120 s"] = stats["refused"].get("no answer within 120 s", 0) + 1
        continue
    files = [w for w in p.stdout.split() if w.endswith(".json")]
    if p.returncode == 0:
        stats["answered"] += 1
        stats["files"] += len(files)
    else:
        why = (p.stderr.strip().splitlines() or ["(nothing said)"])[-1][:80]
        stats["refused"][why] = stats["refused"].get(why, 0) + 1
    time.sleep(pause)
print(json.dumps(stats), flush=True)
