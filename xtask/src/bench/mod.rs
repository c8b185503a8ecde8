//! `cargo xtask bench`: rocsync's costs measured side by side, interleaved and repeated,
//! written to bench/results.json and bench/RESULTS.md.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::{cargo, root, run};

mod bin;
mod breakdown;
mod budget;
mod cycle;
mod daemon;
mod dense;
mod flight;
mod flight_budget;
mod learning;
mod mix;
mod one_trap;
mod real_daemon;
mod real_runtime;
mod report;
mod run_parts;
mod soak;
mod tree;

use bin::{Probes, bench_bin, quartiles};
use report::report;

const ROUNDS: usize = 5;
/// What the per-call section measures side by side with the empty pair: the capture, the
/// capture with its call probes as classic uprobes, and the empty pair through
/// multi-uprobe links (the call probes' default attachment: the like-for-like floor).
const SIDE_BY_SIDE: [(&str, &[&str]); 3] = [
    ("full", &[]),
    ("full", &["--classic-uprobes"]),
    ("empty-multi", &[]),
];
/// A case's side-by-side rounds' ratios, one list per [`SIDE_BY_SIDE`] entry.
type SideBySide = [Vec<f64>; 3];
const REAL_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

struct Case {
    name: &'static str,
    lib: String,
    symbol: &'static str,
    calls: u64,
    /// (label, bench mode, extra rocsync arguments)
    modes: Vec<(&'static str, &'static str, Vec<&'static str>)>,
    /// Also measured side by side with the empty pair in one process (a copy of `lib`).
    side_by_side: bool,
}

fn stats(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// Builds the benchmark binary (with the empty baseline probes, behind the `bench`
/// feature) and the fixtures.
fn build() -> Result<()> {
    crate::setup()?;
    run(cargo().args([
        "build",
        "--release",
        "--package",
        "rocsync-user",
        "--bins",
        "--features",
        "bench",
    ]))?;
    run(cargo().args(["build", "--release", "--package", "rocsync-tests"]))
}

/// The measurements that also run alone (`cargo xtask bench-<part>`), each into its own
/// file in bench/: (part, file, title).
const PARTS: [(&str, &str, &str); 10] = [
    ("tree", "process-tree.md", "following processes"),
    ("daemon", "daemon.md", "the daemon"),
    ("breakdown", "breakdown.md", "where a call's cost goes"),
    (
        "run-parts",
        "run-parts.md",
        "where `rocsync run`'s cost goes on a dense loop, part by part",
    ),
    ("learning", "learning.md", "the *GetDevice learning window"),
    (
        "budget",
        "budget.md",
        "the daemon's budget on a polling process",
    ),
    (
        "cycle",
        "cycle.md",
        "the budget's duty cycle on a sync-dense loop",
    ),
    ("soak", "soak.md", "the daemon under unprivileged churn"),
    (
        "one-trap",
        "one-trap.md",
        "one trap where the return adds nothing",
    ),
    (
        "real-runtime",
        "real-runtime.md",
        "the probes on the real ROCm runtimes' dispatch stubs",
    ),
];

fn measure_part(part: &str) -> Result<(String, Value)> {
    match part {
        "tree" => tree::tree(),
        "daemon" => daemon_suite(),
        "learning" => learning::learning(ROUNDS),
        "budget" => budget::budget(),
        "cycle" => cycle::cycle(),
        "run-parts" => run_parts::run_parts(),
        "one-trap" => one_trap::one_trap(),
        "real-runtime" => real_runtime::real_runtime(),
        "soak" => soak::soak(soak::MINUTES, "cargo xtask bench"),
        _ => breakdown::breakdown(ROUNDS),
    }
}

/// `cargo xtask bench-<part>`: one of [`PARTS`] alone, into its file.
pub(crate) fn bench_part(part: &str) -> Result<()> {
    build()?;
    let (md, v) = measure_part(part)?;
    write_part(part, &md, &v)
}

/// `cargo xtask bench-flight-budget [BEFORE]`: the flight recorder held to the budget,
/// before (`BEFORE`'s `rocsync`, default main's) and after, appended to bench/flight.md.
pub(crate) fn bench_flight_budget(before: Option<&str>) -> Result<()> {
    build()?;
    flight_budget::flight_budget(before)
}

/// `cargo xtask bench-soak [MINUTES]`: the soak alone, for MINUTES (default
/// [`soak::MINUTES`]), into bench/soak.md.
pub(crate) fn bench_soak(minutes: Option<&str>) -> Result<()> {
    let m: f64 = match minutes {
        Some(m) => m
            .parse()
            .ok()
            .filter(|m: &f64| *m > 0.0)
            .with_context(|| format!("bench-soak {m:?}: expected minutes (e.g. 10 or 0.5)"))?,
        None => soak::MINUTES,
    };
    let command = match minutes {
        Some(m) => format!("cargo xtask bench-soak {m}"),
        None => "cargo xtask bench-soak".into(),
    };
    build()?;
    let (md, v) = soak::soak(m, &command)?;
    write_part("soak", &md, &v)
}

/// Writes one measurement's own file in bench/.
fn write_part(part: &str, md: &str, v: &Value) -> Result<()> {
    let (_, file, title) = PARTS
        .iter()
        .find(|p| p.0 == part)
        .context("unknown bench part")?;
    let text = format!(
        "# rocsync: {title}\n\nWritten by `cargo xtask bench-{part}` (also part of `cargo xtask \
         bench`).\n{md}\n```json\n{}\n```\n",
        serde_json::to_string_pretty(v)?
    );
    std::fs::write(root().join("bench").join(file), text)?;
    eprintln!("xtask: wrote bench/{file}");
    Ok(())
}

pub(crate) fn bench() -> Result<()> {
    build()?;
    let driver = rocsync_tests::bench_calls().display().to_string();
    let paired = rocsync_tests::bench_paired().display().to_string();
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let sim = rocsync_tests::sim_hip().display().to_string();
    let cet = rocsync_tests::sim_hip_cet().display().to_string();
    // Each round's rocsync run sits between two runs of the empty pair (the machine
    // drifts between runs by more than the margins measured here).
    let plain = vec![
        ("untraced", "untraced", vec![]),
        ("empty pair", "empty", vec![]),
        ("rocsync", "full", vec![]),
        ("empty pair, again", "empty", vec![]),
    ];
    let mut cases = vec![
        Case {
            name: "simulated libamdhip64 (push %rbp entry)",
            lib: sim.clone(),
            symbol: "hipStreamSynchronize",
            calls: 200_000,
            modes: plain.clone(),
            side_by_side: true,
        },
        Case {
            name: "simulated libamdhip64, CET build (endbr64 entry)",
            lib: cet,
            symbol: "hipStreamSynchronize",
            calls: 100_000,
            modes: vec![
                ("untraced", "untraced", vec![]),
                ("empty pair", "empty", vec![]),
                ("rocsync", "full", vec![]),
                ("empty pair, again", "empty", vec![]),
                ("empty pair at entry", "empty-at-entry", vec![]),
                ("rocsync at entry", "full", vec!["--probe-at-entry"]),
            ],
            side_by_side: true,
        },
    ];
    if Path::new(REAL_HIP).exists() {
        cases.push(Case {
            name: "Debian libamdhip64.so.5 (returns 101: no GPU)",
            lib: REAL_HIP.into(),
            symbol: "hipStreamSynchronize",
            calls: 20_000,
            modes: plain,
            side_by_side: false,
        });
    }
    // Interleaved: every round measures every mode of every case once.
    let mut results: Vec<Vec<Vec<f64>>> = cases
        .iter()
        .map(|c| vec![Vec::new(); c.modes.len()])
        .collect();
    // Side by side: every round's runs' rounds' ratios, pooled per case and kind.
    let mut pooled: Vec<SideBySide> = vec![Default::default(); cases.len()];
    for round in 0..ROUNDS {
        eprintln!("xtask: bench round {}/{ROUNDS}", round + 1);
        for (ci, c) in cases.iter().enumerate() {
            let calls = c.calls.to_string();
            let probes = Probes {
                lib: &c.lib,
                symbol: c.symbol,
                calls: &calls,
                driver: &driver,
                rocsync: &rocsync,
            };
            if c.side_by_side {
                for (k, (mode, extra)) in SIDE_BY_SIDE.iter().enumerate() {
                    pooled[ci][k].extend(probes.side_by_side(&paired, mode, extra)?);
                }
            }
            for (mi, (_, mode, extra)) in c.modes.iter().enumerate() {
                let v = probes.run(mode, extra)?;
                if v.get("dropped").and_then(Value::as_u64).unwrap_or(0) > 0 {
                    eprintln!("xtask: warning: drops in {} {mode}", c.name);
                }
                results[ci][mi].push(v["ns_per_call"].as_f64().context("ns_per_call")?);
            }
        }
    }
    // 8 threads at increasing paced rates, then flat out: where drops begin.
    let mut threads = Vec::new();
    for rate in [
        "50000",
        "100000",
        "200000",
        "400000",
        "flat out",
        "flat out, 1 MiB ring",
    ] {
        let mut args = vec![
            "probes",
            "--mode",
            "full",
            "--lib",
            &sim,
            "--symbol",
            "hipStreamSynchronize",
            "--calls",
            "50000",
            "--threads",
            "8",
            "--driver",
            &driver,
            "--rocsync",
            &rocsync,
        ];
        if rate.starts_with("flat out") {
            if rate.ends_with("ring") {
                args.extend(["--extra", "--ring-size", "--extra", "1"]); // 1 MiB
            }
        } else {
            args.extend(["--rate", rate]);
        }
        threads.push((rate, bench_bin(&args)?));
    }
    let mut pipeline = Vec::new();
    for churn in [false, true] {
        let mut rates = Vec::new();
        for _ in 0..ROUNDS {
            let mut args = vec!["pipeline", "--records", "2000000"];
            if churn {
                args.push("--churn");
            }
            rates.push(bench_bin(&args)?["records_per_s"].as_f64().unwrap_or(0.0));
        }
        let mut args = vec!["pipeline", "--records", "10000000"];
        if churn {
            args.push("--churn");
        }
        let big = bench_bin(&args)?;
        pipeline.push((churn, rates, big));
    }
    let (mix_md, mix) = mix::mix(ROUNDS)?;
    let (convert_md, convert) = mix::convert_memory()?;
    let mut md = mix_md + &convert_md;
    let mut json = json!({ "call_mix": mix, "convert": convert });
    for (part, ..) in PARTS {
        let (part_md, v) = measure_part(part)?;
        // Its own file too, from this same run.
        write_part(part, &part_md, &v)?;
        md += &part_md;
        json[part] = v;
    }
    let extra = (md, json);
    report(&cases, (&results, &pooled), &threads, &pipeline, extra)
}

/// The daemon's cost on a counted process beside a plain one, then its flight recorder's.
fn daemon_suite() -> Result<(String, Value)> {
    let dir = PathBuf::from(format!("/tmp/rocsync-bench-daemon-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("counted"))?;
    std::fs::create_dir_all(dir.join("plain"))?;
    // Counted: an executable the daemon includes, with a library copy of its own (probed
    // by the daemon). Plain: another name and library, never probed by the daemon.
    let counted = dir.join("counted/bench_calls");
    let plain = dir.join("plain/bench_calls");
    let (counted_lib, plain_lib) = (
        dir.join("counted/libamdhip64.so"),
        dir.join("plain/libamdhip64.so"),
    );
    for (exe, lib) in [(&counted, &counted_lib), (&plain, &plain_lib)] {
        std::fs::copy(rocsync_tests::bench_calls(), exe)?;
        std::fs::copy(rocsync_tests::sim_hip(), lib)?;
    }
    let result =
        daemon::measure(&dir, &counted, &counted_lib, &plain, &plain_lib).and_then(|(md, v)| {
            let (flight_md, flight) = flight::flight(&dir, &counted, &counted_lib)?;
            let mut v = v;
            v["flight"] = flight;
            Ok((md + &flight_md, v))
        });
    let _ = std::fs::remove_dir_all(&dir);
    result
}
