//! What the budget's duty cycle holds on a sync-dense loop: the scenario's `dense` mode
//! (record, stream wait and synchronize, then 50 µs of work on the host, for 10 s) with
//! no daemon, under the daemon's default budget shed-only (records and waits always
//! probed, as before), and under its default (the duty cycle); rounds rotated, medians.
//! The loop's own iterations per second, the probes' share of its CPU the daemon
//! measured, and the records the daemon showed (counted and estimated) of those made.

use std::fmt::Write as _;

use anyhow::Result;
use serde_json::{Value, json};

use super::{
    daemon::{Daemon, get, median},
    dense::{self, SPIN_US, metric},
};

const ROUNDS: usize = 3;
const MS: &str = "10000";
/// (label, the daemon's options; `None`: no daemon).
const MODES: [(&str, Option<&[&str]>); 3] = [
    ("no daemon", None),
    ("1 %, shed-only", Some(&["--budget-mode", "shed-only"])),
    ("1 %, duty cycle (default)", Some(&[])),
];

struct Run {
    per_second: f64,
    /// The probes' share of the loop's CPU (the daemon's last measure while it ran).
    share: Option<f64>,
    /// Records shown of those made, and of them estimated.
    shown: Option<(f64, f64)>,
}

fn one(options: Option<&[&str]>, dir: &std::path::Path) -> Result<Run> {
    let scenario = rocsync_tests::scenario();
    let daemon = options
        .map(|o| Daemon::start(dir, &scenario, o))
        .transpose()?;
    let log = dir.join("dense.log");
    let mut child = dense::start(&scenario, MS, &log, daemon.as_ref())?;
    let ms: f64 = MS.parse()?;
    std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1e3 - 0.7));
    let share = daemon
        .as_ref()
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| metric(&text, "rocsync_probe_cost_ratio"));
    child.wait()?;
    let made = dense::iterations(&log)?;
    let shown = daemon
        .as_ref()
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| {
            let series =
                |family: &str| metric(&text, &format!("{family}{{api=\"hipEventRecord\"")) / made;
            (
                series("rocsync_sync_calls_total"),
                series("rocsync_sync_calls_estimated_total"),
            )
        });
    if let Some(d) = daemon {
        d.stop()?;
    }
    Ok(Run {
        per_second: made / (ms / 1e3),
        share,
        shown,
    })
}

pub(super) fn cycle() -> Result<(String, Value)> {
    let dir = std::env::temp_dir().join(format!("rocsync-bench-cycle-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<Vec<Run>> = MODES.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        for k in 0..MODES.len() {
            let i = (k + round) % MODES.len();
            runs[i].push(one(MODES[i].1, &dir)?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let bare = median(runs[0].iter().map(|r| r.per_second).collect());
    let mut md = format!(
        "The scenario's `dense` mode: per iteration `hipEventRecord`, `hipStreamWaitEvent` \
         and `hipStreamSynchronize`, then {SPIN_US} µs of work on the host, for {} s; \
         {ROUNDS} rounds, the modes rotated, medians. The daemon measures the probes' share \
         from its first second and starts the cycle at the next, so the first 2–3 s of each \
         run are probed whole. Synchronizes stay probed: their share is what the cycle \
         cannot take.\n\n\
         | mode | iterations/s | × no daemon | probes' share of its CPU | records shown / made | of them estimated |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n",
        MS.parse::<f64>()? / 1e3
    );
    let mut json_modes = Vec::new();
    for ((label, _), rs) in MODES.iter().zip(&runs) {
        let rate = median(rs.iter().map(|r| r.per_second).collect());
        let pct = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} %", v * 100.0));
        let share = rs[0]
            .share
            .map(|_| median(rs.iter().filter_map(|r| r.share).collect()));
        let shown = rs[0]
            .shown
            .map(|_| median(rs.iter().filter_map(|r| r.shown.map(|s| s.0)).collect()));
        let estimated = rs[0]
            .shown
            .map(|_| median(rs.iter().filter_map(|r| r.shown.map(|s| s.1)).collect()));
        let _ = writeln!(
            md,
            "| {label} | {rate:.0} | {:.3} | {} | {} | {} |",
            rate / bare,
            pct(share),
            pct(shown),
            pct(estimated)
        );
        json_modes.push(json!({
            "mode": label, "iterations_per_second": rate, "ratio": rate / bare,
            "probe_share": share, "records_shown": shown, "records_estimated": estimated,
        }));
    }
    Ok((md, json!({ "cycle": json_modes })))
}
