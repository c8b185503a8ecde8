"""The stack reader on a real PyTorch hang (issue 62): a process whose main thread blocks
in a CUDA event's synchronize (a blocking-sync event recorded after a 60 s GPU sleep)
inside a function of its own, read with `rocsync read-stacks` as the daemon's bounded
child runs it. Writes OUT_DIR/stacks-torch.json (the stacks) and prints the Python
frames, the native frames with their objects, and the time of each read.

usage: python stacks.py ROCSYNC OUT_DIR
"""
import json
import subprocess
import sys
import time
from pathlib import Path

HANG = r'''
import torch

def step():
    e = torch.cuda.Event(blocking=True)  # synchronize sleeps in the driver, not spinning
    torch.cuda._sleep(60 * 2_000_000_000)
    e.record()
    print("ready", flush=True)
    e.synchronize()

torch.cuda.init()
torch.cuda._sleep(1000)
torch.cuda.synchronize()
step()
'''


def main():
    rocsync, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    script = out / "hang_torch.py"
    script.write_text(HANG)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        # Until the thread sits in the driver's wait.
        for _ in range(200):
            if not open(f"/proc/{p.pid}/syscall").read().startswith("running"):
                break
            time.sleep(0.05)
        walls = []
        for _ in range(5):
            t = time.perf_counter()
            run = subprocess.run([rocsync, "read-stacks", "--pid", str(p.pid)],
                                 capture_output=True, check=True)
            walls.append((time.perf_counter() - t) * 1e3)
        line = json.loads(run.stdout.decode().strip().splitlines()[-1])
        stacks = line["stacks"]
        (out / "stacks-torch.json").write_text(json.dumps(stacks, indent=1))
        print(f"phase {line['phase']}, python {stacks['python_version']}, "
              f"{len(stacks['threads'])} threads, cut {stacks['cut']}")
        print("read wall ms:", " ".join(f"{w:.0f}" for w in walls))
        blocked = stacks["threads"][0]
        print("python:", [(f["function"], Path(f["file"]).name, f["line"])
                          for f in blocked["python_stack"] or []], blocked["python_error"])
        print("native_error:", blocked["native_error"])
        for f in blocked["native_stack"] or []:
            print(f"  {f['symbol']}  [{Path(f['object'] or '?').name}]"
                  f"{'  scanned' if f.get('scanned') else ''}")
        for t in stacks["threads"][1:]:
            print("thread", t["tid"], t["name"], [f["function"] for f in t["python_stack"] or []])
    finally:
        p.kill()


if __name__ == "__main__":
    main()
