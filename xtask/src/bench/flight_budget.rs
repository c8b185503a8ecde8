//! The flight recorder held to the budget (issue 63, item 4), `cargo xtask
//! bench-flight-budget [BEFORE]`: the scenario's `dense` loop (record, stream wait and
//! synchronize, then 50 µs of work on the host, for 10 s) with no daemon, and under a
//! daemon with `--budget 1% --flight-recorder 10s` (and with the stall settings the docs
//! recommend for fleets, `--capture-on-stall 50ms`), of `BEFORE` (another build's
//! `rocsync`, e.g. main's, where the flight recorder held every probe on) and of this
//! tree's, rounds rotated, medians. Appends a dated section to bench/flight.md.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Result, bail};

use super::{
    daemon::{Daemon, get, median},
    dense::{self, SPIN_US, metric},
};
use crate::root;

const ROUNDS: usize = 3;
const MS: &str = "10000";
const FLIGHT: &[&str] = &["--budget", "1%", "--flight-recorder", "10s"];
const FLEET: &[&str] = &[
    "--budget",
    "1%",
    "--flight-recorder",
    "10s",
    "--capture-on-stall",
    "50ms",
];

struct Run {
    per_second: f64,
    /// The duty cycle's share probed near the end, and the calls the flight recorder
    /// did not record (the daemon's word; 0 before this branch).
    duty: Option<(f64, f64)>,
}

fn one(daemon: Option<(&Path, &[&str])>, dir: &Path) -> Result<Run> {
    let scenario = rocsync_tests::scenario();
    let daemon = daemon
        .map(|(bin, o)| Daemon::start_of(bin, dir, &scenario, o))
        .transpose()?;
    let log = dir.join("dense.log");
    let mut child = dense::start(&scenario, MS, &log, daemon.as_ref())?;
    let ms: f64 = MS.parse()?;
    std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1e3 - 0.7));
    let duty = (daemon.as_ref())
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| {
            (
                metric(&text, "rocsync_probes_duty_cycle"),
                metric(&text, "rocsync_flight_recorder_unrecorded_calls_total"),
            )
        });
    child.wait()?;
    let made = dense::iterations(&log)?;
    if let Some(d) = daemon {
        d.stop()?;
    }
    Ok(Run {
        per_second: made / (ms / 1e3),
        duty,
    })
}

/// A mode's label, and the daemon it runs (which rocsync, its flags), if any.
type Mode<'a> = (String, Option<(&'a Path, &'a [&'a str])>);

pub(crate) fn flight_budget(before: Option<&str>) -> Result<()> {
    let before = PathBuf::from(before.unwrap_or("/work/main/target/release/rocsync"));
    if !before.exists() {
        bail!("{}: no such rocsync to compare with", before.display());
    }
    let after = root().join("target/release/rocsync");
    let modes: Vec<Mode> = vec![
        ("no daemon".into(), None),
        (
            "before: flight 10s, budget 1 %".into(),
            Some((&before, FLIGHT)),
        ),
        (
            "after: flight 10s, budget 1 %".into(),
            Some((&after, FLIGHT)),
        ),
        (
            "before: + --capture-on-stall 50ms".into(),
            Some((&before, FLEET)),
        ),
        (
            "after: + --capture-on-stall 50ms".into(),
            Some((&after, FLEET)),
        ),
    ];
    let dir = std::env::temp_dir().join(format!("rocsync-bench-flight-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<Vec<Run>> = modes.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        for k in 0..modes.len() {
            let i = (k + round) % modes.len();
            eprintln!("xtask: round {round}: {}", modes[i].0);
            runs[i].push(one(modes[i].1, &dir)?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let bare = median(runs[0].iter().map(|r| r.per_second).collect());
    let date = String::from_utf8(
        Command::new("date")
            .args(["-u", "+%F %R UTC"])
            .output()?
            .stdout,
    )?;
    let mut md = format!(
        "\n## The flight recorder held to the budget ({})\n\n\
         Command (root): `cargo xtask bench-flight-budget {}` — before: that build's \
         `rocsync` (main); after: this tree's. The scenario's `dense` mode: per iteration \
         `hipEventRecord`, `hipStreamWaitEvent`, `hipStreamSynchronize`, then {SPIN_US} µs \
         of work on the host, for {} s; {ROUNDS} rounds, the modes rotated, medians. \
         Iterations per second are the loop's own (its log); the duty cycle and the calls \
         the flight recorder did not record are the daemon's `/metrics` 0.7 s before the \
         loop ends (before: no such counter, and no cycle).\n\n\
         | mode | iterations/s | × no daemon | each round | probed share (duty) | records not recorded (estimated) |\n\
         | --- | ---: | ---: | --- | ---: | ---: |\n",
        date.trim(),
        before.display(),
        MS.parse::<f64>()? / 1e3
    );
    for ((label, _), rs) in modes.iter().zip(&runs) {
        let rate = median(rs.iter().map(|r| r.per_second).collect());
        let each: Vec<String> = rs
            .iter()
            .map(|r| format!("{:.3}", r.per_second / bare))
            .collect();
        let duty = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<f64> = rs.iter().filter_map(|r| r.duty.as_ref().map(f)).collect();
            match v.is_empty() {
                true => "–".to_string(),
                false => format!("{:.2}", median(v)),
            }
        };
        let _ = writeln!(
            md,
            "| {label} | {rate:.0} | {:.3} | {} | {} | {} |",
            rate / bare,
            each.join(" "),
            duty(|d| d.0),
            duty(|d| d.1)
        );
    }
    let file = root().join("bench/flight.md");
    let mut text = std::fs::read_to_string(&file).unwrap_or_else(|_| {
        "# rocsync: the flight recorder's cost on a sync-dense loop\n".to_string()
    });
    text.push_str(&md);
    std::fs::write(&file, text)?;
    eprintln!("xtask: appended to bench/flight.md");
    Ok(())
}
