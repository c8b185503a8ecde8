"""What `rocsync attach`'s `*GetDevice` learning window costs a running training loop,
each window length measured side by side, interleaved: train.py runs untraced for a
while; rocsync attaches with `--learn-devices W` for a few seconds and detaches. The
steps the loop did not make in the span from the attach being armed, against its own
untraced rate just before, are its lost time; the window's cost is that less the lost
time with no window (`off`: the default probes' traps alone).

usage: python learning.py ROCSYNC OUT_DIR [ROUNDS] [STEPS] [BEFORE_S] [ATTACHED_S]
Writes OUT_DIR/learning.md (the report) and OUT_DIR/learning.jsonl (one line per run).
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WINDOWS = ("2s", "100ms", "off")


def steps_by(marks: list[float], t: float) -> float:
    """Steps done by time t (10 per mark), interpolated between marks."""
    for i in range(1, len(marks)):
        if marks[i] >= t:
            return 10 * (i - 1 + (t - marks[i - 1]) / (marks[i] - marks[i - 1]))
    raise ValueError("the loop ended before the span did: give it more STEPS")


def one_run(rocsync: str, out: Path, window: str, r: int, steps: int, before_s: float,
            attached_s: float) -> dict:
    train = subprocess.Popen([sys.executable, str(HERE / "train.py"), str(steps), "--windows"],
                             stdout=subprocess.PIPE, text=True)
    assert train.stdout is not None
    if (line := train.stdout.readline().strip()) != "started":
        sys.exit(f"train.py said {line!r}, not 'started'")
    time.sleep(before_s)
    attach = time.monotonic()
    rs = subprocess.Popen([rocsync, "attach", "--pid", str(train.pid), "--backend", "cuda",
                           "--learn-devices", window, "--duration", str(attached_s),
                           "--no-status", "-o", str(out / f"learning.{window}.{r}.json.gz")],
                          stderr=subprocess.PIPE, text=True)
    assert rs.stderr is not None
    armed, said = None, []
    for text in rs.stderr:
        said.append(text)
        if armed is None and "tracing pid" in text:
            armed = time.monotonic()
    rc = rs.wait()
    result = json.loads(train.stdout.read().strip().splitlines()[-1])
    if train.wait() != 0 or rc != 0 or armed is None:
        sys.exit(f"{window} round {r}: train.py {train.returncode}, rocsync {rc}: {''.join(said)}")
    marks = result["marks"]
    # The loop's own rate: its last second before the attach.
    rate = (steps_by(marks, attach) - steps_by(marks, attach - 1.0)) / 1.0
    span = attached_s - 0.5
    made = steps_by(marks, armed + span) - steps_by(marks, armed)
    return {"window": window, "round": r, "steps_per_s": rate,
            "lost_ms": (span - made / rate) * 1e3, "span_s": span,
            "learned": [s.rstrip() for s in said if "learned the device" in s]}


def main() -> None:
    rocsync, out = sys.argv[1], Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
    before_s = float(sys.argv[5]) if len(sys.argv) > 5 else 3
    attached_s = float(sys.argv[6]) if len(sys.argv) > 6 else 3
    out.mkdir(parents=True, exist_ok=True)
    runs = [one_run(rocsync, out, w, r, steps, before_s, attached_s)
            for r in range(1, rounds + 1) for w in WINDOWS]
    with open(out / "learning.jsonl", "w") as f:
        for d in runs:
            f.write(json.dumps(d) + "\n")
    lost = {w: [d["lost_ms"] for d in runs if d["window"] == w] for w in WINDOWS}
    med = {w: statistics.median(v) for w, v in lost.items()}
    rows = [f"| {w} | {med[w]:.0f} | {med[w] - med['off']:.0f} | "
            + ", ".join(f"{x:.0f}" for x in lost[w]) + " |" for w in WINDOWS]
    command = "python3 scripts/gpu-validate/learning.py " + " ".join(sys.argv[1:])
    span = runs[0]["span_s"]
    (out / "learning.md").write_text("\n".join([
        "# The `*GetDevice` learning window on a running training loop", "",
        f"Command: `{command}` (as root, on the GPU machine).", "",
        "train.py (a 4-layer transformer, AdamW, a side copy stream with events) runs "
        "untraced; `rocsync attach --learn-devices W` attaches, records and detaches; "
        f"the loop's time lost in the {span:g} s from the attach being armed, against its "
        "own rate in the second before, per window length, interleaved over the rounds. "
        "The window's cost is that less the lost time with no window (`off`).", "",
        "| --learn-devices | lost ms (median) | window's cost, ms | runs |",
        "| --- | ---: | ---: | --- |", *rows, ""]))
    print((out / "learning.md").read_text())


if __name__ == "__main__":
    main()
