"""What `rocsync attach` costs a training loop that is already running, measured side by
side in one process: train.py runs untraced, rocsync attaches with its default probes
(first with the temporary `cudaGetDevice` probe that learns the threads' devices, then
without it), stops after a set time and detaches, and the loop runs on untraced. Every
stretch of 10 steps ends in a `.item()` (host and GPU in step); each is classed by what
was attached while it ran, and its time compared with the untraced stretches' of the
same process.

usage: python attach.py ROCSYNC OUT_DIR [ROUNDS] [STEPS] [BEFORE_S] [ATTACHED_S]
Writes OUT_DIR/attach.md (the report), OUT_DIR/attach.jsonl (one line per round), and
each round's trace and rocsync log (attach.R.json.gz, attach.R.log).
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PHASES = ("before", "learning", "attached", "after")


def one_round(rocsync: str, out: Path, r: int, steps: int, before_s: float,
              attached_s: float) -> dict:
    train = subprocess.Popen([sys.executable, str(HERE / "train.py"), str(steps), "--windows"],
                             stdout=subprocess.PIPE, text=True)
    assert train.stdout is not None
    line = train.stdout.readline().strip()
    if line != "started":
        sys.exit(f"train.py said {line!r}, not 'started'")
    time.sleep(before_s)
    at = {"attach": time.monotonic()}
    trace, log = out / f"attach.{r}.json.gz", out / f"attach.{r}.log"
    rs = subprocess.Popen([rocsync, "attach", "--pid", str(train.pid), "--backend", "cuda",
                           "--duration", str(attached_s), "--no-status", "-o", str(trace)],
                          stderr=subprocess.PIPE, text=True)
    assert rs.stderr is not None
    said = []
    # Each line is timed as it arrives: the phases' bounds, on the loop's clock.
    for text in rs.stderr:
        now = time.monotonic()
        said.append(text)
        for key, needle in (("armed", "tracing pid"), ("learned", "learned the device"),
                            ("stop", "stopping (")):
            if needle in text:
                at.setdefault(key, now)
    rc = rs.wait()
    at["detached"] = time.monotonic()
    log.write_text("".join(said))
    result = json.loads(train.stdout.read().strip().splitlines()[-1])
    if train.wait() != 0 or rc != 0:
        sys.exit(f"round {r}: train.py exited {train.returncode}, rocsync {rc}; see {log}")
    missing = [k for k in ("armed", "learned", "stop") if k not in at]
    if missing:
        sys.exit(f"round {r}: rocsync never said {missing}; see {log}")
    if at["detached"] > result["marks"][-1]:
        sys.exit(f"round {r}: the loop ended before rocsync detached; give it more STEPS")
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    marks = result["marks"]
    for start, end in zip(marks, marks[1:]):
        phase = ("before" if end < at["attach"] else
                 "learning" if start >= at["armed"] and end <= at["learned"] else
                 "attached" if start >= at["learned"] and end <= at["stop"] else
                 "after" if start >= at["detached"] else None)
        if phase:
            phases[phase].append((end - start) * 1e3)
    return {"round": r, "at": {k: v - marks[0] for k, v in at.items()},
            "ms_per_10_steps": phases, "summary": [s.rstrip() for s in said[-12:]]}


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def report(rounds: list[dict], command: str) -> str:
    rows = []
    for d in rounds:
        w = d["ms_per_10_steps"]
        untraced = median(w["before"] + w["after"])
        cells = [f"{median(w[p]):.2f} ({len(w[p])})" for p in PHASES]
        rows.append(f"| {d['round']} | " + " | ".join(cells) +
                    f" | {median(w['learning']) / untraced:.3f}"
                    f" | **{median(w['attached']) / untraced:.3f}**"
                    f" | {median(w['attached']) / median(w['before']):.3f}"
                    f" | {median(w['attached']) / median(w['after']):.3f} |")
    ratios = [median(d["ms_per_10_steps"]["attached"]) /
              median(d["ms_per_10_steps"]["before"] + d["ms_per_10_steps"]["after"])
              for d in rounds]
    spread = [median(d["ms_per_10_steps"]["before"]) / median(d["ms_per_10_steps"]["after"])
              for d in rounds]
    return "\n".join([
        "# `rocsync attach` on a running training loop",
        "",
        f"Command: `{command}` (as root, on the GPU machine).",
        "",
        "train.py (a 4-layer transformer, AdamW, a side copy stream with events, `.item()`",
        "every 10 steps) runs untraced; rocsync attaches to it with no options, stops after",
        "a set time and detaches. Each stretch of 10 steps (from one `.item()` to the next) is",
        "classed by what was attached while it ran: *before* rocsync attached; *learning*,",
        "the default probes and the temporary `cudaGetDevice` probe that learns the threads'",
        "devices; *attached*, the default probes alone; *after* rocsync detached. Stretches",
        "that straddle a change are left out. Ratios are to the median of the same process's",
        "untraced stretches (before and after).",
        "",
        "| round | before: ms per 10 steps (stretches) | learning | attached | after |"
        " learning / untraced | attached / untraced | attached / before | attached / after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        f"Attached / untraced over the rounds: median **{median(ratios):.3f}**, "
        f"{min(ratios):.3f}–{max(ratios):.3f}. The untraced stretches themselves: before / after "
        f"{min(spread):.3f}–{max(spread):.3f} (the noise between two untraced stretches of one "
        "process).",
        "",
        "Each round's rocsync trace and log: `attach.R.json.gz`, `attach.R.log`; the stretches "
        "and the times of each change (seconds from the first stretch): `attach.jsonl`.",
        "",
    ])


def main() -> None:
    rocsync, out = sys.argv[1], Path(sys.argv[2])
    rounds, steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3, \
        int(sys.argv[4]) if len(sys.argv) > 4 else 3000
    before_s = float(sys.argv[5]) if len(sys.argv) > 5 else 4
    attached_s = float(sys.argv[6]) if len(sys.argv) > 6 else 10
    out.mkdir(parents=True, exist_ok=True)
    results = [one_round(rocsync, out, r, steps, before_s, attached_s)
               for r in range(1, rounds + 1)]
    with open(out / "attach.jsonl", "w") as f:
        for d in results:
            f.write(json.dumps(d) + "\n")
    command = "python3 scripts/gpu-validate/attach.py " + " ".join(sys.argv[1:])
    (out / "attach.md").write_text(report(results, command))
    print((out / "attach.md").read_text())


if __name__ == "__main__":
    main()
