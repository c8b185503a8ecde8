"""Compares rocsync's trace with CUPTI's (torch.profiler) for the same process, and writes
the validation report.

usage: python compare.py RESULTS_DIR REPORT.md
RESULTS_DIR holds: timings.jsonl (mode, seconds per run), both.rocsync.json and
both.cupti.json (one process traced by both), both.raw.jsonl (rocsync's raw calls).
"""
import collections
import json
import os
import sys

WAIT_KINDS = ("Stream Wait Event", "Event Sync")


def load(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def sync_rows(events):
    """(runtime tid, kind) -> [(ts, runtime name, sync args)] in time order, joining each
    cuda_sync row to its cuda_runtime row by correlation."""
    runtime = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime":
            runtime[e["args"]["correlation"]] = e
    rows = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_sync":
            rt = runtime.get(e["args"]["correlation"])
            tid = rt["tid"] if rt else None
            name = rt["name"] if rt else "?"
            rows[(tid, e["name"])].append((e["ts"], name, e["args"]))
    for v in rows.values():
        v.sort(key=lambda r: r[0])
    return rows


def main(results, report):
    timings = collections.defaultdict(list)
    meta = {}
    with open(os.path.join(results, "timings.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            timings[r["mode"]].append(r["seconds"])
            meta = r
    cupti = sync_rows(load(os.path.join(results, "both.cupti.json")))
    ours = sync_rows(load(os.path.join(results, "both.rocsync.json")))

    lines = []
    matched = collections.Counter()
    missing = collections.Counter()
    cupti_resolved = collections.Counter()
    for key, rows in sorted(cupti.items(), key=str):
        mine = ours.get(key, [])
        kind = key[1]
        n = min(len(rows), len(mine))
        matched[kind] += n
        missing[kind] += len(rows) - n
        for _, name, args in rows:
            if kind in WAIT_KINDS and args.get("wait_on_cuda_event_record_corr_id", -1) >= 0:
                cupti_resolved[kind] += 1
        for (_, cname, _), (_, rname, _) in zip(rows, mine):
            if cname.split("_ptsz")[0] != rname.split("_ptsz")[0]:
                missing[f"{kind} (runtime API differs: {cname} vs {rname})"] += 1
    ours_total = collections.Counter()
    ours_resolved = collections.Counter()
    for (tid, kind), rows in ours.items():
        ours_total[kind] += len(rows)
        if kind in WAIT_KINDS:
            ours_resolved[kind] += sum(1 for r in rows if r[2]["wait_on_cuda_event_record_corr_id"] >= 0)

    # Waits whose event was recorded before them, by rocsync's own raw record of calls.
    recorded_before = collections.Counter()
    last_record = {}
    with open(os.path.join(results, "both.raw.jsonl")) as f:
        calls = [json.loads(l) for l in f if l.startswith('{"api"')]
    calls.sort(key=lambda c: c["correlation"])
    for c in calls:
        api, args = c["api"], c["args"]
        if api.startswith("cudaEventRecord") and c["ret"] == 0:
            last_record[(c["pid"], args["event"])] = c["correlation"]
        elif api.startswith("cudaEventDestroy") and c["ret"] == 0:
            last_record.pop((c["pid"], args["event"]), None)
        elif api.startswith("cudaStreamWaitEvent") or api == "cudaEventSynchronize":
            if (c["pid"], args["event"]) in last_record:
                kind = "Stream Wait Event" if api.startswith("cudaStreamWaitEvent") else "Event Sync"
                recorded_before[kind] += 1

    def ratio(mode):
        base = sorted(timings["untraced"])[len(timings["untraced"]) // 2]
        xs = sorted(timings[mode])
        return sorted(x / base for x in xs)

    lines.append("# rocsync on a real GPU: validation against CUPTI\n")
    lines.append(f"Machine: {meta.get('gpu')}, PyTorch {meta.get('torch')}, CUDA {meta.get('cuda')}, "
                 f"kernel {os.uname().release}. Workload: `scripts/gpu-validate/workload.py` "
                 f"({meta.get('iterations')} iterations x 2 threads). Produced by "
                 "`scripts/gpu-validate/run.sh` in one session on the machine.\n")
    lines.append("## Every CUPTI sync row has a rocsync counterpart\n")
    lines.append("One process traced by rocsync and torch.profiler (CUPTI, `enable_cuda_sync_events`) at once. "
                 "Rows are matched per (host thread, kind) in time order, and the runtime API of both must agree.\n")
    lines.append("| kind | CUPTI rows | rocsync rows | matched | CUPTI rows without a rocsync row |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    kinds = sorted(set(k for _, k in cupti) | set(k for _, k in ours))
    for k in kinds:
        c = sum(len(v) for (t, kk), v in cupti.items() if kk == k)
        lines.append(f"| {k} | {c} | {ours_total[k]} | {matched[k]} | {missing[k]} |")
    extra = {k: v for k, v in missing.items() if "differs" in k}
    for k, v in extra.items():
        lines.append(f"\nMismatch: {k}: {v}")
    lines.append("\n## Producer resolution\n")
    lines.append("| kind | waits | waits whose event was recorded before them | resolved by rocsync | resolved by CUPTI |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for k in WAIT_KINDS:
        lines.append(f"| {k} | {ours_total[k]} | {recorded_before[k]} | {ours_resolved[k]} | {cupti_resolved[k]} |")
    lines.append("\n## Wall-time overhead of the threaded section (ratios to the median untraced run)\n")
    lines.append("| mode | runs | ratio min | ratio median | ratio max |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for mode in ("untraced", "rocsync", "torch.profiler"):
        r = ratio(mode)
        lines.append(f"| {mode} | {len(r)} | {r[0]:.3f} | {r[len(r)//2]:.3f} | {r[-1]:.3f} |")
    lines.append("\nSeconds per run: " + ", ".join(f"{m}: {[round(x, 3) for x in v]}" for m, v in timings.items()))
    text = "\n".join(lines) + "\n"
    with open(report, "w") as f:
        f.write(text)
    print(text)
    ok = sum(v for k, v in missing.items()) == 0 and all(
        ours_resolved[k] == recorded_before[k] for k in WAIT_KINDS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
