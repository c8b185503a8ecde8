"""What the daemon (at its defaults, and with the stall settings and flight recorder the
docs offer) and `rocsync run` cost a dense-sync PyTorch loop and a training loop, in whole-
process wall time (the training loop: its timed steps), with torch.profiler in the same rotation for scale (issue 63). Each round
runs every mode once, the order rotating by round; each mode's ratio is taken to the
untraced run of its own round, and the median of those is reported.

usage: python rotation.py ROCSYNC OUT_DIR [ROUNDS] [ITERATIONS] [TRAIN_STEPS] [TRAIN_ROUNDS]
Writes OUT_DIR/rotation.md and OUT_DIR/rotation.jsonl (one line per run).
"""
import json
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from budget import SETUP, STEP  # noqa: E402  (one loop for both benches)

# The loop: per iteration a kernel on a side stream, an event recorded there, the
# current stream waiting on it, the event polled until done; N iterations, then exit.
DENSE = f'''
import sys, torch
n, profile = int(sys.argv[1]), sys.argv[2] == "profile"
{SETUP}def loop():
    for _ in range(n):
{textwrap.indent(STEP, "        ")}        while not e.query():
            pass
    torch.cuda.synchronize()
if profile:
    from torch.profiler import profile as p, ProfilerActivity as A
    with p(activities=[A.CPU, A.CUDA]) as prof:
        loop()
else:
    loop()
'''

DAEMONS = {
    "daemon (defaults)": [],
    "daemon, stalls 50ms": ["--capture-on-stall", "50ms"],
    "daemon, stalls 50ms + flight 10s": ["--capture-on-stall", "50ms", "--flight-recorder", "10s"],
}


class Daemon:
    def __init__(self, rocsync, out, extra):
        self.log = out / "daemon.log"
        args = [rocsync, "daemon", "--metrics-addr", "127.0.0.1:9466",
                "--state-dir", str(out / "state"), "--socket", str(out / "rocsync.sock"), *extra]
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        self.proc = subprocess.Popen(args, stderr=open(self.log, "a"))
        end = time.time() + 120
        while "SIGTERM stops" not in self.log.read_text()[self.offset:]:
            if time.time() > end or self.proc.poll() is not None:
                raise SystemExit("the daemon did not start:\n" + self.log.read_text()[-3000:])
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def timed(cmd):
    """The whole process's wall time; for train.py, the timed steps' own (its JSON line)."""
    t = time.monotonic()
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    wall = time.monotonic() - t
    said = [x for x in p.stdout.splitlines() if x.startswith('{"seconds"')]
    return json.loads(said[-1])["seconds"] if said else wall


def one(rocsync, out, mode, workload, r):
    """The run's time in `mode`."""
    py = [sys.executable, "-c", DENSE, str(workload), "plain"] if isinstance(workload, int) \
        else [sys.executable, str(HERE / "train.py"), str(workload[1])]
    if mode == "torch.profiler":
        return timed(py[:4] + ["profile"])
    if mode == "rocsync run":
        trace = out / f"run-{'dense' if isinstance(workload, int) else 'train'}-{r}.json"
        trace.unlink(missing_ok=True)
        return timed([rocsync, "run", "-o", str(trace), "--", *py])
    d = Daemon(rocsync, out, DAEMONS[mode]) if mode in DAEMONS else None
    try:
        return timed(py)
    finally:
        if d:
            d.stop()


def rotate(rocsync, out, modes, workload, rounds, rows, name):
    timed(([sys.executable, "-c", DENSE, "2000", "plain"]) if isinstance(workload, int)
          else [sys.executable, str(HERE / "train.py"), "20"])  # warm
    for r in range(rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for m in order:
            s = one(rocsync, out, m, workload, r)
            rows.append({"workload": name, "round": r, "mode": m, "seconds": s})
            print(json.dumps(rows[-1]), flush=True)


def table(rows, name, modes):
    mine = [x for x in rows if x["workload"] == name]
    base = {x["round"]: x["seconds"] for x in mine if x["mode"] == "untraced"}
    out = [f"| {name}: mode | wall s (median) | ratio to its round's untraced (median) | all ratios |",
           "| --- | ---: | ---: | --- |"]
    for m in modes:
        runs = [x for x in mine if x["mode"] == m]
        ratios = [x["seconds"] / base[x["round"]] for x in runs]
        out.append(f"| {m} | {statistics.median(x['seconds'] for x in runs):.3f} | "
                   f"**{statistics.median(ratios):.3f}** | {' '.join(f'{q:.3f}' for q in ratios)} |")
    return out


def main():
    rocsync, out = str(Path(sys.argv[1]).resolve()), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    iterations = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    train_rounds = int(sys.argv[6]) if len(sys.argv) > 6 else rounds
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    dense_modes = ["untraced", *DAEMONS, "rocsync run", "torch.profiler"]
    rotate(rocsync, out, dense_modes, iterations, rounds, rows, "dense-sync loop")
    train_modes = ["untraced", *DAEMONS, "rocsync run"]
    if steps:
        rotate(rocsync, out, train_modes, ("train", steps), train_rounds, rows, "training loop")
    (out / "rotation.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    lines = [f"Command: `python3 scripts/gpu-validate/rotation.py ROCSYNC OUT {rounds} {iterations} {steps} {train_rounds}`",
             "", *table(rows, "dense-sync loop", dense_modes), ""]
    if steps:
        lines += table(rows, "training loop", train_modes)
    (out / "rotation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
