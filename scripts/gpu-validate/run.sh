#!/usr/bin/env bash
# Validates rocsync against PyTorch + CUPTI on a machine with an NVIDIA GPU (as root).
#   scripts/gpu-validate/run.sh ROCSYNC_BINARY OUT_DIR [ITERATIONS] [ROUNDS] [TRAIN_STEPS]
# For each workload — workload.py (two threads, cross-stream events) and train.py (a
# transformer training loop with a copy stream) — runs, interleaved for ROUNDS rounds:
# untraced, under `rocsync run` (default probes), under `rocsync run --probe
# cudaGetDevice` (every function), and under torch.profiler; then once under rocsync and
# torch.profiler at the same time, and compares the traces.
# Writes OUT_DIR/gpu-validation.md (and the traces it compared).
set -euo pipefail
rocsync=$(realpath "$1"); out=$2; iters=${3:-400}; rounds=${4:-3}; train_steps=${5:-150}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"; : > "$out/timings.jsonl"; uname -r > "$out/kernel.txt"
record() { # workload mode json
  "$py" -c 'import json,sys; r=json.loads(sys.argv[3]); r["workload"]=sys.argv[1]; r["mode"]=sys.argv[2]; print(json.dumps(r))' "$1" "$2" "$3" >> "$out/timings.jsonl"
}
measure() { # name script n round
  local name=$1 script=$2 n=$3 r=$4
  record "$name" untraced "$("$py" "$here/$script" "$n" | tail -1)"
  record "$name" rocsync "$("$rocsync" run --no-status --backend cuda -o "$out/scratch.json" -- "$py" "$here/$script" "$n" 2>"$out/$name.rocsync.$r.log" | tail -1)"
  record "$name" "rocsync --probe cudaGetDevice" "$("$rocsync" run --no-status --backend cuda --probe cudaGetDevice -o "$out/scratch.json" -- "$py" "$here/$script" "$n" 2>/dev/null | tail -1)"
  record "$name" torch.profiler "$("$py" "$here/$script" "$n" --profile "$out/$name.cupti.$r.json" | tail -1)"
  rm -f "$out/$name.cupti.$r.json" "$out/scratch.json"
}
for r in $(seq "$rounds"); do
  measure workload workload.py "$iters" "$r"
  measure train train.py "$train_steps" "$r"
done
for w in workload:workload.py:$iters train:train.py:$train_steps; do
  IFS=: read -r name script n <<< "$w"
  "$rocsync" run --no-status --backend cuda -o "$out/$name.both.rocsync.json" --raw "$out/$name.both.raw.jsonl" -- \
    "$py" "$here/$script" "$n" --profile "$out/$name.both.cupti.json" 2>"$out/$name.both.log" | tail -1
done
"$py" "$here/compare.py" "$out" "$out/gpu-validation.md"
