//! What the daemon's budget saves a polling process: the scenario's `poll` mode (one
//! thread polling `hipEventQuery` flat out, another recording and waiting every 2 ms)
//! polls for a few seconds with no daemon, under the daemon with `--budget off`, and
//! under `--budget 1%`, interleaved; the polling thread's own ns per poll, the share of
//! its polls the daemon counted, and the probes' share of its CPU the daemon measured.

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::daemon::{Daemon, get, median};

const ROUNDS: usize = 3;
const POLLING: Duration = Duration::from_secs(4);
/// (label, the daemon's options; `None`: no daemon).
const MODES: [(&str, Option<&[&str]>); 3] = [
    ("no daemon", None),
    ("--budget off", Some(&["--budget", "off"])),
    ("--budget 1%", Some(&["--budget", "1%"])),
];

/// One series' value (summed over its label sets) from a `/metrics` text.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

struct Run {
    ns_per_poll: f64,
    /// Polls the daemon counted, of those made.
    counted: Option<f64>,
    /// The probes' share of the process's CPU, as the daemon last measured it.
    share: Option<f64>,
}

fn one(options: Option<&[&str]>, dir: &std::path::Path) -> Result<Run> {
    let scenario = rocsync_tests::scenario();
    let daemon = options
        .map(|o| Daemon::start(dir, &scenario, o))
        .transpose()?;
    let mut child = Command::new(&scenario)
        .arg("poll")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the scenario")?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut gate = child.stdin.take().context("stdin")?;
    let mut said = |word: &str| -> Result<String> {
        match out.next() {
            Some(Ok(l)) if l.starts_with(word) => Ok(l),
            other => bail!("the scenario said {other:?}, not {word:?}"),
        }
    };
    said("ready")?;
    if let Some(d) = &daemon {
        d.wait_for(&format!("tracking pid {}", child.id()))?;
    }
    writeln!(gate, "go")?;
    said("polling from ")?;
    let start = Instant::now();
    std::thread::sleep(POLLING - Duration::from_millis(700));
    let share = daemon
        .as_ref()
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| metric(&text, "rocsync_probe_cost_ratio"));
    std::thread::sleep(Duration::from_millis(700));
    writeln!(gate, "stop")?;
    let polled: f64 = said("polled ")?["polled ".len()..].trim().parse()?;
    let seconds = start.elapsed().as_secs_f64();
    writeln!(gate, "end")?;
    child.wait()?;
    let counted = daemon
        .as_ref()
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| {
            let prefix = "rocsync_sync_calls_total{api=\"hipEventQuery\"";
            let counted: f64 = text
                .lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            counted.max(0.0) / polled
        });
    if let Some(d) = daemon {
        d.stop()?;
    }
    Ok(Run {
        ns_per_poll: seconds * 1e9 / polled,
        counted,
        share,
    })
}

pub(super) fn budget() -> Result<(String, Value)> {
    let dir = std::env::temp_dir().join(format!("rocsync-bench-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut runs: Vec<Vec<Run>> = MODES.iter().map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for (i, (_, options)) in MODES.iter().enumerate() {
            runs[i].push(one(*options, &dir)?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let bare = median(runs[0].iter().map(|r| r.ns_per_poll).collect());
    let mut md = format!(
        "The scenario's `poll` mode: one thread polls `hipEventQuery` flat out for {} s while \
         another records and waits every 2 ms; {ROUNDS} rounds, the modes interleaved, \
         medians. The probes' share is the daemon's own measurement (`rocsync_probe_cost_ratio`) \
         shortly before the polling stops. Under the budget the probe comes back after 2 s, \
         then 4 s, doubling to 64 s while the polling goes on: over a 4 s poll the retries \
         are most of what is left of the cost; over minutes it falls towards none.\n\n\
         | mode | ns per poll | × no daemon | polls counted | probes' share of its CPU |\n\
         | --- | ---: | ---: | ---: | ---: |\n",
        POLLING.as_secs()
    );
    let mut json_modes = Vec::new();
    for ((label, _), rs) in MODES.iter().zip(&runs) {
        let ns = median(rs.iter().map(|r| r.ns_per_poll).collect());
        let pct = |v: Option<f64>| v.map_or("–".into(), |v| format!("{:.1} %", v * 100.0));
        let counted = rs[0]
            .counted
            .map(|_| median(rs.iter().filter_map(|r| r.counted).collect()));
        let share = rs[0]
            .share
            .map(|_| median(rs.iter().filter_map(|r| r.share).collect()));
        let _ = writeln!(
            md,
            "| {label} | {ns:.1} | {:.2} | {} | {} |",
            ns / bare,
            pct(counted),
            pct(share)
        );
        json_modes.push(json!({
            "mode": label, "ns_per_poll": ns, "ratio": ns / bare,
            "polls_counted": counted, "probe_share": share,
        }));
    }
    Ok((md, json!({ "budget": json_modes })))
}
