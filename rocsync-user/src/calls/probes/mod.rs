//! Probes: the loaded eBPF object (target settings, the ring, the drop counters), and
//! attaching its programs to runtime libraries ([`elf`] finds the functions, [`placement`]
//! where in them to trap), to the dynamic loader ([`ld_so`]) of processes read from
//! [`maps`].

mod calibrate;
pub use calibrate::{CallPrices, Stepped};
pub(crate) mod attach;
mod call_ring;
mod daemon;
mod diagnostics;
pub mod elf;
pub mod mapped;
pub(crate) mod maps;
pub mod placement;
pub mod seccomp;
mod stops;
mod targets;
pub use targets::CallCounts;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow};
use aya::{
    Ebpf,
    maps::{Array, MapData, PerCpuArray, RingBuf},
    programs::UProbe,
};
use rocsync_common::{Api, Switch, drop_index};

pub use self::diagnostics::Diagnostics;
use self::placement::Placement;
use tokio::io::{Interest, unix::AsyncFd};

use crate::calls::{backend::Runtime, stats::KernelDrops};
pub use attach::links::{LinkGroup, LinkKind, LinkMark};
pub use attach::multi::MultiPrograms;
use attach::{links::Attached, multi};
pub use placement::choice::{ApiChoice, ReturnProbes};
use placement::points;
pub use stops::SETTLE;
pub use stops::job::continue_process;
use stops::release;

const LINK_MAP: &str = "link_map_changed";
const QUEUE_CREATE_ENTER: &str = "queue_create_enter";
const QUEUE_CREATE_EXIT: &str = "queue_create_exit";
const QUEUE_DESTROY: &str = "queue_destroy";
const DOORBELL: &str = "doorbell";
const AGENT_INFO_ENTER: &str = "agent_info_enter";
const AGENT_INFO_EXIT: &str = "agent_info_exit";
const ITERATE_AGENTS_ENTER: &str = "iterate_agents_enter";
const ITERATE_AGENTS_EXIT: &str = "iterate_agents_exit";
/// Set: targets are released by the watchdog process, as on kernels without the kfuncs
/// the release at exit needs (`release`), even where the kernel has them.
const WATCHDOG_ENV: &str = "ROCSYNC_WATCHDOG";
/// What attaching to one library file found.
#[derive(Debug)]
pub struct LibraryReport {
    pub path: PathBuf,
    /// Hooked functions (distinct addresses) and the names probed at each.
    pub probed: Vec<(Placement, Vec<&'static str>)>,
    /// Hooked names this library does not export.
    pub missing: Vec<&'static str>,
    /// It has no static symbol table: functions it carries may be hidden.
    pub stripped: bool,
}

impl LibraryReport {
    fn new(
        path: &Path,
        probed: Vec<(Placement, Vec<&'static str>)>,
        missing: Vec<&'static str>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            probed,
            missing,
            stripped: false,
        }
    }
}

/// How probes are loaded and placed.
/// The ring's size in the probes' object, used when `ring_bytes` is `None`.
const DEFAULT_RING: u32 = 8 << 20;
/// Longest time temporary `*GetDevice` probes stay attached by default. They trap every
/// call of a function a busy PyTorch thread calls ~250 000 times a second (+43-90 % for
/// as long as they stay, on the H200); a busy thread calls it within microseconds, so a
/// short window learns what matters (bench/learning.md). As a flag gives it (`attach`'s
/// and the daemon's `--learn-devices`).
pub const LEARN_DEVICES: &str = "100ms";

#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeOptions {
    /// Ring buffer size in bytes (a power of two, a multiple of the page size); the call
    /// ring gets as many, unless `call_ring_bytes` says otherwise.
    pub ring_bytes: Option<u32>,
    /// The call ring's own size in bytes (rounded to a power of two of 64-byte slots).
    pub call_ring_bytes: Option<u32>,
    /// Probe the first instruction even where placement would skip `endbr64`/`nop`.
    pub at_entry: bool,
    /// Show the probes' own diagnostics (`-v`).
    pub diagnostics: bool,
    /// Attach the call probes as classic (perf-event) uprobes even where the kernel has
    /// multi-uprobe links.
    pub classic_uprobes: bool,
    /// The daemon's labelled series (`--metric-labels`): how many the kernel holds, and
    /// how many of them one label group (a pod) may have (`None`: none labelled).
    pub labelled_series: Option<(u32, u32)>,
}

pub struct Probes {
    ebpf: Ebpf,
    /// Where the call probes write (every other record goes to the ring, `EVENTS`).
    calls: call_ring::CallRing,
    /// Stepped after every change to `TARGETS`.
    generation: targets::Generation,
    pub diagnostics: Diagnostics,
    options: ProbeOptions,
    /// The call programs loaded for multi-uprobe links, where the call probes use them.
    multi: Option<multi::MultiPrograms>,
    links: Vec<Attached>,
    /// Links of temporary probes, detached on their own.
    temporary: Vec<Attached>,
    /// Library probes attach to every process mapping the file (children are followed),
    /// not to one pid.
    file_wide: bool,
    /// The kernel continues what the probes stopped when this process exits, however.
    releases_at_exit: bool,
    /// What must live as long as the probes (a capture's watchdog, which continues
    /// stopped targets if rocsync is killed): dropped after `release_targets`.
    kept: Vec<Box<dyn Send>>,
}

impl Probes {
    /// Loads the programs; callers run [`crate::os::preflight::check`] first.
    pub fn load(options: ProbeOptions) -> Result<Self> {
        let mut loader = aya::EbpfLoader::new();
        if let Some(bytes) = options.ring_bytes {
            loader.map_max_entries("EVENTS", bytes);
        }
        // The call ring gets as many bytes as the ring (its slots a power of two).
        let call_bytes = (options.call_ring_bytes)
            .or(options.ring_bytes)
            .unwrap_or(DEFAULT_RING);
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
        for name in classic_calls.chain([
            LINK_MAP,
            QUEUE_CREATE_ENTER,
            QUEUE_CREATE_EXIT,
            QUEUE_DESTROY,
            DOORBELL,
            AGENT_INFO_ENTER,
            AGENT_INFO_EXIT,
            ITERATE_AGENTS_ENTER,
            ITERATE_AGENTS_EXIT,
            seccomp::RETURN_CHECK,
        ]) {
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
        let generation = targets::Generation::new(owned_fd(&ebpf, "TARGETS_GENERATION")?)?;
        let probes = Self {
            diagnostics,
            ebpf,
            calls,
            generation,
            options,
            multi,
            links: Vec::new(),
            temporary: Vec::new(),
            file_wide: false,
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
        let mark = (self.links.len(), self.temporary.len());
        let mut probed = Vec::new();
        for p in points {
            let temporary = choice.temporary.contains(&p.api);
            for (prog, ret) in
                (p.api.programs()).filter(|&(_, ret)| choice.returns.wants(p.api, ret))
            {
                let at = (if ret { p.ret } else { p.entry }, ret);
                if let Err(e) = self.attach_call(prog, at, path, pid, &p.names, temporary) {
                    self.rollback(mark);
                    return Err(e);
                }
            }
            probed.push((p.said, p.names));
        }
        Ok(LibraryReport::new(path, probed, missing))
    }

    /// The last correlation id the call probes assigned.
    pub fn correlations_assigned(&self) -> Result<u64> {
        let counter: Array<_, u64> = Array::try_from(
            self.ebpf
                .map("CORRELATION")
                .context("CORRELATION map missing")?,
        )?;
        Ok(counter.get(&0, 0)?)
    }

    /// Failed ring reservations by record kind, summed over CPUs.
    pub fn drops(&self) -> Result<KernelDrops> {
        let drops: PerCpuArray<_, u64> =
            PerCpuArray::try_from(self.ebpf.map("DROPS").context("DROPS map missing")?)?;
        let sum = |i: u32| -> Result<u64> { Ok(drops.get(&i, 0)?.iter().sum()) };
        Ok(KernelDrops {
            entries: sum(drop_index::ENTRY)?,
            exits: sum(drop_index::EXIT)?,
            library_loads: sum(drop_index::LINK_MAP)?,
            queues: sum(drop_index::QUEUE)?,
            packets: sum(drop_index::PACKET)?,
            packets_truncated: sum(drop_index::TRUNCATED)?,
            out_params: sum(drop_index::OUT_PARAM)?,
            packets_unread: sum(drop_index::PACKET_UNREAD)?,
            get_device_unrecorded: sum(drop_index::GET_DEVICE_UNRECORDED)?,
            comm_state: sum(drop_index::COMM_STATE)?,
            thread_names: sum(drop_index::THREAD_NAME)?,
        })
    }
}

fn uprobe<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut UProbe> {
    let prog = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?;
    Ok(prog.try_into()?)
}

/// An array map's fd, of our own: the call ring maps it for as long as it lives.
fn owned_fd(ebpf: &Ebpf, name: &str) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd as _;
    match ebpf.map(name) {
        Some(aya::maps::Map::Array(data)) => Ok(data.fd().as_fd().try_clone_to_owned()?),
        _ => Err(anyhow!("{name}: no such array map")),
    }
}

/// Wraps the ring buffer for readiness notification.
pub fn async_ring(ring: RingBuf<MapData>) -> Result<AsyncFd<RingBuf<MapData>>> {
    // SAFETY: the ring buffer owns its fd for as long as the AsyncFd that wraps it.
    unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(std::io::Error::from)
        .context("registering the ring buffer with the event loop")
}
