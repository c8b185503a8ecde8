//! The real ROCm runtimes (Debian's 6.4 and 7.2, `scripts/rocm-runtimes`), whose exports
//! are `endbr64` stubs that tail-jump through HIP's dispatch table: on their
//! `hipStreamSynchronize` (which returns `hipErrorNoDevice` at once without a GPU), the
//! empty pair's control, an empty entry probe alone, and rocsync's capture, each side by
//! side with the empty pair in one process (`bench_paired-SERIES`, built against the
//! series' own loader). Ratios to the empty pair: what the return trap costs on the real
//! stub (1 − entry-only), and what the capture adds over the trap.

use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::bin::{Probes, quartiles};
use crate::root;

/// Runs of `rocsync-bench side-by-side` per mode and runtime (each of 40 rounds).
const RUNS: usize = 3;
/// (label, bench mode, extra rocsync arguments, what it is)
const MODES: [(&str, &str, &[&str], &str); 3] = [
    (
        "empty pair",
        "empty",
        &[],
        "a second copy under an empty pair of its own: the method's control (1 where there is no difference)",
    ),
    (
        "empty entry probe",
        "empty-entry-only",
        &[],
        "an empty uprobe, no uretprobe: one trap",
    ),
    (
        "rocsync",
        "full",
        &[],
        "the capture (`rocsync run`), its default probes",
    ),
];

pub fn real_runtime() -> Result<(String, Value)> {
    let reals = rocsync_tests::real_runtimes();
    if reals.is_empty() {
        bail!("no real ROCm runtime is unpacked: run scripts/setup (scripts/rocm-runtimes)");
    }
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let mut md = String::from(
        "\nOn each real runtime's `hipStreamSynchronize(NULL)` (it returns 100, \
         `hipErrorNoDevice`, without a GPU), three copies of the runtime in one process \
         called in alternating batches of 10 000: one untraced, one under the empty pair, \
         one measured (`rocsync-bench side-by-side`). A round's ratio is (measured − \
         untraced) / (empty pair − untraced); the table gives the median of every round \
         of 3 runs (lower–upper quartile), beside each copy's ns per call (the runs' \
         medians' median).\n\n\
         | runtime | mode | what it is | untraced ns | empty pair ns | measured ns | side by \
         side |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    let mut out = Vec::new();
    for r in reals {
        let major = r.series.split('.').next().unwrap_or_default();
        let lib = r.lib.join(format!("libamdhip64.so.{major}"));
        let lib = lib
            .canonicalize()
            .with_context(|| lib.display().to_string())?;
        let lib = lib.display().to_string();
        let paired = rocsync_tests::bench_paired_for(&r.series);
        let paired = paired.display().to_string();
        let probes = Probes {
            lib: &lib,
            symbol: "hipStreamSynchronize",
            calls: "0",
            driver: &paired,
            rocsync: &rocsync,
        };
        let mut modes = Vec::new();
        for (label, mode, extra, what) in MODES {
            let (mut ratios, mut ns) = (Vec::new(), Vec::new());
            for _ in 0..RUNS {
                let (r, n) = probes.side_by_side_ns(&paired, mode, extra)?;
                ratios.extend(r);
                ns.push(n);
            }
            let [lo, mid, hi] = quartiles(&ratios);
            // The runs' medians' median, per copy.
            let of = |i: usize| quartiles(&ns.iter().map(|n| n[i]).collect::<Vec<_>>())[1];
            let (untraced, empty, measured) = (of(0), of(1), of(2));
            writeln!(
                md,
                "| ROCm {} | {label} | {what} | {untraced:.0} | {empty:.0} | {measured:.0} | \
                 **{mid:.3}** ({lo:.3}–{hi:.3}) |",
                r.series
            )?;
            modes.push(json!({
                "mode": label, "quartiles": [lo, mid, hi], "ratios": ratios,
                "ns_per_call": {"untraced": untraced, "empty_pair": empty, "measured": measured},
            }));
        }
        out.push(json!({ "series": r.series, "library": lib, "modes": modes }));
    }
    md.push_str(
        "\nThe entry probe alone over the pair is the part of the pair's cost the entry trap \
         makes; one minus it, the return's. A counted process pays the entry alone where \
         counting needs no return (records, stream waits: bench/one-trap.md).\n\n\
         Where the empty pair costs microseconds here, against under one on the simulated \
         runtime (bench/breakdown.md), the instruction probed is the likely reason: the real stubs begin \
         `endbr64; sub $0x18,%rsp`, and the kernel emulates neither (it emulates `push`, \
         `nop` and branches, as the simulated runtime's `push %rbp` entry), so every hit \
         is single-stepped out of line: a second trap, which in this virtual machine \
         (firecracker) costs several microseconds. The entry trap is then nearly all of \
         the pair (the return, through the kernel's uretprobe trampoline, the rest).\n",
    );
    md.push_str(&super::bin::losses_md());
    Ok((md, json!({ "real_runtimes": out })))
}
