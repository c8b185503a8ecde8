"""Where is a hung rank, on a real GPU (issue 62): a PyTorch process with an NCCL
communicator (world size 1) whose compute stream sleeps before an all-reduce, then
synchronizes inside `step()`, under a daemon started with its defaults only (no stall or
hang setting). Checks that the daemon's hang trace holds the Python stack of the blocked
thread and its native frames (into libcudart/libcuda), and says where the process is; and
what reading the stacks cost the target, side by side in one run:
  1. the blocked process's wall time, untraced and under the daemon (rotating rounds);
  2. a dense Python loop's rate in 1 s windows, quiet and while its stacks are read back to
     back (`rocsync read-stacks`, what the daemon runs), alternating.

usage: python hang_stacks.py ROCSYNC OUT_DIR [ROUNDS] [SLEEP_S]
Writes OUT_DIR/hang-stacks.md and the hang trace's object (OUT_DIR/hang-object.json).
"""
import glob
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

JOB = r'''
import os, sys, time, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(1024, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record(); torch.cuda._sleep(10_000_000); b.record(); b.synchronize()
cycles = int(10_000_000 * float(sys.argv[1]) * 1000 / a.elapsed_time(b))

def step():
    torch.cuda._sleep(cycles)       # the GPU is busy: the collective waits behind it
    dist.all_reduce(t)
    start = time.monotonic()
    if sys.argv[2] == "event":      # a blocking-sync event: the thread sleeps in the driver
        e = torch.cuda.Event(blocking=True)
        e.record()
        e.synchronize()
    else:                           # the default: the runtime spins on a CPU
        torch.cuda.current_stream().synchronize()   # blocked here
    return time.monotonic() - start

print("blocking", flush=True)
print("blocked %.3f" % step(), flush=True)
dist.destroy_process_group()
'''

LOOP = r'''
import sys, time
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
n, last, counts = 0, time.monotonic(), []
while time.monotonic() < end:
    n += 1
    if n % 100000 == 0:
        now = time.monotonic()
        if now - last >= 0.25:
            counts.append((now, n)); n = 0; last = now
print(" ".join("%.3f:%d" % c for c in counts), flush=True)
'''


def job(out, sleep_s, mode="stream"):
    script = out / "hang_job.py"
    script.write_text(JOB)
    p = subprocess.run([sys.executable, str(script), str(sleep_s), mode], capture_output=True, text=True,
                       timeout=300)
    blocked = [float(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("blocked ")]
    if p.returncode != 0 or not blocked:
        raise SystemExit(f"job failed: {p.stdout}\n{p.stderr[-2000:]}")
    return blocked[0]


def start_daemon(rocsync, out):
    state = out / "state"
    log = open(out / "daemon.log", "w")
    d = subprocess.Popen([rocsync, "daemon", "--metrics-addr", "127.0.0.1:9471", "--state-dir",
                          str(state), "--socket", str(out / "rocsync.sock"), "--lock",
                          str(out / "daemon.lock")], stderr=log)
    deadline = time.time() + 60
    while "SIGTERM stops" not in (out / "daemon.log").read_text():
        if time.time() > deadline or d.poll() is not None:
            raise SystemExit("daemon did not start:\n" + (out / "daemon.log").read_text())
        time.sleep(0.2)
    return d


def hang_object(out, api):
    deadline = time.time() + 30
    while time.time() < deadline:
        files = [f for f in glob.glob(str(out / "state" / "**" / f"hang-{api}-*"), recursive=True)
                 if f.endswith((".json", ".json.gz"))]
        if files:
            f = sorted(files)[-1]
            opener = gzip.open if f.endswith(".gz") else open
            with opener(f, "rt") as fh:
                t = json.load(fh)
            return t["rocsync"]["parameters"]["hang"], t
        time.sleep(0.5)
    raise SystemExit("no hang trace:\n" + (out / "daemon.log").read_text())


def loop_rates(rocsync, windows):
    p = subprocess.Popen([sys.executable, "-c", LOOP, str(windows * 1.0 + 0.5)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    start = time.monotonic()
    spans = []  # (from, to, reading)
    for w in range(windows):
        reading = w % 2 == 1
        t0 = time.monotonic()
        reads = 0
        while time.monotonic() - t0 < 1.0:
            if reading:
                subprocess.run([rocsync, "read-stacks", "--pid", str(p.pid)], capture_output=True)
                reads += 1
            else:
                time.sleep(0.05)
        spans.append((t0, time.monotonic(), reading, reads))
    counts = [tuple(map(float, c.split(":"))) for c in p.stdout.readline().split()]
    p.wait()
    rate = {True: [], False: []}
    reads = sum(s[3] for s in spans)
    for a, b, reading, _ in spans:
        inside = [n / 0.25 for (t, n) in counts if a + 0.3 <= t <= b]
        if inside:
            rate[reading].append(statistics.median(inside))
    return rate, reads, start


def main():
    rocsync, out = os.path.realpath(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    sleep_s = float(sys.argv[4]) if len(sys.argv) > 4 else 9.0
    out.mkdir(parents=True, exist_ok=True)
    job(out, 1.0)  # warm: kernels, NCCL's first set-up
    walls = {"untraced": [], "daemon (defaults)": []}
    hang = None
    for r in range(rounds):
        walls["untraced"].append(job(out, sleep_s))
        d = start_daemon(rocsync, out)
        try:
            walls["daemon (defaults)"].append(job(out, sleep_s))
            if hang is None:
                hang, trace = hang_object(out, "cudaStreamSynchronize")
        finally:
            d.terminate()
            d.wait()
    (out / "hang-object.json").write_text(json.dumps(hang, indent=1))
    # Once more with a blocking-sync event: its thread waits in a system call, where its
    # native stack can be read without stopping it.
    d = start_daemon(rocsync, out)
    try:
        job(out, sleep_s, "event")
        event_hang, _ = hang_object(out, "cudaEventSynchronize")
    finally:
        d.terminate()
        d.wait()
    (out / "hang-object-event.json").write_text(json.dumps(event_hang, indent=1))
    rate, reads, _ = loop_rates(rocsync, 10)
    blocked = hang["stacks"]["threads"][0]
    py = [(f["function"], Path(f["file"]).name, f["line"]) for f in blocked["python_stack"] or []]
    eb = event_hang["stacks"]["threads"][0]
    native = [(f["symbol"], Path(f["object"] or "?").name, f["symbolized"])
              for f in eb["native_stack"] or []]
    spun = [(f["symbol"], Path(f["object"] or "?").name, f["symbolized"])
            for f in blocked["native_stack"] or []]
    rows = [e for e in trace["traceEvents"] if e.get("cat") in ("python_stack", "native_stack")]
    q, r = statistics.median(rate[False]), statistics.median(rate[True])
    lines = [
        "# Where a hung PyTorch rank is: the daemon's defaults on a real GPU (issue 62)",
        "",
        f"Command: `python3 scripts/gpu-validate/hang_stacks.py target/release/rocsync OUT {rounds} {sleep_s}`"
        " (device machine, root). A daemon with no setting but its paths; a world-size-1 NCCL"
        f" job whose compute stream sleeps {sleep_s} s before an all-reduce, then synchronizes"
        " in `step()`.",
        "",
        f"- log: `{next((l for l in (out / 'daemon.log').read_text().splitlines() if ' is in ' in l or 'is unknown' in l), '(none)')}`",
        f"- `where`: `{hang.get('where')}`; python version {hang['stacks'].get('python_version')};"
        f" read in {hang['stacks'].get('took_ms')} ms; error {hang['stacks'].get('error')}",
        f"- blocked thread's Python stack (innermost first): {py}",
        f"- its native stack ({blocked.get('native_read')!r}; cudaStreamSynchronize spins on a CPU"
        f" by default), innermost first (symbol, object, symbolized): {spun[:40]}"
        f" {blocked['native_error'] or ''}",
        f"- with a blocking-sync event (`cudaEventSynchronize`), `where` `{event_hang.get('where')}`,"
        f" Python {[f['function'] for f in eb['python_stack'] or []]}, native frames (innermost first,"
        f" symbol, object, symbolized): {native[:40]} {eb['native_error'] or ''}",
        f"- rows on its track: {len(rows)} ({sorted(set(e['cat'] for e in rows))})",
        "",
        "| blocked wall time (s) | " + " | ".join(walls) + " |",
        "| --- | " + " | ".join("---:" for _ in walls) + " |",
        "| median | " + " | ".join(f"{statistics.median(v):.3f}" for v in walls.values()) + " |",
        "| all | " + " | ".join(" ".join(f"{x:.3f}" for x in v) for v in walls.values()) + " |",
        "",
        f"Dense Python loop, iterations per second (median of 1 s windows, alternating): quiet"
        f" {q:.3e}, while its stacks are read back to back ({reads} reads in 5 windows, each a perf sample of the running loop's stack) {r:.3e}:"
        f" **{r / q:.3f}** of quiet.",
    ]
    (out / "hang-stacks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
