//! One capture: targets, library discovery and attachment, the ring-buffer event loop, and
//! the stop sequence (deactivate, let in-flight calls return, detach, drain).

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result};
use aya::maps::{MapData, RingBuf};
use rocsync_common::{Api, Config, Decoded, decode};
use tokio::{
    io::{Interest, unix::AsyncFd},
    signal::unix::{SignalKind, signal},
};

use super::{
    probes::{LibraryReport, Probes},
    sequence::Sequencer,
};
use crate::{backend::Runtime, cli::CaptureArgs};
use crate::{
    output::FileStream,
    target::maps::{self, Mapping},
    trace::{call::Call, stream::TraceStream},
};

const INACTIVE: Config = Config {
    capture: 0,
    stop_on_link_map: 0,
    agents: 0,
};
/// How long stop waits for calls already entered to return before reporting them in flight.
const IN_FLIGHT_GRACE: Duration = Duration::from_millis(300);
/// How often the ring is read when the probes have not woken the reader.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// How often the calls in flight are looked at, to release calls waiting behind them.
const RELEASE_EVERY: Duration = Duration::from_millis(100);
/// Safety net for library loads the loader hook cannot see (e.g. a dropped notification).
const RESCAN_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Signal(&'static str),
    Duration,
    TargetExited,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drops {
    /// Calls lost because the ring buffer was full.
    pub calls: u64,
    pub calls_per_cpu: Vec<u64>,
    /// Library-load notifications lost (the process was not held; a rescan caught up).
    pub link_map: u64,
    /// Records that failed to decode.
    pub undecodable: u64,
    /// Correlation ids that never arrived nor were in flight: dropped records.
    pub lost: u64,
    /// AQL packets a doorbell published beyond what one probe run reads.
    pub truncated: u64,
}

/// Where released calls go: resolved and written while the capture runs.
pub type Sink = TraceStream<FileStream, FileStream>;

pub struct Captured {
    pub sink: Sink,
    pub drops: Drops,
    pub libraries: Vec<LibraryReport>,
    pub stop: StopReason,
    pub detaching: Detaching,
}

/// Probes being detached in the background.
pub struct Detaching(std::thread::JoinHandle<()>);

impl Detaching {
    /// Waits until every probe is detached.
    pub fn wait(self) {
        let _ = self.0.join();
    }
}

pub struct Session {
    probes: Probes,
    /// The runtimes whose libraries are looked for.
    runtimes: Vec<&'static Runtime>,
    /// Functions the user asked not to probe.
    skip: Vec<Api>,
    /// Agents (devices) to record, as a bit mask; 0 records every agent.
    agents: u64,
    targets: Vec<u32>,
    /// (device, inode) of every library file probed: one file seen through two paths
    /// must not be probed twice.
    probed_files: HashSet<(u64, u64)>,
    libraries: Vec<LibraryReport>,
    sequencer: Sequencer,
    sink: Sink,
    /// The first error writing the outputs; it ends the capture.
    write_error: Option<std::io::Error>,
    undecodable: u64,
    verbose: bool,
}

impl Session {
    /// A session for the runtimes, skipped functions and verbosity the user asked for.
    pub fn new(probes: Probes, args: &CaptureArgs, sink: Sink) -> Self {
        let verbose = args.verbose;
        Self {
            probes,
            runtimes: args.runtimes(),
            skip: args.skip.clone(),
            agents: args.agent_mask(),
            targets: Vec::new(),
            probed_files: HashSet::new(),
            libraries: Vec::new(),
            sequencer: Sequencer::new(),
            sink,
            write_error: None,
            undecodable: 0,
            verbose,
        }
    }

    /// Starts capturing `pid` and hooks `loader` (its dynamic loader) for library loads.
    pub fn add_target(&mut self, pid: u32, loader: Option<&Path>) -> Result<()> {
        let active = Config {
            capture: 1,
            stop_on_link_map: 1,
            agents: self.agents,
        };
        self.probes.set_target(pid, active)?;
        self.targets.push(pid);
        match loader {
            Some(l) => {
                if !self.probes.attach_loader(l, pid)? {
                    eprintln!(
                        "rocsync: warning: {} has no _dl_debug_state; libraries loaded later \
                         are found by periodic rescans only",
                        l.display()
                    );
                }
            }
            None => eprintln!(
                "rocsync: warning: no dynamic loader found for pid {pid}; libraries loaded \
                 later are found by periodic rescans only"
            ),
        }
        Ok(())
    }

    /// Probes a runtime library file for `pid`, once per file. Returns whether it was new.
    pub fn attach_library(&mut self, runtime: &Runtime, path: &Path, pid: u32) -> Result<bool> {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot open {}", path.display()))?;
        if !self.probed_files.insert((meta.dev(), meta.ino())) {
            return Ok(false);
        }
        let report = match self
            .probes
            .attach_runtime(runtime, &self.skip, path, Some(pid))
        {
            Ok(r) => r,
            Err(e) => {
                self.probed_files.remove(&(meta.dev(), meta.ino()));
                return Err(e);
            }
        };
        eprintln!(
            "rocsync: attached to {} (pid {pid}): {} functions",
            report.path.display(),
            report.probed.len()
        );
        if self.verbose {
            for (p, names) in &report.probed {
                let skipped = if p.skipped.is_empty() {
                    String::new()
                } else {
                    format!(" after {}", p.skipped.join(", "))
                };
                let cost = if p.emulated {
                    "emulated"
                } else {
                    "single-stepped"
                };
                eprintln!(
                    "rocsync:   {:#x} {}: probe on `{}`{skipped} ({cost})",
                    p.offset,
                    names.join(" = "),
                    p.probed
                );
            }
        }
        if !report.missing.is_empty() {
            eprintln!(
                "rocsync: warning: {} does not export {}; skipped",
                report.path.display(),
                report.missing.join(", ")
            );
        }
        self.libraries.push(report);
        Ok(true)
    }

    /// Probes an HSA runtime file for `pid`, once per file.
    fn attach_hsa(&mut self, path: &Path, pid: u32) -> Result<()> {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot open {}", path.display()))?;
        if !self.probed_files.insert((meta.dev(), meta.ino())) {
            return Ok(());
        }
        let report = self.probes.attach_hsa(path, pid)?;
        eprintln!(
            "rocsync: attached to {} (pid {pid}): HSA queues and doorbells",
            report.path.display()
        );
        self.libraries.push(report);
        Ok(())
    }

    /// Reads `pid`'s maps and probes every runtime library (HIP, CUDA, HSA) not yet
    /// probed. Returns how many such libraries the process maps in all.
    pub fn scan(&mut self, pid: u32) -> Result<usize> {
        let text = match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            Ok(t) => t,
            // The process is gone; its exit ends the capture elsewhere.
            Err(_) => return Ok(0),
        };
        let mappings = maps::parse(&text);
        let mut n = 0;
        for m in maps::libraries(&mappings, maps::is_hsa_runtime) {
            n += 1;
            let path = openable_path(pid, m);
            if let Err(e) = self.attach_hsa(&path, pid) {
                eprintln!("rocsync: warning: {e:#}");
            }
        }
        for runtime in self.runtimes.clone() {
            for m in maps::libraries(&mappings, runtime.matches_library) {
                n += 1;
                let path = openable_path(pid, m);
                if let Err(e) = self.attach_library(runtime, &path, pid) {
                    eprintln!("rocsync: warning: {e:#}");
                }
            }
        }
        Ok(n)
    }

    fn handle(&mut self, bytes: &[u8]) {
        match decode(bytes) {
            Ok(Decoded::Call(r)) => {
                if let Some(call) = Call::from_record(&r) {
                    let (sink, err) = (&mut self.sink, &mut self.write_error);
                    self.sequencer
                        .push(call, &mut |r| keep_first(err, sink.released(r)));
                }
            }
            Ok(Decoded::Queue(q)) => self.sink.queue(&q),
            Ok(Decoded::Packet(p)) => keep_first(&mut self.write_error, self.sink.packet(&p)),
            Ok(Decoded::LinkMap(r)) => {
                if self.targets.contains(&r.pid) {
                    let _ = self.scan(r.pid);
                }
                if r.stopped != 0 {
                    // Our probe stopped it; everything it may call into is probed now.
                    // SAFETY: plain kill(2) on a process this capture stopped.
                    unsafe { libc::kill(r.pid as i32, libc::SIGCONT) };
                }
            }
            Err(e) => {
                self.undecodable += 1;
                if self.verbose {
                    eprintln!("rocsync: undecodable record: {e}");
                }
            }
        }
    }

    /// Runs until a signal, the duration, or `target_exit` completes.
    pub async fn run(
        &mut self,
        ring: &mut AsyncFd<RingBuf<MapData>>,
        duration: Option<Duration>,
        target_exit: impl Future<Output = ()>,
    ) -> Result<StopReason> {
        let mut sigint = signal(SignalKind::interrupt())?;
        let mut sigterm = signal(SignalKind::terminate())?;
        let deadline = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline, target_exit);
        let mut rescan = tokio::time::interval(RESCAN_EVERY);
        let mut release = tokio::time::interval(RELEASE_EVERY);
        // The probes wake this loop only when much is waiting; the rest is read here.
        let mut poll = tokio::time::interval(DRAIN_EVERY);
        loop {
            if let Some(e) = self.write_error.take() {
                return Err(anyhow::Error::from(e).context("writing the outputs"));
            }
            tokio::select! {
                guard = ring.readable_mut() => {
                    let mut guard = guard?;
                    self.drain(guard.get_inner_mut());
                    guard.clear_ready();
                }
                _ = sigint.recv() => return Ok(StopReason::Signal("SIGINT")),
                _ = sigterm.recv() => return Ok(StopReason::Signal("SIGTERM")),
                _ = &mut deadline => return Ok(StopReason::Duration),
                _ = &mut target_exit => return Ok(StopReason::TargetExited),
                _ = rescan.tick() => {
                    for pid in self.targets.clone() {
                        let _ = self.scan(pid);
                    }
                }
                _ = release.tick() => self.release()?,
                _ = poll.tick() => self.drain(ring.get_mut()),
            }
        }
    }

    fn drain(&mut self, ring: &mut RingBuf<MapData>) {
        while let Some(item) = ring.next() {
            let mut buf = [0u8; 128];
            let n = item.len().min(buf.len());
            buf[..n].copy_from_slice(&item[..n]);
            let len = item.len();
            drop(item);
            if len > buf.len() {
                self.undecodable += 1;
                continue;
            }
            self.handle(&buf[..n]);
        }
    }

    /// Releases what a fresh look at the calls in flight allows (see [`Sequencer`]).
    fn release(&mut self) -> Result<()> {
        let scan: HashMap<u64, Call> = self
            .probes
            .in_flight(&self.targets)?
            .iter()
            .filter_map(|(pid_tgid, e)| Call::in_flight(*pid_tgid, e))
            .map(|c| (c.correlation, c))
            .collect();
        let (sink, err) = (&mut self.sink, &mut self.write_error);
        self.sequencer
            .release(Some(&scan), &mut |r| keep_first(err, sink.released(r)));
        Ok(())
    }

    /// Stop: no new calls enter; calls in flight get a grace period to return; the ring
    /// is drained; calls still in flight are written from the stash; probes detach in
    /// the background (see [`Captured::detached`]).
    pub async fn finish(
        mut self,
        mut ring: AsyncFd<RingBuf<MapData>>,
        stop: StopReason,
    ) -> Result<Captured> {
        for &pid in &self.targets {
            self.probes.set_target(pid, INACTIVE)?;
        }
        let waited = tokio::time::Instant::now();
        while waited.elapsed() < IN_FLIGHT_GRACE
            && !self.probes.in_flight(&self.targets)?.is_empty()
        {
            self.drain(ring.get_mut());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let in_flight = self.probes.in_flight(&self.targets)?;
        self.drain(ring.get_mut());
        // A call may return between the stash read and the drain: its record wins. One
        // that returns after the drain stays written as in flight, so none is lost.
        let in_flight: Vec<Call> = in_flight
            .iter()
            .filter_map(|(pid_tgid, e)| Call::in_flight(*pid_tgid, e))
            .collect();
        let (sink, err) = (&mut self.sink, &mut self.write_error);
        self.sequencer
            .finish(in_flight, &mut |r| keep_first(err, sink.released(r)));
        if let Some(e) = self.write_error.take() {
            return Err(anyhow::Error::from(e).context("writing the outputs"));
        }
        let (calls_per_cpu, link_map, truncated) = self.probes.drops()?;
        let detaching = self.probes.detach_in_background();
        Ok(Captured {
            sink: self.sink,
            drops: Drops {
                calls: calls_per_cpu.iter().sum(),
                calls_per_cpu,
                link_map: link_map.iter().sum(),
                undecodable: self.undecodable,
                lost: self.sequencer.lost,
                truncated,
            },
            libraries: self.libraries,
            stop,
            detaching: Detaching(detaching),
        })
    }
}

fn keep_first(slot: &mut Option<std::io::Error>, r: std::io::Result<()>) {
    if let Err(e) = r
        && slot.is_none()
    {
        *slot = Some(e);
    }
}

/// Wraps the ring buffer for readiness notification.
pub fn async_ring(ring: RingBuf<MapData>) -> Result<AsyncFd<RingBuf<MapData>>> {
    // SAFETY: the ring buffer owns its fd for as long as the AsyncFd that wraps it.
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(std::io::Error::from)
        .context("registering the ring buffer with the event loop")
}

/// A path through which the mapped file can be opened from here: through the target's
/// root (containers), or through `map_files` when the file was deleted or replaced.
fn openable_path(pid: u32, m: &Mapping) -> PathBuf {
    if m.deleted {
        PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
    } else {
        maps::host_path(pid, &m.path)
    }
}
