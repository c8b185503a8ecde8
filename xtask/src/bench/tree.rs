//! Following processes, both ways of placing probes: attach/detach time for eight
//! processes and the cost to an untraced bystander mapping the same library
//! (`rocsync-bench tree`), repeated, medians. Also `cargo xtask bench-tree` alone.

use std::fmt::Write as _;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::bin::bench_bin;

const ROUNDS: usize = 3;
const PROCESSES: &str = "8";

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

pub(super) fn tree() -> Result<(String, Value)> {
    let scenario = rocsync_tests::scenario().display().to_string();
    let driver = rocsync_tests::bench_calls().display().to_string();
    let lib = rocsync_tests::sim_hip().display().to_string();
    let mut runs = Vec::new();
    for round in 0..ROUNDS {
        eprintln!("xtask: process-tree round {}/{ROUNDS}", round + 1);
        runs.push(bench_bin(&[
            "tree",
            "--scenario",
            &scenario,
            "--driver",
            &driver,
            "--lib",
            &lib,
            "--symbol",
            "hipStreamSynchronize",
            "--processes",
            PROCESSES,
        ])?);
    }
    let at = |f: &dyn Fn(&Value) -> &Value| -> Result<f64> {
        Ok(median(
            runs.iter()
                .map(|r| f(r).as_f64().context("missing figure"))
                .collect::<Result<_>>()?,
        ))
    };
    let mut md = String::from("\n## Following processes: where the probes go\n\n");
    let _ = writeln!(
        md,
        "`rocsync-bench tree`: {PROCESSES} idle processes mapping the simulated library are \
         traced with pid-scoped probes (a set per process, `--no-follow`'s placement) or \
         file-wide ones (one set, filtered in the kernel by the traced set: the default, \
         which follows children from their first call); meanwhile an untraced process \
         mapping the same file calls `hipStreamSynchronize` in a loop. Medians of \
         {ROUNDS} rounds.\n"
    );
    let _ = writeln!(
        md,
        "| probes | attach {PROCESSES} processes (s) | detach (s) | bystander ns/call |"
    );
    let _ = writeln!(md, "| --- | ---: | ---: | ---: |");
    let none = at(&|r| &r["bystander_ns_per_call"]["no probes"])?;
    let _ = writeln!(md, "| none | | | {none:.1} |");
    let mut out = json!({ "bystander_ns_no_probes": none });
    for (name, label) in [("pid_scoped", "pid-scoped"), ("file_wide", "file-wide")] {
        let attach = at(&|r| &r["timing"][name]["attach_s"])?;
        let detach = at(&|r| &r["timing"][name]["detach_s"])?;
        let ns = at(&|r| &r["bystander_ns_per_call"][name])?;
        let _ = writeln!(md, "| {label} | {attach:.3} | {detach:.2} | {ns:.1} |");
        out[name] = json!({ "attach_s": attach, "detach_s": detach, "bystander_ns": ns });
    }
    Ok((md, out))
}
