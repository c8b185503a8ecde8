"""Reads a rocsync trace with HolisticTraceAnalysis and prints, as JSON, the record->wait
edges HTA's own model of the trace contains, and HTA's CPU<->GPU join.

usage: python sync_edges.py TRACE_DIR

An edge counts when, in HTA's parsed dataframe:
  - the sync row (cat cuda_sync) is classified as GPU by HTA's GPUKernelFilter,
  - HTA joined it to its CPU runtime row (index_correlation) and that row is the HIP wait,
  - its wait_on_cuda_event_record_corr_id names a CPU hipEventRecord* row.
Waits HTA sees as unresolved map to -1. Any inconsistency is a non-zero exit.

"joins" lists, for every row HTA classified as GPU, [its name, its correlation, the name
and correlation of the CPU row HTA joined it to (index_correlation), whether that CPU row
points back]; "cpu_joined" counts the runtime rows HTA joined to any GPU row.
"""
import json
import sys

from hta.common.trace_filter import GPUKernelFilter
from hta.trace_analysis import TraceAnalysis

RECORDS = ("hipEventRecord", "hipEventRecord_spt", "hipEventRecordWithFlags")
WAITS = {"Stream Wait Event": ("hipStreamWaitEvent", "hipStreamWaitEvent_spt"),
         "Event Sync": ("hipEventSynchronize",)}


def main(trace_dir: str) -> int:
    analyzer = TraceAnalysis(trace_dir=trace_dir)
    trace = analyzer.t
    df = trace.get_trace(0)
    symbols = trace.symbol_table
    names = symbols.get_sym_table()
    ids = symbols.get_sym_id_map()
    gpu = GPUKernelFilter()(df, symbols)
    runtime = df[df.cat == ids["cuda_runtime"]]
    if len(gpu.index.intersection(runtime.index)):
        print("HTA classified a runtime row as GPU", file=sys.stderr)
        return 1
    by_corr = runtime.set_index("correlation")
    edges = {}
    for _, row in gpu[gpu.cat == ids["cuda_sync"]].iterrows():
        kind = names[row["name"]]
        if kind not in WAITS:
            continue
        cpu = df.loc[row["index_correlation"]]
        if names[cpu["name"]] not in WAITS[kind]:
            print(f"sync row {row['correlation']} joined to {names[cpu['name']]}", file=sys.stderr)
            return 1
        producer = int(row["wait_on_cuda_event_record_corr_id"])
        if producer >= 0 and names[by_corr.loc[producer]["name"]] not in RECORDS:
            print(f"producer {producer} is not an event record", file=sys.stderr)
            return 1
        edges[int(row["correlation"])] = producer
    joins = []
    for gpu_index, row in gpu.iterrows():
        cpu_index = int(row["index_correlation"])
        cpu = df.loc[cpu_index] if cpu_index > 0 else None
        joins.append([
            names[row["name"]],
            int(row["correlation"]),
            None if cpu is None else names[cpu["name"]],
            None if cpu is None else int(cpu["correlation"]),
            cpu is not None and int(cpu["index_correlation"]) == gpu_index,
        ])
    print(json.dumps({
        "edges": edges,
        "sync_rows": int((gpu.cat == ids["cuda_sync"]).sum()),
        "joins": joins,
        "cpu_joined": int(runtime.index_correlation.gt(0).sum()),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
