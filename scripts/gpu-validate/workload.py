"""Cross-stream PyTorch workload for validating rocsync against CUPTI on a CUDA GPU.

Two threads; each has two streams A and B and, every iteration: a matmul on A, an event
recorded on A (a new torch.cuda.Event, so events are created and destroyed continuously),
B waiting on it, a matmul on B, an event recorded on B, and every few iterations an
event synchronize, a stream synchronize and a device synchronize.

usage: python workload.py ITERATIONS [--profile TRACE.json]
Prints one JSON line: {"seconds": wall time of the threaded section, ...}.
"""
import json
import sys
import threading
import time

import torch


def worker(iterations: int, errors: list) -> None:
    try:
        torch.cuda.set_device(0)
        a, b = torch.cuda.Stream(), torch.cuda.Stream()
        x = torch.randn(512, 512, device="cuda")
        for i in range(iterations):
            with torch.cuda.stream(a):
                y = x @ x
            produced = torch.cuda.Event()
            produced.record(a)
            b.wait_event(produced)
            with torch.cuda.stream(b):
                z = y @ x
            done = torch.cuda.Event()
            done.record(b)
            if i % 4 == 0:
                done.synchronize()
            if i % 8 == 0:
                b.synchronize()
            if i % 16 == 0:
                torch.cuda.synchronize()
            del z
        torch.cuda.synchronize()
    except Exception as e:  # surfaced by the main thread
        errors.append(repr(e))


def run(iterations: int) -> float:
    errors: list = []
    threads = [threading.Thread(target=worker, args=(iterations, errors)) for _ in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise SystemExit(f"worker failed: {errors}")
    return elapsed


def main() -> None:
    iterations = int(sys.argv[1])
    profile = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--profile" else None
    torch.cuda.init()
    torch.ones(1, device="cuda").sum().item()  # CUDA context before timing
    run(20)  # warm-up: kernels, allocator
    if profile:
        from torch.profiler import ProfilerActivity, profile as prof

        config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
        with prof(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            experimental_config=config,
        ) as p:
            seconds = run(iterations)
        p.export_chrome_trace(profile)
    else:
        seconds = run(iterations)
    print(json.dumps({"seconds": seconds, "iterations": iterations, "torch": torch.__version__,
                      "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
