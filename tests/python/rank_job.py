"""A two-rank job as torchrun starts it, in Python over ctypes: each rank is a fresh
interpreter that loads the simulated HIP runtime and RCCL itself and sets its
communicator up at once (no warm-up), then runs STEPS all-reduce + synchronize steps.
Rank 1 stops before collective STOP_AT in a function of its own (`wait_for_data`, a
host sleep, no GPU call); rank 0 enters it and blocks in its stream's synchronisation
inside `train_step` until rank 1 comes.

usage: rank_job.py HIP_LIB RCCL_LIB STEPS STOP_AT PAUSE_S
Prints "uid <hex>", then per rank "rank R pid P comm" and "rank R pid P allreduce N",
flushed: the job's own log."""

import ctypes
import os
import subprocess
import sys
import time


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def say(line):
    # One write(2) per line: the ranks share the pipe, and print's text and newline may
    # go out apart, one rank's line then running into another's.
    os.write(1, (line + "\n").encode())


def wait_for_data(seconds):
    time.sleep(seconds)  # rank 1's host-side wait: where it is while the others block


def train_step(hip, nccl, comm, stream, buf, n):
    if nccl.ncclAllReduce(buf, buf, 1024 + n, 7, 0, comm, stream):
        sys.exit(4)
    if hip.hipStreamSynchronize(stream):  # rank 0 blocks here in the collective
        sys.exit(5)


def rank_main(rank, hip_lib, rccl_lib, steps, stop_at, pause_s, uid_hex):
    hip, nccl = ctypes.CDLL(hip_lib), ctypes.CDLL(rccl_lib)
    uid = UniqueId()
    ctypes.memmove(ctypes.byref(uid), bytes.fromhex(uid_hex), 128)
    comm, stream = ctypes.c_void_p(), ctypes.c_void_p()
    if nccl.ncclCommInitRank(ctypes.byref(comm), 2, uid, rank):
        sys.exit(3)
    if hip.hipStreamCreate(ctypes.byref(stream)):
        sys.exit(3)
    say(f"rank {rank} pid {os.getpid()} comm")
    buf = (ctypes.c_float * (1024 + 4096))()
    for n in range(1, steps + 1):
        if rank == 1 and n == stop_at:
            wait_for_data(pause_s)
        say(f"rank {rank} pid {os.getpid()} allreduce {n}")
        train_step(hip, nccl, comm, stream, buf, n)
    nccl.ncclCommDestroy(comm)


def main():
    if sys.argv[1] == "rank":
        rank, hip_lib, rccl_lib, steps, stop_at, pause_s, uid_hex = sys.argv[2:9]
        rank_main(int(rank), hip_lib, rccl_lib, int(steps), int(stop_at), float(pause_s), uid_hex)
        return
    hip_lib, rccl_lib, steps, stop_at, pause_s = sys.argv[1:6]
    uid = UniqueId()
    if ctypes.CDLL(rccl_lib).ncclGetUniqueId(ctypes.byref(uid)):
        sys.exit(3)
    uid_hex = ctypes.string_at(ctypes.byref(uid), 128).hex()
    say(f"uid {uid_hex}")
    ranks = [
        subprocess.Popen([sys.executable, __file__, "rank", str(r), hip_lib, rccl_lib,
                          steps, stop_at, pause_s, uid_hex])
        for r in range(2)
    ]
    sys.exit(max(p.wait() for p in ranks))


if __name__ == "__main__":
    main()
