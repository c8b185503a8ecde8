"""Compares rocsync's trace with CUPTI's (torch.profiler) for the same process, and writes
the validation report.

usage: python compare.py RESULTS_DIR REPORT.md
RESULTS_DIR holds: timings.jsonl (workload, mode, seconds per run) and, per workload W,
W.both.rocsync.json and W.both.cupti.json (one process traced by both) and
W.both.raw.jsonl (rocsync's raw capture).
"""
import collections
import gzip
import json
import os
import sys

WAIT_KINDS = ("Stream Wait Event", "Event Sync")


def load(path):
    """JSON, gzip-compressed or not."""
    opener = gzip.open if not os.path.exists(path) else open
    with opener(path if os.path.exists(path) else path + ".gz", "rt") as f:
        return json.load(f)


def sync_rows(trace):
    """kind -> [(absolute ns, runtime name, runtime tid, sync args)] in time order, joining
    each cuda_sync row to its cuda_runtime row by correlation."""
    base = trace["baseTimeNanoseconds"]
    events = trace["traceEvents"]
    runtime = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime":
            runtime[e["args"]["correlation"]] = e
    rows = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cuda_sync":
            rt = runtime.get(e["args"]["correlation"])
            rows[e["name"]].append((base + round(e["ts"] * 1000), rt["name"] if rt else "?",
                                    rt["tid"] if rt else None, e["args"]))
    for v in rows.values():
        v.sort(key=lambda r: r[0])
    return rows


def thread_map(cupti, ours):
    """CUPTI's thread ids are pthread handles, not OS tids: map each to the OS thread whose
    rows most often lie nearest in time to its rows."""
    votes = collections.defaultdict(collections.Counter)
    for kind, rows in cupti.items():
        for c, r in match(rows, ours.get(kind, []))[0]:
            votes[c[2]][r[2]] += 1
    return {c: v.most_common(1)[0][0] for c, v in votes.items()}


def match(cupti, ours):
    """Pairs each CUPTI row with the unused rocsync row nearest in time (both lists of one
    kind, and of one thread once threads are mapped). Returns (pairs, unmatched)."""
    pairs, unmatched = [], []
    j = 0
    used = set()
    for row in cupti:
        t = row[0]
        while j < len(ours) and ours[j][0] < t - 5_000_000:
            j += 1
        best = None
        k = j
        while k < len(ours) and ours[k][0] <= t + 5_000_000:
            if k not in used and (best is None or abs(ours[k][0] - t) < abs(ours[best][0] - t)):
                best = k
            k += 1
        if best is None:
            unmatched.append(row)
        else:
            used.add(best)
            pairs.append((row, ours[best]))
    return pairs, unmatched


WORKLOADS = {
    "workload": "`workload.py`: two threads, each with two streams, a new event per "
                "iteration recorded on one and waited on by the other, with event, stream "
                "and device synchronizes",
    "train": "`train.py`: a 4-layer transformer encoder trained with AdamW; each batch "
             "copied host→device on a side stream with an event the compute stream waits "
             "on; the loss read with `.item()` every 10 steps",
}
MODES = ("untraced", "rocsync", "rocsync --probe cudaGetDevice", "torch.profiler")


def compare(results, w):
    """Sync rows matched, producers resolved, for one workload traced by both tools."""
    cupti = sync_rows(load(os.path.join(results, f"{w}.both.cupti.json")))
    ours = sync_rows(load(os.path.join(results, f"{w}.both.rocsync.json")))
    matched, missing, api_differs = collections.Counter(), collections.Counter(), collections.Counter()
    max_skew = 0
    cupti_resolved = collections.Counter()
    threads = thread_map(cupti, ours)
    for kind, rows in cupti.items():
        pairs, unmatched = [], []
        for tid, mapped in threads.items():
            p, u = match([r for r in rows if r[2] == tid], [r for r in ours.get(kind, []) if r[2] == mapped])
            pairs += p
            unmatched += u
        unmatched += [r for r in rows if r[2] not in threads]
        matched[kind] = len(pairs)
        missing[kind] = len(unmatched)
        for c, r in pairs:
            if c[1].replace("_ptsz", "") != r[1].replace("_ptsz", ""):
                api_differs[f"{c[1]} vs {r[1]}"] += 1
            max_skew = max(max_skew, abs(c[0] - r[0]))
        for row in rows:
            if kind in WAIT_KINDS and row[3].get("wait_on_cuda_event_record_corr_id", -1) >= 0:
                cupti_resolved[kind] += 1
    ours_total, ours_resolved = collections.Counter(), collections.Counter()
    for kind, rows in ours.items():
        ours_total[kind] += len(rows)
        if kind in WAIT_KINDS:
            ours_resolved[kind] += sum(1 for r in rows if r[3]["wait_on_cuda_event_record_corr_id"] >= 0)
    # Waits whose event was recorded before them, by rocsync's own raw record of calls.
    recorded_before = collections.Counter()
    last_record = {}
    raw = os.path.join(results, f"{w}.both.raw.jsonl")
    with (open(raw) if os.path.exists(raw) else gzip.open(raw + ".gz", "rt")) as f:
        calls = [json.loads(line) for line in f if line.startswith('{"api"')]
    calls = [c for c in calls if not c.get("filtered")]
    calls.sort(key=lambda c: c["correlation"])
    for c in calls:
        api, args = c["api"], c["args"]
        if api.startswith("cudaEventRecord") and c["ret"] == 0:
            last_record[(c["pid"], args["event"])] = c["correlation"]
        elif api.startswith("cudaEventDestroy") and c["ret"] == 0:
            last_record.pop((c["pid"], args["event"]), None)
        elif api.startswith("cudaStreamWaitEvent") or api in ("cudaEventSynchronize", "cudaEventQuery"):
            if (c["pid"], args["event"]) in last_record:
                kind = "Stream Wait Event" if api.startswith("cudaStreamWaitEvent") else "Event Sync"
                recorded_before[kind] += 1
    lines = [f"### {w}: every CUPTI sync row has a rocsync counterpart\n",
             "| kind | CUPTI rows | rocsync rows (whole run) | matched | CUPTI rows without a rocsync row |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for k in sorted(set(cupti) | set(ours)):
        lines.append(f"| {k} | {len(cupti.get(k, []))} | {ours_total[k]} | {matched[k]} | {missing[k]} |")
    queries = sum(1 for c in calls if c["api"] == "cudaEventQuery")
    lines.append(f"\nLargest start-time difference between matched rows: {max_skew / 1000:.1f} µs. "
                 f"Runtime API of matched rows differs: {sum(api_differs.values())} "
                 f"{dict(api_differs) if api_differs else ''}. cudaEventQuery calls captured: {queries}. "
                 f"CUPTI's thread ids map onto OS threads {({str(k): v for k, v in threads.items()})}. "
                 "rocsync also holds the warm-up, which ran before the profiler started.\n")
    lines.append(f"### {w}: producer resolution\n")
    lines.append("| kind | waits | waits whose event was recorded before them | resolved by rocsync | resolved by CUPTI |")
    lines.append("| --- | ---: | ---: | ---: | ---: |")
    for k in WAIT_KINDS:
        lines.append(f"| {k} | {ours_total[k]} | {recorded_before[k]} | {ours_resolved[k]} | {cupti_resolved[k]} |")
    per_api = collections.Counter(c["api"] for c in calls)
    lines.append(f"\nCalls rocsync captured (default probes): {dict(per_api.most_common())}.\n")
    ok = sum(missing.values()) == 0 and not api_differs and all(
        ours_resolved[k] == recorded_before[k] for k in WAIT_KINDS)
    return lines, ok


def main(results, report):
    timings = collections.defaultdict(list)
    meta = {}
    with open(os.path.join(results, "timings.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            timings[(r["workload"], r["mode"])].append(r["seconds"])
            meta = r if "gpu" in r else meta
    kernel_file = os.path.join(results, "kernel.txt")
    kernel = open(kernel_file).read().strip() if os.path.exists(kernel_file) else os.uname().release
    lines = ["# rocsync on a real GPU: overhead and validation against CUPTI\n",
             f"Machine: {meta.get('gpu')}, PyTorch {meta.get('torch')}, CUDA {meta.get('cuda')}, "
             f"kernel {kernel}. Produced by `scripts/gpu-validate/run.sh` in one session on the machine "
             "(the command is in the section below); `python3 scripts/gpu-validate/compare.py "
             "bench/gpu-validation bench/gpu-validation.md` redoes the comparison from the traces kept "
             "in `bench/gpu-validation/`.\n", "Workloads:\n"]
    lines += [f"- {v}" for v in WORKLOADS.values()]
    lines.append("\n## Wall-time overhead (ratio to the median untraced run of the same workload)\n")
    lines.append("Runs interleaved round by round on one machine. rocsync's default probes leave "
                 "`cudaGetDevice` out; `--probe cudaGetDevice` is every hooked function.\n")
    lines.append("| workload | mode | runs | ratio min | ratio median | ratio max | overhead / torch.profiler's |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for w in WORKLOADS:
        base_runs = sorted(timings.get((w, "untraced"), []))
        if not base_runs:
            continue
        base = base_runs[len(base_runs) // 2]
        med = {m: sorted(x / base for x in timings[(w, m)])[len(timings[(w, m)]) // 2]
               for m in MODES if timings.get((w, m))}
        for m in MODES:
            xs = sorted(x / base for x in timings.get((w, m), []))
            if not xs:
                continue
            share = ""
            if m.startswith("rocsync") and med.get("torch.profiler", 1) > 1:
                share = f"{(med[m] - 1) / (med['torch.profiler'] - 1):.2f}"
            lines.append(f"| {w} | {m} | {len(xs)} | {xs[0]:.3f} | {xs[len(xs) // 2]:.3f} | {xs[-1]:.3f} | {share} |")
    lines.append("\nSeconds per run: " + "; ".join(
        f"{w}/{m}: {[round(x, 3) for x in v]}" for (w, m), v in sorted(timings.items())) + "\n")
    lines.append("## Sync rows and producers, one process traced by rocsync and torch.profiler at once\n")
    lines.append("Each CUPTI row (`enable_cuda_sync_events`) is paired with the rocsync row of the same kind "
                 "nearest in time on the same thread; the runtime API of both must agree.\n")
    all_ok = True
    for w in WORKLOADS:
        if not os.path.exists(os.path.join(results, f"{w}.both.rocsync.json")) and \
                not os.path.exists(os.path.join(results, f"{w}.both.rocsync.json.gz")):
            continue
        more, ok = compare(results, w)
        lines += more
        all_ok = all_ok and ok
    text = "\n".join(lines) + "\n"
    with open(report, "w") as f:
        f.write(text)
    print(text)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
