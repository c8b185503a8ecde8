#!/usr/bin/env bash
# A 2-rank DDP job under torchrun, traced whole (as root, on a machine with 2 NVIDIA GPUs):
#   scripts/gpu-validate/ddp.sh ROCSYNC_BINARY OUT_DIR [STEPS]
# Runs the job untraced, under `rocsync run` (one trace per rank, wall time), and under
# rocsync with torch.profiler in each rank at once; then ddp_report.py compares each rank's
# trace with its CUPTI trace and writes OUT_DIR/ddp-validation.md.
set -euo pipefail
rocsync=$(realpath "$1"); out=$(realpath -m "$2"); steps=${3:-60}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
rm -rf "$out/traces" "$out/cupti" "$out/scratch"
mkdir -p "$out/traces" "$out/cupti" "$out/scratch"
job=("$py" -m torch.distributed.run --standalone --nproc_per_node 2 "$here/ddp.py" "$steps")
"${job[@]}" > "$out/untraced.jsonl" 2> "$out/untraced.log"
"$rocsync" run --no-status --backend cuda -o "$out/scratch/ddp.json" -- "${job[@]}" \
  > "$out/rocsync.jsonl" 2> "$out/rocsync.log"
"$rocsync" run --no-status --backend cuda -o "$out/traces/ddp.json.gz" -- "${job[@]}" \
  --profile-dir "$out/cupti" > "$out/both.jsonl" 2> "$out/both.log"
"$py" "$here/ddp_report.py" "$out" > "$out/ddp-validation.md"
