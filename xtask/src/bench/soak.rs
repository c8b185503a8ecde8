//! `cargo xtask bench-soak [MINUTES]` (also part of `cargo xtask bench`, 10 minutes): the
//! release daemon, as root, for MINUTES under six unprivileged (`nobody`) loads at once
//! — short-lived processes churning fresh copies of a real runtime (`soak/churn.py`), a
//! dynolog flood of malformed, refused and valid-looking requests (`soak/dyno.py`), slow
//! connections held on its metrics and dynolog ports (`soak/slow.py`), thread churn
//! (`soak/threads.py`), communicator floods (`soak/comms.py`) and flight-recorder dumps
//! asked in a loop (`soak/flight.py`) — beside a well-behaved root process (`witness`)
//! whose counts and hang trace must come out exact. A root daemon runs on every node
//! beside users it does not trust: whatever they do, its descriptors, BPF links and
//! memory must come back once they stop, and `/metrics` must stay answered. Sampled every
//! 15 s; the baseline is taken idle before the load, then the load is stopped and the
//! daemon watched until it is back (or 60 s), then stopped with SIGTERM. The daemon's log
//! is kept in target/bench-soak/.

mod daemon;
mod loads;
mod report;
mod sample;
mod witness;

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::root;
use daemon::Daemon;
use loads::{SCRIPTS, start_load, stop_load};
use sample::{Sample, bpf_links, du, flight_dumps, keep_largest};

/// `cargo xtask bench`'s soak, and `bench-soak`'s unless told.
pub(super) const MINUTES: f64 = 10.0;
const SAMPLE_EVERY: Duration = Duration::from_secs(15);
/// The idle daemon's time before its baseline (its start-up learning window is 100 ms).
const BASELINE_AFTER: Duration = Duration::from_secs(10);
const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Churned processes a second; dyno requests a second; slow connections per port.
pub(crate) const CHURN_RATE: &str = "4";
pub(crate) const DYNO_RATE: &str = "100";
pub(crate) const SLOW_PER_PORT: &str = "48";
/// Thread churn's bursts (ms); communicator jobs alive at once; seconds between dumps.
pub(crate) const THREAD_BURST_MS: &str = "3000";
pub(crate) const COMM_JOBS: &str = "2";
pub(crate) const FLIGHT_PAUSE_S: &str = "1";
/// The daemon's flags besides its own paths and filters: the flight recorder the dumps
/// ask, the group that lets nobody ask them, and records and waits probed always (the
/// witness's counts are compared exactly; `cycle` estimates them over the budget).
pub(crate) const FLAGS: [&str; 6] = [
    "--flight-recorder",
    "10s",
    "--group",
    "nogroup",
    "--budget-mode",
    "shed-only",
];
const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const NOBODY: u32 = 65534;

fn port(addr: &str) -> Result<String> {
    Ok(addr.rsplit(':').next().context("no port")?.to_string())
}

/// The soak; `command` is how it was asked for (for the report).
pub(super) fn soak(minutes: f64, command: &str) -> Result<(String, Value)> {
    if !Path::new(HIP).exists() {
        bail!("{HIP} is missing: the churn copies a real runtime");
    }
    let dir = PathBuf::from(format!("/tmp/rocsync-bench-soak-{}", std::process::id()));
    let logs = root().join("target/bench-soak");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs)?;
    for sub in ["load", "bin", "witness"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    for sub in ["churn", "comms"] {
        std::fs::create_dir_all(dir.join(sub))?;
        std::os::unix::fs::chown(dir.join(sub), Some(NOBODY), Some(NOBODY))?;
    }
    for (name, text) in SCRIPTS {
        std::fs::write(dir.join("load").join(name), text)?;
    }
    // The soak's own copies: the daemon counts these executables and no others.
    loads::copy_python(&dir.join("bin").join(loads::PYTHON))?;
    std::fs::copy(rocsync_tests::scenario(), dir.join("bin/scenario"))?;
    std::fs::copy(rocsync_tests::nccl_ranks(), dir.join("bin/nccl_ranks"))?;
    let result = run(minutes, &dir, &logs).map(|r| report::report(&r, minutes, command));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What a soak saw, for the report.
pub(crate) struct Run {
    pub links_before: u64,
    pub baseline: Sample,
    pub load: Vec<Sample>,
    pub settle: Vec<Sample>,
    pub settled: Sample,
    /// Seconds after the load stopped until fds, link fds, the system's links, threads
    /// and the heap (within its slack) were back at their baseline (`None`: not within
    /// [`SETTLE_MAX`]).
    pub back_after: [Option<f64>; 5],
    pub shutdown_s: Option<f64>,
    /// Seconds after the daemon exited until the system's links were those before it.
    pub links_gone_after: Option<f64>,
    pub links_after_exit: u64,
    /// Log lines per phase (idle, load, settle, shutdown), and each phase's seconds.
    pub log_phases: Vec<(&'static str, f64, Vec<String>)>,
    pub loads: Vec<(&'static str, Value)>,
    pub state_bytes: u64,
    pub state_files: u64,
    /// Flight dumps left in the state folder at the end, and the largest's bytes.
    pub flight_dumps: (u64, u64),
    /// The well-behaved root process's runs, counts and hang trace ([`witness::check`]).
    pub witness: Value,
}

fn run(minutes: f64, dir: &Path, logs: &Path) -> Result<Run> {
    let links_before = bpf_links()?;
    let t0 = Instant::now();
    let bin = dir.join("bin");
    let exes = ["scenario", "nccl_ranks", loads::PYTHON].map(|e| bin.join(e));
    let mut d = Daemon::start(dir, logs, &exes, &FLAGS)?;
    std::thread::sleep(BASELINE_AFTER);
    let baseline = d.sample(t0, true)?;
    eprintln!("xtask: soak: baseline {baseline:?}");
    let load_start = Instant::now();
    let secs = format!("{}", minutes * 60.0 + 120.0);
    let (mport, dport) = (port(&d.metrics)?, port(&d.dyno)?);
    let dyno_dir = dir.join("state/dyno").display().to_string();
    let churn_dir = dir.join("churn").display().to_string();
    let scenario = bin.join("scenario").display().to_string();
    let ranks = bin.join("nccl_ranks").display().to_string();
    let comms_dir = dir.join("comms").display().to_string();
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let sock = dir.join("rocsync.sock").display().to_string();
    let loads = [
        start_load("churn.py", dir, logs, &[HIP, &churn_dir, &secs, CHURN_RATE])?,
        start_load("dyno.py", dir, logs, &[&dport, &dyno_dir, &secs, DYNO_RATE])?,
        start_load(
            "slow.py",
            dir,
            logs,
            &[&mport, &dport, &secs, SLOW_PER_PORT],
        )?,
        start_load(
            "threads.py",
            dir,
            logs,
            &[&scenario, &secs, THREAD_BURST_MS],
        )?,
        start_load(
            "comms.py",
            dir,
            logs,
            &[&ranks, &comms_dir, &secs, COMM_JOBS],
        )?,
        start_load(
            "flight.py",
            dir,
            logs,
            &[&rocsync, &sock, &secs, FLIGHT_PAUSE_S],
        )?,
    ];
    let load_for = Duration::from_secs_f64(minutes * 60.0);
    let witness = witness::start(
        bin.join("scenario"),
        dir.join("witness"),
        d.tracked.clone(),
        load_for,
    );
    let mut load = Vec::new();
    let mut next = load_start + SAMPLE_EVERY;
    while next < load_start + load_for {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let s = d.sample(t0, true)?;
        eprintln!(
            "xtask: soak: {:.0}/{:.0} s: {} fds, {} links, {} KiB, scrape {:?} ms",
            load_start.elapsed().as_secs_f64(),
            load_for.as_secs_f64(),
            s.fds,
            s.links,
            s.rss_kib,
            s.scrape_ms
        );
        load.push(s);
        next += SAMPLE_EVERY;
    }
    std::thread::sleep((load_start + load_for).saturating_duration_since(Instant::now()));
    load.push(d.sample(t0, true)?);
    let load_end = Instant::now();
    let ran = witness.stop();
    let mut counts = Vec::new();
    for l in loads {
        let name = l.0;
        counts.push((name.trim_end_matches(".py"), stop_load(l)?));
    }
    let stopped = Instant::now();
    let mut settle = Vec::new();
    let mut back_after = [None; 5];
    while stopped.elapsed() < SETTLE_MAX {
        let s = d.sample(t0, false)?;
        let t = stopped.elapsed().as_secs_f64();
        let now = [
            s.fds == baseline.fds,
            s.link_fds == baseline.link_fds,
            s.links == baseline.links,
            // The runtime's idle blocking threads and the flight recorder's window go
            // after seconds of their own: waited for, not taken for leaks.
            s.threads == baseline.threads,
            s.anon_kib as f64 <= baseline.anon_kib as f64 * (1.0 + report::RSS_SLACK),
        ];
        for (b, ok) in back_after.iter_mut().zip(now) {
            if ok && b.is_none() {
                *b = Some(t);
            } else if !ok {
                *b = None; // back only once it stays back
            }
        }
        settle.push(s);
        if back_after.iter().all(Option::is_some) {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let settled = d.sample(t0, true)?;
    let settle_end = Instant::now();
    let witness = witness::check(&ran, &get_metrics(&d.metrics)?, &dir.join("state"));
    let (state_bytes, state_files) = du(&dir.join("state"));
    let flight_dumps = flight_dumps(&dir.join("state/traces"));
    keep_largest(
        &dir.join("state/dyno"),
        &logs.join("largest-dyno-trace.json"),
    );
    let shutdown_s = d.stop()?;
    let exited = Instant::now();
    let mut links_gone_after = None;
    let mut links_after_exit = bpf_links()?;
    while exited.elapsed() < Duration::from_secs(30) {
        links_after_exit = bpf_links()?;
        if links_after_exit <= links_before {
            links_gone_after = Some(exited.elapsed().as_secs_f64());
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let phases = [
        ("start and idle", t0, load_start),
        ("load", load_start, load_end),
        ("settle", load_end, settle_end),
        ("shutdown", settle_end, exited + Duration::from_secs(1)),
    ];
    let log_phases = phases
        .iter()
        .map(|&(name, from, to)| {
            let lines = d.seen.iter().filter(|(at, _)| (from..to).contains(at));
            let lines = lines.map(|l| l.1.clone()).collect();
            (name, (to - from).as_secs_f64(), lines)
        })
        .collect();
    Ok(Run {
        links_before,
        baseline,
        load,
        settle,
        settled,
        back_after,
        shutdown_s,
        links_gone_after,
        links_after_exit,
        log_phases,
        loads: counts,
        state_bytes,
        state_files,
        flight_dumps,
        witness,
    })
}

/// The whole of `/metrics`' body.
fn get_metrics(addr: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (_, body) = out.split_once("\r\n\r\n").context("no HTTP body")?;
    Ok(body.to_string())
}
