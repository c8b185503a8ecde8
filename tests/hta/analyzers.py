"""Runs every HolisticTraceAnalysis 0.5 analyzer (TraceAnalysis's methods) on a directory of
rocsync traces and prints, as JSON, what each did, and how HTA classified the sync rows.

usage: python analyzers.py TRACE_DIR SCRATCH_DIR

"results": analyzer -> "ok", or "<ExceptionType>: <message>" when it raised.
"kernel_types": cuda_sync row name -> the kernel type HTA's GPU kernel breakdown gave the
rows of that name (every rank), absent when the breakdown did not see them.
"compute_names": the row names behind HTA's temporal breakdown's compute time.
"""
import json
import logging
import sys
import warnings

from hta.trace_analysis import TimeSeriesTypes, TraceAnalysis
from hta.utils.utils import get_kernel_type, KernelType

SYNC_NAMES = ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync")


def analyzers(a, ranks, scratch):
    """Every public analysis of TraceAnalysis, with arguments that ask for all ranks."""
    queue = lambda: a.get_queue_length_time_series(ranks=ranks)  # noqa: E731
    return {
        "get_temporal_breakdown": lambda: a.get_temporal_breakdown(visualize=False),
        "get_idle_time_breakdown": lambda: [
            a.get_idle_time_breakdown(ranks=[r], visualize=False) for r in ranks],
        "get_gpu_kernel_breakdown": lambda: a.get_gpu_kernel_breakdown(visualize=False),
        "get_gpu_kernels_with_user_annotations": lambda: [
            a.get_gpu_kernels_with_user_annotations(rank=r) for r in ranks],
        "get_gpu_user_annotation_breakdown": lambda: a.get_gpu_user_annotation_breakdown(
            visualize=False),
        "get_comm_comp_overlap": lambda: a.get_comm_comp_overlap(visualize=False),
        "get_profiler_steps": lambda: a.get_profiler_steps(),
        "get_potential_stragglers": lambda: a.get_potential_stragglers(),
        "get_frequent_cuda_kernel_sequences": lambda: [
            a.get_frequent_cuda_kernel_sequences("hipStreamWaitEvent", scratch, rank=r)
            for r in ranks],
        "get_aten_op_kernels_and_delay": lambda: a.get_aten_op_kernels_and_delay(ranks=ranks),
        "get_cuda_kernel_launch_stats": lambda: a.get_cuda_kernel_launch_stats(
            ranks=ranks, visualize=False),
        "generate_trace_with_counters": lambda: a.generate_trace_with_counters(
            TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH, ranks=ranks),
        "get_queue_length_summary": lambda: a.get_queue_length_summary(ranks=ranks),
        "get_queue_length_time_series": queue,
        "get_queue_length_summary_from_time_series": lambda: (
            a.get_queue_length_summary_from_time_series(queue())),
        "get_time_spent_blocked_on_full_queue": lambda: (
            a.get_time_spent_blocked_on_full_queue(queue())),
        "get_memory_bw_summary": lambda: a.get_memory_bw_summary(ranks=ranks),
        "get_memory_bw_time_series": lambda: a.get_memory_bw_time_series(ranks=ranks),
        "get_cupti_counter_data_with_operators": lambda: (
            a.get_cupti_counter_data_with_operators(ranks=ranks)),
        "critical_path_analysis": lambda: [
            a.critical_path_analysis(rank=r, annotation="", instance_id=None) for r in ranks],
    }


def main(trace_dir: str, scratch: str) -> int:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    a = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(a.t.traces.keys())
    results = {}
    breakdown = None
    for name, run in analyzers(a, ranks, scratch).items():
        try:
            out = run()
            results[name] = "ok"
            if name == "get_gpu_kernel_breakdown":
                breakdown = out
        except Exception as e:  # noqa: BLE001 - the test wants every failure, named
            results[name] = f"{type(e).__name__}: {e}"
    kernel_types = {}
    if breakdown is not None:
        # num_kernels=10 keeps every row name here: the traces hold four sync names.
        for _, row in breakdown[1].iterrows():
            kernel_types.setdefault(row["name"], set()).add(row["kernel_type"])
    symbols = a.t.symbol_table.get_sym_table()
    compute_names = set()
    for df in a.t.traces.values():
        for n in df[df.stream.ne(-1)].name.unique():
            if get_kernel_type(symbols[n]) == KernelType.COMPUTATION.name:
                compute_names.add(symbols[n])
    print(json.dumps({
        "ranks": ranks,
        "results": results,
        "kernel_types": {k: sorted(v) for k, v in kernel_types.items()},
        "compute_names": sorted(compute_names),
        "sync_names_hta_calls_computation": sorted(
            n for n in SYNC_NAMES if get_kernel_type(n) == KernelType.COMPUTATION.name),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
