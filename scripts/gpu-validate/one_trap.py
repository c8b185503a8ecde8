"""The one-trap counting on a GPU (as root): budget.py's dense-sync PyTorch loop (per
iteration a kernel on a side stream, an event recorded there, the current stream
waiting on it, `event.query()` polled until done), untraced and under the daemon with
its default budget shed-only (records and waits always probed), every return probed
(`--return-probes all`, the behaviour before) and only those counting needs (the
default), in rotating whole-process rounds.

usage: python one_trap.py ROCSYNC OUT_DIR [ROUNDS] [SECONDS]

Per run: iterations per second after the first 3 s (the daemon tracks the process
before its first call: a gate), the probes' share of its CPU as the daemon measured it,
and the records and waits the daemon counted against the loop's own count. Writes
OUT_DIR/one-trap.md and OUT_DIR/one-trap.jsonl.
"""
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from budget import daemon_cells, dense, rate_after, torch_line  # noqa: E402


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 10
    python, exe = sys.executable, os.path.realpath(sys.executable)
    out.mkdir(parents=True, exist_ok=True)
    # Shed-only: the trap's cost alone (the default duty cycle would take the loop's
    # records and waits: budget.py measures it).
    modes = [("untraced", None, ()),
             ("daemon, every return probed", "1%",
              ("--return-probes", "all", "--budget-mode", "shed-only")),
             ("daemon, one trap", "1%", ("--budget-mode", "shed-only"))]
    runs = {m: [] for m, _, _ in modes}
    lines = []
    for r in range(rounds):
        # Rotated: each mode runs first, second and third in turn.
        for label, budget, extra in modes[r % 3:] + modes[:r % 3]:
            res, view = dense(rocsync, out, python, exe, budget, seconds, extra)
            row = {"mode": label, "round": r, "rate": rate_after(res["marks"], 3.0),
                   **res, "daemon": view}
            row.pop("marks")
            runs[label].append(row)
            lines.append(row)
    (out / "one-trap.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    bare = statistics.median(x["rate"] for x in runs["untraced"])
    md = ["# One trap where the return adds nothing, on a GPU\n",
          f"`python scripts/gpu-validate/one_trap.py ROCSYNC OUT {rounds} {seconds:g}`; "
          f"{torch_line(python)}\n",
          "Dense-sync loop (budget.py's), rotating whole-process rounds; rate = iterations "
          "per second after the first 3 s; the daemon's default budget (1 %) in both daemon "
          "modes.\n",
          "| mode | rates (it/s) | median | × untraced | probes' share (daemon) | "
          "records counted / made | waits counted / made |",
          "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for label, _, _ in modes:
        rs = runs[label]
        med = statistics.median(x["rate"] for x in rs)
        share, rec, wait = daemon_cells(rs)
        rates = " ".join("%.0f" % x["rate"] for x in rs)
        md.append(f"| {label} | {rates} | {med:.0f} | {med / bare:.3f} | {share} | {rec} | "
                  f"{wait} |")
    (out / "one-trap.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
