//! Where a captured call's cost goes: the trap, then probe pairs that each do one part of
//! a capture's work (the target-table lookup, the two ring records, the least any
//! two-record capture writes), then the capture pid-scoped and file-wide. All as ratios to
//! the empty pair, measured side by side.

use std::fmt::Write as _;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::{bench::bench_bin, root};

/// (label, bench mode, extra rocsync arguments, what it adds)
const MODES: [(&str, &str, &[&str], &str); 7] = [
    ("untraced", "untraced", &[], ""),
    ("empty pair", "empty", &[], "the trap pair alone"),
    (
        "lookup pair",
        "lookup",
        &[],
        "the target-table lookup of file-wide probes, at entry and exit",
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
        "rocsync --no-follow",
        "full",
        &["--no-follow"],
        "the capture, pid-scoped probes (no lookup)",
    ),
    (
        "rocsync",
        "full",
        &[],
        "the capture, default file-wide probes",
    ),
];

const CALLS: &str = "200000";

/// Every mode once per round, `rounds` rounds; medians as ratios to the empty pair.
pub fn breakdown(rounds: usize) -> Result<(String, Value)> {
    let driver = rocsync_tests::bench_calls().display().to_string();
    let lib = rocsync_tests::sim_hip().display().to_string();
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for round in 0..rounds {
        eprintln!("xtask: cost breakdown round {}/{rounds}", round + 1);
        for (i, (_, mode, extra, _)) in MODES.iter().enumerate() {
            let mut args = vec![
                "probes",
                "--mode",
                mode,
                "--lib",
                &lib,
                "--symbol",
                "hipStreamSynchronize",
                "--calls",
                CALLS,
                "--driver",
                &driver,
                "--rocsync",
                &rocsync,
            ];
            for e in *extra {
                args.extend(["--extra", e]);
            }
            let v = bench_bin(&args)?;
            ns[i].push(v["ns_per_call"].as_f64().context("ns_per_call")?);
        }
    }
    let med: Vec<f64> = ns
        .iter()
        .map(|xs| {
            let mut v = xs.clone();
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        })
        .collect();
    let ratio = |m: f64| (m - med[0]) / (med[1] - med[0]);
    let mut md = String::new();
    let _ = writeln!(md, "\n## Where a captured call's cost goes\n");
    let _ = writeln!(
        md,
        "`hipStreamSynchronize(NULL)` of the simulated runtime (push %rbp entry), {CALLS} calls per run, {rounds} interleaved rounds. Each pair below does one part of a capture's work and nothing else; the ratio is (mode − untraced) / (empty pair − untraced), from medians.\n"
    );
    let _ = writeln!(
        md,
        "| mode | what it adds | median ns | ratio to the trap | runs |"
    );
    let _ = writeln!(md, "| --- | --- | ---: | ---: | --- |");
    for (i, (label, _, _, what)) in MODES.iter().enumerate() {
        let mut runs = ns[i].clone();
        runs.sort_by(|a, b| a.total_cmp(b));
        let runs: Vec<String> = runs.iter().map(|x| format!("{x:.0}")).collect();
        let r = if i == 0 {
            String::new()
        } else {
            format!("{:.2}", ratio(med[i]))
        };
        let _ = writeln!(
            md,
            "| {label} | {what} | {:.0} | {r} | {} |",
            med[i],
            runs.join(" ")
        );
    }
    let json = json!({
        "modes": MODES.iter().map(|m| m.0).collect::<Vec<_>>(),
        "ns_per_call": ns,
        "ratio": med.iter().map(|&m| ratio(m)).collect::<Vec<_>>(),
    });
    Ok((md, json))
}
