"""Per call, on the GPU machine's host (as root): an empty uprobe alone, the empty pair,
and the daemon counting with every return probed and with one trap, on the simulated
runtime's `hipEventRecord` (the trap is the host's: the GPU plays no part), the modes
rotated each round, medians. The figures of `cargo xtask bench-one-trap` and of
`bench-breakdown`'s entry-only mode, on a machine without cargo.

usage: python one_trap_calls.py DIR ROUNDS OUT_DIR
DIR holds rocsync, rocsync-bench (feature bench), bench_calls and the simulated
libamdhip64.so. Writes OUT_DIR/one-trap-calls.md and .jsonl.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CALLS = 400000
WARM_UP = 1000  # bench_calls' untimed calls before its timed ones: counted too
API = "hipEventRecord"
METRICS = "127.0.0.1:9467"


def bench_probes(d, mode):
    """rocsync-bench's own probes on the function: ns per call."""
    out = subprocess.run(
        [str(d / "rocsync-bench"), "probes", "--mode", mode, "--lib", str(d / "libamdhip64.so"),
         "--symbol", API, "--calls", str(CALLS), "--driver", str(d / "bench_calls"),
         "--rocsync", str(d / "rocsync")], capture_output=True, text=True, check=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["ns_per_call"], None


def wait_for(log, offset, text, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if text in log.read_text()[offset:]:
            return
        time.sleep(0.02)
    raise SystemExit(f"the daemon never said {text!r}")


def under_daemon(d, out, extra):
    """bench_calls under a daemon (shed-only: a flat-out loop's records stay probed):
    ns per call, and the share of the calls made that the daemon counted."""
    log = out / "daemon.log"
    log.touch()
    offset = log.stat().st_size
    daemon = subprocess.Popen(
        [str(d / "rocsync"), "daemon", "--metrics-addr", METRICS, "--state-dir",
         str(out / "state"), "--socket", str(out / "rocsync.sock"), "--include-exe",
         str((d / "bench_calls").resolve()), "--budget-mode", "shed-only", *extra],
        stderr=open(log, "a"))
    try:
        wait_for(log, offset, "SIGTERM stops")
        child = subprocess.Popen([str(d / "bench_calls"), str(d / "libamdhip64.so"), API,
                                  str(CALLS)], env={**os.environ, "BENCH_GATE": "1"},
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "loaded"
        wait_for(log, offset, f"tracking pid {child.pid}")
        child.stdin.write("go\n")
        child.stdin.flush()
        ns = json.loads(child.stdout.readline())["ns_per_call"]
        child.wait()
        body = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
        counted = sum(float(m.group(1)) for m in re.finditer(
            rf'^rocsync_sync_calls_total{{api="{API}"[^}}]*}} (\S+)$', body, re.M))
        return ns, counted / (CALLS + WARM_UP)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)


def main():
    d, rounds, out = Path(sys.argv[1]).resolve(), int(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    modes = [("untraced", lambda: bench_probes(d, "untraced")),
             ("an empty uprobe alone", lambda: bench_probes(d, "empty-entry-only")),
             ("the empty pair", lambda: bench_probes(d, "empty")),
             ("daemon, every return probed",
              lambda: under_daemon(d, out, ["--return-probes", "all"])),
             ("daemon, one trap (default)", lambda: under_daemon(d, out, []))]
    runs = {m: [] for m, _ in modes}
    with open(out / "one-trap-calls.jsonl", "w") as f:
        for r in range(rounds):
            for label, run in modes[r % len(modes):] + modes[:r % len(modes)]:
                ns, counted = run()
                runs[label].append((ns, counted))
                f.write(json.dumps({"round": r, "mode": label, "ns_per_call": ns,
                                    "counted": counted}) + "\n")
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
               if l.startswith("model name"))
    bare = statistics.median(ns for ns, _ in runs["untraced"])
    pair = statistics.median(ns for ns, _ in runs["the empty pair"]) - bare
    md = ["# One trap, per call, on this host\n",
          f"`python3 scripts/gpu-validate/one_trap_calls.py DIR {rounds} OUT`: "
          f"{CALLS} calls of the simulated `{API}` on one thread, flat out; the modes "
          f"rotated over {rounds} rounds, medians. {cpu}, {os.cpu_count()} CPUs, kernel "
          f"{os.uname().release}.\n",
          "| mode | ns per call | runs | over untraced, × the empty pair's | calls counted |",
          "| --- | ---: | --- | ---: | ---: |"]
    for label, _ in modes:
        ns = [x for x, _ in runs[label]]
        med = statistics.median(ns)
        counted = [c for _, c in runs[label] if c is not None]
        md.append(f"| {label} | {med:.0f} | {' '.join('%.0f' % x for x in sorted(ns))} | "
                  f"{'' if label == 'untraced' else '%.2f' % ((med - bare) / pair)} | "
                  f"{'%.1f %%' % (100 * statistics.median(counted)) if counted else '–'} |")
    (out / "one-trap-calls.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
