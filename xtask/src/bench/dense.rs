//! The scenario's `dense` loop, the budget benches' workload: per iteration a record, a
//! stream wait and a synchronize, then `SPIN_US` µs of work on the host. Started held at
//! its gate so that a daemon tracks it before its first call; its iterations are counted
//! from its log (one `hipEventRecord` each).

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::Path,
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

use super::daemon::Daemon;

/// The host work per iteration, µs.
pub(crate) const SPIN_US: &str = "50";

/// Starts the loop for `ms` milliseconds at its gate, waits until `daemon` (if any)
/// tracks it, and lets it go.
pub(crate) fn start(
    scenario: &Path,
    ms: &str,
    log: &Path,
    daemon: Option<&Daemon>,
) -> Result<Child> {
    let mut child = Command::new(scenario)
        .args(["gated", "dense", ms, SPIN_US])
        .env("SCENARIO_LOG", log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the scenario")?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
    match out.next() {
        Some(Ok(l)) if l == "ready" => {}
        other => bail!("the scenario said {other:?}, not \"ready\""),
    }
    if let Some(d) = daemon {
        d.wait_for(&format!("tracking pid {}", child.id()))?;
    }
    writeln!(child.stdin.take().context("stdin")?, "go")?;
    Ok(child)
}

/// The iterations the loop logged.
pub(crate) fn iterations(log: &Path) -> Result<f64> {
    let log = std::fs::read_to_string(log).with_context(|| format!("{}", log.display()))?;
    Ok(log.lines().filter(|l| l.contains("hipEventRecord")).count() as f64)
}

/// One series' value (summed over its label sets) from a `/metrics` text; 0 without one.
pub(crate) fn metric(text: &str, series: &str) -> f64 {
    (text.lines())
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{', ',']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        // An empty sum is -0.0.
        .max(0.0)
        + 0.0
}
