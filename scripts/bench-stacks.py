#!/usr/bin/env python3
"""What reading a process's stacks costs (bench/stacks.md; issue 62).

1. One read: `rocsync read-stacks --pid P` (what the daemon runs as its bounded child) on
   a Python process blocked in a function of its own with a second thread, N times: wall
   time per read and the reader's peak resident set.
2. The target's price: a dense Python loop's rate in rotating windows, side by side in
   one run: quiet; the reader run back to back on another process (what running it costs
   the host's CPUs); the reader run back to back on the loop itself. The loop is pinned
   to CPU 0, this script and its readers to CPU 1, when there are two.

Usage (root): python3 scripts/bench-stacks.py [ROCSYNC] [--reads N] [--windows N]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

BLOCKED = """\
import threading, time
def other():
    time.sleep(1000)
def step():
    print('ready', flush=True)
    time.sleep(1000)
threading.Thread(target=other, daemon=True).start()
step()
"""

# Counts iterations; prints the count when asked (a line on stdin).
DENSE = """\
import sys, threading
n = 0
def answer():
    for _ in sys.stdin:
        print(n, flush=True)
threading.Thread(target=answer, daemon=True).start()
print('ready', flush=True)
def loop():
    global n
    while True:
        n += 1
loop()
"""


def start(script, cpu=None):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "target.py")
    with open(path, "w") as f:
        f.write(script)
    cmd = ["python3", path]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    return p


def read(rocsync, pid, cpu=None):
    cmd = [rocsync, "read-stacks", "--pid", str(pid)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return out.decode().strip().splitlines()[-1]


def one_read(rocsync, reads):
    p = start(BLOCKED)
    try:
        walls = []
        for _ in range(reads):
            t = time.perf_counter()
            last = read(rocsync, p.pid)
            walls.append((time.perf_counter() - t) * 1e3)
        assert '"function":"step"' in last, last
        # The largest peak of any child so far: a reader (taskset never ran here).
        rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return walls, rss_kib
    finally:
        p.kill()


def count(p):
    """The loop's iterations so far, and its main thread's CPU time (ns, schedstat)."""
    p.stdin.write("\n")
    p.stdin.flush()
    n = int(p.stdout.readline())
    with open(f"/proc/{p.pid}/task/{p.pid}/schedstat") as f:
        return n, int(f.read().split()[0])


def price(rocsync, windows, seconds):
    """Rates of the loop in rotating windows: quiet; the reader run back to back on
    another process (what running it costs the host); on the loop itself."""
    two = os.cpu_count() >= 2
    p = start(DENSE, cpu=0 if two else None)
    other = start(BLOCKED)
    if two:
        # This script and the readers off the loop's CPU.
        os.sched_setaffinity(0, {1})
    try:
        kinds = ("quiet", "read other", "read target")
        rates = {k: [] for k in kinds}
        per_cpu = {k: [] for k in kinds}
        reads = 0
        for w in range(len(kinds) * windows):
            kind = kinds[w % len(kinds)]
            pid = other.pid if kind == "read other" else p.pid
            (c0, cpu0), t0 = count(p), time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                if kind == "quiet":
                    time.sleep(0.01)
                else:
                    read(rocsync, pid)
                    reads += 1
            (c1, cpu1), t1 = count(p), time.perf_counter()
            rates[kind].append((c1 - c0) / (t1 - t0))
            per_cpu[kind].append((c1 - c0) / (cpu1 - cpu0) * 1e9)
        return rates, per_cpu, reads
    finally:
        p.kill()
        other.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rocsync", nargs="?", default="target/release/rocsync")
    ap.add_argument("--reads", type=int, default=30)
    ap.add_argument("--windows", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args()
    walls, rss = one_read(a.rocsync, a.reads)
    q = statistics.quantiles(walls, n=4)
    print(f"one read of a 2-thread Python {sys.version.split()[0]} process, {a.reads} reads:")
    print(f"  wall ms: median {statistics.median(walls):.1f}, quartiles {q[0]:.1f}-{q[2]:.1f},"
          f" max {max(walls):.1f}; reader peak RSS {rss / 1024:.1f} MiB")
    rates, per_cpu, reads = price(a.rocsync, a.windows, a.seconds)
    print(f"dense loop (CPU 0; readers on CPU 1), {a.windows} rounds of {a.seconds} s windows,"
          f" {reads} reads ({reads / (2 * a.windows * a.seconds):.0f}/s while reading):")
    for what, r in (("per second of wall time", rates),
                    ("per second of the loop's own CPU time", per_cpu)):
        print(f"  iterations {what}:")
        for kind, v in r.items():
            print(f"    {kind:12} median {statistics.median(v):.3e}")
        for num, den in (("read target", "read other"), ("read other", "quiet"),
                         ("read target", "quiet")):
            ratios = [x / y for x, y in zip(r[num], r[den])]
            q = statistics.quantiles(ratios, n=4)
            print(f"    {num} / {den}: median {statistics.median(ratios):.3f},"
                  f" quartiles {q[0]:.3f}-{q[2]:.3f}")


if __name__ == "__main__":
    main()
