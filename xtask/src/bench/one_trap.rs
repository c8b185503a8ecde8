//! What one trap saves a counted process: a thread records events flat out
//! (`bench_calls` calling the simulated `hipEventRecord`, and `hipStreamSynchronize` for
//! the calls that keep their return) with no daemon, under the daemon with every return
//! probed (`--return-probes all`, as before) and with only those counting needs (the
//! default); rounds rotated, medians. Also the calls the daemon counted of those made.

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::daemon::{Daemon, get, median};

const ROUNDS: usize = 3;
const CALLS: &str = "400000";
/// The calls `bench_calls` makes before its timed ones (lazy binding, caches): counted too.
const WARM_UP: f64 = 1000.0;
/// (label, the daemon's options; `None`: no daemon).
/// Shed-only: a flat-out loop is over the budget, and its records are measured probed
/// (bench-cycle measures the duty cycle).
const MODES: [(&str, Option<&[&str]>); 3] = [
    ("no daemon", None),
    (
        "every return probed",
        Some(&["--return-probes", "all", "--budget-mode", "shed-only"]),
    ),
    ("one trap (default)", Some(&["--budget-mode", "shed-only"])),
];
const APIS: [&str; 2] = ["hipEventRecord", "hipStreamSynchronize"];

struct Run {
    ns_per_call: f64,
    /// Calls the daemon counted, of those made.
    counted: Option<f64>,
}

fn one(api: &str, options: Option<&[&str]>, dir: &std::path::Path) -> Result<Run> {
    let program = rocsync_tests::bench_calls();
    let daemon = options
        .map(|o| Daemon::start(dir, &program, o))
        .transpose()?;
    let mut child = Command::new(&program)
        .arg(rocsync_tests::sim_hip())
        .args([api, CALLS])
        .env("BENCH_GATE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting bench_calls")?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?).lines();
    match out.next() {
        Some(Ok(l)) if l == "loaded" => {}
        other => bail!("bench_calls said {other:?}, not \"loaded\""),
    }
    if let Some(d) = &daemon {
        d.wait_for(&format!("tracking pid {}", child.id()))?;
    }
    writeln!(child.stdin.take().context("stdin")?, "go")?;
    let line = out.next().context("no result from bench_calls")??;
    child.wait()?;
    let result: Value = serde_json::from_str(&line)?;
    let counted = daemon
        .as_ref()
        .map(|d| get(d.metrics_addr(), "/metrics"))
        .transpose()?
        .map(|(_, text)| {
            let prefix = format!("rocsync_sync_calls_total{{api=\"{api}\"");
            let counted: f64 = text
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            counted / (CALLS.parse::<f64>().unwrap_or(1.0) + WARM_UP)
        });
    if let Some(d) = daemon {
        d.stop()?;
    }
    Ok(Run {
        ns_per_call: result["ns_per_call"].as_f64().context("ns_per_call")?,
        counted,
    })
}

pub(super) fn one_trap() -> Result<(String, Value)> {
    let dir = std::env::temp_dir().join(format!("rocsync-bench-one-trap-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut md = format!(
        "`bench_calls` calls one function of the simulated HIP runtime {CALLS} times on one \
         thread, flat out; {ROUNDS} rounds, the modes rotated, medians. Both daemon \
         modes run `--budget-mode shed-only`: records and waits are always probed (the \
         default duty cycle would take a flat-out loop's, bench/cycle.md).\n\n\
         | function | mode | ns per call | × no daemon | calls counted |\n\
         | --- | --- | ---: | ---: | ---: |\n"
    );
    let mut json_rows = Vec::new();
    for api in APIS {
        let mut runs: Vec<Vec<Run>> = MODES.iter().map(|_| Vec::new()).collect();
        for round in 0..ROUNDS {
            for k in 0..MODES.len() {
                let i = (k + round) % MODES.len();
                runs[i].push(one(api, MODES[i].1, &dir)?);
            }
        }
        let bare = median(runs[0].iter().map(|r| r.ns_per_call).collect());
        for ((label, _), rs) in MODES.iter().zip(&runs) {
            let ns = median(rs.iter().map(|r| r.ns_per_call).collect());
            let counted = rs[0]
                .counted
                .map(|_| median(rs.iter().filter_map(|r| r.counted).collect()));
            let shown = counted.map_or("–".into(), |c| format!("{:.1} %", c * 100.0));
            let _ = writeln!(
                md,
                "| {api} | {label} | {ns:.0} | {:.2} | {shown} |",
                ns / bare
            );
            json_rows.push(json!({
                "api": api, "mode": label, "ns_per_call": ns, "ratio": ns / bare,
                "counted": counted,
            }));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((md, json!({ "one_trap": json_rows })))
}
