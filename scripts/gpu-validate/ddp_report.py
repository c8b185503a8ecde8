"""Report of ddp.sh: one rocsync trace per rank of a torchrun job, each checked against
that rank's own torch.profiler (CUPTI) trace.

usage: python ddp_report.py OUT_DIR    (prints Markdown)
"""
import collections
import glob
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import load, match, sync_rows, thread_map  # noqa: E402

WAIT_KINDS = ("Stream Wait Event", "Event Sync")


def load_trace(path):
    """A trace as written: gzip-compressed by its name."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


def seconds(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    return max(r["seconds"] for r in rows) if rows else float("nan")


def main(out):
    files = sorted(glob.glob(os.path.join(out, "traces", "ddp_*.json.gz")))
    print("# rocsync on a torchrun job: one trace per rank\n")
    print("Written by `scripts/gpu-validate/ddp.sh` (2 ranks, `torchrun --standalone "
          "--nproc_per_node 2 ddp.py`, NCCL); `rocsync run -- torchrun …` with no other "
          "option follows torchrun's workers.\n")
    t_un, t_rs = seconds(os.path.join(out, "untraced.jsonl")), seconds(os.path.join(out, "rocsync.jsonl"))
    print(f"Timed steps, slowest rank: untraced {t_un:.3f} s, under rocsync {t_rs:.3f} s "
          f"({t_rs / t_un:.3f}×; one run each, not a benchmark).\n")
    with open(os.path.join(out, "both.log")) as f:
        summary = [l.rstrip() for l in f if "trace:" in l or "captured" in l or "waits" in l or "lost" in l]
    print("rocsync's summary of the traced run:\n\n```\n" + "\n".join(summary) + "\n```\n")
    print("| file | pid | rank | world size | backend | runtime rows | sync rows | "
          "waits resolved | unresolved | CUPTI sync rows | matched | CUPTI rows without a rocsync row |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    correlations = collections.Counter()
    ok = len(files) == 2
    ranks = set()
    unmatched_by = collections.Counter()
    unmatched_threads = collections.Counter()
    thread_maps = {}
    for path in files:
        t = load_trace(path)
        d = t["distributedInfo"]
        ranks.add(d.get("rank"))
        ev = t["traceEvents"]
        runtime = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"]
        for e in runtime:
            correlations[e["args"]["correlation"]] += 1
        syncs = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cuda_sync"]
        waits = [e for e in syncs if e["name"] in WAIT_KINDS]
        resolved = sum(1 for e in waits if e["args"]["wait_on_cuda_event_record_corr_id"] >= 0)
        cupti_path = os.path.join(out, "cupti", f"cupti_rank{d.get('rank')}.json")
        cupti_trace = load(cupti_path)
        cupti = sync_rows(cupti_trace)
        # The API behind each CUPTI row, runtime or driver (rocsync probes libcudart only).
        api_of = {e["args"]["correlation"]: f'{e["cat"]}:{e["name"]}'
                  for e in cupti_trace["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and "correlation" in e.get("args", {})}
        ours = sync_rows(t)
        threads = thread_map(cupti, ours)
        n_cupti = sum(len(v) for v in cupti.values())
        matched = missing = 0
        for kind, rows in cupti.items():
            lost = [r for r in rows if r[2] not in threads]
            for tid, mapped in threads.items():
                p, u = match([r for r in rows if r[2] == tid], [r for r in ours.get(kind, []) if r[2] == mapped])
                matched += len(p)
                lost += u
            missing += len(lost)
            for r in lost:
                unmatched_by[(d.get("rank"), kind, api_of.get(r[3].get("correlation"), "?"))] += 1
                unmatched_threads[(d.get("rank"), r[2], threads.get(r[2], "unmapped"))] += 1
        thread_maps[d.get("rank")] = threads
        ok &= all(e["pid"] == t["rocsync"]["pid"] for e in runtime)
        print(f"| {os.path.basename(path)} | {t['rocsync']['pid']} | {d.get('rank')} | "
              f"{d.get('world_size')} | {d.get('backend', '')} | {len(runtime)} | {len(syncs)} | "
              f"{resolved} | {len(waits) - resolved} | {n_cupti} | {matched} | {missing} |")
    if unmatched_by:
        print("\nCUPTI rows without a rocsync row, by rank, kind and the API CUPTI joins "
              "them to:\n")
        print("| rank | kind | API | rows |\n| ---: | --- | --- | ---: |")
        for (rank, kind, api), n in sorted(unmatched_by.items()):
            print(f"| {rank} | {kind} | {api} | {n} |")
    if unmatched_threads:
        print("\nBy CUPTI thread (and the OS thread it maps to): "
              f"{ {str(k): v for k, v in unmatched_threads.items()} }; thread maps: "
              f"{ {r: {str(k): v for k, v in m.items()} for r, m in thread_maps.items()} }.")
    dup = sum(1 for c in correlations.values() if c > 1)
    # rocsync hooks the runtime API (libcudart); driver-API syncs are out of its scope.
    runtime_missing = sum(n for (_, _, api), n in unmatched_by.items() if not api.startswith("cuda_driver:"))
    ok &= dup == 0 and ranks == {0, 1} and runtime_missing == 0
    print(f"\nCorrelation ids in more than one file: {dup}. Ranks: {sorted(ranks)}.")
    print(f"\n**{'PASS' if ok else 'FAIL'}**: one trace per rank with its distributedInfo, "
          "each rank's CUPTI sync rows of runtime-API calls all matched in its own file, "
          "ids unique across files.")


if __name__ == "__main__":
    main(sys.argv[1])
