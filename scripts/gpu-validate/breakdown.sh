#!/bin/bash
# The per-call cost breakdown of `cargo xtask bench-breakdown`, on a machine without cargo
# (the GPU machine): the same rocsync-bench modes, interleaved, as ratios to the empty pair.
#
#   breakdown.sh DIR ROUNDS OUT
#
# DIR holds rocsync, rocsync-bench, bench_calls and the simulated libamdhip64.so, its CET
# build as cet/libamdhip64.so (rocsync knows a runtime by its file name); OUT receives
# breakdown.jsonl, programs.jsonl, machine.txt and breakdown.md. Each round also runs every
# traced mode once more with `--program-time` (the probe programs' own ns per run, from
# the kernel's BPF statistics, which slow those runs: their wall time is not used).
set -euo pipefail
dir=$1 rounds=$2 out=$3
mkdir -p "$out"
py=python3
[ -x /opt/torch/.venv/bin/python ] && py=/opt/torch/.venv/bin/python

{
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
    echo "kernel: $(uname -r)"
    for v in spec_rstack_overflow retbleed spectre_v2; do
        f=/sys/devices/system/cpu/vulnerabilities/$v
        [ -r "$f" ] && echo "$v: $(cat "$f")"
    done
} >"$out/machine.txt"

# label|lib|mode|extra rocsync argument
modes=(
    "untraced|libamdhip64.so|untraced|"
    "empty pair|libamdhip64.so|empty|"
    "lookup pair|libamdhip64.so|lookup|"
    "timestamp pair|libamdhip64.so|clock|"
    "thread-id pair|libamdhip64.so|who|"
    "ring pair|libamdhip64.so|ring|"
    "two-record floor|libamdhip64.so|records|"
    "floor without the ring|libamdhip64.so|slots|"
    "rocsync --no-follow|libamdhip64.so|full|--no-follow"
    "rocsync|libamdhip64.so|full|"
    "CET untraced|cet/libamdhip64.so|untraced|"
    "CET empty pair|cet/libamdhip64.so|empty|"
    "CET rocsync|cet/libamdhip64.so|full|"
)
: >"$out/breakdown.jsonl"; : >"$out/programs.jsonl"
for round in $(seq "$rounds"); do
    echo "breakdown: round $round/$rounds" >&2
    for m in "${modes[@]}"; do
        IFS='|' read -r label lib mode extra <<<"$m"
        args=(probes --mode "$mode" --lib "$dir/$lib" --symbol hipStreamSynchronize
            --calls 200000 --driver "$dir/bench_calls" --rocsync "$dir/rocsync")
        [ -n "$extra" ] && args+=(--extra "$extra")
        line=$("$dir/rocsync-bench" "${args[@]}" 2>>"$out/stderr.txt" | grep '^{' | tail -1)
        echo "{\"label\": \"$label\", \"result\": $line}" >>"$out/breakdown.jsonl"
        [ "$mode" = untraced ] && continue
        line=$("$dir/rocsync-bench" "${args[@]}" --program-time 2>>"$out/stderr.txt" | grep '^{' | tail -1)
        echo "{\"label\": \"$label\", \"result\": $line}" >>"$out/programs.jsonl"
    done
done

"$py" - "$out" <<'EOF'
import collections, json, statistics, sys
out = sys.argv[1]
ns = collections.OrderedDict()
for l in open(f"{out}/breakdown.jsonl"):
    r = json.loads(l)
    ns.setdefault(r["label"], []).append(r["result"]["ns_per_call"])
med = {k: statistics.median(v) for k, v in ns.items()}
programs = collections.defaultdict(list)
for l in open(f"{out}/programs.jsonl"):
    r = json.loads(l)
    programs[r["label"]].append(sum(r["result"]["programs"]["ns_per_run"].values()))
prog = {k: statistics.median(v) for k, v in programs.items()}
lines = [
    "| mode | median ns | ratio to the trap | runs | programs, ns per call | over the empty pair's |",
    "| --- | ---: | ---: | --- | ---: | ---: |",
]
for k, v in ns.items():
    cet = k.startswith("CET ")
    base, trap = (med["CET untraced"], med["CET empty pair"]) if cet else (med["untraced"], med["empty pair"])
    ratio = "" if k.endswith("untraced") else f"{(med[k] - base) / (trap - base):.2f}"
    runs = " ".join(f"{x:.0f}" for x in sorted(v))
    empty = prog.get("CET empty pair" if cet else "empty pair")
    p = f"{prog[k]:.0f}" if k in prog else ""
    over = f"{prog[k] - empty:+.0f}" if k in prog and empty is not None else ""
    lines.append(f"| {k} | {med[k]:.0f} | {ratio} | {runs} | {p} | {over} |")
head = [
    "# rocsync: where a call's cost goes, on this machine",
    "",
    f"`scripts/gpu-validate/breakdown.sh DIR {len(next(iter(ns.values())))} OUT`: the modes of `cargo xtask bench-breakdown`,",
    "interleaved; ratio = (mode - untraced) / (empty pair - untraced), from medians. The last two",
    "columns: the probe programs' own ns per call (entry + exit, kernel BPF statistics, runs of",
    "their own), median, and that over the empty pair's.",
    "",
    "```",
    open(f"{out}/machine.txt").read().strip(),
    "```",
    "",
]
open(f"{out}/breakdown.md", "w").write("\n".join(head + lines) + "\n")
print("\n".join(lines))
EOF
