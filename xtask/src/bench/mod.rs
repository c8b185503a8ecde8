//! `cargo xtask bench`: rocsync's costs measured side by side, interleaved and repeated,
//! written to bench/results.json and bench/RESULTS.md.

use std::{fmt::Write as _, path::Path, process::Command};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::{cargo, root, run};

mod bin;
mod breakdown;
mod budget;
mod daemon;
mod flight;
mod learning;
mod mix;
mod soak;
mod tree;

use bin::{Probes, bench_bin, quartiles};

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
const PARTS: [(&str, &str, &str); 6] = [
    ("tree", "process-tree.md", "following processes"),
    ("daemon", "daemon.md", "the daemon"),
    ("breakdown", "breakdown.md", "where a call's cost goes"),
    ("learning", "learning.md", "the *GetDevice learning window"),
    (
        "budget",
        "budget.md",
        "the daemon's budget on a polling process",
    ),
    ("soak", "soak.md", "the daemon under unprivileged churn"),
];

fn measure_part(part: &str) -> Result<(String, Value)> {
    match part {
        "tree" => tree::tree(),
        "daemon" => daemon::daemon(),
        "learning" => learning::learning(ROUNDS),
        "budget" => budget::budget(),
        "soak" => soak::soak(soak::MINUTES, "cargo xtask bench"),
        _ => breakdown::breakdown(ROUNDS),
    }
}

/// `cargo xtask bench-<part>`: one of [`PARTS`] alone, into its file.
pub fn bench_part(part: &str) -> Result<()> {
    build()?;
    let (md, v) = measure_part(part)?;
    write_part(part, &md, &v)
}

/// `cargo xtask bench-soak [MINUTES]`: the soak alone, for MINUTES (default
/// [`soak::MINUTES`]), into bench/soak.md.
pub fn bench_soak(minutes: Option<&str>) -> Result<()> {
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

pub fn bench() -> Result<()> {
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

fn report(
    cases: &[Case],
    (results, pooled): (&[Vec<Vec<f64>>], &[SideBySide]),
    threads: &[(&str, Value)],
    pipeline: &[(bool, Vec<f64>, Value)],
    (extra_md, extra_json): (String, Value),
) -> Result<()> {
    let sh = |cmd: &str| {
        Command::new("sh")
            .args(["-c", cmd])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let machine = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2");
    let kernel = sh("uname -r");
    let commit = sh("git rev-parse --short HEAD; git diff --quiet -- . ':!bench' || echo '(with local changes)'")
        .replace('\n', " ");
    let date = sh("date -u +%Y-%m-%dT%H:%MZ");
    let mut md = String::new();
    let _ = writeln!(md, "# rocsync benchmarks\n");
    let _ = writeln!(
        md,
        "Machine: {machine}, {} cores; kernel {kernel}; commit {commit}; {date}. `cargo xtask bench`; {ROUNDS} interleaved rounds, min / median / max.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(md, "## Per-call cost of a hooked function\n");
    let _ = writeln!(
        md,
        "ns per call of `hipStreamSynchronize(NULL)` in a loop (bench_calls). \"empty pair\" is an empty uprobe + uretprobe on the same instruction: the trap alone, the floor for any uprobe tracer; it runs before and again after rocsync in every round. The ratio is (rocsync − untraced) / (empty − untraced): in each round to the mean of the two empty-pair runs around it, median and range of the rounds; the ratio of the modes' medians follows it. \"side by side\": the same ratio with the three modes in one process — rounds of 10 000 calls to each of an untraced copy of the library, a copy under the empty pair and the library under `rocsync run`, alternating (`rocsync-bench side-by-side`): the machine drifts between separate runs by more than the margin measured; batches milliseconds apart see the same machine. Its columns are the lower quartile, median and upper quartile of all its rounds.\n"
    );
    let _ = writeln!(md, "| library | mode | min | median | max |");
    let _ = writeln!(md, "| --- | --- | ---: | ---: | ---: |");
    let mut json_cases = Vec::new();
    for ((c, r), [sbs, classic, multi_floor]) in cases.iter().zip(results).zip(pooled) {
        let med: Vec<f64> = r.iter().map(|x| stats(x).1).collect();
        for ((label, ..), xs) in c.modes.iter().zip(r) {
            let (lo, mid, hi) = stats(xs);
            let _ = writeln!(
                md,
                "| {} | {label} | {lo:.0} | {mid:.0} | {hi:.0} |",
                c.name
            );
        }
        let rounds: Vec<f64> = (0..r[0].len())
            .map(|k| (r[2][k] - r[0][k]) / ((r[1][k] + r[3][k]) / 2.0 - r[0][k]))
            .collect();
        let (rlo, ratio, rhi) = stats(&rounds);
        let of_medians = (med[2] - med[0]) / (med[1] - med[0]);
        let (lo, _, hi) = stats(&r[0]);
        if med[1] - med[0] > hi - lo {
            let _ = writeln!(
                md,
                "| {} | **ratio (c−a)/(b−a)** of the rounds | {rlo:.2} | **{ratio:.2}** | {rhi:.2} |\n| {} | ratio of the medians | | {of_medians:.2} | |",
                c.name, c.name
            );
        } else {
            let _ = writeln!(
                md,
                "| {} | ratio (c−a)/(b−a) | | n/a: the empty pair ({:.0} ns) is within the untraced spread ({lo:.0}–{hi:.0} ns) | |",
                c.name,
                med[1] - med[0]
            );
        }
        let [q1, q2, q3] = quartiles(sbs);
        if c.side_by_side {
            let _ = writeln!(
                md,
                "| {} | **ratio side by side**, {} rounds in one process | {q1:.3} | **{q2:.3}** | {q3:.3} |",
                c.name,
                sbs.len()
            );
            let [_, classic_q2, _] = quartiles(classic);
            let [_, floor_q2, _] = quartiles(multi_floor);
            let _ = writeln!(
                md,
                "| {} | side by side: rocsync `--classic-uprobes` (call probes through perf events) | | {classic_q2:.3} | |\n| {} | side by side: the empty pair through multi-uprobe links | | {floor_q2:.3} | |\n| {} | rocsync over the empty multi-uprobe pair (like for like: quotient of the medians) | | {:.3} | |",
                c.name,
                c.name,
                c.name,
                q2 / floor_q2
            );
        }
        if c.modes.len() == 6 {
            let gain = (med[5] - med[0]) / (med[2] - med[0]);
            let _ = writeln!(
                md,
                "| {} | probe placement: overhead at entry / after endbr64 | | **{gain:.1}×** | |",
                c.name
            );
        }
        json_cases.push(json!({ "name": c.name, "modes": c.modes.iter().map(|m| m.0).collect::<Vec<_>>(), "ns_per_call": r, "ratio": ratio, "round_ratios": rounds, "ratio_of_medians": of_medians, "side_by_side_ratios": sbs, "side_by_side_quartiles": [q1, q2, q3], "side_by_side_classic_ratios": classic, "side_by_side_multi_floor_ratios": multi_floor }));
    }
    let _ = writeln!(
        md,
        "\n## 8 threads, paced and flat out (default 8 MiB ring)\n"
    );
    let _ = writeln!(
        md,
        "| asked calls/s | calls made | captured | dropped | drop rate | achieved calls/s |"
    );
    let _ = writeln!(md, "| ---: | ---: | ---: | ---: | ---: | ---: |");
    for (label, v) in threads {
        let calls = v["calls"].as_u64().unwrap_or(0);
        let dropped = v["dropped"].as_u64().unwrap_or(0);
        let rate = calls as f64 / v["seconds"].as_f64().unwrap_or(1.0);
        let share = 100.0 * dropped as f64 / calls.max(1) as f64;
        let _ = writeln!(
            md,
            "| {label} | {calls} | {} | {dropped} | {share:.2}% | {rate:.0} |",
            v["captured"]
        );
    }
    let _ = writeln!(
        md,
        "\n## Userspace: decode → order → resolve → Kineto JSON, one core\n"
    );
    let _ = writeln!(
        md,
        "| stream | records/s min | median | max (2 M records) | peak RSS, 10 M records | records/s, 10 M |"
    );
    let _ = writeln!(md, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for (churn, rates, big) in pipeline {
        let (lo, mid, hi) = stats(rates);
        let name = if *churn {
            "an event created and destroyed per iteration"
        } else {
            "64 events reused"
        };
        let rss = big["peak_rss_bytes"].as_f64().unwrap_or(0.0) / (1 << 20) as f64;
        let _ = writeln!(
            md,
            "| {name} | {lo:.0} | {mid:.0} | {hi:.0} | {rss:.1} MiB | {:.0} |",
            big["records_per_s"].as_f64().unwrap_or(0.0)
        );
    }
    md.push_str(&extra_md);
    let json = json!({
        "extra": extra_json,
        "machine": machine, "kernel": kernel, "commit": commit, "date": date, "rounds": ROUNDS,
        "cases": json_cases,
        "threads": threads.iter().map(|(l, v)| json!({"ring": l, "result": v})).collect::<Vec<_>>(),
        "pipeline": pipeline.iter().map(|(c, r, b)| json!({"churn": c, "records_per_s": r, "ten_million": b})).collect::<Vec<_>>(),
    });
    std::fs::create_dir_all(root().join("bench"))?;
    std::fs::write(
        root().join("bench/results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    std::fs::write(root().join("bench/RESULTS.md"), &md)?;
    println!("{md}");
    Ok(())
}
