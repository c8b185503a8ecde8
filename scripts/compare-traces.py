#!/usr/bin/env python3
"""Compares two rocsync traces of the same scenario, ignoring what differs run to run
(timestamps, durations, pids, tids, correlation and flow ids, handles, paths): prints
the top-level fields and the events (compared as a multiset) that differ.

    scripts/compare-traces.py before.json after.json

Used to show that a refactor changes no output (issue 30: the demo trace).
"""
import json
import re
import sys
from collections import Counter

RUN_TO_RUN = {
    "ts", "dur", "baseTimeNanoseconds", "pid", "tid", "start_ns", "end_ns",
    "clock_offset_ns", "elapsed_s", "id", "correlation", "cid", "External id",
    "wait_on_hip_event_record_corr_id", "wait_on_cuda_event_record_corr_id", "bind_id",
    "traceName", "command", "rank", "local_rank", "sort_index",
}


def norm(v, key=None):
    if isinstance(v, dict):
        return {k: norm(x, k) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [norm(x, key) for x in v]
    if key in RUN_TO_RUN:
        return "*"
    if isinstance(v, str):
        return re.sub(r"\b\d{3,}\b", "N", re.sub(r"0x[0-9a-f]+", "0x*", v))
    return v


def load(path):
    trace = json.load(open(path))
    events = trace.pop("traceEvents")
    return norm(trace), Counter(json.dumps(norm(e), sort_keys=True) for e in events)


def differences(a, b, at=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differences(a.get(k), b.get(k), f"{at}.{k}")
    elif a != b:
        yield f"{at}: {json.dumps(a)[:200]} | {json.dumps(b)[:200]}"


(top_a, ev_a), (top_b, ev_b) = load(sys.argv[1]), load(sys.argv[2])
for line in differences(top_a, top_b):
    print("top level", line)
only_a, only_b = ev_a - ev_b, ev_b - ev_a
print(f"events: {sum(ev_a.values())} and {sum(ev_b.values())}; "
      f"only in the first: {sum(only_a.values())}, only in the second: {sum(only_b.values())}")
for e in list(only_a.elements())[:5]:
    print("  first: ", e[:300])
for e in list(only_b.elements())[:5]:
    print("  second:", e[:300])
