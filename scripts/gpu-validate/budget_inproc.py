"""The daemon's budget on a GPU, measured inside one process (as root): budget.py's
dense-sync loop runs once, warmed, while daemons come and go beside it; its rate in
each phase is compared with the untraced phases on either side (the in-process A/B:
the rate of separate processes of this loop differs by up to 20 % from run to run).

usage: python budget_inproc.py ROCSYNC OUT_DIR [ROUNDS] [PHASE_SECONDS] [WARM_SECONDS]
(it takes about WARM + (4 × ROUNDS + 1) × (PHASE + 8) + 25 seconds: 2 30 20 → 400 s)

Phases, each PHASE_SECONDS, ROUNDS times: untraced, the daemon with its default budget
and `--budget-mode shed-only` (records and waits always probed), untraced, the daemon's
defaults (the duty cycle), and a last untraced phase. A daemon finds the running loop by
its scan at start; its phase's rate is read from 4 s after it says it tracks the loop
(its budget has shed and cycled by then) until it is stopped. Per phase: the loop's
iterations per second, the daemon's view (probes' share of the loop's CPU, duty cycle)
and the records and waits it counted (exact and estimated) against the iterations the
loop made while the daemon ran. Writes OUT_DIR/budget-inproc.md and .jsonl.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from budget import DENSE, Daemon, metrics, torch_line  # noqa: E402

SETTLE = 4.0


def rate_between(marks, a, b):
    """Iterations per second between monotonic times a and b (1000 per mark)."""
    m = [t for t in marks if a <= t <= b]
    return 1000 * (len(m) - 1) / (m[-1] - m[0]) if len(m) > 1 else float("nan")


def made_between(marks, a, b):
    return 1000 * sum(1 for t in marks if a <= t <= b)


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    phase = float(sys.argv[4]) if len(sys.argv) > 4 else 30
    warm = float(sys.argv[5]) if len(sys.argv) > 5 else 20
    python, exe = sys.executable, os.path.realpath(sys.executable)
    out.mkdir(parents=True, exist_ok=True)
    modes = [("untraced", None, ()),
             ("1%, shed-only", "1%", ("--budget-mode", "shed-only")),
             ("untraced", None, ()),
             ("1%, duty cycle (default)", "1%", ())]
    plan = [m for _ in range(rounds) for m in modes] + [modes[0]]
    total = warm + len(plan) * (phase + 8) + 10
    # Give the command this much and more (a device call cut short loses every phase:
    # the loop reports its marks when it ends).
    print(f"planned: about {total + 15:.0f} s", file=sys.stderr, flush=True)
    # The loop's marks are absolute monotonic times (one clock for every process here).
    loop = DENSE.replace("start = time.monotonic()", "start = 0.0").replace(
        "end = start + seconds", "end = time.monotonic() + seconds")
    p = subprocess.Popen([python, "-c", loop, str(total)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.stdin.write("go\n")
    p.stdin.flush()
    time.sleep(warm)
    phases = []
    for label, budget, extra in plan:
        if budget is None:
            a = time.monotonic()
            time.sleep(phase)
            phases.append({"mode": label, "from": a, "to": time.monotonic()})
            continue
        d = Daemon(rocsync, out, exe, budget, extra)
        d.wait_for(f"tracking pid {p.pid}")
        a = time.monotonic() + SETTLE
        before, _ = metrics()
        time.sleep(SETTLE + phase - 1.0)
        _, seen = metrics()
        time.sleep(1.0)
        after, _ = metrics()
        b = time.monotonic()
        d.stop()
        counted = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        phases.append({"mode": label, "from": a, "to": b, "daemon": seen,
                       "counted": counted, "counted_from": a - SETTLE})
    r = json.loads(p.stdout.readline())
    p.wait()
    marks = r["marks"]
    with open(out / "budget-inproc.jsonl", "w") as f:
        for i, ph in enumerate(phases):
            ph["rate"] = rate_between(marks, ph["from"], ph["to"])
            if "counted" in ph:
                ph["made"] = made_between(marks, ph["counted_from"], ph["to"])
            f.write(json.dumps({"phase": i, **ph}) + "\n")
    md = ["# The daemon's budget on a GPU, inside one process\n",
          f"`python scripts/gpu-validate/budget_inproc.py ROCSYNC OUT {rounds} {phase:g} "
          f"{warm:g}`; {torch_line(python)}\n",
          "One dense-sync loop (budget.py's), warmed, with daemons started and stopped "
          "beside it; each daemon phase against the mean of the untraced phases on either "
          f"side, its rate read from {SETTLE:g} s after the daemon tracks the loop.\n",
          "| phase | mode | it/s | × untraced beside | probes' share (daemon) | duty | "
          "records counted (estimated) / made | waits counted (estimated) / made |",
          "| ---: | --- | ---: | ---: | --- | --- | --- | --- |"]
    ratios = {}
    for i, ph in enumerate(phases):
        ratio, share, duty, rec, wait = "", "–", "–", "–", "–"
        if "daemon" in ph:
            beside = statistics.mean([phases[i - 1]["rate"], phases[i + 1]["rate"]])
            x = ph["rate"] / beside
            ratios.setdefault(ph["mode"], []).append(x)
            ratio = f"{x:.3f}"
            share = f"{(ph['daemon']['cost_ratio'] or 0) * 100:.1f} %"
            duty = "%.2f" % (ph["daemon"].get("duty") or 1.0)
            c = ph["counted"]

            def cell(api):
                n = sum(v for k, v in c.items() if k.startswith(api))
                est = sum(v for k, v in c.items() if k.startswith("estimated:" + api))
                return f"{n} ({est}) / ~{ph['made']}"
            rec, wait = cell("cudaEventRecord"), cell("cudaStreamWaitEvent")
        md.append(f"| {i} | {ph['mode']} | {ph['rate']:.0f} | {ratio} | {share} | {duty} "
                  f"| {rec} | {wait} |")
    md.append("")
    for mode, xs in ratios.items():
        md.append(f"- {mode}: × {statistics.mean(xs):.3f} of untraced (phases: "
                  + ", ".join(f"{x:.3f}" for x in xs) + ")")
    (out / "budget-inproc.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
