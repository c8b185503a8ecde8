"""Validates the daemon's hang detection on a GPU (as root): a PyTorch loop whose side
stream sleeps ~5 s (`torch.cuda._sleep`) before the event the main stream waits on, then
synchronizes, under a daemon with a 50 ms stall threshold and a 1 s hang threshold.
While the call is blocked, /metrics is read every 250 ms: the call is reported in flight
(`rocsync_calls_in_flight_seconds`) and a hang trace starts before it returns; the trace
is written when it returns, and says so.

usage: python hang.py ROCSYNC OUT_DIR [SECONDS]
Writes OUT_DIR/hang.md.
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

METRICS = "127.0.0.1:9467"
LOOP = r'''
import sys, time, torch
ms = float(sys.argv[1])
torch.cuda.init()
side = torch.cuda.Stream()
torch.cuda._sleep(1_000_000)  # the first launch pays for loading the kernel
torch.cuda.synchronize()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
torch.cuda._sleep(10_000_000)
b.record()
b.synchronize()
cycles = int(10_000_000 * ms / a.elapsed_time(b))
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
e = torch.cuda.Event()
with torch.cuda.stream(side):
    torch.cuda._sleep(cycles)
e.record(side)
torch.cuda.current_stream().wait_event(e)
t = time.monotonic()
print("blocking", flush=True)
torch.cuda.current_stream().synchronize()
print("synchronized %.1f ms" % ((time.monotonic() - t) * 1e3), flush=True)
time.sleep(1)
'''


def metric(body, name, api=None):
    label = rf'\{{api="{api}"\}}' if api else r"(?:\{[^}]*\})?"
    return sum(float(m.group(1)) for m in re.finditer(rf"^{name}{label} (\S+)$", body, re.M))


def scrape():
    return urllib.request.urlopen(f"http://{METRICS}/metrics").read().decode()


def main():
    rocsync, out = os.path.abspath(sys.argv[1]), Path(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    out.mkdir(parents=True, exist_ok=True)
    python, exe = sys.executable, os.path.realpath(sys.executable)
    log = out / "daemon.log"
    sock = out / "rocsync.sock"
    d = subprocess.Popen([rocsync, "daemon", "--metrics-addr", METRICS, "--state-dir",
                          str(out / "state"), "--socket", str(sock), "--include-exe", exe,
                          "--flight-recorder", "10s", "--capture-on-stall", "50ms",
                          "--hang-after", "1s", "--lock", str(out / "lock")],
                         stderr=open(log, "w"))
    while "SIGTERM stops" not in log.read_text():
        time.sleep(0.05)
    p = subprocess.Popen([python, "-c", LOOP, str(seconds * 1000)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    while f"tracking pid {p.pid}" not in log.read_text():
        time.sleep(0.05)
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "blocking"
    start = time.monotonic()
    samples = []
    # Sampled while the loop is blocked (it prints when the call returns).
    while p.poll() is None and time.monotonic() - start < seconds + 10:
        body = scrape()
        samples.append((time.monotonic() - start,
                        metric(body, "rocsync_calls_in_flight_seconds", "cudaStreamSynchronize"),
                        metric(body, "rocsync_hang_traces_total")))
        time.sleep(0.25)
        if samples[-1][1] == 0 and samples[-1][0] > 1.5 and len(samples) > 8:
            break  # returned
    said = [l.strip() for l in p.stdout]
    p.wait()
    time.sleep(2)
    status = subprocess.run([rocsync, "status", "--socket", str(sock)], capture_output=True,
                            text=True).stdout
    body = scrape()
    d.send_signal(signal.SIGTERM)
    d.wait(timeout=60)
    listed = [l.strip() for l in status.splitlines() if "hang-" in l and l.strip().endswith(".json")]
    first_in_flight = next((s for s in samples if s[1] > 0), None)
    first_trace = next((s for s in samples if s[2] > 0), None)
    md = ["# Hang detection on a GPU\n",
          f"`python3 scripts/gpu-validate/hang.py ROCSYNC OUT {seconds:g}`: the side stream "
          f"sleeps ~{seconds:g} s before the event the main stream waits on, then the main "
          "stream synchronizes; daemon: `--flight-recorder 10s --capture-on-stall 50ms "
          "--hang-after 1s`. /metrics read every 250 ms while the call is blocked.\n",
          "The loop said: " + "; ".join(said) + "\n",
          f"- first seen in flight: {first_in_flight[0]:.2f} s after the call began "
          f"(in flight {first_in_flight[1]:.2f} s)" if first_in_flight else "- never seen in flight",
          f"- hang trace started (rocsync_hang_traces_total > 0): {first_trace[0]:.2f} s after"
          if first_trace else "- no hang trace started while blocked",
          f"- highest rocsync_calls_in_flight_seconds seen: {max(s[1] for s in samples):.2f}",
          f"- rocsync_hang_traces_total at the end: {metric(body, 'rocsync_hang_traces_total'):.0f}",
          f"- listed by `rocsync status`: {listed}\n",
          "| t (s) | in flight (s) | hang traces |", "| ---: | ---: | ---: |"]
    md += [f"| {t:.2f} | {f:.2f} | {h:.0f} |" for t, f, h in samples[::4]]
    for path in listed:
        t = json.loads(Path(path).read_text())
        md.append(f"\n### {Path(path).name}\n\n`hang`: " +
                  json.dumps(t["rocsync"]["parameters"].get("hang")) + "\n")
        syncs = [e for e in t["traceEvents"] if e.get("ph") == "X"
                 and e.get("name") == "cudaStreamSynchronize"]
        md.append("Its cudaStreamSynchronize rows (dur µs): " +
                  ", ".join(f"{e.get('dur', 0):.0f}" for e in syncs))
    (out / "hang.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
