//! The soak's daemon: started as root with its own socket, lock, state and ports, its
//! log read line by line (with when), the pids it says it tracks shared with the witness.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, channel},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::sample::Sample;
use crate::root;

/// The pids the daemon said it tracks ("tracking pid N"), each with when it last said
/// so, for the witness's gate: pids are reused (the thread churn wraps `pid_max` many
/// times), so only a line read after the witness's start says it is tracked.
pub(crate) type Tracked = Arc<Mutex<HashMap<u32, Instant>>>;

/// The daemon's log lines, each with when it was read.
pub(crate) struct Daemon {
    pub child: Child,
    lines: Receiver<(Instant, String)>,
    /// Lines read so far, with their time.
    pub seen: Vec<(Instant, String)>,
    pub metrics: String,
    pub dyno: String,
    pub tracked: Tracked,
}

/// The pid in a "tracking pid N (…)" line.
fn tracking(line: &str) -> Option<u32> {
    let rest = line.split("tracking pid ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

impl Daemon {
    /// `exes`: the only executables it counts (the loads' and the witness's copies);
    /// `extra`: more flags.
    pub(crate) fn start(
        dir: &Path,
        logs: &Path,
        exes: &[PathBuf],
        extra: &[&str],
    ) -> Result<Daemon> {
        let mut cmd = Command::new(root().join("target/release/rocsync"));
        cmd.args(["daemon", "--metrics-addr", "127.0.0.1:0"])
            .args(["--dynolog-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(dir.join("rocsync.sock"))
            .arg("--lock")
            .arg(dir.join("daemon.lock"))
            // Only the load's processes (nobody's) and the witness (root's), each from
            // the soak's own copies: the machine's other work (tests, other daemons,
            // root's too) is neither probed by it nor counted in its figures.
            .args(["--user", "nobody", "--user", "root"]);
        for exe in exes {
            cmd.arg("--include-exe").arg(exe);
        }
        let mut child = cmd
            .args(extra)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the daemon")?;
        let stderr = child.stderr.take().context("stderr")?;
        let mut log = std::fs::File::create(logs.join("daemon.log"))?;
        let (tx, lines) = channel();
        let tracked = Tracked::default();
        let t0 = Instant::now();
        let pids = tracked.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let now = Instant::now();
                let _ = writeln!(log, "[{:9.3}] {l}", (now - t0).as_secs_f64());
                if let (Some(pid), Ok(mut set)) = (tracking(&l), pids.lock()) {
                    set.insert(pid, now);
                }
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
            tracked,
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

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the lines written so far; fails if the daemon has exited.
    pub(crate) fn check(&mut self) -> Result<()> {
        self.seen.extend(self.lines.try_iter());
        if let Some(status) = self.child.try_wait()? {
            let tail: Vec<&str> = self.seen.iter().rev().take(20).map(|l| &*l.1).collect();
            bail!("the daemon exited ({status}); its last lines: {tail:#?}");
        }
        Ok(())
    }

    pub(crate) fn sample(&mut self, t0: Instant, scrape: bool) -> Result<Sample> {
        self.check()?;
        let metrics = scrape.then_some(self.metrics.as_str());
        Sample::take(self.pid(), t0.elapsed().as_secs_f64(), metrics)
    }

    /// SIGTERM, and the seconds until it has exited (`None`: not within 60 s, killed).
    pub(crate) fn stop(&mut self) -> Result<Option<f64>> {
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
pub(crate) fn wait_for(child: &mut Child, limit: Duration) -> Result<bool> {
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
