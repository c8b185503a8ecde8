//! `cargo xtask bench-soak [MINUTES]` (also part of `cargo xtask bench`, 10 minutes): the
//! release daemon, as root, for MINUTES under three unprivileged (`nobody`) loads at once
//! — short-lived processes churning fresh copies of a real runtime (`soak/churn.py`), a
//! dynolog flood of malformed, refused and valid-looking requests (`soak/dyno.py`), and
//! slow connections held on its metrics and dynolog ports (`soak/slow.py`). A root daemon
//! runs on every node beside users it does not trust: whatever they do, its descriptors,
//! BPF links and memory must come back once they stop, and `/metrics` must stay
//! answered. Sampled every 15 s; the baseline is taken idle before the load, then the load
//! is stopped and the daemon watched until it is back (or 60 s), then stopped with SIGTERM.
//! The daemon's log is kept in target/bench-soak/.

mod report;
mod sample;

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, channel},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::root;
use sample::{Sample, bpf_links, du, keep_largest};

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
const SCRIPTS: [(&str, &str); 3] = [
    ("churn.py", include_str!("soak/churn.py")),
    ("dyno.py", include_str!("soak/dyno.py")),
    ("slow.py", include_str!("soak/slow.py")),
];
const HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const NOBODY: u32 = 65534;

/// The daemon's log lines, each with when it was read.
struct Daemon {
    child: Child,
    lines: Receiver<(Instant, String)>,
    /// Lines read so far, with their time.
    seen: Vec<(Instant, String)>,
    metrics: String,
    dyno: String,
}

impl Daemon {
    fn start(dir: &Path, logs: &Path) -> Result<Daemon> {
        let mut child = Command::new(root().join("target/release/rocsync"))
            .args(["daemon", "--metrics-addr", "127.0.0.1:0"])
            .args(["--dynolog-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(dir.join("rocsync.sock"))
            .arg("--lock")
            .arg(dir.join("daemon.lock"))
            // Only the load's processes: the machine's other work (tests, other daemons)
            // is neither probed by it nor counted in its figures.
            .args(["--user", "nobody"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the daemon")?;
        let stderr = child.stderr.take().context("stderr")?;
        let mut log = std::fs::File::create(logs.join("daemon.log"))?;
        let (tx, lines) = channel();
        let t0 = Instant::now();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let now = Instant::now();
                let _ = writeln!(log, "[{:9.3}] {l}", (now - t0).as_secs_f64());
                if tx.send((now, l)).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child,
            lines,
            seen: Vec::new(),
            metrics: String::new(),
            dyno: String::new(),
        };
        let until = Instant::now() + Duration::from_secs(60);
        while !d.seen.iter().any(|(_, l)| l.contains("SIGTERM stops")) {
            let left = until.saturating_duration_since(Instant::now());
            let line = d
                .lines
                .recv_timeout(left)
                .context("the daemon never started")?;
            d.seen.push(line);
        }
        let after = |needle: &str| {
            d.seen.iter().find_map(|(_, l)| {
                let rest = l.split(needle).nth(1)?;
                Some(rest.trim().trim_end_matches("/metrics").to_string())
            })
        };
        d.metrics = after("metrics on http://").context("no metrics address")?;
        d.dyno = after("dynolog requests on ").context("no dynolog address")?;
        Ok(d)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the lines written so far; fails if the daemon has exited.
    fn check(&mut self) -> Result<()> {
        self.seen.extend(self.lines.try_iter());
        if let Some(status) = self.child.try_wait()? {
            let tail: Vec<&str> = self.seen.iter().rev().take(20).map(|l| &*l.1).collect();
            bail!("the daemon exited ({status}); its last lines: {tail:#?}");
        }
        Ok(())
    }

    fn sample(&mut self, t0: Instant, scrape: bool) -> Result<Sample> {
        self.check()?;
        let metrics = scrape.then_some(self.metrics.as_str());
        Sample::take(self.pid(), t0.elapsed().as_secs_f64(), metrics)
    }

    /// SIGTERM, and the seconds until it has exited (`None`: not within 60 s, killed).
    fn stop(&mut self) -> Result<Option<f64>> {
        let start = Instant::now();
        // SAFETY: signals the daemon this benchmark started.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let exited = wait_for(&mut self.child, Duration::from_secs(60))?;
        let took = start.elapsed().as_secs_f64();
        // Its last lines, up to the end of its standard error.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(l);
        }
        Ok(exited.then_some(took))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: signals the daemon this benchmark started.
            unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
            let _ = wait_for(&mut self.child, Duration::from_secs(30));
        }
    }
}

/// Waits up to `limit` for `child`; past it, kills it. Whether it exited by itself.
fn wait_for(child: &mut Child, limit: Duration) -> Result<bool> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if child.try_wait()?.is_some() {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait()?;
    Ok(false)
}

/// One unprivileged load: its name, its process (`setpriv` execs Python as nobody).
struct Load(&'static str, Child);

impl Drop for Load {
    fn drop(&mut self) {
        if matches!(self.1.try_wait(), Ok(None)) {
            let _ = self.1.kill();
            let _ = self.1.wait();
        }
    }
}

fn python() -> &'static str {
    // The system's: root's own may live where nobody cannot read.
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn start_load(name: &'static str, dir: &Path, logs: &Path, args: &[&str]) -> Result<Load> {
    let err = std::fs::File::create(logs.join(format!("{name}.err")))?;
    let child = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            python(),
        ])
        .arg(dir.join("load").join(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {name} as nobody"))?;
    Ok(Load(name, child))
}

/// SIGTERM, then its counts (the JSON line it prints as it ends).
fn stop_load(mut load: Load) -> Result<Value> {
    let alive = load.1.try_wait()?.is_none();
    // SAFETY: signals a process this benchmark started.
    unsafe { libc::kill(load.1.id() as i32, libc::SIGTERM) };
    let clean = wait_for(&mut load.1, Duration::from_secs(20))?;
    let mut out = String::new();
    if let Some(mut o) = load.1.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    let mut v: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| json!({ "no_counts": out }));
    v["ran_to_the_end"] = alive.into();
    v["stopped_cleanly"] = clean.into();
    Ok(v)
}

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
    std::fs::create_dir_all(dir.join("load"))?;
    std::fs::create_dir_all(dir.join("churn"))?;
    std::os::unix::fs::chown(dir.join("churn"), Some(NOBODY), Some(NOBODY))?;
    for (name, text) in SCRIPTS {
        std::fs::write(dir.join("load").join(name), text)?;
    }
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
    /// Seconds after the load stopped until fds, link fds and the system's links were
    /// back at their baseline (`None`: not within [`SETTLE_MAX`]).
    pub back_after: [Option<f64>; 3],
    pub shutdown_s: Option<f64>,
    /// Seconds after the daemon exited until the system's links were those before it.
    pub links_gone_after: Option<f64>,
    pub links_after_exit: u64,
    /// Log lines per phase (idle, load, settle, shutdown), and each phase's seconds.
    pub log_phases: Vec<(&'static str, f64, Vec<String>)>,
    pub loads: Vec<(&'static str, Value)>,
    pub state_bytes: u64,
    pub state_files: u64,
}

fn run(minutes: f64, dir: &Path, logs: &Path) -> Result<Run> {
    let links_before = bpf_links()?;
    let t0 = Instant::now();
    let mut d = Daemon::start(dir, logs)?;
    std::thread::sleep(BASELINE_AFTER);
    let baseline = d.sample(t0, true)?;
    eprintln!("xtask: soak: baseline {baseline:?}");
    let load_start = Instant::now();
    let secs = format!("{}", minutes * 60.0 + 120.0);
    let (mport, dport) = (port(&d.metrics)?, port(&d.dyno)?);
    let dyno_dir = dir.join("state/dyno").display().to_string();
    let churn_dir = dir.join("churn").display().to_string();
    let loads = [
        start_load("churn.py", dir, logs, &[HIP, &churn_dir, &secs, CHURN_RATE])?,
        start_load("dyno.py", dir, logs, &[&dport, &dyno_dir, &secs, DYNO_RATE])?,
        start_load(
            "slow.py",
            dir,
            logs,
            &[&mport, &dport, &secs, SLOW_PER_PORT],
        )?,
    ];
    let load_for = Duration::from_secs_f64(minutes * 60.0);
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
    let mut counts = Vec::new();
    for l in loads {
        let name = l.0;
        counts.push((name.trim_end_matches(".py"), stop_load(l)?));
    }
    let stopped = Instant::now();
    let mut settle = Vec::new();
    let mut back_after = [None; 3];
    while stopped.elapsed() < SETTLE_MAX {
        let s = d.sample(t0, false)?;
        let t = stopped.elapsed().as_secs_f64();
        let now = [
            s.fds == baseline.fds,
            s.link_fds == baseline.link_fds,
            s.links == baseline.links,
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
    let (state_bytes, state_files) = du(&dir.join("state"));
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
    })
}
