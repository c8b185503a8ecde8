"""Validates the collective probes on a GPU (as root), with torch.distributed's NCCL
backend at world size 1 (a real communicator, real NCCL kernels):

1. `rocsync run` of JOB: every `all_reduce` the job counted is an `ncclAllReduce` row with
   its sequence number, and its communicator's id and rank come from its set-up call.
2. The daemon (`--capture-on-stall 50ms`) on JOB with a stall: the collective's input
   depends on a `torch.cuda._sleep` of ~STALL ms, then the host waits (`.item()`): the
   stall trace's chain ends at `ncclAllReduce #n`, n the job's own count (the host
   waits in `cudaStreamSynchronize` of the current stream).
3. What NCCL's internal stream waits depend on: the events its stream waits on and
   whether rocsync saw them recorded (and whether the library names the driver API's
   cuEventRecord), from the raw capture of step 1.

usage: python collectives.py ROCSYNC OUT_DIR [STEPS] [STALL_MS]
Writes OUT_DIR/collectives.md and the traces it read.
"""
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

METRICS = "127.0.0.1:9468"
JOB = r'''
import os, sys, time, torch, torch.distributed as dist
steps, stall_ms = int(sys.argv[1]), float(sys.argv[2])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[3], RANK="0", WORLD_SIZE="1")
torch.cuda.set_device(0)
dist.init_process_group("nccl")
t = torch.ones(1 << 20, device="cuda")
n = 0
def all_reduce():
    global n
    dist.all_reduce(t)
    n += 1
for _ in range(steps):
    all_reduce()
torch.cuda.synchronize()
print("collectives %d" % n, flush=True)
if stall_ms > 0:
    # cycles for stall_ms, measured
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(10_000_000); b.record(); b.synchronize()
    cycles = int(10_000_000 * stall_ms / a.elapsed_time(b))
    print("ready", flush=True)
    sys.stdin.readline()
    torch.cuda._sleep(cycles)   # the collective's input is ready only after it
    all_reduce()
    print("stalled collective %d" % n, flush=True)
    t0 = time.monotonic()
    torch.cuda.current_stream().synchronize()   # the host waits for the collective
    print("waited %.1f ms" % ((time.monotonic() - t0) * 1e3), flush=True)
    time.sleep(1.5)
dist.destroy_process_group()
'''


def rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def nccl_rows(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
            and str(e.get("name", "")).startswith("nccl")]


def step1(rocsync, python, out, steps, md):
    job = out / "job.py"
    job.write_text(JOB)
    r = subprocess.run([rocsync, "run", "-f", "-o", str(out / "run.json"), "--raw",
                        str(out / "run.raw.jsonl"), "--", python, str(job), str(steps), "0",
                        "29511"], capture_output=True, text=True, timeout=300)
    said = [l for l in r.stdout.splitlines() if l.startswith("collectives")]
    counted = int(said[0].split()[1]) if said else -1
    traces = sorted(out.glob("run*.json"))
    t = rows(traces[0])
    nr = nccl_rows(t)
    ar = [e for e in nr if e["name"] == "ncclAllReduce"]
    seqs = [e["args"].get("Seq") for e in ar]
    names = {}
    for e in nr:
        names[e["name"]] = names.get(e["name"], 0) + 1
    # The driver's records: how many, and how many lie inside a runtime record's row of
    # their thread (the runtime's cudaEventRecord calling the exported cuEventRecord).
    rt = [e for e in t["traceEvents"] if e.get("cat") == "cuda_runtime"]
    drv = [e for e in rt if str(e["name"]).startswith("cuEventRecord")]
    outer = [e for e in rt if str(e["name"]).startswith("cudaEventRecord")]
    nested = sum(1 for d in drv if any(o["tid"] == d["tid"] and o["ts"] <= d["ts"] and
                                       o["ts"] + o["dur"] >= d["ts"] + d["dur"] for o in outer))
    md += ["## 1. `rocsync run` of the job\n",
           f"`rocsync run -o run.json --raw run.raw.jsonl -- python job.py {steps} 0 PORT` "
           f"(exit {r.returncode}).\n",
           f"- the job counted {counted} all_reduce calls",
           f"- NCCL rows by name: {json.dumps(names)}",
           f"- ncclAllReduce rows: {len(ar)}; their Seq: {seqs[:5]} … {seqs[-3:]}",
           f"- Seq are 1..{len(ar)} in order: {seqs == list(range(1, len(ar) + 1))}",
           f"- rows equal the job's count: {len(ar) == counted}",
           f"- driver records (cuEventRecord*) rows: {len(drv)}, inside a cudaEventRecord* "
           f"row of their thread: {nested}; runtime records: {len(outer)}",
           "- first ncclAllReduce row's args: " + (json.dumps(ar[0]["args"]) if ar else "none"),
           "- set-up rows: " + json.dumps([{"name": e["name"], **e["args"]} for e in nr
                                             if "Comm" in e["name"] and "Init" in e["name"]]),
           "\nrocsync's summary:\n", "```", *r.stderr.splitlines()[-14:], "```\n"]
    return ar


def step3(out, md, rocsync_lib):
    waits, records = {}, set()
    for line in open(out / "run.raw.jsonl"):
        c = json.loads(line)
        api, a = c.get("api", ""), c.get("args", {})
        if api.endswith("StreamWaitEvent"):
            waits.setdefault((a.get("stream"), a.get("event")), 0)
            waits[(a.get("stream"), a.get("event"))] += 1
        if "EventRecord" in api:
            records.add(a.get("event"))
    unseen = {k: v for k, v in waits.items() if k[1] not in records}
    names = ""
    if rocsync_lib:
        names = subprocess.run(["grep", "-c", "cuEventRecord", rocsync_lib],
                               capture_output=True, text=True).stdout.strip()
    md += ["## 3. NCCL's internal stream waits\n",
           f"- stream waits by (stream, event): {len(waits)} pairs, "
           f"{sum(waits.values())} waits",
           f"- pairs whose event rocsync never saw recorded: {len(unseen)} "
           f"({sum(unseen.values())} waits): {list(unseen.items())[:4]}",
           f"- libnccl ({rocsync_lib}) names `cuEventRecord` in {names or '?'} line(s) "
           "(the driver API, reached through cuGetProcAddress: not an import)\n"]


def step2(rocsync, python, out, stall_ms, md):
    log = out / "daemon.log"
    sock = out / "rocsync.sock"
    exe = os.path.realpath(python)
    d = subprocess.Popen([rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir",
                          str(out / "state"), "--socket", str(sock), "--include-exe", exe,
                          "--capture-on-stall", "50ms", "--lock", str(out / "lock")],
                         stderr=open(log, "w"))
    while "SIGTERM stops" not in log.read_text():
        time.sleep(0.05)
    p = subprocess.Popen([python, str(out / "job.py"), "20", str(stall_ms), "29512"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    said = [p.stdout.readline().strip(), p.stdout.readline().strip()]
    while f"tracking pid {p.pid}" not in log.read_text():
        time.sleep(0.05)
    time.sleep(0.5)
    metrics = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
    p.stdin.write("go\n")
    p.stdin.flush()
    said += [l.strip() for l in p.stdout]
    p.wait()
    time.sleep(2.5)
    after = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
    watched = ("rocsync_stalls_total", "rocsync_stall_traces", "rocsync_hang",
               "rocsync_sync_calls_total{api=\"cudaStreamSynchronize\"",
               "rocsync_sync_wait_seconds_count{api=\"cudaStreamSynchronize\"",
               "rocsync_collective_seq")
    after_lines = [l for l in after.splitlines() if l.startswith(watched)]
    status = subprocess.run([rocsync, "status", "--socket", str(sock)], capture_output=True,
                            text=True).stdout
    d.send_signal(signal.SIGTERM)
    d.wait(timeout=60)
    listed = [l.strip() for l in status.splitlines() if l.strip().endswith(".json")]
    seq_lines = [l for l in metrics.splitlines() if l.startswith("rocsync_collective_seq")]
    md += ["## 2. The daemon on a stalled collective\n",
           f"`rocsync daemon --capture-on-stall 50ms`; the job: 20 all_reduce, then "
           f"`torch.cuda._sleep` ~{stall_ms:g} ms, all_reduce, `.item()`.\n",
           "The job said: " + "; ".join(said) + "\n",
           "/metrics before the stall: `" + "`, `".join(seq_lines) + "`\n",
           "/metrics after it:\n", "```", *after_lines, "```\n",
           "The daemon's log:\n", "```", *log.read_text().splitlines()[:30], "```\n"]
    for path in listed:
        if "stall-" not in path and "hang-" not in path:
            continue
        shutil.copy(path, out / Path(path).name)
        t = rows(path)
        o = t["rocsync"]["parameters"].get("stall") or t["rocsync"]["parameters"].get("hang")
        md += [f"### {Path(path).name}\n",
               "- collective: " + json.dumps(o.get("collective")),
               "- behind: " + json.dumps(o.get("behind")),
               "- chain: " + json.dumps(o.get("waits_on")),
               "- its ncclAllReduce rows' Seq: " +
               str([e["args"].get("Seq") for e in nccl_rows(t) if e["name"] == "ncclAllReduce"]),
               ""]


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    stall_ms = float(sys.argv[4]) if len(sys.argv) > 4 else 600.0
    out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    import torch  # noqa: F401  (where its NCCL is)
    lib = next(iter(Path(os.path.dirname(torch.__file__)).parent.glob("nvidia/nccl/lib/libnccl.so*")), None)
    md = ["# NCCL collectives on a GPU\n",
          f"`python3 scripts/gpu-validate/collectives.py ROCSYNC OUT {steps} {stall_ms:g}`; "
          f"PyTorch {torch.__version__}, world size 1, NCCL {torch.cuda.nccl.version()}, "
          f"libnccl: {lib}\n"]
    step1(rocsync, python, out, steps, md)
    step3(out, md, str(lib) if lib else None)
    step2(rocsync, python, out, stall_ms, md)
    for f in out.glob("run*.json"):
        subprocess.run(["gzip", "-f", str(f)])
    (out / "run.raw.jsonl").unlink(missing_ok=True)
    (out / "collectives.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
