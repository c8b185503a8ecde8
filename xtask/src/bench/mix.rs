//! Benchmarks beside the per-call cost: a PyTorch-shaped call mix (what leaving rocsync on
//! costs a step) and the memory `rocsync convert` needs for a large raw capture.

use std::{fmt::Write as _, process::Command};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::bin::{bench_bin, run_json};
use crate::root;

/// Steps of the mix per measurement.
const STEPS: &str = "20000";
/// Calls in the raw capture `convert` reads (about 2 GB).
const RAW_CALLS: u64 = 13_000_000;

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

/// Untraced, rocsync's default probes, and every function probed, interleaved.
pub(super) fn mix(rounds: usize) -> Result<(String, Value)> {
    let mix = rocsync_tests::mix();
    let lib = rocsync_tests::sim_hip();
    let rocsync = root().join("target/release/rocsync");
    let modes: [(&str, Vec<&str>); 3] = [
        ("untraced", vec![]),
        ("rocsync, default probes", vec![]),
        (
            "rocsync, every function (--probe hipGetDevice)",
            vec!["--probe", "hipGetDevice"],
        ),
    ];
    let scratch = tempfile_dir()?;
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        eprintln!("xtask: call mix round {}/{rounds}", round + 1);
        for (i, (_, flags)) in modes.iter().enumerate() {
            let mut cmd = if i == 0 {
                Command::new(&mix)
            } else {
                let mut c = Command::new(&rocsync);
                c.args(["run", "--no-status", "--force", "-o"])
                    .arg(scratch.join("mix.json"))
                    .args(flags)
                    .arg("--")
                    .arg(&mix);
                c
            };
            cmd.arg(&lib).arg(STEPS);
            let v = run_json(&mut cmd)?;
            ns[i].push(v["ns_per_step"].as_f64().context("ns_per_step")?);
        }
    }
    let med: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## A PyTorch-shaped call mix (simulated runtime)\n\nPer step: 20 `hipGetDevice`, an event created and destroyed, a record, a stream wait, an event query, an event synchronize, a stream synchronize ({STEPS} steps, median of {rounds} interleaved rounds).\n"
    );
    let _ = writeln!(
        md,
        "| mode | ns per step | rocsync's cost per step | ratio to untraced |"
    );
    let _ = writeln!(md, "| --- | ---: | ---: | ---: |");
    for (i, (name, _)) in modes.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {name} | {:.0} | {:.0} | {:.1}× |",
            med[i],
            med[i] - med[0],
            med[i] / med[0]
        );
    }
    let saved = 1.0 - (med[1] - med[0]) / (med[2] - med[0]);
    let _ = writeln!(
        md,
        "\nLeaving `*GetDevice` unprobed removes {:.0} % of rocsync's cost in this mix. (The simulated calls cost ~10 ns; a real runtime's cost tens of µs per step, so the ratio to untraced is the upper bound of what a GPU job sees.)",
        saved * 100.0
    );
    Ok((
        md,
        json!({ "modes": modes.iter().map(|m| m.0).collect::<Vec<_>>(), "ns_per_step": ns }),
    ))
}

/// Peak memory of `rocsync convert` over a ~2 GB raw capture.
pub(super) fn convert_memory() -> Result<(String, Value)> {
    let dir = tempfile_dir()?;
    let raw = dir.join("big.jsonl");
    let calls = RAW_CALLS.to_string();
    let utf8 = |p: &std::path::Path| p.to_str().map(str::to_owned).context("a path not in UTF-8");
    let (raw_path, out) = (utf8(&raw)?, utf8(&dir.join("big.json"))?);
    let made = bench_bin(&["raw", "--calls", &calls, "--out", &raw_path])?;
    let rocsync = utf8(&root().join("target/release/rocsync"))?;
    let v = bench_bin(&["peak-rss", "--", &rocsync, "convert", &raw_path, "-o", &out]);
    let _ = std::fs::remove_dir_all(&dir);
    let v = v?;
    let gb = made["bytes"].as_f64().unwrap_or(0.0) / 1e9;
    let mib = v["peak_rss_bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64;
    let secs = v["seconds"].as_f64().unwrap_or(0.0);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## `rocsync convert` of a large raw capture\n\n| raw file | calls | peak RSS | time | calls/s |\n| ---: | ---: | ---: | ---: | ---: |\n| {gb:.2} GB | {RAW_CALLS} | {mib:.1} MiB | {secs:.1} s | {:.0} |",
        RAW_CALLS as f64 / secs
    );
    Ok((md, json!({ "raw": made, "convert": v })))
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = root().join("target/bench-raw");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
