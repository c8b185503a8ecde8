"""Runs HolisticTraceAnalysis's critical-path analysis on one Kineto trace and prints, as
one JSON line, its edges by type and its SYNC_DEPENDENCY edges by (source, destination)
row category — a kernel->kernel one is a stream wait HTA followed.

usage: python critical_path.py TRACE.json[.gz]
HTA reads a directory of per-rank traces: the trace is linked into one of its own.
"""
import collections
import gzip
import json
import os
import sys
import tempfile

from hta.trace_analysis import TraceAnalysis


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    step = next((e["name"].split("#")[0] for e in events
                 if str(e.get("name", "")).startswith("ProfilerStep")), "")
    with tempfile.TemporaryDirectory() as d:
        os.symlink(os.path.abspath(path), os.path.join(d, os.path.basename(path)))
        analyzer = TraceAnalysis(trace_dir=d)
        cp, ok = analyzer.critical_path_analysis(rank=0, annotation=step, instance_id=0)
        df = analyzer.t.get_trace(0)
        names = analyzer.t.symbol_table.get_sym_table()
        kinds = collections.Counter()
        sync = collections.Counter()
        for u, v in cp.edges:
            e = cp.edges[u, v]["object"]
            kinds[e.type.value] += 1
            if e.type.value == "critical_path_sync_dependency":
                src = df.loc[cp.node_list[u].ev_idx]
                dst = df.loc[cp.node_list[v].ev_idx]
                sync[f"{names[src['cat']]}->{names[dst['cat']]}"] += 1
    print(json.dumps({"ok": bool(ok), "edges": dict(kinds), "sync": dict(sync)}))


if __name__ == "__main__":
    main(sys.argv[1])
