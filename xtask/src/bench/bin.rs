//! The measurement binary (`rocsync-bench`, root: it loads eBPF programs), run once per
//! measurement: xtask interleaves the runs.

use std::process::Command;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::root;

pub(crate) fn bench_bin(args: &[&str]) -> Result<Value> {
    run_json(Command::new(root().join("target/release/rocsync-bench")).args(args))
}

/// Runs a measurement command: its last JSON line, or its stderr as the error.
pub(crate) fn run_json(cmd: &mut Command) -> Result<Value> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("no result line")?;
    Ok(serde_json::from_str(line)?)
}

/// What the side-by-side runs lost, said beside the figures (`losses_md`).
static LOSSES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The side-by-side runs' losses so far, as a section of a report ("" when none).
pub(super) fn losses_md() -> String {
    let losses = LOSSES.lock().unwrap_or_else(|e| e.into_inner());
    if losses.is_empty() {
        return String::new();
    }
    let mut md = String::from("\nSide-by-side runs that lost records:\n\n");
    for l in losses.iter() {
        md.push_str(&format!("- {l}\n"));
    }
    md
}

/// Rounds of one side-by-side run (each 10 000 calls to every copy: ≈30 ms).
const SIDE_BY_SIDE_ROUNDS: &str = "40";

/// The lower quartile, median and upper quartile of `xs` (pooled rounds' ratios).
pub(crate) fn quartiles(xs: &[f64]) -> [f64; 3] {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| {
        s.get(((s.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    [at(0.25), at(0.5), at(0.75)]
}

/// One function under one kind of probe (`rocsync-bench probes`), the driver calling it
/// `calls` times: the bench's result line.
pub(crate) struct Probes<'a> {
    pub lib: &'a str,
    pub symbol: &'a str,
    pub calls: &'a str,
    pub driver: &'a str,
    pub rocsync: &'a str,
}

impl Probes<'_> {
    pub(super) fn run(&self, mode: &str, extra: &[&str]) -> Result<Value> {
        self.run_with(mode, extra, &[])
    }

    /// The same, also reading each probe program's ns per run from the kernel's BPF
    /// statistics (`--program-time`; they slow the run, so its wall time is not used).
    pub(super) fn program_time(&self, mode: &str, extra: &[&str]) -> Result<Value> {
        self.run_with(mode, extra, &["--program-time"])
    }

    /// `mode` in one process with the empty pair, in alternating batches (`rocsync-bench
    /// side-by-side`, `paired` its driver): the ratio (mode − untraced) / (empty − untraced)
    /// of each of its rounds.
    pub(super) fn side_by_side(
        &self,
        paired: &str,
        mode: &str,
        extra: &[&str],
    ) -> Result<Vec<f64>> {
        Ok(self.side_by_side_ns(paired, mode, extra)?.0)
    }

    /// [`Self::side_by_side`], and the run's median ns per call of the untraced copy, the
    /// empty pair's and the measured one's.
    pub(super) fn side_by_side_ns(
        &self,
        paired: &str,
        mode: &str,
        extra: &[&str],
    ) -> Result<(Vec<f64>, [f64; 3])> {
        let mut args = self.args("side-by-side", mode, paired, extra);
        args.extend(["--rounds", SIDE_BY_SIDE_ROUNDS]);
        let v = bench_bin(&args)?;
        let lost = v["lost_calls"].as_u64().unwrap_or(0) + v["records_short"].as_u64().unwrap_or(0);
        if lost > 0 {
            let said = format!(
                "side by side, {mode} on {}: {} of {} calls' records lost (counted; the ratios \
                 are of every call, trapped all the same)",
                self.symbol, lost, v["calls"]
            );
            eprintln!("xtask: warning: {said}");
            LOSSES.lock().unwrap_or_else(|e| e.into_inner()).push(said);
        }
        let ratios = v["round_ratios"]
            .as_array()
            .context("round_ratios")?
            .iter()
            .map(|x| x.as_f64().context("round_ratios"))
            .collect::<Result<_>>()?;
        let median = |copy: &str| v["quartiles"][copy][2].as_f64().context("quartiles");
        let ns = [median("untraced")?, median("empty")?, median("measured")?];
        Ok((ratios, ns))
    }

    fn run_with(&self, mode: &str, extra: &[&str], flags: &[&str]) -> Result<Value> {
        let mut args = self.args("probes", mode, self.driver, extra);
        args.extend(["--calls", self.calls]);
        args.extend(flags);
        bench_bin(&args)
    }

    /// `rocsync-bench command --mode mode`, this function of this library, `driver` and
    /// rocsync, and `extra` for rocsync.
    fn args<'b>(
        &'b self,
        command: &'b str,
        mode: &'b str,
        driver: &'b str,
        extra: &[&'b str],
    ) -> Vec<&'b str> {
        let mut args = vec![
            command,
            "--mode",
            mode,
            "--lib",
            self.lib,
            "--symbol",
            self.symbol,
            "--driver",
            driver,
            "--rocsync",
            self.rocsync,
        ];
        for e in extra {
            args.extend(["--extra", e]);
        }
        args
    }
}
