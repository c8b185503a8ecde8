//! Where a captured call's cost goes: the trap, then probe pairs that each do one part of
//! a capture's work (the target-table lookup, the clock, the thread id, the two ring
//! records, the least any two-record capture writes, the same without the ring), then the
//! capture pid-scoped and file-wide. All as ratios to
//! the empty pair, measured side by side.

use std::fmt::Write as _;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::bin::{Probes, quartiles};
use crate::root;

/// (label, bench mode, extra rocsync arguments, what it adds)
const MODES: [(&str, &str, &[&str], &str); 14] = [
    ("untraced", "untraced", &[], ""),
    ("empty pair", "empty", &[], "the trap pair alone"),
    (
        "empty pair, multi-uprobe links",
        "empty-multi",
        &[],
        "the trap pair attached by `BPF_LINK_CREATE` (uprobe_multi): no perf-event layer per hit",
    ),
    (
        "lookup pair",
        "lookup",
        &[],
        "what file-wide probes ask of the target table (its cache), at entry and exit",
    ),
    (
        "timestamp pair",
        "clock",
        &[],
        "one clock read at entry and at exit (`bpf_ktime_get_ns`)",
    ),
    (
        "thread-id pair",
        "who",
        &[],
        "one thread-id read at entry and at exit: a trivial helper call each",
    ),
    (
        "dependency-state pair",
        "dependency",
        &[],
        "the daemon's dependency state as a stream wait updates it at entry: its last wait rewritten in place, its event's record looked up",
    ),
    (
        "collective pair",
        "collective",
        &[],
        "an ncclAllReduce's bookkeeping at entry: its communicator's number, its stream's last collective",
    ),
    (
        "ring pair",
        "ring",
        &[],
        "one ring record reserved, written and submitted at entry and exit",
    ),
    (
        "two-record floor",
        "records",
        &[],
        "the ring records with thread, timestamp and return value: the least two records per call can be",
    ),
    (
        "floor without the ring",
        "slots",
        &[],
        "the same records in per-CPU slot arrays the reader maps: no helper call for the transport",
    ),
    (
        "rocsync --no-follow",
        "full",
        &["--no-follow"],
        "the capture, pid-scoped probes (no lookup)",
    ),
    (
        "rocsync --classic-uprobes",
        "full",
        &["--classic-uprobes"],
        "the capture, its call probes as classic perf-event uprobes",
    ),
    (
        "rocsync",
        "full",
        &[],
        "the capture, default file-wide probes through multi-uprobe links",
    ),
];

const CALLS: &str = "200000";

/// `rounds` rounds. The machine drifts by more than the parts differ, so each mode is
/// measured between two runs of the empty pair, and its ratio in a round is to their mean:
/// (mode − untraced) / (empty − untraced). Reported: the median of the rounds' ratios.
pub(super) fn breakdown(rounds: usize) -> Result<(String, Value)> {
    let driver = rocsync_tests::bench_calls().display().to_string();
    let paired = rocsync_tests::bench_paired().display().to_string();
    let lib = rocsync_tests::sim_hip().display().to_string();
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let probes = Probes {
        lib: &lib,
        symbol: "hipStreamSynchronize",
        calls: CALLS,
        driver: &driver,
        rocsync: &rocsync,
    };
    let measure = |i: usize| -> Result<f64> {
        let (_, mode, extra, _) = MODES[i];
        probes.run(mode, extra)?["ns_per_call"]
            .as_f64()
            .context("ns_per_call")
    };
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for round in 0..rounds {
        eprintln!("xtask: cost breakdown round {}/{rounds}", round + 1);
        let untraced = measure(0)?;
        ns[0].push(untraced);
        let mut before = measure(1)?;
        ns[1].push(before);
        for i in 2..MODES.len() {
            let m = measure(i)?;
            let after = measure(1)?;
            ns[i].push(m);
            ns[1].push(after);
            ratios[i].push((m - untraced) / ((before + after) / 2.0 - untraced));
            before = after;
        }
    }
    // Side by side with the empty pair in one process: every run's rounds, pooled.
    let mut side: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for round in 0..rounds {
        eprintln!("xtask: side by side round {}/{rounds}", round + 1);
        // The empty pair too: a second copy under its own pair, the method's control.
        for (i, (_, mode, extra, _)) in MODES.iter().enumerate().skip(1) {
            side[i].extend(probes.side_by_side(&paired, mode, extra)?);
        }
    }
    // The programs' own time, from the kernel's statistics: runs of their own (the
    // statistics slow every run), interleaved the same way.
    let mut programs: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for round in 0..rounds {
        eprintln!("xtask: program time round {}/{rounds}", round + 1);
        for (i, (_, mode, extra, _)) in MODES.iter().enumerate().skip(1) {
            let v = probes.program_time(mode, extra)?;
            let per_run = v["programs"]["ns_per_run"]
                .as_object()
                .filter(|o| !o.is_empty())
                .with_context(|| format!("{mode}: no program ran"))?;
            programs[i].push(per_run.values().filter_map(Value::as_f64).sum());
        }
    }
    let med = |xs: &[f64]| {
        let mut v = xs.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut md = String::new();
    let _ = writeln!(md, "\n## Where a captured call's cost goes\n");
    let _ = writeln!(
        md,
        "`hipStreamSynchronize(NULL)` of the simulated runtime (push %rbp entry), {CALLS} calls per run, {rounds} rounds. Each pair below does one part of a capture's work and nothing else. Each mode runs between two runs of the empty pair; its ratio in a round is (mode − untraced) / (mean of those two − untraced). The table gives the median of the rounds' ratios and their range.\n"
    );
    let _ = writeln!(
        md,
        "The last two columns time the programs alone, from the kernel's BPF statistics (`kernel.bpf_stats_enabled`, in runs of their own: the statistics add two clock reads per run): ns per call of the entry and exit programs together, median of the rounds, and that over the empty pair's — the programs' part of the ratio, free of the trap's noise.\n"
    );
    let _ = writeln!(
        md,
        "\"Side by side\" measures the same ratio with the mode, the empty pair and an untraced copy of the library in one process, in alternating rounds of 10 000 calls (`rocsync-bench side-by-side`): the drift between separate runs cancels. Median of all its rounds (lower–upper quartile); on the empty pair's row, a second copy under an empty pair of its own: the method's control, 1 if it measures no difference where there is none.\n"
    );
    let _ = writeln!(
        md,
        "| mode | what it adds | median ns | ratio to the trap | rounds' ratios | side by side | programs, ns per call | over the empty pair's |"
    );
    let _ = writeln!(md, "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |");
    let empty_programs = med(&programs[1]);
    for (i, (label, _, _, what)) in MODES.iter().enumerate() {
        let mut r = ratios[i].clone();
        r.sort_by(|a, b| a.total_cmp(b));
        let (ratio, range) = match i {
            0 => (String::new(), String::new()),
            1 => ("1.00".into(), String::new()),
            _ => (
                format!("{:.2}", med(&r)),
                r.iter()
                    .map(|x| format!("{x:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        };
        let side_by_side = match quartiles(&side[i]) {
            _ if i < 1 => String::new(),
            [q1, q2, q3] => format!("**{q2:.3}** ({q1:.3}–{q3:.3})"),
        };
        let (program, over) = match i {
            0 => (String::new(), String::new()),
            _ => (
                format!("{:.0}", med(&programs[i])),
                format!("{:+.0}", med(&programs[i]) - empty_programs),
            ),
        };
        let _ = writeln!(
            md,
            "| {label} | {what} | {:.0} | {ratio} | {range} | {side_by_side} | {program} | {over} |",
            med(&ns[i])
        );
    }
    // Like for like: the capture over the floor its call probes now stand on.
    let at = |label: &str| MODES.iter().position(|m| m.0 == label);
    if let (Some(f), Some(c)) = (at("empty pair, multi-uprobe links"), at("rocsync")) {
        let (floor, capture) = (quartiles(&side[f])[1], quartiles(&side[c])[1]);
        let _ = writeln!(
            md,
            "\nThe capture's call probes attach through multi-uprobe links, whose empty pair costs {floor:.3} of the classic one side by side: over that floor, like for like, the capture costs **{:.3}×** (quotient of the side-by-side medians).",
            capture / floor
        );
    }
    let json = json!({
        "modes": MODES.iter().map(|m| m.0).collect::<Vec<_>>(),
        "ns_per_call": ns,
        "ratios": ratios,
        "program_ns_per_call": programs,
        "side_by_side_ratios": side,
        // null for untraced (no ratio), 1 for the trap itself.
        "ratio": (0..MODES.len())
            .map(|i| if i == 1 { 1.0 } else { med(&ratios[i]) })
            .collect::<Vec<_>>(),
    });
    // What its side-by-side runs lost, beside the figures (they stand: every call trapped).
    let md = md + &super::bin::losses_md();
    Ok((md, json))
}
