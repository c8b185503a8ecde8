//! `side-by-side`: the per-call cost of rocsync's capture and of the empty pair measured
//! in one process, in alternating batches. Separate runs of each mode (`probes`) see a
//! machine that drifts between them by more than the margin measured; batches of a few
//! milliseconds, alternating, see the same machine.
//!
//! The process calls one function of three copies of the library: one untraced, one
//! under the empty pair, and one measured: the library itself under `rocsync run`, or a
//! copy under one of the bench's pairs. Only the library's own name is rocsync's to probe,
//! so the copies carry other names.

use std::{fs, os::unix::fs::DirBuilderExt as _, path::PathBuf, process::Command};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::per_call::{
    Measured, Mode, attach_bench_pair, capture, capture_counts, run_draining, scratch_trace,
};

/// What is measured: `rounds` rounds of `batch` calls to each copy.
#[derive(clap::Args)]
pub(crate) struct Batches {
    #[arg(long, default_value_t = 60)]
    pub rounds: u64,
    #[arg(long, default_value_t = 10_000)]
    pub batch: u64,
}

pub(crate) fn side_by_side(mode: Mode, measured: &Measured, batches: &Batches) -> Result<()> {
    let (lib, symbol, driver) = (&measured.lib, &measured.symbol, &measured.driver);
    let (rocsync, extra) = (&measured.rocsync, &measured.extra);
    // A directory of our own (created, never reused: no one else's file is opened as root).
    let dir = tempfile::Builder::new()
        .prefix("rocsync-bench-twins-")
        .tempdir()?;
    let twin = |name: &str| -> Result<PathBuf> {
        let sub = dir.path().join(name);
        fs::DirBuilder::new().mode(0o700).create(&sub)?;
        let path = sub.join(format!("libtwin-{name}.so"));
        fs::copy(lib, &path).with_context(|| format!("copying {}", lib.display()))?;
        Ok(path)
    };
    let (untraced, empty) = (twin("untraced")?, twin("empty")?);
    let pair = attach_bench_pair(&empty, symbol, Mode::Empty)?;
    let measured = if mode == Mode::Full {
        lib.to_path_buf()
    } else {
        twin("measured")?
    };
    let mut cmd = Command::new(driver);
    let mut ebpf = None;
    if mode == Mode::Full {
        cmd = capture(rocsync, extra, driver);
    } else if mode != Mode::Untraced {
        // `empty`: a second copy under its own empty pair, the control (ratio ≈ 1).
        ebpf = Some(attach_bench_pair(&measured, symbol, mode)?);
    }
    cmd.args([
        symbol,
        &batches.rounds.to_string(),
        &batches.batch.to_string(),
    ])
    .args([&untraced, &empty, &measured]);
    let ring = match ebpf.as_mut() {
        Some(obj) => mode.drain(obj)?,
        None => None,
    };
    let (out, drained) = run_draining(&mut cmd, ring).context("running the driver")?;
    drop(ebpf);
    drop(pair);
    let _ = fs::remove_file(scratch_trace());
    if !out.status.success() {
        bail!(
            "the driver failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("driver printed no result")?;
    let v: Value = serde_json::from_str(line)?;
    let per_round = |i: usize| -> Result<Vec<f64>> {
        v["ns_per_call"][i]
            .as_array()
            .context("ns_per_call")?
            .iter()
            .map(|x| x.as_f64().context("ns_per_call"))
            .collect()
    };
    let (u, e, c) = (per_round(0)?, per_round(1)?, per_round(2)?);
    ensure!(!u.is_empty() && u.len() == e.len() && e.len() == c.len());
    let ratios: Vec<f64> = (0..u.len())
        .map(|r| (c[r] - u[r]) / (e[r] - u[r]))
        .collect();
    // Every call of the measured copy trapped, whatever its records became: a record
    // the ring had no room for (its reader descheduled for longer than the ring lasts,
    // ~65 ms of a flat-out thread on a busy 2-core host) is a loss to report beside the
    // figure, not a reason to throw the run's figures away.
    let calls = v["calls_per_library"].as_u64().unwrap_or(0);
    let (captured, lost_ids) = capture_counts(&String::from_utf8_lossy(&out.stderr));
    let lost = match mode {
        Mode::Full => calls.saturating_sub(captured.unwrap_or(0)),
        _ => 0,
    };
    let short_records = drained.map_or(0, |records| (2 * calls).saturating_sub(records));
    let quartiles = |xs: &[f64]| {
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        [at(0.0), at(0.25), at(0.5), at(0.75), at(1.0)]
    };
    println!(
        "{}",
        json!({
            "mode": mode.name(),
            "side_by_side": true,
            "rounds": batches.rounds,
            "batch": batches.batch,
            "captured": captured,
            "calls": calls,
            "lost_calls": lost,
            "lost_ids": lost_ids,
            "records_short": short_records,
            "quartiles": {
                "untraced": quartiles(&u),
                "empty": quartiles(&e),
                "measured": quartiles(&c),
                "ratio": quartiles(&ratios),
            },
            "round_ratios": ratios,
        })
    );
    Ok(())
}
