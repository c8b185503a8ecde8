"""Issue 49's run, for a machine with 2 NVIDIA GPUs (as root): a real NCCL hang and its
laggard named. Not yet run: the two-GPU machine was never lent while it was written.

1. `rocsync daemon --capture-on-stall 50ms`, then `torchrun --nproc-per-node 2` of JOB:
   STEPS all_reduce steps; rank 1 sleeps SLEEP s on the host (no GPU call) before
   collective K+1, so rank 0 enters it and blocks. Read while it hangs: /metrics
   (`rocsync_collective_seq` of both ranks) and the daemon's log; after: rank 0's hang
   trace, rank 1's behind trace, `rocsync report` over both, each rank's `Comms Id`.
2. The same job without the sleep, untraced and under the daemon, ROUNDS rounds each,
   interleaved: step time, and the collectives the daemon counted against the job's own.

usage: python laggard.py ROCSYNC OUT_DIR [STEPS] [K] [SLEEP] [ROUNDS]
Writes OUT_DIR/laggard.md and the traces it read.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

METRICS = "127.0.0.1:9469"
JOB = r'''
import json, os, sys, time, torch, torch.distributed as dist
steps, k, sleep_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
rank = int(os.environ["RANK"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t); torch.cuda.synchronize()     # collective 1: the communicator is up
n, times = 1, []
for i in range(steps):
    if rank == 1 and n == k and sleep_s > 0:
        print(json.dumps({"rank": rank, "pid": os.getpid(), "sleeping_before": n + 1}), flush=True)
        time.sleep(sleep_s)
    s = time.perf_counter()
    dist.all_reduce(t)
    n += 1
    torch.cuda.current_stream().synchronize()
    times.append(time.perf_counter() - s)
print(json.dumps({"rank": rank, "pid": os.getpid(), "collectives": n,
                  "step_s": sorted(times)[len(times) // 2]}), flush=True)
dist.destroy_process_group()
'''


def scrape():
    return urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()


def daemon(rocsync, out, exe):
    out.mkdir(parents=True, exist_ok=True)
    log = out / "daemon.log"
    d = subprocess.Popen([rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir",
                          str(out / "state"), "--socket", str(out / "rocsync.sock"),
                          "--include-exe", exe, "--capture-on-stall", "50ms",
                          "--lock", str(out / "lock")], stderr=open(log, "w"))
    while "SIGTERM stops" not in log.read_text():
        time.sleep(0.05)
    return d, log


def job(python, out, steps, k, sleep_s, port):
    env = dict(os.environ, MASTER_PORT=str(port))
    return subprocess.Popen([python, "-m", "torch.distributed.run", "--standalone",
                             "--nproc-per-node", "2", str(out / "job.py"), str(steps), str(k),
                             str(sleep_s)], stdout=subprocess.PIPE, text=True, env=env)


def hang_run(rocsync, python, out, steps, k, sleep_s, md):
    d, log = daemon(rocsync, out, os.path.realpath(python))
    p = job(python, out, steps, k, sleep_s, 29521)
    said, seq_lines = [], []
    deadline = time.monotonic() + sleep_s + 120
    while p.poll() is None and time.monotonic() < deadline:
        if "hang: pid" in log.read_text() and not seq_lines:
            seq_lines = [l for l in scrape().splitlines() if l.startswith("rocsync_collective_seq")]
        time.sleep(0.25)
    said = [json.loads(l) for l in p.stdout if l.startswith("{")]
    time.sleep(2)
    status = subprocess.run([rocsync, "status", "--socket", str(out / "rocsync.sock")],
                            capture_output=True, text=True).stdout
    d.send_signal(signal.SIGTERM)
    d.wait(timeout=60)
    listed = [Path(l.strip()) for l in status.splitlines() if l.strip().endswith(".json")]
    job_dir = out / "job-traces"
    job_dir.mkdir(exist_ok=True)
    for f in listed:
        if f.name.startswith(("hang-", "behind-")):
            shutil.copy(f, job_dir / f.name)
    report = subprocess.run([rocsync, "report", str(job_dir)], capture_output=True, text=True)
    ids = {}
    for f in job_dir.glob("*.json"):
        t = json.loads(f.read_text())
        for e in t["traceEvents"]:
            if e.get("name") == "ncclAllReduce":
                ids.setdefault(f.name, set()).add(e["args"].get("Comms Id"))
    lines = [l for l in log.read_text().splitlines() if "hang" in l or "behind" in l]
    md += ["## 1. A hang with a laggard\n",
           f"{steps} steps; rank 1 sleeps {sleep_s:g} s before collective {k + 1}.\n",
           "The job said: `" + json.dumps(said) + "`\n",
           "/metrics while it hung:\n", "```", *seq_lines, "```\n",
           "The daemon's log:\n", "```", *lines[:12], "```\n",
           "`rocsync report` over rank 0's hang trace and rank 1's behind trace:\n", "```",
           *report.stdout.splitlines(), *report.stderr.splitlines(), "```\n",
           "Comms Id per trace: `" + json.dumps({k: sorted(v, key=str) for k, v in ids.items()})
           + "`\n"]


def overhead(rocsync, python, out, steps, rounds, md):
    rows = []
    for r in range(rounds):
        for mode in ("untraced", "daemon"):
            d = daemon(rocsync, out / f"o-{r}", os.path.realpath(python))[0] if mode == "daemon" else None
            p = job(python, out, steps, 0, 0, 29530 + 2 * r + (mode == "daemon"))
            said = [json.loads(l) for l in p.stdout if l.startswith("{")]
            p.wait()
            counted = None
            if d:
                body = scrape()
                counted = sum(float(m.group(1)) for m in re.finditer(
                    r'^rocsync_sync_calls_total\{api="ncclAllReduce"[^}]*\} (\S+)$', body, re.M))
                d.send_signal(signal.SIGTERM)
                d.wait(timeout=60)
            rows.append((r, mode, [s.get("step_s") for s in said],
                         sum(s.get("collectives", 0) for s in said), counted))
    md += ["## 2. Without the sleep: step time and counts\n",
           "| round | mode | median step (s), per rank | collectives (job) | counted by the daemon |",
           "| ---: | --- | --- | ---: | ---: |"]
    md += [f"| {r} | {m} | {s} | {n} | {c} |" for r, m, s, n, c in rows]


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    k = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    sleep_s = float(sys.argv[5]) if len(sys.argv) > 5 else 8.0
    rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.py").write_text(JOB)
    python = sys.executable
    md = ["# A real NCCL hang on two GPUs: the laggard named\n",
          f"`python3 scripts/gpu-validate/laggard.py ROCSYNC OUT {steps} {k} {sleep_s:g} {rounds}`\n"]
    hang_run(rocsync, python, out, steps, k, sleep_s, md)
    overhead(rocsync, python, out, steps, rounds, md)
    (out / "laggard.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
