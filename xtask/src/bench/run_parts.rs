//! Where `rocsync run`'s cost goes on a dense loop (issue 63, item 5), `cargo xtask
//! bench-run-parts`: the scenario's `dense` loop (record, stream wait, synchronize, then
//! 50 µs of work on the host) untraced; with the traps alone (the daemon counting with
//! every return probed and nothing recorded); with the call records written and a
//! consumer that only keeps them (the daemon's flight recorder: no pairing, resolution
//! or emitting); under `rocsync run` (its consumer pairs, resolves and writes the trace);
//! and `rocsync run` with the consumer pinned on the target's CPU (competing for it) or
//! on another. Rounds rotated, medians; the consumer's own CPU time per iteration is read
//! from /proc while it runs.

use std::{
    fmt::Write as _,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{
    daemon::{Daemon, median},
    dense::{self, SPIN_US},
};
use crate::root;

const ROUNDS: usize = 3;
const MS: &str = "5000";

#[derive(Clone, Copy)]
enum How {
    Untraced,
    Daemon(&'static [&'static str]),
    /// `rocsync run`; the CPUs of the consumer and of the target (`None`: any).
    Run(Option<(&'static str, &'static str)>),
}

const MODES: [(&str, How, &str); 7] = [
    ("untraced", How::Untraced, ""),
    (
        "untraced, pinned",
        How::Run(Some(("-", "0"))),
        "the loop on CPU 0 alone: the pinned modes' baseline",
    ),
    (
        "traps alone",
        How::Daemon(&["--budget", "off", "--return-probes", "all"]),
        "every call's entry and return trapped and counted, nothing recorded (the daemon)",
    ),
    (
        "records, kept",
        How::Daemon(&["--budget", "off", "--flight-recorder", "10s"]),
        "the same with each call's two records written and a consumer that only keeps them (the daemon's flight recorder)",
    ),
    (
        "rocsync run",
        How::Run(None),
        "the records paired, resolved and written as a trace by `run`'s consumer, wherever the scheduler puts it",
    ),
    (
        "rocsync run, consumer on the target's CPU",
        How::Run(Some(("0", "0"))),
        "both on CPU 0: the consumer competes with the loop",
    ),
    (
        "rocsync run, consumer on another CPU",
        How::Run(Some(("1", "0"))),
        "the loop on CPU 0, the consumer on CPU 1",
    ),
];

/// `pid`'s user + system CPU seconds, if it still runs.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    Some(ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64)
}

/// Waits for `child`, reading the CPU time of `consumer` (its pid) meanwhile: the last
/// reading before it ended.
fn wait_reading(child: &mut Child, consumer: Option<u32>) -> Result<Option<f64>> {
    let mut last = None;
    loop {
        if let Some(p) = consumer
            && let Some(s) = cpu_seconds(p)
        {
            last = Some(s);
        }
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{status}");
            }
            return Ok(last);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Run {
    per_second: f64,
    /// The consumer's CPU µs per iteration (3 calls).
    consumer_us: Option<f64>,
}

fn one(how: How, dir: &Path) -> Result<Run> {
    let scenario = rocsync_tests::scenario();
    let log = dir.join("dense.log");
    let _ = std::fs::remove_file(&log);
    let consumer_s = match how {
        How::Daemon(options) => {
            let daemon = Daemon::start(dir, &scenario, options)?;
            let before = daemon.cpu_seconds()?;
            let mut child = dense::start(&scenario, MS, &log, Some(&daemon))?;
            let status = child.wait()?;
            let used = daemon.cpu_seconds()? - before;
            daemon.stop()?;
            if !status.success() {
                bail!("the scenario: {status}");
            }
            Some(used)
        }
        How::Untraced => {
            let status = Command::new(&scenario)
                .args(["dense", MS, SPIN_US])
                .env("SCENARIO_LOG", &log)
                .stdout(Stdio::null())
                .status()?;
            if !status.success() {
                bail!("the scenario: {status}");
            }
            None
        }
        How::Run(cpus) => {
            let mut cmd = Command::new("taskset");
            let (consumer, target) = cpus.unwrap_or(("0-1023", "0-1023"));
            let rocsync = root().join("target/release/rocsync");
            if consumer == "-" {
                cmd.args(["-c", target]).arg(&scenario);
            } else {
                cmd.args(["-c", consumer])
                    .arg(&rocsync)
                    .args(["run", "--no-status", "--force", "-o"])
                    .arg(dir.join("run.json"))
                    .args(["--", "taskset", "-c", target])
                    .arg(&scenario);
            }
            let mut child = cmd
                .args(["dense", MS, SPIN_US])
                .env("SCENARIO_LOG", &log)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting the run")?;
            let pid = (consumer != "-").then_some(child.id());
            wait_reading(&mut child, pid)?
        }
    };
    let made = dense::iterations(&log)?;
    let secs = MS.parse::<f64>()? / 1e3;
    Ok(Run {
        per_second: made / secs,
        consumer_us: consumer_s.map(|s| s * 1e6 / made.max(1.0)),
    })
}

pub(super) fn run_parts() -> Result<(String, Value)> {
    let dir = std::env::temp_dir().join(format!("rocsync-bench-parts-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<Vec<Run>> = MODES.iter().map(|_| Vec::new()).collect();
    for round in 0..ROUNDS {
        for k in 0..MODES.len() {
            let i = (k + round) % MODES.len();
            eprintln!(
                "xtask: run parts round {}/{ROUNDS}: {}",
                round + 1,
                MODES[i].0
            );
            runs[i].push(one(MODES[i].1, &dir)?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rate = |i: usize| median(runs[i].iter().map(|r| r.per_second).collect());
    let (bare, pinned) = (rate(0), rate(1));
    let mut md = format!(
        "\nThe scenario's `dense` mode: per iteration `hipEventRecord`, `hipStreamWaitEvent`, \
         `hipStreamSynchronize` (simulated runtime), then {SPIN_US} µs of work on the host, for \
         {} s; {ROUNDS} rounds, the modes rotated, medians. \"× untraced\" is the loop's \
         iterations per second over the untraced loop's (the pinned modes: over the loop \
         pinned alone, on CPU 0); \"consumer\" is the CPU time of what reads the records \
         (the daemon, or `rocsync run`, from /proc while it runs) per iteration. Each row \
         adds one part to the one above it; the last two move `run`'s consumer.\n\n\
         | mode | what it adds | iterations/s | × untraced | each round | consumer µs / iteration |\n\
         | --- | --- | ---: | ---: | --- | ---: |\n",
        MS.parse::<f64>()? / 1e3
    );
    let mut modes = Vec::new();
    for (i, ((label, how, what), rs)) in MODES.iter().zip(&runs).enumerate() {
        let base = match how {
            How::Run(Some(_)) if i > 1 => pinned,
            _ => bare,
        };
        let r = rate(i);
        let each: Vec<String> = rs
            .iter()
            .map(|x| format!("{:.3}", base / x.per_second))
            .collect();
        let consumer: Vec<f64> = rs.iter().filter_map(|x| x.consumer_us).collect();
        let consumer = (!consumer.is_empty()).then(|| median(consumer));
        let _ = writeln!(
            md,
            "| {label} | {what} | {r:.0} | {:.3} | {} | {} |",
            base / r,
            each.join(" "),
            consumer.map_or("–".into(), |c| format!("{c:.2}"))
        );
        modes.push(json!({
            "mode": label, "iterations_per_second": r, "slowdown": base / r,
            "consumer_us_per_iteration": consumer,
        }));
    }
    Ok((md, json!({ "run_parts": modes })))
}
