"""A DistributedDataParallel training step per rank (NCCL), as torchrun starts it: the
train.py model, each batch copied host→device on a side stream with an event the compute
stream waits on, gradients all-reduced by DDP (NCCL's own streams and events), the loss
read with `.item()` every 10 steps.

usage: torchrun --standalone --nproc_per_node N ddp.py STEPS [--profile-dir DIR]
Each rank prints one JSON line; with --profile-dir, each also writes the torch.profiler
(CUPTI) trace DIR/cupti_rank<R>.json of the timed steps.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

from train import make_step, profiled, transformer


def main() -> None:
    steps = int(sys.argv[1])
    profile_dir = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--profile-dir" else None
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(rank)
    dev = torch.device("cuda", local)
    model = nn.parallel.DistributedDataParallel(transformer().to(dev), device_ids=[local])
    step = make_step(model, dev)

    for i in range(5):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()

    def run() -> float:
        start = time.perf_counter()
        for i in range(steps):
            step(i)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    if profile_dir:
        seconds = profiled(run, os.path.join(profile_dir, f"cupti_rank{rank}.json"))
    else:
        seconds = run()
    print(json.dumps({"rank": rank, "pid": os.getpid(), "seconds": seconds, "steps": steps,
                      "world_size": dist.get_world_size(), "torch": torch.__version__}),
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
