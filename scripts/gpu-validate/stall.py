"""Validates the daemon's stall capture on a GPU (as root): a PyTorch loop whose side
stream sleeps ~200 ms (`torch.cuda._sleep`) before the event the main stream waits on,
then synchronizes, under a daemon with the flight recorder on and a 50 ms threshold.

usage: python stall.py ROCSYNC OUT_DIR [ITERATIONS]
Writes OUT_DIR/stall.md: the stalls the daemon counted against the loop's, the stall
trace listed by `rocsync status`, its stall object, and its rows around the slow call
(the wait and the record it resolves to).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

METRICS = "127.0.0.1:9466"
LOOP = r'''
import sys, time, torch
n = int(sys.argv[1])
torch.cuda.init()
side = torch.cuda.Stream()
# ~200 ms of GPU time on the side stream: this GPU's cycles per ms, measured.
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
torch.cuda._sleep(10_000_000)  # ~5 ms: under the threshold, not a stall itself
b.record()
b.synchronize()
cycles = int(10_000_000 * 200 / a.elapsed_time(b))
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    e = torch.cuda.Event()
    with torch.cuda.stream(side):
        torch.cuda._sleep(cycles)
    e.record(side)
    torch.cuda.current_stream().wait_event(e)
    t = time.monotonic()
    torch.cuda.current_stream().synchronize()
    print("synchronized %.1f ms" % ((time.monotonic() - t) * 1e3), flush=True)
    time.sleep(1.5)  # past the daemon's --stall-interval: each stall gets its trace
'''


def metric(body, name):
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M))


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    out.mkdir(parents=True, exist_ok=True)
    python, exe = sys.executable, os.path.realpath(sys.executable)
    log = out / "daemon.log"
    sock = out / "rocsync.sock"
    d = subprocess.Popen([rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir",
                          str(out / "state"), "--socket", str(sock), "--include-exe", exe,
                          "--flight-recorder", "10s", "--capture-on-stall", "50ms",
                          "--stall-window-after", "1s", "--stall-interval", "1s",
                          "--lock", str(out / "lock")],
                         stderr=open(log, "w"))
    while "SIGTERM stops" not in log.read_text():
        time.sleep(0.05)
    p = subprocess.Popen([python, "-c", LOOP, str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    while f"tracking pid {p.pid}" not in log.read_text():
        time.sleep(0.05)
    p.stdin.write("go\n")
    p.stdin.flush()
    synced = [l.strip() for l in p.stdout]
    p.wait()
    time.sleep(3)  # the stall trace's window after, and its writing
    body = urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()
    status = subprocess.run([rocsync, "status", "--socket", str(sock)], capture_output=True,
                            text=True).stdout
    d.send_signal(signal.SIGTERM)
    d.wait(timeout=60)
    listed = [l.strip() for l in status.splitlines() if l.strip().endswith(".json")
              and "stall-" in l]
    md = ["# Stall capture on a GPU\n",
          f"`python scripts/gpu-validate/stall.py ROCSYNC OUT {n}`: the loop's side stream "
          "sleeps ~200 ms before the event the main stream waits on, then the main stream "
          "synchronizes; daemon: `--flight-recorder 10s --capture-on-stall 50ms "
          "--stall-window-after 1s --stall-interval 1s`.\n",
          "The loop said: " + "; ".join(synced) + "\n",
          f"- rocsync_stalls_total: {metric(body, 'rocsync_stalls_total'):.0f} "
          f"(the loop made {n} synchronizations over 50 ms)",
          f"- rocsync_stall_traces_total: {metric(body, 'rocsync_stall_traces_total'):.0f}; "
          f"skipped: {metric(body, 'rocsync_stall_traces_skipped_total'):.0f}",
          f"- listed by `rocsync status`: {listed}\n"]
    for path in listed:
        t = json.loads(Path(path).read_text())
        stall = t["rocsync"]["parameters"]["stall"]
        md.append(f"### {Path(path).name}\n\n`stall`: " + json.dumps(stall) + "\n")
        keep = ("cudaEventRecord", "cudaEventRecordWithFlags", "cudaStreamWaitEvent",
                "cudaStreamSynchronize", "cudaEventSynchronize")
        rows = [e for e in t["traceEvents"] if e.get("ph") == "X"
                and (e.get("name") in keep or e.get("cat") == "cuda_sync")]
        md.append("Its record, wait and synchronisation rows (the last 8):\n")
        md.append("| name | cat | dur µs | correlation | wait_on_cuda_event_record_corr_id |")
        md.append("| --- | --- | ---: | ---: | ---: |")
        for e in rows[-8:]:
            a = e.get("args", {})
            md.append(f"| {e['name']} | {e['cat']} | {e.get('dur', 0):.0f} | "
                      f"{a.get('correlation', '')} | "
                      f"{a.get('wait_on_cuda_event_record_corr_id', '')} |")
        md.append("")
    (out / "stall.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
