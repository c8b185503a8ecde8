#!/usr/bin/env bash
# Validates rocsync against PyTorch + CUPTI on a machine with an NVIDIA GPU (as root).
#   scripts/gpu-validate/run.sh ROCSYNC_BINARY OUT_DIR [ITERATIONS] [ROUNDS]
# Runs, interleaved for ROUNDS rounds: the workload untraced, under `rocsync run`, and
# under torch.profiler; then once under both at the same time, and compares the traces.
# Writes OUT_DIR/gpu-validation.md (and the traces it compared).
set -euo pipefail
rocsync=$(realpath "$1"); out=$2; iters=${3:-400}; rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"; : > "$out/timings.jsonl"; uname -r > "$out/kernel.txt"
record() { # mode json
  "$py" -c 'import json,sys; r=json.loads(sys.argv[2]); r["mode"]=sys.argv[1]; print(json.dumps(r))' "$1" "$2" >> "$out/timings.jsonl"
}
for r in $(seq "$rounds"); do
  record untraced "$("$py" "$here/workload.py" "$iters" | tail -1)"
  record rocsync "$("$rocsync" run --backend cuda -o "$out/rocsync.$r.json" -- "$py" "$here/workload.py" "$iters" 2>"$out/rocsync.$r.log" | tail -1)"
  record "rocsync --skip cudaGetDevice" "$("$rocsync" run --backend cuda --skip cudaGetDevice -o "$out/rocsync-skip.$r.json" -- "$py" "$here/workload.py" "$iters" 2>"$out/rocsync-skip.$r.log" | tail -1)"
  record torch.profiler "$("$py" "$here/workload.py" "$iters" --profile "$out/cupti.$r.json" | tail -1)"
done
"$rocsync" run --backend cuda -o "$out/both.rocsync.json" --raw "$out/both.raw.jsonl" -- \
  "$py" "$here/workload.py" "$iters" --profile "$out/both.cupti.json" 2>"$out/both.log" | tail -1
cat "$out/both.log" >&2
"$py" "$here/compare.py" "$out" "$out/gpu-validation.md"
