"""A small transformer training loop for the overhead validation: an optimizer, a side
stream copying each batch host→device with an event the compute stream waits on, and a
loss `.item()` every few steps (a host synchronisation), as real training loops do.

usage: python train.py STEPS [--profile TRACE.json] [--pause] [--windows]
Prints one JSON line: {"seconds": wall time of the timed steps, ...}.
--windows: print "started" as the timed steps begin, and add to the JSON line "marks":
the CLOCK_MONOTONIC time after each `.item()` (every 10 steps, the host and the GPU in
step), so an outside observer (the attach validation) can time stretches of the run.
--pause: just before and just after the timed steps (inside the profiler, if any), print
"paused" and wait for a line on stdin, so an outside observer (the daemon validation)
can read its counters while the process makes no call.
"""
import json
import sys
import time

import torch
from torch import nn


def transformer() -> nn.Module:
    """The model: a 4-layer transformer encoder and a linear head."""
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, num_layers=4), nn.Linear(256, 256))


def make_step(model: nn.Module, dev: torch.device):
    """One training step: the batch copied host→device on a side stream with an event the
    compute stream waits on, AdamW, the loss read with `.item()` every 10 steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    copy = torch.cuda.Stream()
    host = [torch.randn(32, 64, 256).pin_memory() for _ in range(4)]

    def step(i: int) -> None:
        with torch.cuda.stream(copy):
            x = host[i % len(host)].to(dev, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(copy)
        torch.cuda.current_stream().wait_event(ready)
        x.record_stream(torch.cuda.current_stream())
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 10 == 0:
            loss.item()

    return step


def profiled(run, path: str) -> float:
    """`run()` under torch.profiler (CUPTI, with its sync events), the trace written to
    `path`."""
    from torch.profiler import ProfilerActivity, profile as prof

    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
              experimental_config=config) as p:
        seconds = run()
    p.export_chrome_trace(path)
    return seconds


def main() -> None:
    steps = int(sys.argv[1])
    profile = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    pause = "--pause" in sys.argv
    windows = "--windows" in sys.argv
    marks: list[float] = []
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = transformer().to(dev)
    step = make_step(model, dev)

    for i in range(10):  # warm-up: kernels, allocator
        step(i)
    torch.cuda.synchronize()

    def wait_outside() -> None:
        if pause:
            print("paused", flush=True)
            sys.stdin.readline()

    def run() -> float:
        wait_outside()
        if windows:
            print("started", flush=True)
        start = time.perf_counter()
        for i in range(steps):
            step(i)
            if windows and i % 10 == 0:
                marks.append(time.monotonic())
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        wait_outside()
        return seconds

    seconds = profiled(run, profile) if profile else run()
    result = {"seconds": seconds, "iterations": steps, "torch": torch.__version__,
              "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    if windows:
        result["marks"] = marks
    print(json.dumps(result))


if __name__ == "__main__":
    main()
