//! One capture: targets, library discovery and attachment, the ring-buffer event loop
//! feeding the [`Pipeline`], and the stop sequence (deactivate, let in-flight calls
//! return, drain, detach).

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    future::Future,
    time::Duration,
};

use anyhow::Result;
use aya::maps::{MapData, RingBuf};
use rocsync_common::{Api, Config, Op, Switch};
use tokio::io::unix::AsyncFd;

mod libraries;
mod outcome;
mod reading;
mod recording;
mod suspend;
mod targets;

pub(crate) use outcome::Detaching;
pub use outcome::{Captured, StopReason};

use super::{settings::CaptureSettings, status::Status};
use crate::{
    calls::{
        agents::AgentSet,
        backend::Runtime,
        emit::{outputs::CaptureSink, processes::ProcessInfo},
        pipeline::{Notice, Pipeline},
        probes::{ApiChoice, LibraryReport, Probes},
    },
    os::signals::Signals,
};

use crate::calls::pipeline::cadence::{DRAIN_EVERY, IN_FLIGHT_GRACE, TICK_EVERY};

/// Safety net for library loads the loader hook cannot see (e.g. a dropped notification).
const RESCAN_EVERY: Duration = Duration::from_secs(1);

pub struct Session {
    probes: Probes,
    /// The runtimes whose libraries are looked for.
    runtimes: Vec<&'static Runtime>,
    choice: ApiChoice,
    agents: AgentSet,
    targets: Vec<u32>,
    /// (device, inode) of every library file probed: one file seen through two paths
    /// must not be probed twice.
    /// Files probed, and for what.
    probed_files: HashSet<(u64, u64, Probed)>,
    libraries: Vec<LibraryReport>,
    /// Runtimes the targets mapped that `--backend` left out, by name.
    excluded: BTreeSet<&'static str>,
    pipeline: Pipeline<CaptureSink>,
    status: Status,
    verbose: bool,
    /// Longest time the temporary `*GetDevice` probes stay.
    learn_for: std::time::Duration,
    /// When the temporary `*GetDevice` probes were first checked.
    learning_since: Option<std::time::Instant>,
    /// Their removal has begun: their calls are no longer recorded
    /// ([`rocsync_common::GetDeviceMode`]).
    temporary_removed: bool,
    /// The output error that stopped the capture.
    output_error: Option<std::io::Error>,
    /// Traced from their start (`run`) rather than attached to.
    from_start: bool,
    /// The targets are in the kernel's table (their calls recorded): from the start for
    /// `run`; for `attach`, once its loop runs (see `recording`).
    live: bool,
    /// When the targets' calls were recorded from and until (µs since the epoch).
    recorded: (Option<u64>, Option<u64>),
    /// When the recording began (the duration counts from it).
    since: Option<std::time::Instant>,
    /// The last drain stopped short of what the probes had written (more to read).
    behind: bool,
    /// Child processes are traced too (the kernel follows the tree).
    follow: bool,
    /// What each target said of itself, read while it lived (its environment is final
    /// once its loader runs: read again at each link-map change).
    processes: BTreeMap<u32, ProcessInfo>,
    /// Each target's visible-device list, where its environment sets one.
    visible: BTreeMap<u32, Vec<u32>>,
    /// Loader stops are armed (see `arm`), except for these foreground jobs.
    armed: bool,
    not_stopped: HashSet<u32>,
    /// Processes under a seccomp filter left unprobed where a probed return kills them:
    /// said once each.
    seccomp_refused: HashSet<u32>,
    /// One rocsync per process: the claims on the targets this session reached by
    /// launching or following them (`attach`'s own target is the capture's).
    claims: Vec<super::claim::Claim>,
    /// Stopped by Ctrl-Z: the loader probe holds no target (see `suspend`).
    suspended: bool,
    temporary_detaching: Option<std::thread::JoinHandle<()>>,
}

impl Session {
    /// A session for the runtimes, probe choice and verbosity the user asked for.
    /// `from_start`: the targets are traced from their first call (`run`).
    pub fn new(
        mut probes: Probes,
        settings: &CaptureSettings,
        sink: CaptureSink,
        from_start: bool,
    ) -> Self {
        let mut choice = settings.apis.clone();
        if !from_start && !settings.learn_devices.is_zero() {
            // Attached to running threads that may have chosen their device already:
            // probe the hot *GetDevice briefly, to learn it (see `learn_devices`).
            choice.temporary = Api::ALL
                .iter()
                .copied()
                .filter(|a| a.op() == Op::GetDevice && !choice.probes(*a))
                .filter(|a| !choice.skip.contains(a))
                .collect();
        }
        let status = Status::new(settings.status_line);
        let mut sink = sink;
        sink.trace_mut().bound(settings.max_bytes);
        let follow = settings.follow
            && match probes.follow_children() {
                Ok(()) => true,
                Err(e) => {
                    status.say(&format!(
                        "rocsync: warning: child processes will not be traced: {e:#}"
                    ));
                    false
                }
            };
        Self {
            probes,
            runtimes: settings.runtimes.clone(),
            choice,
            agents: settings.agents.clone(),
            targets: Vec::new(),
            probed_files: HashSet::new(),
            libraries: Vec::new(),
            excluded: BTreeSet::new(),
            pipeline: Self::pipeline(sink, from_start),
            status,
            verbose: settings.verbose,
            learn_for: settings.learn_devices,
            learning_since: None,
            temporary_removed: false,
            output_error: None,
            from_start,
            live: from_start,
            recorded: (None, None),
            since: None,
            behind: false,
            follow,
            processes: BTreeMap::new(),
            visible: BTreeMap::new(),
            armed: false,
            not_stopped: HashSet::new(),
            seccomp_refused: HashSet::new(),
            claims: Vec::new(),
            suspended: false,
            temporary_detaching: None,
        }
    }

    /// The capture's pipeline. An attach begins while its targets' calls are in flight,
    /// as a daemon trace does, and counts them by the daemon's rule: a return with no
    /// entry of its thread before it is a call begun before the recording
    /// (`calls_begun_before`), not a loss.
    fn pipeline(sink: CaptureSink, from_start: bool) -> Pipeline<CaptureSink> {
        let mut pipeline = Pipeline::new(sink, from_start);
        pipeline.name_threads();
        if !from_start {
            pipeline.begins_mid_call();
        }
        pipeline
    }

    /// Claims `pid` for this capture (one rocsync per process), or says who holds it.
    pub fn claim(&mut self, pid: u32) -> Result<()> {
        self.claims.push(super::claim::claim(pid)?);
        Ok(())
    }

    /// Runtimes the targets mapped that `--backend` left out, by name.
    pub fn excluded(&self) -> &BTreeSet<&'static str> {
        &self.excluded
    }

    fn say(&self, line: &str) {
        self.status.say(line);
    }

    fn notice(&mut self, n: Notice) {
        match n {
            Notice::LinkMap { pid, stopped } => {
                if self.targets.contains(&pid) {
                    self.learn_process(pid);
                    let _ = self.scan(pid);
                }
                if stopped {
                    // Our probe stopped it; everything it may call into is probed now.
                    if let Err(e) = self.probes.continue_stopped(pid, true) {
                        self.say(&format!("rocsync: warning: continuing pid {pid}: {e:#}"));
                    }
                }
            }
            Notice::Forked { parent, child } => {
                // The kernel follows it already; another rocsync reaching it later by
                // `attach` is refused. (A claim taken first is another capture's child:
                // said, since both now follow it.)
                if let Err(e) = self.claim(child) {
                    self.say(&format!("rocsync: warning: {e:#}"));
                }
                if !self.targets.contains(&child) {
                    self.targets.push(child);
                    if self.verbose {
                        self.say(&format!(
                            "rocsync: following pid {child} (forked by {parent})"
                        ));
                    }
                }
                self.learn_child(parent, child);
                // Its libraries are its parent's, probed file-wide; a rescan finds more.
                let _ = self.scan(child);
            }
            Notice::Exited { .. } => {}
            // Named as it left: procfs has no name for it once its calls are read.
            Notice::ThreadExited { pid, tid, comm } => {
                let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
                let name = String::from_utf8_lossy(&comm[..end]).into_owned();
                let info = self.processes.entry(pid).or_default();
                info.threads.entry(tid).or_insert(name);
            }
        }
    }

    /// Runs until a signal, the duration, or `target_exit` completes. The duration counts
    /// from when the targets' calls are recorded ([`Session::start_recording`]), and is
    /// looked at before any other work, so that a busy loop never records past it.
    pub async fn run(
        &mut self,
        ring: &mut AsyncFd<RingBuf<MapData>>,
        signals: &mut Signals,
        duration: Option<Duration>,
        target_exit: impl Future<Output = ()>,
    ) -> Result<StopReason> {
        let since = self.start_recording()?;
        let until = duration.map(|d| since + d);
        let deadline = async {
            match until {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline, target_exit);
        let mut rescan = tokio::time::interval(RESCAN_EVERY);
        let mut tick = tokio::time::interval(TICK_EVERY);
        // The probes wake this loop only when much is waiting; the rest is read here.
        let mut poll = tokio::time::interval(DRAIN_EVERY);
        loop {
            if let Some(e) = self.pipeline.take_error() {
                // Stop the capture; what was written before is kept (see `finish`).
                self.output_error = Some(e);
                return Ok(StopReason::OutputFailed);
            }
            // The sink writes nothing more once a file reached its bound: the trace ends.
            if self.pipeline.sink().trace().left_out().is_some() {
                return Ok(StopReason::SizeBound);
            }
            // Read from the clock: a loop kept busy reading may find its timer late.
            if until.is_some_and(|at| std::time::Instant::now() >= at) {
                return Ok(StopReason::Duration);
            }
            // In this order: the ends first, then the periodic work, then reading.
            tokio::select! {
                biased;
                _ = &mut deadline => return Ok(StopReason::Duration),
                s = signals.next_or_suspend() => match s {
                    Some(s) => return Ok(StopReason::Signal(s)),
                    None => self.suspend(),
                },
                _ = &mut target_exit => return Ok(StopReason::TargetExited),
                _ = tick.tick() => {
                    self.drain(ring.get_mut());
                    self.pipeline.tick();
                    self.learn_devices();
                    self.probes.diagnostics.flush();
                    self.status.update(&self.pipeline.stats);
                }
                _ = rescan.tick() => {
                    self.rescan();
                }
                guard = ring.readable_mut() => {
                    let mut guard = guard?;
                    self.drain(guard.get_inner_mut());
                    guard.clear_ready();
                }
                _ = poll.tick() => self.drain(ring.get_mut()),
                () = std::future::ready(()), if self.behind => {
                    self.drain(ring.get_mut());
                    // Lets the runtime look at its timers and signals between batches.
                    tokio::task::yield_now().await;
                }
            }
        }
    }

    /// Stop: no new calls enter; calls in flight get a grace period to return; the ring
    /// is drained; calls still in flight are written as such; probes detach in the
    /// background (see [`Detaching`]).
    pub async fn finish(
        mut self,
        mut ring: AsyncFd<RingBuf<MapData>>,
        stop: StopReason,
    ) -> Result<Captured> {
        self.probes.set_switch(Switch::default())?;
        for &pid in &self.targets {
            self.probes.set_target(pid, Config::INACTIVE)?;
        }
        self.recorded.1 = Some(crate::os::clock::unix_us());
        // From here the probes write only returns, of calls in flight now (their rows
        // say so if they never come) and of calls the targets make after the stop, which
        // are not the capture's: a return dropped from here on is no record lost.
        let exits_dropped = self.probes.drops()?.exits;
        self.pipeline.stopping();
        for pid in self.targets.clone() {
            self.learn_process(pid);
        }
        let waited = tokio::time::Instant::now();
        loop {
            self.drain_all(ring.get_mut());
            if self.pipeline.open_calls() == 0 || waited.elapsed() >= IN_FLIGHT_GRACE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.status.clear();
        self.probes.diagnostics.flush();
        // Calls whose entry records were dropped last leave no gap: the counter says.
        self.pipeline
            .assigned_up_to(self.probes.correlations_assigned()?);
        self.pipeline.stats.kernel = self.probes.drops()?;
        self.pipeline.stats.kernel.exits = exits_dropped;
        if self.verbose {
            self.say(&format!(
                "rocsync: the probes woke the reader {} times in {} drains",
                self.pipeline.stats.wakes,
                self.probes.call_drains()
            ));
        }
        if let Some(t) = self.temporary_detaching.take() {
            let _ = t.join();
        }
        let detaching = Detaching(self.probes.detach_in_background());
        let (sink, stats, late_error) = self.pipeline.finish_keeping();
        Ok(Captured {
            error: self.output_error.or(late_error),
            processes: self.processes,
            sink,
            stats,
            libraries: self.libraries,
            excluded: self.excluded,
            call_probe_links: self.probes.link_kind().name(),
            stop,
            detaching,
            recorded: self.recorded,
        })
    }
}

/// What a file was probed for: once each. One file may hold two runtimes (libnccl's own
/// exports and the CUDA runtime it carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(in crate::capture) enum Probed {
    Loader,
    Hsa,
    Runtime(rocsync_common::Backend),
}
