"""The daemon's budget on a GPU, measured inside one process (as root): budget.py's
dense-sync loop runs once, warmed, while daemons come and go beside it; its rate in
each phase is compared with the untraced phases on either side (the in-process A/B:
the rate of separate processes of this loop differs by up to 20 % from run to run).

usage: python budget_inproc.py ROCSYNC OUT_DIR [ROUNDS] [PHASE_SECONDS] [WARM_SECONDS] [SET]
(it takes about WARM + (4 × ROUNDS + 1) × (PHASE + 8) + 25 seconds: 2 30 20 → 400 s;
a flight phase adds its dump and its reading, about 20 s)

Phases, each PHASE_SECONDS, ROUNDS times, then a last untraced phase; SET chooses the two
daemons of a round:
- `budget` (the default): untraced, the daemon's default budget with `--budget-mode
  shed-only` (records and waits always probed), untraced, the daemon's defaults (the duty
  cycle);
- `trap`: untraced, shed-only with `--return-probes all` (every call pays two traps, the
  behaviour before), untraced, shed-only (one trap where the return adds nothing): the
  per-call price of each, from the loop's slowdown and the calls the daemon counted;
- `flight`: untraced, `--flight-recorder 10s` (every call recorded, all the time), with
  `rocsync trace --flight` at the phase's end: the dump's losses by kind (unpaired
  entries and exits among them) and its records against the iterations the loop made in
  the dump's span, to the call (the loop marks every 1 000th iteration after its
  record); twice a round. A daemon finds the running loop by
its scan at start; its phase's rate is read from 4 s after it says it tracks the loop
(its budget has shed and cycled by then) until it is stopped. Per phase: the loop's
iterations per second, the daemon's view (probes' share of the loop's CPU, duty cycle)
and the records and waits it counted (exact and estimated) against the iterations the
loop made while the daemon ran; and the time an iteration spends in its calls before
it spins on its event (the probes' traps land there, and unlike the rate it does not
follow the GPU's pace), against the untraced phases beside as the rate is. Writes
OUT_DIR/budget-inproc.md and .jsonl.
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


# The time each iteration spends in its calls up to the spin on its event (the last
# event's destroy, the launch, the record and its create, the stream wait): where the
# probes' traps land, and, unlike the rate, not tied to the GPU's pace.
LOOP_EDITS = [
    # Ends when told (a file appears), not at a time planned in advance: a phase that
    # overran its plan (a slow dump) cut the phases after it short.
    ("import json, sys, time, torch", "import json, os, sys, time, torch"),
    ("seconds = float(sys.argv[1])", "seconds, stop = float(sys.argv[1]), sys.argv[2]"),
    ("marks, it, polls = [], 0, 0", "marks, it, polls, spent, spents = [], 0, 0, 0, []"),
    ("    e = torch.cuda.Event()\n", "    t0 = time.perf_counter_ns()\n    e = torch.cuda.Event()\n"),
    ("    torch.cuda.current_stream().wait_event(e)\n",
     "    torch.cuda.current_stream().wait_event(e)\n    spent += time.perf_counter_ns() - t0\n"),
    ("        marks.append(time.monotonic() - start)\n",
     "        marks.append(time.monotonic() - start)\n        spents.append(spent)\n"
     "        if os.path.exists(stop):\n            break\n"),
    ('"marks": marks}', '"marks": marks, "spent": spents}'),
]


def call_ns_between(marks, spent, a, b):
    """ns per iteration spent in the timed calls between monotonic times a and b."""
    i = [k for k, t in enumerate(marks) if a <= t <= b]
    return (spent[i[-1]] - spent[i[0]]) / (1000 * (len(i) - 1)) if len(i) > 1 else float("nan")


# Ten seconds of this loop come to about 0.5 GB of trace: over the default size bound.
FLIGHT = ("--flight-recorder", "10s", "--trace-max-bytes", "4G")
SETS = {
    "budget": [("untraced", None, ()),
               ("1%, shed-only", "1%", ("--budget-mode", "shed-only")),
               ("untraced", None, ()),
               ("1%, duty cycle (default)", "1%", ())],
    "trap": [("untraced", None, ()),
             ("shed-only, every return probed", "1%",
              ("--budget-mode", "shed-only", "--return-probes", "all")),
             ("untraced", None, ()),
             ("shed-only, one trap (default)", "1%", ("--budget-mode", "shed-only"))],
    "flight": [("untraced", None, ()),
               ("flight recorder 10s", "1%", FLIGHT),
               ("untraced", None, ()),
               ("flight recorder 10s", "1%", FLIGHT)],
}


def flight_dump(rocsync, out, phase):
    """`rocsync trace --flight` now: the dump's losses and its record calls' times
    (monotonic seconds), read here so that only a summary leaves the machine."""
    path = out / f"flight-{phase}.json"
    subprocess.run([rocsync, "trace", "--flight", "--socket", str(out / "rocsync.sock"),
                    "-o", str(path)], check=True, stdout=subprocess.DEVNULL)
    t = json.loads(path.read_text())
    meta = t["rocsync"]
    base, offset = t["baseTimeNanoseconds"], meta["clock_offset_ns"]
    calls = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"]
    records = sorted((base + round(e["ts"] * 1000) - offset) / 1e9
                     for e in calls if e["name"].startswith("cudaEventRecord"))
    path.unlink()
    return {"drops": meta.get("drops", {}), "calls": len(calls), "records": records,
            "truncated": meta["parameters"].get("truncated"),
            "unresolved": meta.get("unresolved_reasons", {})}


def price_lines(phases):
    """Each daemon phase's added time per iteration and per call the daemon counted."""
    out = []
    for i, ph in enumerate(phases):
        if "counted" not in ph:
            continue
        beside = statistics.mean([phases[i - 1]["rate"], phases[i + 1]["rate"]])
        per_it = 1e9 / ph["rate"] - 1e9 / beside
        calls = sum(v for k, v in ph["counted"].items() if not k.startswith("estimated:"))
        per_call = per_it * ph["made"] / calls if calls else float("nan")
        out.append(f"- phase {i} ({ph['mode']}): +{per_it:.0f} ns per iteration, "
                   f"{calls / ph['made']:.2f} calls counted per iteration: "
                   f"{per_call:.0f} ns per call")
    return out


def dump_lines(phases, marks):
    """A dump's records against the loop's own count over the marks inside its span."""
    out = []
    for i, ph in enumerate(phases):
        d = ph.get("dump")
        if not d:
            continue
        r = d.pop("records")
        lost = {k: v for k, v in d["drops"].items() if v}
        inside = [m for m in marks if r and r[0] < m < r[-1]]
        line = (f"- phase {i}: the dump holds {d['calls']} calls, {len(r)} records; "
                f"lost: {lost or 'none'}; truncated: {d['truncated'] or 'no'}")
        if len(inside) > 1:
            got = sum(1 for t in r if inside[0] < t <= inside[-1])
            made = 1000 * (len(inside) - 1)
            line += f"; records between its first and last mark: {got}, made: {made}"
        out.append(line)
        ph["dump"] = {**d, "records": len(r)}
    return out


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    phase = float(sys.argv[4]) if len(sys.argv) > 4 else 30
    warm = float(sys.argv[5]) if len(sys.argv) > 5 else 20
    which = sys.argv[6] if len(sys.argv) > 6 else "budget"
    python, exe = sys.executable, os.path.realpath(sys.executable)
    out.mkdir(parents=True, exist_ok=True)
    modes = SETS[which]
    plan = [m for _ in range(rounds) for m in modes] + [modes[0]]
    total = warm + len(plan) * (phase + 8) + 10 + (40 * rounds if which == "flight" else 0)
    # Give the command this much and more (a device call cut short loses every phase:
    # the loop reports its marks when it ends).
    print(f"planned: about {total + 15:.0f} s", file=sys.stderr, flush=True)
    # The loop's marks are absolute monotonic times (one clock for every process here).
    loop = DENSE.replace("start = time.monotonic()", "start = 0.0").replace(
        "end = start + seconds", "end = time.monotonic() + seconds")
    # It ends when told, and times its calls (LOOP_EDITS).
    for a, b in LOOP_EDITS:
        assert loop.count(a) == 1, a
        loop = loop.replace(a, b)
    # LOOP_CPU=N pins the loop to CPU N (the daemons stay free): on the H200 an unpinned
    # loop's rate jumped between ~20 000 and ~33 000 it/s from one second to the next.
    cpu = os.environ.get("LOOP_CPU")
    pin = (lambda: os.sched_setaffinity(0, {int(cpu)})) if cpu else None
    stop = out / "loop.stop"
    stop.unlink(missing_ok=True)
    # Its own end is only a bound: the script stops it once the last phase is over.
    p = subprocess.Popen([python, "-c", loop, str(3 * total), str(stop)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, preexec_fn=pin)
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
        dump = flight_dump(rocsync, out, len(phases)) if which == "flight" else None
        d.stop()
        counted = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        phases.append({"mode": label, "from": a, "to": b, "daemon": seen,
                       "counted": counted, "counted_from": a - SETTLE, "dump": dump})
    stop.touch()
    r = json.loads(p.stdout.readline())
    p.wait()
    marks, spent = r["marks"], r["spent"]
    for ph in phases:
        ph["rate"] = rate_between(marks, ph["from"], ph["to"])
        ph["call_ns"] = call_ns_between(marks, spent, ph["from"], ph["to"])
        # Second by second, to see where a phase's time went (a cycle's turns, drift).
        edges = range(int(ph["to"] - ph["from"]))
        per = (rate_between(marks, ph["from"] + k, ph["from"] + k + 1) for k in edges)
        ph["per_second"] = [None if r != r else round(r) for r in per]
        if "counted" in ph:
            ph["made"] = made_between(marks, ph["counted_from"], ph["to"])
    md = ["# The daemon's budget on a GPU, inside one process\n",
          f"`python scripts/gpu-validate/budget_inproc.py ROCSYNC OUT {rounds} {phase:g} "
          f"{warm:g} {which}`" + (f" (LOOP_CPU={cpu})" if cpu else "")
          + f"; {torch_line(python)}\n",
          "One dense-sync loop (budget.py's), warmed, with daemons started and stopped "
          "beside it; each daemon phase against the mean of the untraced phases on either "
          f"side, its rate read from {SETTLE:g} s after the daemon tracks the loop.\n",
          "| phase | mode | it/s | × untraced beside | ns in the calls per it | "
          "× untraced beside | probes' share (daemon) | duty | "
          "records counted (estimated) / made | waits counted (estimated) / made |",
          "| ---: | --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"]
    in_calls = {}
    ratios = {}
    for i, ph in enumerate(phases):
        ratio, call_ratio, share, duty, rec, wait = "", "", "–", "–", "–", "–"
        if "daemon" in ph:
            beside = statistics.mean([phases[i - 1]["rate"], phases[i + 1]["rate"]])
            x = ph["rate"] / beside
            ratios.setdefault(ph["mode"], []).append(x)
            ratio = f"{x:.3f}"
            # Time in the calls: more is slower, so untraced over traced, as the rate.
            y = statistics.mean([phases[i - 1]["call_ns"], phases[i + 1]["call_ns"]]) / ph["call_ns"]
            in_calls.setdefault(ph["mode"], []).append(y)
            call_ratio = f"{y:.3f}"
            share = f"{(ph['daemon']['cost_ratio'] or 0) * 100:.1f} %"
            duty = "%.2f" % (ph["daemon"].get("duty") or 1.0)
            c = ph["counted"]

            def cell(api):
                n = sum(v for k, v in c.items() if k.startswith(api))
                est = sum(v for k, v in c.items() if k.startswith("estimated:" + api))
                return f"{n} ({est}) / ~{ph['made']}"
            rec, wait = cell("cudaEventRecord"), cell("cudaStreamWaitEvent")
        md.append(f"| {i} | {ph['mode']} | {ph['rate']:.0f} | {ratio} | {ph['call_ns']:.0f} "
                  f"| {call_ratio} | {share} | {duty} | {rec} | {wait} |")
    md.append("")
    for mode, xs in ratios.items():
        ys = in_calls[mode]
        md.append(f"- {mode}: × {statistics.mean(xs):.3f} of untraced (phases: "
                  + ", ".join(f"{x:.3f}" for x in xs) + "); by the time in its calls × "
                  f"{statistics.mean(ys):.3f} (" + ", ".join(f"{y:.3f}" for y in ys) + ")")
    md += price_lines(phases) + dump_lines(phases, marks)
    with open(out / "budget-inproc.jsonl", "w") as f:
        for i, ph in enumerate(phases):
            f.write(json.dumps({"phase": i, **ph}) + "\n")
    (out / "budget-inproc.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
