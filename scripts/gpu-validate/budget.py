"""Validates the daemon's budget on a GPU (as root): a dense-sync PyTorch loop that polls,
and the training loop, each untraced and under the daemon (budget off, the default
budget shed-only, and the default: its duty cycle).

usage: python budget.py ROCSYNC OUT_DIR [ROUNDS] [SECONDS] [TRAIN_STEPS] [TRAIN_ROUNDS]
(0 steps: no training loop; 0 rounds with TRAIN_ROUNDS: the training loop alone, one
device call's worth each)

1. The dense-sync loop (dense.py below, run as a child): per iteration a small kernel on
   a side stream, an event recorded there, the current stream waiting on it, and
   `event.query()` polled until the event is done. ROUNDS interleaved rounds of
   SECONDS each: untraced, the daemon with `--budget off`, with its default budget and
   `--budget-mode shed-only`, and with its defaults (the duty cycle). Its own iterations
   per second (after the first 2 s: the budget's first shed and retries), the probes'
   share of its CPU as the daemon measured it, what was shed, the duty cycle, and the
   records and waits the daemon counted (estimated ones included, and apart) against the
   loop's own count of them (every call is made after the daemon tracks the process: a
   gate).
2. train.py TRAIN_STEPS untraced and under the daemon's default budget, interleaved.
Writes OUT_DIR/budget.md and OUT_DIR/budget.jsonl.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
METRICS = "127.0.0.1:9465"

# One iteration of the dense-sync loop (rotation.py runs the same one): a kernel on a side
# stream, an event recorded there, the current stream waiting on it; the caller polls it.
SETUP = """\
torch.cuda.init()
side = torch.cuda.Stream()
x = torch.ones(64, device="cuda")
torch.cuda.synchronize()
"""
STEP = """\
e = torch.cuda.Event()
with torch.cuda.stream(side):
    x.mul_(1.0)
e.record(side)
torch.cuda.current_stream().wait_event(e)
"""

DENSE = f'''
import json, sys, time, torch
seconds = float(sys.argv[1])
{SETUP}print("ready", flush=True)
sys.stdin.readline()
marks, it, polls = [], 0, 0
start = time.monotonic()
end = start + seconds
while time.monotonic() < end:
{textwrap.indent(STEP, "    ")}    while not e.query():
        polls += 1
    polls += 1
    it += 1
    if it % 1000 == 0:
        marks.append(time.monotonic() - start)
torch.cuda.synchronize()
print(json.dumps({{"iterations": it, "polls": polls, "marks": marks}}), flush=True)
'''


def metrics():
    body = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
    calls = {}
    for m in re.finditer(r'^rocsync_sync_calls_total\{api="([^"]+)",device="[^"]*"\} (\S+)$',
                         body, re.M):
        calls[m.group(1)] = calls.get(m.group(1), 0) + int(float(m.group(2)))

    def one(name):
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M)
        return float(m.group(1)) if m else None

    shed = {m.group(1): float(m.group(2)) for m in
            re.finditer(r'^rocsync_probes_shed\{api="([^"]+)"\} (\S+)$', body, re.M)}
    for m in re.finditer(
            r'^rocsync_sync_calls_estimated_total\{api="([^"]+)",device="[^"]*"\} (\S+)$',
            body, re.M):
        key = "estimated:" + m.group(1)
        calls[key] = calls.get(key, 0) + int(float(m.group(2)))
    return calls, {"cost_ratio": one("rocsync_probe_cost_ratio"),
                   "call_seconds": one("rocsync_probe_call_seconds"),
                   "over_budget": one("rocsync_over_budget_processes"), "shed": shed,
                   "duty": one("rocsync_probes_duty_cycle")}


class Daemon:
    def __init__(self, rocsync, out, exe, budget, extra=()):
        self.log = out / "daemon.log"
        args = [rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir", str(out / "state"),
                "--socket", str(out / "rocsync.sock"), "--include-exe", exe]
        if budget:
            args += ["--budget", budget]
        args += list(extra)
        with open(self.log, "a") as f:
            f.write(f"=== {' '.join(args)}\n")
        # What this daemon says is looked for after this point (the log is shared).
        self.offset = self.log.stat().st_size
        self.proc = subprocess.Popen(args, stderr=open(self.log, "a"))
        self.wait_for("SIGTERM stops")

    def wait_for(self, text, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            if text in self.log.read_text()[self.offset:]:
                return
            time.sleep(0.05)
        raise SystemExit(f"the daemon never said {text!r}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(timeout=60) != 0:
            raise SystemExit("the daemon did not exit 0")


def dense(rocsync, out, python, exe, budget, seconds, extra=()):
    """One dense-loop run: (its JSON line, the daemon's view or None)."""
    d = Daemon(rocsync, out, exe, budget, extra) if budget else None
    p = subprocess.Popen([python, "-c", DENSE, str(seconds)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    view = None
    if d:
        d.wait_for(f"tracking pid {p.pid}")
        before, _ = metrics()
    p.stdin.write("go\n")
    p.stdin.flush()
    if d:
        time.sleep(seconds - 1.0)
        _, seen = metrics()  # while it runs: the share, what is shed
    r = json.loads(p.stdout.readline())
    p.wait()
    if d:
        after, _ = metrics()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        view = {**seen, "counted": delta}
        d.stop()
    return r, view


def rate_after(marks, skip=2.0):
    """Iterations per second after `skip` seconds (1000 per mark)."""
    m = [t for t in marks if t >= skip]
    return 1000 * (len(m) - 1) / (m[-1] - m[0]) if len(m) > 1 else float("nan")


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 10
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 300
    train_rounds = int(sys.argv[6]) if len(sys.argv) > 6 else rounds
    python, exe = sys.executable, os.path.realpath(sys.executable)
    out.mkdir(parents=True, exist_ok=True)
    # Each run's row is written as it ends: a run cut short keeps what it measured.
    jsonl = open(out / "budget.jsonl", "w")
    lines = []

    def keep(row):
        lines.append(row)
        jsonl.write(json.dumps(row) + "\n")
        jsonl.flush()
    modes = [("untraced", None, ()), ("--budget off", "off", ()),
             ("1%, shed-only", "1%", ("--budget-mode", "shed-only")),
             ("1%, duty cycle (default)", "1%", ())]
    runs = {m: [] for m, _, _ in modes}
    for r in range(rounds):
        for label, budget, extra in modes:
            res, view = dense(rocsync, out, python, exe, budget, seconds, extra)
            row = {"part": "dense", "mode": label, "round": r,
                   "rate": rate_after(res["marks"]), **res, "daemon": view}
            row.pop("marks")
            runs[label].append(row)
            keep(row)
    trains = {"untraced": [], "default budget (1%)": []}
    for r in range(train_rounds if steps > 0 else 0):
        for label in trains:
            d = Daemon(rocsync, out, exe, "1%") if label != "untraced" else None
            p = subprocess.Popen([python, str(HERE / "train.py"), str(steps)],
                                 stdout=subprocess.PIPE, text=True)
            # The share is the process's while it lives: read it as the loop runs, and
            # keep the highest (once it has exited the daemon reports none).
            view, shares = None, []
            while p.poll() is None:
                time.sleep(0.5)
                if d:
                    view = metrics()[1]
                    shares.append(view["cost_ratio"] or 0.0)
            stdout = p.stdout.read()
            if p.returncode != 0:
                sys.exit(f"train.py failed: {p.returncode}")
            if view:
                view["cost_ratio_max"] = max(shares, default=0.0)
            if d:
                d.stop()
            s = json.loads(stdout.strip().splitlines()[-1])["seconds"]
            trains[label].append(s)
            keep({"part": "train", "mode": label, "round": r, "seconds": s, "daemon": view})

    md = [f"# The daemon's budget on a GPU\n",
          f"`python scripts/gpu-validate/budget.py ROCSYNC OUT {rounds} {seconds:g} {steps} "
          f"{train_rounds}`; {torch_line(python)}\n"]
    if rounds > 0:
        md += dense_table(modes, runs)
    if steps <= 0:
        (out / "budget.md").write_text("\n".join(md) + "\n")
        print("\n".join(md))
        return
    t0 = statistics.median(trains["untraced"])
    md += ["\n## The training loop (train.py)\n",
           "| mode | seconds | median | × untraced | probes' share, highest read (daemon) |",
           "| --- | --- | ---: | ---: | --- |"]
    for label, xs in trains.items():
        med = statistics.median(xs)
        views = [l["daemon"] for l in lines if l["part"] == "train" and l["mode"] == label]
        share = " ".join(f"{v['cost_ratio_max'] * 100:.2f} %" for v in views if v) or "–"
        md.append(f"| {label} | {' '.join(f'{x:.3f}' for x in xs)} | {med:.3f} | "
                  f"{med / t0:.3f} | {share} |")
    (out / "budget.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


def dense_table(modes, runs):
    """The dense loop's table: each mode's rates, against the untraced median."""
    bare = statistics.median(x["rate"] for x in runs["untraced"])
    md = ["## A dense-sync loop that polls\n",
          "Per iteration: a small kernel on a side stream, an event recorded there, the "
          "current stream waiting on it, `event.query()` polled until done. Rounds "
          "interleaved; rate = iterations per second after the first 2 s.\n",
          "| mode | rates (it/s) | median | × untraced | probes' share (daemon) | shed | "
          "duty | records counted / made (estimated) | waits counted / made (estimated) |",
          "| --- | --- | ---: | ---: | --- | --- | --- | --- | --- |"]
    for label, _, _ in modes:
        rs = runs[label]
        med = statistics.median(x["rate"] for x in rs)
        share, rec, wait = daemon_cells(rs)
        shed, duty = "–", "–"
        if rs[0]["daemon"]:
            shed = " ".join(str(int(sum(x["daemon"]["shed"].values()))) for x in rs)
            duty = " ".join("%.2f" % (x["daemon"].get("duty") or 1.0) for x in rs)
        rates = " ".join("%.0f" % x["rate"] for x in rs)
        md.append(f"| {label} | {rates} | {med:.0f} | "
                  f"{med / bare:.3f} | {share} | {shed} | {duty} | {rec} | {wait} |")
    return md


def daemon_cells(rs):
    """The daemon's view of dense-loop runs, a cell each: the probes' share of the loop's
    CPU, and the records and waits it counted of those the loop made ("–" untraced)."""
    if not rs[0]["daemon"]:
        return "–", "–", "–"
    share = " ".join(f"{(x['daemon']['cost_ratio'] or 0) * 100:.1f} %" for x in rs)
    def cell(x, prefix):
        counted = x["daemon"]["counted"]
        n = sum(v for k, v in counted.items() if k.startswith(prefix))
        est = sum(v for k, v in counted.items() if k.startswith("estimated:" + prefix))
        return "%d/%d (%d)" % (n, x["iterations"], est)
    rec = " ".join(cell(x, "cudaEventRecord") for x in rs)
    wait = " ".join(cell(x, "cudaStreamWaitEvent") for x in rs)
    return share, rec, wait


def torch_line(python):
    p = subprocess.run([python, "-c", "import torch; print(torch.__version__, "
                        "torch.version.cuda, torch.cuda.get_device_name())"],
                       capture_output=True, text=True)
    return "PyTorch/CUDA/GPU: " + p.stdout.strip()


if __name__ == "__main__":
    main()
