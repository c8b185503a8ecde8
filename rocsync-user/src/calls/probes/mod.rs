//! Probes: the loaded eBPF object (target settings, the ring, the drop counters), and
//! attaching its programs to runtime libraries ([`elf`] finds the functions, [`placement`]
//! where in them to trap), to the dynamic loader ([`ld_so`]) of processes read from
//! [`maps`].

mod calibrate;
pub use calibrate::{CallPrices, Stepped};
pub(crate) mod attach;
mod daemon;
pub mod elf;
pub mod kernel;
pub(crate) mod maps;
mod options;
pub mod placement;
pub mod seccomp;
mod stops;
pub use kernel::{mapped, targets::CallCounts};
pub use options::{LEARN_DEVICES, ProbeOptions};

use std::{path::Path, thread::JoinHandle};

use anyhow::{Context as _, Result, anyhow};
use aya::{
    Ebpf,
    maps::{Array, MapData, RingBuf},
};
use rocsync_common::{Api, Switch};

pub use kernel::diagnostics::Diagnostics;
use tokio::io::{Interest, unix::AsyncFd};

use crate::calls::{backend::Runtime, stats::KernelDrops};
pub use attach::links::{LinkGroup, LinkKind, LinkMark};
use attach::links::{Links, uprobe};
use attach::multi;
pub use attach::multi::MultiPrograms;
pub use attach::report::LibraryReport;
use kernel::{call_ring, counts, diagnostics, mapped::owned_fd, targets};
pub use placement::choice::{ApiChoice, ReturnProbes};
use placement::points;
pub use stops::SETTLE;
pub use stops::job::continue_process;
use stops::release;
use targets::Targets;

/// Set: targets are released by the watchdog process, as on kernels without the kfuncs
/// the release at exit needs (`release`), even where the kernel has them.
const WATCHDOG_ENV: &str = "ROCSYNC_WATCHDOG";

/// The loaded object and what it attached.
pub struct Probes {
    ebpf: Ebpf,
    /// Where the call probes write (every other record goes to the ring, `EVENTS`).
    calls: call_ring::CallRing,
    /// `TARGETS`' generation, stepped after every change to it.
    targets: Targets,
    pub diagnostics: Diagnostics,
    options: ProbeOptions,
    /// Every probe's link, from its attach to its detach.
    links: Links,
    /// The kernel continues what the probes stopped when this process exits, however.
    releases_at_exit: bool,
    /// What must live as long as the probes (a capture's watchdog, which continues
    /// stopped targets if rocsync is killed): dropped after `release_targets`.
    kept: Vec<Box<dyn Send>>,
}

impl Probes {
    /// What the kernel does to a process under seccomp whose return is probed, tried
    /// once (`seccomp`).
    pub fn returns_under_seccomp(&mut self) -> Result<seccomp::Returns> {
        seccomp::Returns::of_kernel(&mut self.ebpf)
    }

    /// Loads the programs; callers run [`crate::os::preflight::check`] first.
    pub fn load(options: ProbeOptions) -> Result<Self> {
        let mut loader = aya::EbpfLoader::new();
        if let Some(bytes) = options.ring_bytes {
            loader.map_max_entries("EVENTS", bytes);
        }
        // The call ring gets as many bytes as the ring (its slots a power of two).
        let call_bytes = (options.call_ring_bytes)
            .or(options.ring_bytes)
            .unwrap_or(options::DEFAULT_RING);
        let slots = rocsync_common::call_slots(call_bytes);
        loader.map_max_entries("CALL_RING", slots);
        // Preallocated per CPU: one entry unless series are labelled.
        // The loader borrows a global's value until it loads.
        let (labelled, per_group) = options.labelled_series.unwrap_or((1, 0));
        loader.map_max_entries("GROUP_METRICS", labelled.max(1));
        loader.map_max_entries("GROUP_SERIES", labelled.max(1));
        loader.override_global("SERIES_PER_GROUP", &per_group, true);
        loader.override_global("CALL_SLOTS", &slots, true);
        diagnostics::set_level(&mut loader, options.diagnostics);
        // The release at rocsync's exit needs the kernel's kfuncs linked into the object.
        // `ROCSYNC_WATCHDOG` set takes the path of kernels without them (for its tests).
        let btf = std::env::var_os(WATCHDOG_ENV)
            .is_none()
            .then(|| aya::Btf::from_sys_fs().ok())
            .flatten();
        let linked = btf
            .as_ref()
            .and_then(|btf| release::link_kfuncs(crate::PROBES, btf).ok());
        let object = linked.as_ref().map_or(crate::PROBES, |l| l.bytes());
        let mut ebpf = loader.load(object).map_err(|e| {
            anyhow!("the kernel refused rocsync's eBPF programs: {e}")
                .context("loading probes (needs Linux ≥ 5.15 with BPF ring buffers and uprobes)")
        })?;
        // Each API's own pair, then the others.
        let calls = || Api::ALL.iter().flat_map(|&a| a.programs().map(|(p, _)| p));
        let multi = (!options.classic_uprobes && LinkKind::preferred() == LinkKind::Multi)
            .then(|| multi::MultiPrograms::load(&ebpf, crate::PROBES, calls()))
            .transpose()
            .unwrap_or_else(|e| {
                crate::say!("rocsync: warning: call probes attach as classic uprobes: {e:#}");
                None
            });
        let classic_calls = calls().filter(|_| multi.is_none());
        for name in classic_calls.chain(attach::programs::CLASSIC) {
            uprobe(&mut ebpf, name)?
                .load()
                .with_context(|| format!("loading program {name}"))?;
        }
        // Where the kernel can continue what is stopped when this process exits, it
        // does; elsewhere a capture keeps its watchdog process (see `release`).
        let releases_at_exit = match (&btf, &linked) {
            (Some(btf), Some(_)) => release::attach(&mut ebpf, btf)
                .map_err(|e| crate::say!("rocsync: warning: no release of targets at exit: {e:#}"))
                .is_ok(),
            _ => false,
        };
        let diagnostics = Diagnostics::init(&mut ebpf, options.diagnostics);
        let calls = call_ring::CallRing::new(
            owned_fd(&ebpf, "CALL_RING")?,
            owned_fd(&ebpf, "CALL_CURSOR")?,
            slots,
        )?;
        let targets = Targets::new(owned_fd(&ebpf, "TARGETS_GENERATION")?)?;
        let probes = Self {
            diagnostics,
            ebpf,
            calls,
            targets,
            options,
            links: Links::new(multi),
            releases_at_exit,
            kept: Vec::new(),
        };
        Ok(probes)
    }

    /// Whether the kernel continues what the probes stopped when this process exits,
    /// however (a SIGKILL of its whole cgroup included): then no watchdog is needed.
    pub fn releases_at_exit(&self) -> bool {
        self.releases_at_exit
    }

    /// Keeps `guard` until the probes are dropped (after every target is released).
    pub fn hold(&mut self, guard: impl Send + 'static) {
        self.kept.push(Box::new(guard));
    }

    /// Removes the ring buffer from the object; the event loop owns it from here on.
    pub fn take_ring(&mut self) -> Result<RingBuf<MapData>> {
        let map = self.ebpf.take_map("EVENTS").context("EVENTS map missing")?;
        Ok(RingBuf::try_from(map)?)
    }

    /// Where the call ring's writers are now: see [`Self::drain_calls`].
    pub fn calls_reserved(&self) -> u64 {
        self.calls.reserved()
    }

    /// Where the call ring has been read up to (its next record).
    pub fn calls_read(&self) -> u64 {
        self.calls.read_up_to()
    }

    /// How many times the call ring has been drained.
    pub fn call_drains(&self) -> u64 {
        self.calls.drains()
    }

    /// Hands the call records reserved before `until` (a [`Self::calls_reserved`] taken
    /// before the ring was read: a call's packets, in the ring, precede its exit record)
    /// and not yet read, in order, to `f`.
    pub fn drain_calls(&mut self, until: u64, f: impl FnMut(&[u8])) -> usize {
        self.calls.drain(until, f)
    }

    /// Turns the call probes on or off for the whole capture.
    pub fn set_switch(&mut self, switch: Switch) -> Result<()> {
        let mut a: Array<_, Switch> =
            Array::try_from(self.ebpf.map_mut("SWITCH").context("SWITCH map missing")?)?;
        a.set(0, switch, 0).context("updating SWITCH")?;
        Ok(())
    }

    /// Attaches the call probes to every hooked function `path` defines, scoped to `pid`
    /// (or every process when `None`). The caller probes each file once: twice would count
    /// every call twice. `carried`: a library carrying its own static copy of the runtime
    /// (see [`Runtime::carried_by`]), for which finding no function is no error.
    pub fn attach_runtime(
        &mut self,
        runtime: &Runtime,
        choice: &ApiChoice,
        path: &Path,
        pid: Option<u32>,
        carried: bool,
    ) -> Result<LibraryReport> {
        let at_entry = self.options.at_entry;
        let (points, missing, symbols) = points::resolve(runtime, choice, path, at_entry, carried)?;
        if points.is_empty() && carried {
            return Ok(LibraryReport {
                path: path.to_path_buf(),
                probed: Vec::new(),
                missing,
                stripped: !symbols,
            });
        }
        let undo = self.links.undo_mark();
        let mut probed = Vec::new();
        for p in points {
            let temporary = choice.temporary.contains(&p.api);
            for (prog, ret) in
                (p.api.programs()).filter(|&(_, ret)| choice.returns.wants(p.api, ret))
            {
                let at = (if ret { p.ret } else { p.entry }, ret);
                let (ebpf, names) = (&mut self.ebpf, &p.names);
                let attached =
                    (self.links).attach_call(ebpf, prog, at, (path, pid), names, temporary);
                if let Err(e) = attached {
                    self.links.rollback(&mut self.ebpf, undo);
                    return Err(e);
                }
            }
            probed.push((p.said, p.names));
        }
        Ok(LibraryReport::new(path, probed, missing))
    }

    /// The last correlation id the call probes assigned.
    pub fn correlations_assigned(&self) -> Result<u64> {
        counts::correlations_assigned(&self.ebpf)
    }

    /// Failed ring reservations by record kind, summed over CPUs.
    pub fn drops(&self) -> Result<KernelDrops> {
        counts::drops(&self.ebpf)
    }
}

/// The links ([`attach::links`]), the target table ([`targets`]), the stops ([`stops`])
/// and the calibration ([`calibrate`]), on the object these probes own.
impl Probes {
    /// Where the links attached from now on will start: see [`Self::take_links`].
    pub fn links_mark(&self) -> LinkMark {
        self.links.mark()
    }

    /// The (non-temporary) links attached since `mark`, handed to the caller, who
    /// releases them with [`Self::release`] when their file is no longer mapped.
    pub fn take_links(&mut self, mark: LinkMark) -> LinkGroup {
        self.links.take(mark)
    }

    /// Attaches `choice` of `runtime` in the file at `path` as a group of its own, for the
    /// caller to keep and release; a failed attach leaves nothing attached (what it did
    /// attach is detached before it returns: attached again meanwhile, each probe would
    /// fire twice).
    pub fn attach_group(
        &mut self,
        runtime: &Runtime,
        choice: &ApiChoice,
        path: &Path,
        pid: Option<u32>,
        carried: bool,
    ) -> Result<LinkGroup> {
        let mark = self.links_mark();
        let attached = self.attach_runtime(runtime, choice, path, pid, carried);
        let links = self.take_links(mark);
        match attached {
            Ok(_) => Ok(links),
            Err(e) => {
                let _ = self.release(vec![links]).join();
                Err(e)
            }
        }
    }

    /// Detaches groups of links on one background thread: [`Links::release`].
    pub fn release(&mut self, groups: Vec<LinkGroup>) -> JoinHandle<()> {
        Links::release(&mut self.ebpf, groups)
    }

    /// Detaches `group` once `before` has finished and `grace` more has passed:
    /// [`Links::release_after`].
    pub fn release_after(
        &mut self,
        group: LinkGroup,
        before: JoinHandle<()>,
        grace: std::time::Duration,
    ) -> JoinHandle<()> {
        Links::release_after(&mut self.ebpf, group, before, grace)
    }

    /// Detaches `group` in the background, then runs `after` (no probe of it fires then).
    pub fn release_then(
        &mut self,
        group: LinkGroup,
        after: impl FnOnce() + Send + 'static,
    ) -> JoinHandle<()> {
        Links::release_then(&mut self.ebpf, group, after)
    }

    /// How the call probes are attached.
    pub fn link_kind(&self) -> LinkKind {
        self.links.kind()
    }

    /// Whether temporary probes are attached.
    pub fn has_temporary(&self) -> bool {
        self.links.has_temporary()
    }

    /// Detaches the temporary probes in the background.
    pub fn detach_temporary(&mut self) -> JoinHandle<()> {
        self.links.detach_temporary(&mut self.ebpf)
    }

    /// Detaches every probe on a background thread, returned to be joined:
    /// [`Links::detach_all`]. Callers deactivate the targets first.
    pub fn detach_in_background(&mut self) -> JoinHandle<()> {
        self.links.detach_all(&mut self.ebpf)
    }

    pub fn set_target(&mut self, pid: u32, config: rocsync_common::Config) -> Result<()> {
        self.targets.set(&mut self.ebpf, pid, config)
    }

    /// The calls the probes counted of a tracked process (wrapping), if it is one.
    pub fn target_calls(&mut self, pid: u32) -> Option<CallCounts> {
        targets::calls_of(&mut self.ebpf, pid)
    }

    /// Removes a process from the traced set (it is gone).
    pub fn forget_target(&mut self, pid: u32) -> Result<()> {
        self.targets.forget(&mut self.ebpf, pid)
    }

    /// Continues `pid` if its latest stop by this capture is not continued yet:
    /// [`stops::continue_stopped`].
    pub fn continue_stopped(&mut self, pid: u32, reported: bool) -> Result<()> {
        stops::continue_stopped(&mut self.ebpf, pid, reported)
    }

    /// Stops every capture in the kernel and continues every process a probe stopped
    /// and nothing continued yet. Runs on every exit path (see `Drop`).
    pub fn release_targets(&mut self) {
        let _ = self.set_switch(Switch::default());
        self.targets.clear(&mut self.ebpf);
        // A probe that read the old settings may still be stopping a target: let it.
        std::thread::sleep(SETTLE);
        for pid in self.stopped_pids() {
            let _ = self.continue_stopped(pid, false);
        }
    }

    /// Every process a probe of this capture has stopped, continued or not.
    pub fn stopped_pids(&self) -> Vec<u32> {
        stops::stopped_pids(&self.ebpf)
    }

    /// A hash map's descriptor, for the watchdog.
    pub fn map_fd(&self, name: &str) -> Result<std::os::fd::BorrowedFd<'_>> {
        stops::hash_map_fd(&self.ebpf, name)
    }

    /// What one call pays for its probes on this machine: [`calibrate::calibrate`].
    pub fn calibrate(&mut self) -> Result<CallPrices> {
        calibrate::calibrate(&mut self.links, &mut self.ebpf)
    }
}

impl Drop for Probes {
    /// Whatever ends the capture — an error, a panic, the normal end — no target stays
    /// stopped by it.
    fn drop(&mut self) {
        self.release_targets();
    }
}

/// Wraps the ring buffer for readiness notification.
pub fn async_ring(ring: RingBuf<MapData>) -> Result<AsyncFd<RingBuf<MapData>>> {
    // SAFETY: the ring buffer owns its fd for as long as the AsyncFd that wraps it.
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(std::io::Error::from)
        .context("registering the ring buffer with the event loop")
}
