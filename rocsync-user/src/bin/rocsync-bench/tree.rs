//! `tree`: what following processes costs, both ways of placing the probes.
//! - attach and detach time for N processes: pid-scoped probes (a set per process) against
//!   file-wide probes (one set, filtered in the kernel by the traced set);
//! - the cost to a bystander: ns per call of an untraced process mapping the same library
//!   while another process is traced, with no probes, pid-scoped and file-wide ones.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::Path,
    process::{Child, Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, Result, bail};
use rocsync::calls::{
    backend::RUNTIMES,
    probes::{ApiChoice, Probes},
};
use rocsync_common::{Config, Switch};
use serde_json::json;

/// A process mapping the library and doing nothing (a gated scenario), ended on drop.
struct Idle(Child);

impl Idle {
    fn start(scenario: &Path) -> Result<Self> {
        let mut c = Command::new(scenario)
            .args(["gated", "basic"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting an idle scenario")?;
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().context("stdout")?).read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("the idle scenario said {line:?}");
        }
        Ok(Idle(c))
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        // Opening the gate lets it run its calls and exit; kill only if it does not.
        if let Some(mut i) = self.0.stdin.take() {
            let _ = i.write_all(b"go\n");
        }
        if self.0.wait().is_err() {
            let _ = self.0.kill();
        }
    }
}

const TRACED: Config = Config {
    capture: 1,
    follow: 1,
    ..Config::INACTIVE
};

/// Attaches the runtime's probes for `pids`, pid-scoped or file-wide; returns the probes
/// and the seconds attaching took.
fn attach(lib: &Path, pids: &[u32], file_wide: bool) -> Result<(Probes, f64)> {
    let mut probes = Probes::load(Default::default())?;
    if file_wide {
        probes.follow_children()?;
    }
    probes.set_switch(Switch {
        capture: 1,
        by_process: u32::from(file_wide),
        agents: 0,
        ..Switch::default()
    })?;
    let start = Instant::now();
    for (i, &pid) in pids.iter().enumerate() {
        probes.set_target(pid, TRACED)?;
        if i == 0 || !file_wide {
            let choice = ApiChoice::default();
            probes.attach_runtime(&RUNTIMES[0], &choice, lib, Some(pid), false)?;
        }
    }
    Ok((probes, start.elapsed().as_secs_f64()))
}

fn bystander_ns(driver: &Path, lib: &Path, symbol: &str, calls: u64) -> Result<f64> {
    let out = Command::new(driver)
        .arg(lib)
        .arg(symbol)
        .arg(calls.to_string())
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("no result")?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    v["ns_per_call"].as_f64().context("ns_per_call")
}

pub(crate) fn tree(
    scenario: &Path,
    driver: &Path,
    lib: &Path,
    symbol: &str,
    processes: usize,
    calls: u64,
) -> Result<()> {
    let idle: Vec<Idle> = (0..processes)
        .map(|_| Idle::start(scenario))
        .collect::<Result<_>>()?;
    let pids: Vec<u32> = idle.iter().map(|i| i.0.id()).collect();
    let mut timing = serde_json::Map::new();
    let mut bystander = serde_json::Map::new();
    bystander.insert(
        "no probes".into(),
        bystander_ns(driver, lib, symbol, calls)?.into(),
    );
    for (name, file_wide) in [("pid_scoped", false), ("file_wide", true)] {
        let (mut probes, attach_s) = attach(lib, &pids, file_wide)?;
        // One traced process; the driver, mapping the same file, is not traced.
        bystander.insert(
            name.into(),
            bystander_ns(driver, lib, symbol, calls)?.into(),
        );
        let start = Instant::now();
        let _ = probes.detach_in_background().join();
        let detach_s = start.elapsed().as_secs_f64();
        timing.insert(
            name.into(),
            json!({ "attach_s": attach_s, "detach_s": detach_s }),
        );
    }
    drop(idle);
    println!(
        "{}",
        json!({ "processes": processes, "timing": timing, "bystander_ns_per_call": bystander })
    );
    Ok(())
}
