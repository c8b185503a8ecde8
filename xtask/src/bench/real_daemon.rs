//! What the daemon adds to a call of a real ROCm runtime (Debian's 6.4 and 7.2, whose
//! exports are `endbr64; sub; mov; call` dispatch stubs) beside what it adds to the same
//! call of the simulated runtime, whose entries (`push %rbp`) the kernel emulates: in one
//! process (`bench_paired-SERIES`, on the series' own loader), alternating batches of the
//! real library and the simulated one, each probed by the daemon, and an untraced copy of
//! each. A round's ratio is (real − its copy) / (simulated − its copy): 1 where a real
//! call costs what an emulated entry does. The daemon at its defaults but `--budget off`
//! (every probe stays on: a flat-out loop is over any budget).

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{
    bin::quartiles,
    daemon::{Daemon, get},
};

/// The functions measured: records, stream waits, destroys and polls count at their entry
/// alone (emulated past the stubs' frame setup) while nothing records.
const FUNCTIONS: [&str; 4] = [
    "hipEventRecord",
    "hipStreamWaitEvent",
    "hipEventQuery",
    "hipEventDestroy",
];
/// Runs per runtime and function, rotated; rounds per run, calls per batch.
const RUNS: usize = 3;
const ROUNDS: &str = "40";
const BATCH: &str = "5000";

/// One runtime's files for the driver: (series, driver, real library, its copy).
struct Series {
    series: String,
    driver: PathBuf,
    real: PathBuf,
    twin: PathBuf,
}

/// A run's rounds: ns per call of the real library, its copy, the simulated one, its
/// copy; and the calls the daemon counted of those made to the probed two.
struct Run {
    ns: [Vec<f64>; 4],
    counted: f64,
}

fn copy_to(dir: &Path, name: &str, from: &Path) -> Result<PathBuf> {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub)?;
    let to = sub.join(format!("libtwin-{name}.so"));
    std::fs::copy(from, &to).with_context(|| format!("copying {}", from.display()))?;
    Ok(to)
}

fn counted(daemon: &Daemon, api: &str) -> Result<f64> {
    let (_, text) = get(daemon.metrics_addr(), "/metrics")?;
    let prefix = format!("rocsync_sync_calls_total{{api=\"{api}\"");
    Ok(text
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

fn run(daemon: &Daemon, s: &Series, sim: (&Path, &Path), api: &str) -> Result<Run> {
    let before = counted(daemon, api)?;
    let mut child = Command::new(&s.driver)
        .args([api, ROUNDS, BATCH])
        .args([&s.real, &s.twin, sim.0, sim.1])
        .env("BENCH_GATE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", s.driver.display()))?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
    match out.next() {
        Some(Ok(l)) if l == "loaded" => {}
        other => bail!("{} said {other:?}, not \"loaded\"", s.driver.display()),
    }
    daemon.wait_for(&format!("tracking pid {}", child.id()))?;
    writeln!(child.stdin.take().context("stdin")?, "go")?;
    let line = out.next().context("no result from the driver")??;
    if !child.wait()?.success() {
        bail!("{} failed", s.driver.display());
    }
    let v: Value = serde_json::from_str(&line)?;
    let per_lib = |i: usize| -> Result<Vec<f64>> {
        (v["ns_per_call"][i]
            .as_array()
            .context("ns_per_call")?
            .iter())
        .map(|x| x.as_f64().context("ns_per_call"))
        .collect()
    };
    let made = 2.0
        * v["calls_per_library"]
            .as_f64()
            .context("calls_per_library")?;
    Ok(Run {
        ns: [per_lib(0)?, per_lib(1)?, per_lib(2)?, per_lib(3)?],
        counted: (counted(daemon, api)? - before) / made,
    })
}

/// The real runtimes' series, the simulated runtime and its copy; the table and JSON.
pub(super) fn real_daemon(dir: &Path) -> Result<(String, Value)> {
    let sim = rocsync_tests::sim_hip();
    let sim_twin = copy_to(dir, "sim", &sim)?;
    let mut series = Vec::new();
    for r in rocsync_tests::real_runtimes() {
        let major = r.series.split('.').next().unwrap_or_default();
        let real = r
            .lib
            .join(format!("libamdhip64.so.{major}"))
            .canonicalize()?;
        series.push(Series {
            twin: copy_to(dir, &format!("real-{}", r.series), &real)?,
            driver: rocsync_tests::bench_paired_for(&r.series),
            series: r.series,
            real,
        });
    }
    let (first, rest) = series.split_first().context("no real runtime unpacked")?;
    let mut extra = vec!["--budget".to_string(), "off".into()];
    for s in rest {
        extra.extend(["--include-exe".into(), s.driver.display().to_string()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let daemon = Daemon::start(dir, &first.driver, &extra)?;
    // Every (series, function) once per pass, the order rotated by pass.
    let cases: Vec<(usize, &str)> = (0..series.len())
        .flat_map(|s| FUNCTIONS.iter().map(move |&f| (s, f)))
        .collect();
    let mut runs: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    for pass in 0..RUNS {
        for k in 0..cases.len() {
            let i = (k + pass) % cases.len();
            let (s, api) = cases[i];
            runs[i].push(run(&daemon, &series[s], (&sim, &sim_twin), api)?);
        }
    }
    daemon.stop()?;
    table(&series, &cases, &runs)
}

fn table(series: &[Series], cases: &[(usize, &str)], runs: &[Vec<Run>]) -> Result<(String, Value)> {
    let mut md = format!(
        "\n## The daemon on the real runtimes beside the simulated one\n\n\
         What the daemon (its defaults, `--budget off`) adds to one call, in one process \
         (`bench_paired-SERIES`): alternating batches of {BATCH} calls to the real \
         library, an untraced copy of it, the simulated runtime (its entries `push %rbp`, \
         emulated) and an untraced copy of that, {ROUNDS} rounds a run, {RUNS} runs each \
         rotated. A round's ratio is (real − copy) / (simulated − copy); the median of \
         every round (lower–upper quartile), beside each one's added ns per call (the \
         median round). Records, stream waits, destroys and polls count at their entry \
         alone while nothing records (a poll's return says only whether its event was \
         done, which only a recording's resolution reads; its duration and error are \
         then not counted), which the daemon places on the stubs' `call` (emulated). \
         \"counted\": the calls the daemon counted of those made to both probed \
         libraries.\n\n\
         | runtime | function | real: added ns | simulated: added ns | real ÷ simulated | counted |\n\
         | --- | --- | ---: | ---: | ---: | ---: |\n"
    );
    let mut rows = Vec::new();
    for ((s, api), rs) in cases.iter().zip(runs) {
        let (mut ratios, mut real, mut sim, mut counted) = (vec![], vec![], vec![], vec![]);
        for r in rs {
            for k in 0..r.ns[0].len() {
                let (a, b) = (r.ns[0][k] - r.ns[1][k], r.ns[2][k] - r.ns[3][k]);
                ratios.push(a / b);
                real.push(a);
                sim.push(b);
            }
            counted.push(r.counted);
        }
        let [lo, mid, hi] = quartiles(&ratios);
        let (real, sim) = (quartiles(&real)[1], quartiles(&sim)[1]);
        let counted = counted.iter().copied().fold(f64::INFINITY, f64::min);
        writeln!(
            md,
            "| ROCm {} | {api} | {real:.0} | {sim:.0} | **{mid:.2}** ({lo:.2}–{hi:.2}) | {:.1} % |",
            series[*s].series,
            counted * 100.0
        )?;
        rows.push(json!({
            "series": series[*s].series, "api": api, "ratios": ratios,
            "quartiles": [lo, mid, hi], "added_ns": {"real": real, "simulated": sim},
            "counted": rs.iter().map(|r| r.counted).collect::<Vec<_>>(),
        }));
    }
    Ok((md, json!(rows)))
}
