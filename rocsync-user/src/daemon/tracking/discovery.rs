//! Finding the processes to count: every process mapping a GPU runtime, found by a scan
//! at start and then as the probes announce an exec or a library load (no polling of
//! every process), subject to the configured filters. Each library file is probed once,
//! file-wide; a tracked process enters `TARGETS` with counting on.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::daemon::tracking::apart::{
    Apart, polling::is_unusable, returns::ReturnsApart, shed_log::ShedLog,
};
use crate::daemon::tracking::files::{FileId, Files, Part};
use crate::daemon::tracking::loading::{self, Loading};
use crate::daemon::tracking::runtimes::{self, Probed};
use crate::daemon::tracking::snapshot::Snapshot;

use anyhow::Result;
use rocsync_common::{Api, Config, Op};

use crate::daemon::{
    quiet::Quiet,
    tracking::filters::{Admitting, Filters},
    tracking::pods::Pods,
    untrusted,
};
use crate::{
    calls::probes::{
        ApiChoice, Probes, ReturnProbes, Stepped, attach::ld_so, elf::library::OpenedLibrary,
        placement::points,
    },
    os::procfs,
};

const COUNTED: Config = Config {
    metrics: 1,
    ..Config::INACTIVE
};

pub(crate) struct Tracker {
    pub probes: Probes,
    /// What the ring gets of a tracked process outside traces: nothing, or (flight
    /// recorder) every call.
    pub baseline: u32,
    filters: Admitting,
    pub tracked: BTreeSet<u32>,
    /// (device, inode) of every loader probed.
    probed: HashSet<(u64, u64)>,
    /// Tracked processes' `HIP_VISIBLE_DEVICES`: their agents numbered as HIP devices.
    visible: HashMap<u32, Vec<u32>>,
    /// The runtime files probed, and those refused.
    pub files: Files,
    /// What the budget shed, and when (`apart/shed_log.rs`).
    pub shed_log: ShedLog,
    /// Files refused for their user's cap, said in the log per user.
    quiet: Quiet,
    /// During the scan at start: probe `*GetDevice` too, for a while, to learn the devices
    /// of threads that chose theirs before the daemon ran.
    learning: bool,
    /// Each tracked process's pod, and the label group its calls are counted in.
    pub pods: Pods,
    /// Processes found while their loader maps a runtime (`loading.rs`).
    pub loading: Loading,
    /// Whether the returns counting does not need are attached (`returns.rs`).
    pub returns: ReturnsApart,
    /// Calls of tracked processes made before they were tracked (their first calls,
    /// before discovery read their library load), by label group and series slot:
    /// `/metrics` adds them to the kernel's counts.
    pub early: BTreeMap<(u32, u32), u64>,
    /// Who held each communicator id, kept after their processes end (upload keys).
    pub claims: super::claims::Claims,
}

impl Tracker {
    pub(crate) fn new(probes: Probes, filters: Filters, baseline: u32, pods: Pods) -> Self {
        Self {
            probes,
            baseline,
            filters: Admitting::new(filters),
            tracked: BTreeSet::new(),
            probed: HashSet::new(),
            visible: HashMap::new(),
            files: Files::default(),
            shed_log: ShedLog::default(),
            quiet: Quiet::new("files refused for their user's cap"),
            learning: false,
            pods,
            loading: Loading::default(),
            returns: ReturnsApart::default(),
            early: BTreeMap::new(),
            claims: Default::default(),
        }
    }

    /// The returns counting does not need attached (a recording needs them: before it is
    /// switched on; the budget's duty cycle is held apart, `Budget::recording`).
    pub(crate) fn returns_on(&mut self) -> Result<()> {
        self.returns
            .switch_on(&mut self.probes, self.files.returns())
    }

    /// Those returns detached a grace from now: once nothing records.
    pub(crate) fn returns_off(&mut self) -> Result<()> {
        self.returns
            .switch_off(&mut self.probes, self.files.returns())
    }

    /// Detaches the returns whose grace is over.
    pub(crate) fn retire_returns(&mut self) {
        let now = tokio::time::Instant::now();
        (self.returns).retire(now, &mut self.probes, self.files.returns());
    }

    /// Looks at every process now. Processes running already may have threads on a
    /// device they chose before: `*GetDevice` is probed too (temporarily), so their
    /// device is learnt at their next call of it (unless `learn` is false).
    pub(crate) fn scan_all(&mut self, learn: bool) {
        self.learning = learn;
        for pid in crate::os::procfs::pids() {
            self.look(pid);
        }
        self.learning = false;
    }

    /// Looks at one process: hooks its loader (so its later library loads are announced),
    /// probes the runtimes it maps, and tracks it if it maps one and passes the filters.
    pub(crate) fn look(&mut self, pid: u32) {
        let looks = self.loading.take(pid);
        if pid == std::process::id() {
            return;
        }
        let Some(p) = Snapshot::of(pid) else {
            return; // gone, or a kernel thread
        };
        let mappings = &*self.files.readable(&p);
        if let Some(loader) = ld_so::of_process(pid, mappings)
            && self.probed.insert((loader.dev, loader.ino))
        {
            match self.probes.attach_loader(&loader.path(), pid) {
                // A loader seen first: what it mapped between the snapshot and the attach
                // was announced to no one (a runtime linked by a program of its own
                // loader went untracked for good). Looked at again: what it maps after
                // this second look is announced.
                Ok(true) => return self.look(pid),
                // Tried again at the next process that maps it.
                Ok(false) => {
                    self.probed.remove(&(loader.dev, loader.ino));
                }
                Err(e) => {
                    self.probed.remove(&(loader.dev, loader.ino));
                    crate::say!(
                        "rocsync daemon: warning: pid {pid}: library loads will not be seen: {e:#}"
                    );
                }
            }
        }
        if !runtimes::maps_runtime(mappings) {
            return;
        }
        // A process the filters exclude gets no probes of its own (its file may still be
        // probed for another's).
        if !(self.tracked.contains(&pid) || self.filters.admits(&p)) {
            // Its calls are not counted: nor are they early ones.
            let _ = self.probes.pass(pid);
            return;
        }
        let mut loading = false;
        for (m, what) in runtimes::mapped(mappings) {
            match OpenedLibrary::of_mapping(pid, m) {
                Ok(lib) => self.probe_file(what, lib, &p),
                Err(e) if OpenedLibrary::moved(&e) && loading::has_moved(pid, m) => loading = true,
                Err(e) => self.files.unopened(m, pid, &e),
            }
        }
        if self.tracked.contains(&pid) {
            return; // a library more, in a process already counted
        }
        // Mid-load: tracked once the load is done, so "tracking" means its runtimes are
        // probed (a caller told so before would miss the calls made in between).
        if loading && self.loading.wait(pid, looks) {
            return;
        }
        // Its pod first: with labels, its first call is counted in its pod's group.
        let mut counted = Config {
            capture: self.baseline,
            metric_group: self.pods.track(pid, p.cgroup()),
            ..COUNTED
        };
        // Its packets counted on its HIP devices, as a capture numbers them.
        if let Some(visible) = p.identity().and_then(|id| id.visible.clone()) {
            crate::os::environ::number_agents(&mut counted, &visible);
            self.visible.insert(pid, visible);
        }
        let group = counted.metric_group;
        match self.probes.set_target(pid, counted) {
            Ok(()) => {
                self.tracked.insert(pid);
                self.claims.tracked(pid);
                // Its calls before this are its counts too.
                for (slot, n) in self.probes.take_early(pid).unwrap_or_default() {
                    *self.early.entry((group, slot)).or_default() += n;
                }
                // Names are checked (DNS-1123); any user names their executables: escaped.
                let pod = self.pods.pod(pid).map(|p| format!(" in pod {}", p.shown()));
                crate::say!(
                    "rocsync daemon: tracking pid {pid} ({}){}",
                    untrusted::shown(p.exe()),
                    pod.unwrap_or_default()
                );
            }
            Err(e) => {
                self.pods.forget(pid);
                crate::say!("rocsync daemon: warning: pid {pid}: {e:#}");
            }
        }
    }

    /// Probes one runtime file `pid` maps, unless it is probed already, was found
    /// unusable, or its user has as many files probed as allowed.
    fn probe_file(&mut self, what: Probed, lib: OpenedLibrary, p: &Snapshot) {
        let pid = p.pid;
        let part = match what {
            Probed::Runtime(r, _) => Part::Runtime(r.backend),
            Probed::Hsa => Part::Hsa,
        };
        if self.files.serves(&lib, part, pid) {
            return;
        }
        let id = FileId::of(&lib, part);
        if self.files.is_unusable(&id) {
            return; // read once already: never again while it is the same file
        }
        // Its earlier probes still being detached would record each call a second time.
        self.files.await_release(&lib, part);
        // A process whose uid is unreadable has just gone.
        let Some(owner) = p.uid() else {
            return;
        };
        let cap = self.filters.filters().max_files_per_user;
        let shown = || untrusted::shown(&lib.shown.to_string_lossy());
        match self.files.admit(owner, id, cap) {
            (true, _) => {}
            (false, first) => {
                let peer = format!("uid {owner}");
                if first && self.quiet.allow(&peer, tokio::time::Instant::now()) {
                    crate::say!(
                        "rocsync daemon: warning: {} (pid {pid}) not probed: uid {owner} has {cap} files probed already",
                        shown()
                    );
                }
                return;
            }
        }
        let mark = self.probes.links_mark();
        let attached = match what {
            Probed::Runtime(r, carried) => {
                // The polling probes are attached apart (below): the budget sheds them.
                // So are records, waits and destroys (its duty cycle's, `apart/cycled.rs`) and
                // the returns counting does not need (`returns.rs`).
                let mut choice = ApiChoice {
                    skip: (r.apis())
                        .filter(|a| a.is_polling() || a.return_optional())
                        .collect(),
                    returns: ReturnProbes::Needed,
                    ..ApiChoice::default()
                };
                if self.learning {
                    choice.temporary = Api::ALL
                        .iter()
                        .copied()
                        .filter(|a| a.op() == Op::GetDevice)
                        .collect();
                }
                self.probes
                    .attach_runtime(r, &choice, &lib.path(), Some(pid), carried)
            }
            Probed::Hsa => self.probes.attach_hsa(&lib.path(), pid),
        };
        match attached {
            Ok(report) => {
                let links = self.probes.take_links(mark);
                // Priced as its calls' probes mostly are: a process's calls are counted
                // together, whatever function they hit (ROCm 6.4/7.2's pairs are all
                // single-stepped, 5.2's all emulated), its entries alone apart (6.4/7.2's
                // emulated past the stubs' frame setup). API calls only: the HSA
                // runtime's doorbells are not counted.
                // Where its probes trap while the daemon counts (records', waits',
                // destroys' and polls' entries alone; their returns, while something records, where
                // `[rsp]` is the return address): said, and its entries alone priced so.
                let counting = match what {
                    Probed::Runtime(r, _) => points::counting(r, &lib.path()).ok(),
                    Probed::Hsa => None,
                };
                let stepped = Stepped {
                    pairs: matches!(what, Probed::Runtime(..))
                        && 2 * report.probed.iter().filter(|(p, _)| !p.emulated).count()
                            > report.probed.len(),
                    alone: counting.as_deref().is_some_and(points::alone_stepped),
                };
                let hsa = if matches!(what, Probed::Hsa) {
                    " (HSA queues and doorbells)"
                } else {
                    ""
                };
                let apart = match what {
                    Probed::Runtime(r, carried) => Apart::attach(
                        &mut self.probes,
                        &lib,
                        (r, carried),
                        (pid, &shown()),
                        (&self.returns, &self.shed_log),
                    ),
                    Probed::Hsa => Apart::default(),
                };
                self.files
                    .add((&lib, part), (owner, pid), (links, stepped), apart);
                // Said once every probe of the file is on.
                crate::say!("rocsync daemon: probing {}{hsa}", shown());
                if let Some(p) = counting {
                    say_placements(&p, &shown());
                }
            }
            // What is wrong with the file itself is remembered; a refusal of the kernel
            // (attaching) is tried again at the next process that maps it.
            Err(e) if is_unusable(&e) => {
                self.files.unusable(id);
                crate::say!("rocsync daemon: warning: {} not probed: {e:#}", shown());
            }
            Err(e) => crate::say!("rocsync daemon: warning: {e:#}"),
        }
    }

    /// Sets what the ring gets of a tracked process: nothing (0), or its calls (of
    /// `agents`, a mask; 0 is every agent) while a trace records it.
    pub(crate) fn set_capture(&mut self, pid: u32, capture: u32, agents: u64) -> Result<()> {
        let mut t = Config {
            capture,
            agents,
            metric_group: self.pods.group_of(pid),
            ..COUNTED
        };
        if let Some(visible) = self.visible.get(&pid) {
            crate::os::environ::number_agents(&mut t, visible);
        }
        self.probes.set_target(pid, t)
    }

    /// Forgets processes that are gone; returns the label groups gone with them.
    pub(crate) fn prune(&mut self) -> Result<Vec<u32>> {
        self.quiet.flush(tokio::time::Instant::now());
        let gone: Vec<u32> = self
            .tracked
            .iter()
            .copied()
            .filter(|&p| !procfs::exists(p))
            .collect();
        for &pid in &gone {
            self.tracked.remove(&pid);
            self.visible.remove(&pid);
            self.pods.forget(pid);
            self.probes.forget_target(pid)?;
        }
        // Whose each id is, kept; their communicators' entries, and their users' share
        // of them, freed.
        self.claims.seen(&self.probes.comms(), &gone);
        self.probes.forget_comms(&gone)?;
        let groups = self.pods.retire(std::time::Instant::now());
        for &group in &groups {
            self.probes.forget_group(group)?;
            self.early.retain(|(g, _), _| *g != group);
        }
        // A file's probes go with the last process it was probed for; detached in the
        // background (each unregistration waits for the kernel).
        let probes = &mut self.probes;
        self.files
            .unmapped(procfs::exists, |released| probes.release(released));
        Ok(groups)
    }

    /// The filters processes are tracked by from now on.
    pub(crate) fn set_filters(&mut self, filters: Filters) {
        self.filters = Admitting::new(filters);
    }
}

/// Where a runtime file's probes trap while the daemon counts, and whether the kernel
/// emulates each: one line per placement, as a runtime's whole list is longer than a log
/// line may be.
fn say_placements(counting: &[points::Points], shown: &str) {
    let said = points::said(counting);
    let groups: Vec<&str> = said.split("; ").collect();
    let n = groups.len();
    for (i, group) in groups.iter().enumerate() {
        crate::say!(
            "rocsync daemon: {shown}: probes on {group} ({} of {n})",
            i + 1
        );
    }
}
