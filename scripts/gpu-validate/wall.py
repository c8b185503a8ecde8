"""What rocsync's default probes cost a PyTorch training loop in wall time, with enough
rounds to tell a cost from the machine's noise. Each round runs train.py (timed steps
only) untraced, under `rocsync run` with no options and under torch.profiler (with its
sync events), the order rotating by round; each traced run is compared with the untraced
run of its own round. The median of those ratios gets a bootstrap 95 % interval, and the
calls rocsync trapped give the cost its probes can explain: calls × NS_PER_CALL (a
trapped call's cost on this machine's CPU, `bench/gpu-validation/program-time/`).

usage: python wall.py ROCSYNC OUT_DIR [ROUNDS] [STEPS] [NS_PER_CALL]
Writes OUT_DIR/wall.md (the report) and OUT_DIR/wall.jsonl (one line per run), and keeps
each rocsync run's log (rocsync.R.log).
"""
import json
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("untraced", "rocsync", "torch.profiler")


def run(mode: str, rocsync: str, out: Path, r: int, steps: int) -> dict:
    train = [sys.executable, str(HERE / "train.py"), str(steps)]
    log = out / f"rocsync.{r}.log"
    if mode == "rocsync":
        cmd = [rocsync, "run", "--no-status", "--force", "--backend", "cuda", "-o",
               str(out / "scratch.json"),
               "--", *train]
    elif mode == "torch.profiler":
        cmd = [*train, "--profile", str(out / "scratch.cupti.json")]
    else:
        cmd = train
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"round {r}, {mode}: exited {done.returncode}:\n{done.stderr[-2000:]}")
    row = {"round": r, "mode": mode, "seconds": json.loads(done.stdout.splitlines()[-1])["seconds"]}
    if mode == "rocsync":
        log.write_text(done.stderr)
        captured = re.search(r"captured (\d+) calls", done.stderr)
        lost = re.search(r"^\s*lost: (.*)$", done.stderr, re.M)
        if not captured or not lost:
            sys.exit(f"round {r}: no summary from rocsync; see {log}")
        row["calls"], row["lost"] = int(captured.group(1)), lost.group(1)
    for scratch in ("scratch.json", "scratch.cupti.json"):
        (out / scratch).unlink(missing_ok=True)
    return row


def interval(xs: list[float], seed: int = 1) -> tuple[float, float]:
    """A bootstrap 95 % interval of the median: the rounds resampled 10 000 times."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(10_000))
    return medians[250], medians[9_749]


def report(rows: list[dict], ns_per_call: float, command: str) -> str:
    by_round: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_round.setdefault(row["round"], {})[row["mode"]] = row
    ratio = {m: [d[m]["seconds"] / d["untraced"]["seconds"] for d in by_round.values()]
             for m in MODES[1:]}
    lines = [
        "# rocsync's default probes on a training loop: wall time, round by round",
        "",
        f"Command: `{command}` (as root, on the GPU machine).",
        "",
        "train.py: a 4-layer transformer encoder with AdamW, each batch copied host→device on",
        "a side stream with an event the compute stream waits on, the loss read with `.item()`",
        "every 10 steps; `seconds` times its steps only. Each round runs it untraced, under",
        "`rocsync run` with no options and under torch.profiler (CUPTI with sync events), the",
        "order rotating by round; ratios are to the untraced run of the same round.",
        "",
        "| mode | rounds | ratio: median | 95 % interval of the median | min – max |"
        " slower than untraced in | overhead / torch.profiler's |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    profiler = statistics.median(ratio["torch.profiler"]) - 1
    for m, xs in ratio.items():
        lo, hi = interval(xs)
        share = (statistics.median(xs) - 1) / profiler if profiler > 0 else float("nan")
        lines.append(f"| {m} | {len(xs)} | **{statistics.median(xs):.3f}** | {lo:.3f} – {hi:.3f}"
                     f" | {min(xs):.3f} – {max(xs):.3f}"
                     f" | {sum(x > 1 for x in xs)} of {len(xs)} | {share:.3f} |")
    traced = [d["rocsync"] for d in by_round.values()]
    explained = [t["calls"] * ns_per_call * 1e-9 / t["seconds"] for t in traced]
    untraced = [d["untraced"]["seconds"] for d in by_round.values()]
    lines += [
        "",
        f"Untraced runs: {min(untraced):.3f} – {max(untraced):.3f} s (median "
        f"{statistics.median(untraced):.3f}).",
        "",
        f"What the probes explain: rocsync trapped {min(t['calls'] for t in traced)} – "
        f"{max(t['calls'] for t in traced)} calls per run (the whole process, start-up "
        f"included); at {ns_per_call:.0f} ns each, that is at most "
        f"**{100 * max(explained):.2f} %** of a run's timed seconds. Lost, per run: "
        f"{sorted({t['lost'] for t in traced})}.",
        "",
        "Seconds per run, by round (untraced, rocsync, torch.profiler):",
        "",
        *(f"- round {r}: " + ", ".join(f"{d[m]['seconds']:.3f}" for m in MODES)
          for r, d in sorted(by_round.items())),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    rocsync, out = sys.argv[1], Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    ns_per_call = float(sys.argv[5]) if len(sys.argv) > 5 else 1405
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    # Each run's line is written as it ends, so a run cut short still leaves its rounds.
    with open(out / "wall.jsonl", "w") as f:
        for r in range(1, rounds + 1):
            k = r % len(MODES)
            for mode in MODES[k:] + MODES[:k]:
                rows.append(run(mode, rocsync, out, r, steps))
                f.write(json.dumps(rows[-1]) + "\n")
                f.flush()
    command = "python3 scripts/gpu-validate/wall.py " + " ".join(sys.argv[1:])
    (out / "wall.md").write_text(report(rows, ns_per_call, command))
    print((out / "wall.md").read_text())


if __name__ == "__main__":
    main()
