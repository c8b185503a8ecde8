//! What the soak reads of the daemon and the system: the daemon's descriptors (by kind),
//! the system's BPF links (by id, as `bpftool link list` counts them), the daemon's
//! memory, threads and CPU time, and one `/metrics` scrape timed from connect to close.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

/// The bpf(2) command that walks the kernel's link ids.
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
/// Scrapes timed per sample (the median is kept, and the slowest).
const SCRAPES: usize = 3;
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Default)]
pub(crate) struct Sample {
    /// Seconds since the daemon started.
    pub t: f64,
    pub fds: u64,
    /// The daemon's descriptors that are BPF links, perf events (classic uprobes) and
    /// sockets.
    pub link_fds: u64,
    pub perf_fds: u64,
    pub sockets: u64,
    /// BPF links on the whole system.
    pub links: u64,
    pub rss_kib: u64,
    /// Its anonymous part (the heap: what a leak grows), without the binary's pages.
    pub anon_kib: u64,
    pub threads: u64,
    pub cpu_s: f64,
    /// Scrape milliseconds: the median and the slowest of [`SCRAPES`]; failures.
    pub scrape_ms: Option<f64>,
    pub scrape_max_ms: Option<f64>,
    pub scrape_failed: u64,
    /// From the scrape: tracked processes, probed files, files refused (all reasons),
    /// traces written.
    pub tracked: Option<u64>,
    pub probed_files: Option<u64>,
    pub refused: Option<u64>,
    pub traces: Option<u64>,
}

impl Sample {
    /// The daemon's and the system's counts now; with `scrape`, the scrapes too.
    pub(crate) fn take(pid: u32, t: f64, metrics: Option<&str>) -> Result<Sample> {
        let mut s = Sample {
            t,
            links: bpf_links()?,
            ..Sample::default()
        };
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).context("the daemon's fds")? {
            s.fds += 1;
            let target = std::fs::read_link(entry?.path()).unwrap_or_default();
            let target = target.to_string_lossy();
            if target == "anon_inode:bpf_link" {
                s.link_fds += 1;
            } else if target == "anon_inode:[perf_event]" {
                s.perf_fds += 1;
            } else if target.starts_with("socket:") {
                s.sockets += 1;
            }
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        s.rss_kib = field(&status, "VmRSS:");
        s.anon_kib = field(&status, "RssAnon:");
        s.threads = field(&status, "Threads:");
        s.cpu_s = cpu_seconds(pid)?;
        let Some(addr) = metrics else { return Ok(s) };
        let mut times = Vec::new();
        let mut body = String::new();
        for _ in 0..SCRAPES {
            match scrape(addr) {
                Ok((secs, text)) => {
                    times.push(secs * 1e3);
                    body = text;
                }
                Err(e) => {
                    eprintln!("xtask: soak: a scrape failed: {e:#}");
                    s.scrape_failed += 1;
                }
            }
        }
        times.sort_by(f64::total_cmp);
        s.scrape_ms = times.get(times.len() / 2).copied();
        s.scrape_max_ms = times.last().copied();
        let gauge = |name: &str| -> Option<u64> {
            body.lines()
                .filter(|l| l.starts_with(name) && !l.starts_with('#'))
                .map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<Option<f64>>()
                .map(|v| v as u64)
        };
        if !body.is_empty() {
            s.tracked = gauge("rocsync_tracked_processes ");
            s.probed_files = gauge("rocsync_probed_files ");
            s.refused = gauge("rocsync_files_refused_total");
            s.traces = gauge("rocsync_traces_written_total ");
        }
        Ok(s)
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "t_s": self.t, "fds": self.fds, "link_fds": self.link_fds,
            "perf_event_fds": self.perf_fds, "sockets": self.sockets,
            "bpf_links_system": self.links, "rss_kib": self.rss_kib, "rss_anon_kib": self.anon_kib, "threads": self.threads,
            "cpu_s": self.cpu_s, "scrape_ms": self.scrape_ms,
            "scrape_max_ms": self.scrape_max_ms, "scrape_failed": self.scrape_failed,
            "tracked": self.tracked, "probed_files": self.probed_files,
            "files_refused": self.refused, "traces_written": self.traces,
        })
    }
}

fn field(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of `pid` so far.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
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

/// The BPF links on this system, walked by id (needs root).
pub(super) fn bpf_links() -> Result<u64> {
    let (mut id, mut n) = (0u32, 0u64);
    loop {
        // union bpf_attr's {start_id, next_id, open_flags}, and a word to spare.
        let mut attr = [id, 0u32, 0, 0];
        // SAFETY: attr is as large as the size passed, and lives across the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_LINK_GET_NEXT_ID,
                attr.as_mut_ptr(),
                std::mem::size_of_val(&attr) as libc::c_uint,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                return Ok(n);
            }
            bail!("bpf(BPF_LINK_GET_NEXT_ID): {e}");
        }
        id = attr[1];
        n += 1;
    }
}

/// One GET of `/metrics`: seconds from connect to the end of the answer, and the body.
pub(super) fn scrape(addr: &str) -> Result<(f64, String)> {
    let start = Instant::now();
    let sock: SocketAddr = addr.parse()?;
    let mut s = TcpStream::connect_timeout(&sock, SCRAPE_TIMEOUT)?;
    s.set_read_timeout(Some(SCRAPE_TIMEOUT))?;
    s.set_write_timeout(Some(SCRAPE_TIMEOUT))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: soak\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let secs = start.elapsed().as_secs_f64();
    if !text.starts_with("HTTP/1.1 200") {
        bail!(
            "the scrape was answered {:?}",
            text.lines().next().unwrap_or("")
        );
    }
    Ok((secs, text))
}

/// Bytes and files under `dir`.
pub(super) fn du(dir: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => {
                    bytes += m.len();
                    files += 1;
                }
                Err(_) => {}
            }
        }
    }
    (bytes, files)
}

/// Keeps a copy of the largest file of `dir` at `to`, for a look at what the traces hold.
pub(super) fn keep_largest(dir: &Path, to: &Path) {
    let largest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.len(), e.path())))
        .max();
    if let Some((_, path)) = largest {
        let _ = std::fs::copy(path, to);
    }
}

/// The flight dumps left in `dir` (retention may have removed some): how many, and the
/// largest's bytes (each is bounded by `--trace-max-bytes`, 512 MiB by default).
pub(super) fn flight_dumps(dir: &Path) -> (u64, u64) {
    let sizes: Vec<u64> = (std::fs::read_dir(dir).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("flight-"))
        .filter_map(|e| Some(e.metadata().ok()?.len()))
        .collect();
    (sizes.len() as u64, sizes.into_iter().max().unwrap_or(0))
}
