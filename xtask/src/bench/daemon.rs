//! What the always-on daemon costs (`cargo xtask bench-daemon`, also part of `cargo xtask
//! bench`), into bench/daemon.md:
//! - per hooked call, side by side in interleaved rounds: untraced, the bare trap (an empty
//!   uprobe + uretprobe), counted by the daemon, captured by `rocsync run`, and a process
//!   the daemon excludes that maps a library it probes for another;
//! - the daemon itself: CPU and memory idle, and while 8 processes call at a paced rate;
//!   the time one `/metrics` scrape takes;
//! - a flight recorder dump under load (`flight`).

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    path::Path,
    process::{Child, ChildStdout, Command, Stdio},
    sync::mpsc::{Receiver, channel},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::bin::bench_bin;
use crate::root;

const ROUNDS: usize = 5;
const CALLS: &str = "200000";
const SYMBOL: &str = "hipStreamSynchronize";
const BUSY: usize = 8;
/// Calls per second of each busy process.
const BUSY_RATE: &str = "10000";
const BUSY_CALLS: &str = "50000";

pub(crate) struct Daemon {
    child: Child,
    lines: Receiver<String>,
    metrics: String,
}

impl Daemon {
    /// A daemon counting `include` only, its state in `dir`, with `extra` options.
    pub(crate) fn start(dir: &Path, include: &Path, extra: &[&str]) -> Result<Daemon> {
        Self::start_of(&root().join("target/release/rocsync"), dir, include, extra)
    }

    /// [`Daemon::start`] of the binary `rocsync` (another build's, to compare).
    pub(crate) fn start_of(
        rocsync: &Path,
        dir: &Path,
        include: &Path,
        extra: &[&str],
    ) -> Result<Daemon> {
        let mut child = Command::new(rocsync)
            .args(["daemon", "--metrics-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.join("state"))
            .arg("--socket")
            .arg(dir.join("rocsync.sock"))
            .arg("--include-exe")
            .arg(include)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the daemon")?;
        let (tx, lines) = channel();
        let stderr = child.stderr.take().context("stderr")?;
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child,
            lines,
            metrics: String::new(),
        };
        let line = d.wait_for("metrics on http://")?;
        d.metrics = line
            .split("http://")
            .nth(1)
            .unwrap_or_default()
            .trim_end_matches("/metrics")
            .to_string();
        d.wait_for("SIGTERM stops")?;
        Ok(d)
    }

    pub(crate) fn wait_for(&self, needle: &str) -> Result<String> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let l = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("the daemon never said {needle:?}"))?;
            if l.contains(needle) {
                return Ok(l);
            }
        }
    }

    /// User + system CPU seconds so far.
    pub(crate) fn cpu_seconds(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        // SAFETY: sysconf has no preconditions.
        Ok(ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64)
    }

    /// Resident memory now and at its peak, KiB.
    pub(crate) fn memory_kib(&self) -> Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        Ok((field("VmRSS:"), field("VmHWM:")))
    }

    /// Seconds one `/metrics` scrape takes, and its size.
    fn scrape(&self) -> Result<(f64, usize)> {
        let (seconds, body) = get(&self.metrics, "/metrics")?;
        Ok((seconds, body.len()))
    }

    /// Its HTTP endpoint's address.
    pub(crate) fn metrics_addr(&self) -> &str {
        &self.metrics
    }

    pub(crate) fn stop(mut self) -> Result<()> {
        // SAFETY: signals the daemon this benchmark started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait()?;
        Ok(())
    }
}

/// One GET over HTTP/1.1: the seconds it took, and the whole response.
pub(crate) fn get(addr: &str, path: &str) -> Result<(f64, String)> {
    let start = Instant::now();
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok((start.elapsed().as_secs_f64(), body))
}

/// A bench_calls process held after loading its library (`BENCH_GATE`).
pub(crate) struct Caller {
    pub(crate) child: Child,
    out: BufReader<ChildStdout>,
}

impl Caller {
    pub(crate) fn start(exe: &Path, lib: &Path, calls: &str, rate: Option<&str>) -> Result<Caller> {
        let mut cmd = Command::new(exe);
        cmd.arg(lib).args([SYMBOL, calls]);
        if let Some(r) = rate {
            cmd.args(["1", r]);
        }
        let mut child = cmd
            .env("BENCH_GATE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting bench_calls")?;
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        out.read_line(&mut line)?;
        if line.trim() != "loaded" {
            bail!("bench_calls said {line:?}");
        }
        Ok(Caller { child, out })
    }

    pub(crate) fn go(&mut self) -> Result<()> {
        self.child
            .stdin
            .as_mut()
            .context("stdin")?
            .write_all(b"go\n")?;
        Ok(())
    }

    /// Its result line.
    pub(crate) fn finish(mut self) -> Result<Value> {
        let mut line = String::new();
        self.out.read_line(&mut line)?;
        if !self.child.wait()?.success() {
            bail!("bench_calls failed");
        }
        Ok(serde_json::from_str(&line)?)
    }
}

pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

pub(super) fn measure(
    dir: &Path,
    counted: &Path,
    counted_lib: &Path,
    plain: &Path,
    plain_lib: &Path,
) -> Result<(String, Value)> {
    let daemon = Daemon::start(dir, counted, &[])?;
    // Idle: no GPU process.
    let idle_s = 10.0;
    let cpu0 = daemon.cpu_seconds()?;
    std::thread::sleep(Duration::from_secs_f64(idle_s));
    let idle_cpu = (daemon.cpu_seconds()? - cpu0) / idle_s;
    let idle_mem = daemon.memory_kib()?;

    let rocsync = root().join("target/release/rocsync").display().to_string();
    let (plain_s, plain_lib_s) = (plain.display().to_string(), plain_lib.display().to_string());
    let probes = |mode: &str| -> Result<f64> {
        let v = bench_bin(&[
            "probes",
            "--mode",
            mode,
            "--lib",
            &plain_lib_s,
            "--symbol",
            SYMBOL,
            "--calls",
            CALLS,
            "--driver",
            &plain_s,
            "--rocsync",
            &rocsync,
        ])?;
        v["ns_per_call"].as_f64().context("ns_per_call")
    };
    let gated = |exe: &Path, lib: &Path, tracked: bool| -> Result<f64> {
        let mut c = Caller::start(exe, lib, CALLS, None)?;
        if tracked {
            daemon.wait_for(&format!("tracking pid {}", c.child.id()))?;
        }
        c.go()?;
        c.finish()?["ns_per_call"].as_f64().context("ns_per_call")
    };
    // The counted library is probed once a counted process maps it.
    let first = Caller::start(counted, counted_lib, "1", None)?;
    daemon.wait_for(&format!("tracking pid {}", first.child.id()))?;
    let mut first = first;
    first.go()?;
    first.finish()?;
    let labels = [
        "untraced",
        "empty pair (the trap)",
        "counted by the daemon",
        "captured (rocsync run)",
        "excluded by the daemon, same library file",
    ];
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    for round in 0..ROUNDS {
        eprintln!("xtask: daemon round {}/{ROUNDS}", round + 1);
        runs[0].push(gated(plain, plain_lib, false)?);
        runs[1].push(probes("empty")?);
        runs[2].push(gated(counted, counted_lib, true)?);
        runs[3].push(probes("full")?);
        runs[4].push(gated(plain, counted_lib, false)?);
    }
    let med: Vec<f64> = runs.iter().cloned().map(median).collect();

    // Busy: 8 counted processes at a paced rate.
    let mut busy = Vec::new();
    for _ in 0..BUSY {
        let c = Caller::start(counted, counted_lib, BUSY_CALLS, Some(BUSY_RATE))?;
        daemon.wait_for(&format!("tracking pid {}", c.child.id()))?;
        busy.push(c);
    }
    let cpu0 = daemon.cpu_seconds()?;
    let start = Instant::now();
    for c in &mut busy {
        c.go()?;
    }
    let mut calls = 0.0;
    for c in busy {
        calls += c.finish()?["calls"].as_f64().unwrap_or(0.0);
    }
    let busy_s = start.elapsed().as_secs_f64();
    let busy_cpu = (daemon.cpu_seconds()? - cpu0) / busy_s;
    let busy_mem = daemon.memory_kib()?;
    let scrapes: Vec<f64> = (0..20)
        .map(|_| daemon.scrape().map(|s| s.0))
        .collect::<Result<_>>()?;
    let (_, scrape_bytes) = daemon.scrape()?;
    let scrape = median(scrapes);
    daemon.stop()?;

    let mut md = String::from("\n## The daemon\n\n");
    let _ = writeln!(
        md,
        "ns per call of `{SYMBOL}(NULL)` (bench_calls, {CALLS} calls, medians of {ROUNDS} \
         interleaved rounds) with a daemon running; the ratio is (mode − untraced) / \
         (trap − untraced).\n"
    );
    let _ = writeln!(md, "| mode | ns/call | ratio to the trap |");
    let _ = writeln!(md, "| --- | ---: | ---: |");
    let trap = med[1] - med[0];
    for (label, m) in labels.iter().zip(&med) {
        let _ = writeln!(md, "| {label} | {m:.0} | {:.2} |", (m - med[0]) / trap);
    }
    let _ = writeln!(
        md,
        "\nThe daemon itself (its own CPU time, user + system; memory resident now / at \
         peak):\n\n| state | CPU (% of one core) | RSS (MiB) | peak RSS (MiB) |\n| --- | ---: | ---: | ---: |"
    );
    let mib = |k: u64| k as f64 / 1024.0;
    let _ = writeln!(
        md,
        "| idle, no GPU process ({idle_s:.0} s) | {:.2} | {:.1} | {:.1} |",
        idle_cpu * 100.0,
        mib(idle_mem.0),
        mib(idle_mem.1)
    );
    let _ = writeln!(
        md,
        "| {BUSY} processes × {BUSY_RATE} calls/s ({calls:.0} calls in {busy_s:.1} s) | {:.2} | {:.1} | {:.1} |",
        busy_cpu * 100.0,
        mib(busy_mem.0),
        mib(busy_mem.1)
    );
    let _ = writeln!(
        md,
        "\nOne `/metrics` scrape ({scrape_bytes} bytes): {:.2} ms (median of 20).",
        scrape * 1e3
    );
    let v = json!({
        "modes": labels, "ns_per_call": runs, "medians": med,
        "idle": { "cpu_fraction": idle_cpu, "rss_kib": idle_mem.0, "peak_rss_kib": idle_mem.1 },
        "busy": { "processes": BUSY, "rate_per_process": BUSY_RATE, "calls": calls,
                  "seconds": busy_s, "cpu_fraction": busy_cpu,
                  "rss_kib": busy_mem.0, "peak_rss_kib": busy_mem.1 },
        "scrape_s": scrape, "scrape_bytes": scrape_bytes,
    });
    Ok((md, v))
}
