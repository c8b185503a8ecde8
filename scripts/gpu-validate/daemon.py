"""Validates `rocsync daemon` on a PyTorch training loop, against CUPTI (torch.profiler),
on a machine with an NVIDIA GPU, as root.

usage: python daemon.py ROCSYNC_BINARY OUT_DIR [STEPS] [ROUNDS]

1. Overhead, side by side, ROUNDS interleaved rounds of train.py STEPS: untraced (no
   daemon) and counted by a running daemon (nothing asked of it).
2. One run of train.py under torch.profiler (CUPTI) with a daemon running, paused just
   before and after its timed steps (`--pause`): the daemon's /metrics read at both
   pauses give the calls of exactly the profiled steps, compared per API with CUPTI's
   rows; meanwhile `rocsync trace --pid P -o window.json` records a window, whose sync
   rows are matched one by one with CUPTI's rows of the same time span.
Writes OUT_DIR/daemon-validation.md, with what it compared beside it.
"""
import collections
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import load, match, sync_rows, thread_map  # noqa: E402

METRICS = "127.0.0.1:9464"
# The CUDA functions rocsync probes by default (README, "What is probed").
PROBED = re.compile(r"^cuda(EventRecord|StreamWaitEvent|EventSynchronize|EventQuery|"
                    r"StreamSynchronize|DeviceSynchronize|SetDevice|StreamCreate|"
                    r"StreamDestroy|EventDestroy)")


class Daemon:
    def __init__(self, rocsync, out, python):
        self.log = os.path.join(out, "daemon.log")
        self.sock = os.path.join(out, "rocsync.sock")
        self.proc = subprocess.Popen(
            [rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir",
             os.path.join(out, "state"), "--socket", self.sock, "--include-exe", python],
            stderr=open(self.log, "a"))
        self.wait_for("SIGTERM stops")

    def wait_for(self, text, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            with open(self.log) as f:
                if text in f.read():
                    return
            time.sleep(0.05)
        raise SystemExit(f"the daemon never said {text!r}")

    def calls(self):
        """rocsync_sync_calls_total per API, summed over devices."""
        body = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
        out = collections.Counter()
        for m in re.finditer(r'^rocsync_sync_calls_total\{api="([^"]+)",device="[^"]*"\} (\S+)$',
                             body, re.M):
            out[m.group(1)] += int(float(m.group(2)))
        return out, body

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        if self.proc.wait(timeout=60) != 0:
            raise SystemExit("the daemon did not exit 0")


def train(python, steps, *extra, stdin=None):
    return subprocess.Popen([python, os.path.join(HERE, "train.py"), str(steps), *extra],
                            stdin=stdin, stdout=subprocess.PIPE, text=True)


def seconds(p):
    out, _ = p.communicate()
    if p.returncode != 0:
        raise SystemExit("train.py failed")
    return json.loads(out.strip().splitlines()[-1])


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    # A venv's python is a link: run it as is (its site-packages), filter by its target
    # (what /proc/PID/exe names).
    python, exe = sys.executable, os.path.realpath(sys.executable)
    os.makedirs(out, exist_ok=True)

    # 1. Overhead.
    timings = collections.defaultdict(list)
    info = {}
    for _ in range(rounds):
        info = seconds(train(python, steps))
        timings["untraced"].append(info["seconds"])
        d = Daemon(rocsync, out, exe)
        timings["counted by the daemon"].append(seconds(train(python, steps))["seconds"])
        d.stop()
        # For reference: a capture of the same run (rocsync run, default probes).
        capture = subprocess.Popen(
            [rocsync, "run", "--no-status", "--force", "--backend", "cuda", "-o",
             os.path.join(out, "scratch.json"), "--", python,
             os.path.join(HERE, "train.py"), str(steps)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        timings["captured (rocsync run)"].append(seconds(capture)["seconds"])
        os.remove(os.path.join(out, "scratch.json"))

    # 2. Counts and a trace window against CUPTI.
    d = Daemon(rocsync, out, exe)
    cupti_path = os.path.join(out, "train.cupti.json")
    p = train(python, steps * 2, "--profile", cupti_path, "--pause", stdin=subprocess.PIPE)
    assert p.stdout.readline().strip() == "paused"
    d.wait_for(f"tracking pid {p.pid}")
    before, _ = d.calls()
    window = os.path.join(out, "window.json")
    asked = {}

    def ask():
        time.sleep(1.0)
        asked["out"] = subprocess.run(
            [rocsync, "trace", "--pid", str(p.pid), "--duration", "2000ms",
             "--socket", d.sock, "--force", "-o", window], capture_output=True, text=True)

    t = threading.Thread(target=ask)
    p.stdin.write("go\n")
    p.stdin.flush()
    t.start()
    assert p.stdout.readline().strip() == "paused"
    t.join()
    after, body = d.calls()
    p.stdin.write("go\n")
    p.stdin.flush()
    seconds(p)
    d.stop()
    if asked["out"].returncode != 0:
        raise SystemExit(f"rocsync trace failed: {asked['out'].stderr}")
    with open(os.path.join(out, "metrics.txt"), "w") as f:
        f.write(body)

    # Report.
    cupti = load(cupti_path)
    probed = [e for e in cupti["traceEvents"] if e.get("ph") == "X"
              and e.get("cat") == "cuda_runtime" and PROBED.match(e["name"])]
    rows = collections.Counter(e["name"].replace("_ptsz", "") for e in probed)
    # Where CUPTI's rows of an API lie against the steps' last stream wait (each step
    # makes one), for the APIs whose counts differ.
    last_wait = max((e["ts"] for e in probed if e["name"].startswith("cudaStreamWaitEvent")),
                    default=0)
    counted = collections.Counter()
    for api, n in (after - before).items():
        counted[api.replace("_ptsz", "")] += n
    lines = ["# rocsync daemon on a PyTorch training loop (H200)\n",
             f"Written by `python scripts/gpu-validate/daemon.py target/release/rocsync OUT "
             f"{steps} {rounds}` on {info.get('gpu')}, PyTorch {info.get('torch')}, CUDA "
             f"{info.get('cuda')}; kernel {os.uname().release}.\n",
             "## Overhead\n",
             f"`train.py {steps}` (a 4-layer transformer with AdamW, a copy stream with an "
             f"event, `.item()` every 10 steps), {rounds} interleaved rounds, seconds of the "
             "timed steps:\n",
             "| mode | runs | median | ratio to untraced |", "| --- | --- | ---: | ---: |"]
    base = statistics.median(timings["untraced"])
    for mode, xs in timings.items():
        m = statistics.median(xs)
        lines.append(f"| {mode} | {' '.join(f'{x:.3f}' for x in xs)} | {m:.3f} | {m / base:.3f} |")
    lines += ["\n## The daemon's counts against CUPTI's rows\n",
              f"`train.py {steps * 2} --profile --pause` with a daemon running: "
              "`rocsync_sync_calls_total` read while the process was paused just before and "
              "just after its profiled steps; the difference against the number of CUPTI "
              "`cuda_runtime` rows of each API the daemon counts.\n",
              "| API | CUPTI rows | daemon's count | equal | CUPTI rows after the last step's wait (ms) |",
              "| --- | ---: | ---: | --- | --- |"]
    exact = True
    for api in sorted(set(counted) | set(rows)):
        ok = rows.get(api, 0) == counted.get(api, 0)
        exact &= ok
        late = ", ".join(f"+{(e['ts'] - last_wait) / 1000:.1f}" for e in probed
                         if e["name"].replace("_ptsz", "") == api and e["ts"] > last_wait)
        lines.append(f"| {api} | {rows.get(api, 0)} | {counted.get(api, 0)} | "
                     f"{'yes' if ok else '**no**'} | {'' if ok else late} |")

    ours = sync_rows(load(window))
    theirs = sync_rows(cupti)
    span = [r[0] for v in ours.values() for r in v]
    lo, hi = (min(span), max(span)) if span else (0, 0)
    inside = {k: [r for r in v if lo <= r[0] <= hi] for k, v in theirs.items()}
    threads = thread_map(inside, ours)
    lines += ["\n## A trace on request against CUPTI\n",
              "`rocsync trace --pid P --duration 2s -o window.json` during the profiled "
              "steps: every CUPTI sync row between the window's first and last rocsync sync "
              "row, matched with rocsync's rows of the same kind and thread by time.\n",
              "| kind | CUPTI rows in the window | rocsync rows | matched | CUPTI rows without a rocsync row |",
              "| --- | ---: | ---: | ---: | ---: |"]
    all_matched = bool(span)
    for kind in sorted(set(inside) | set(ours)):
        pairs, unmatched = [], []
        for tid, mapped in threads.items():
            p_, u = match([r for r in inside.get(kind, []) if r[2] == tid],
                          [r for r in ours.get(kind, []) if r[2] == mapped])
            pairs += p_
            unmatched += u
        unmatched += [r for r in inside.get(kind, []) if r[2] not in threads]
        all_matched &= not unmatched
        lines.append(f"| {kind} | {len(inside.get(kind, []))} | {len(ours.get(kind, []))} | "
                     f"{len(pairs)} | {len(unmatched)} |")
    w = load(window)
    resolved = w["rocsync"].get("waits_resolved")
    lines += ["", f"Waits resolved in the window: {resolved}; unresolved by reason: "
                  f"{json.dumps(w['rocsync'].get('unresolved_reasons'))}.",
              "", f"**Counts equal for every API: {'yes' if exact else 'no'}; every CUPTI sync "
                  f"row in the window matched: {'yes' if all_matched else 'no'}.**", ""]
    with open(os.path.join(out, "daemon-validation.md"), "w") as f:
        f.write("\n".join(lines))
    for name in ("train.cupti.json", "window.json"):
        path = os.path.join(out, name)
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
