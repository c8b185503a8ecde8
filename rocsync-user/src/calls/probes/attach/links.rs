//! Attaching and detaching probes: the call probes through multi-uprobe links where the
//! kernel has them ([`super::multi`]), every other probe (and the call probes otherwise)
//! as aya's classic uprobes; each kept until its library's capture ends, or until the
//! temporary `*GetDevice` probes have learned what they were for.

use std::{num::NonZeroU32, os::fd::OwnedFd, path::Path, thread::JoinHandle};

use anyhow::{Context as _, Result};
use aya::{
    Ebpf,
    programs::{
        UProbe,
        uprobe::{UProbeAttachPoint, UProbeLinkId},
    },
};

use super::multi::MultiPrograms;

/// A position in the list of links ([`Links::mark`]).
#[derive(Clone, Copy, Debug)]
pub struct LinkMark(usize);

/// The links of one library file, owned by whoever decides when that file is done with.
/// Detached in their order.
pub struct LinkGroup(Vec<Attached>);

impl LinkGroup {
    /// `self`'s links, then `later`'s.
    pub fn then(mut self, mut later: LinkGroup) -> LinkGroup {
        self.0.append(&mut later.0);
        self
    }
}

/// How the call probes are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// `BPF_TRACE_UPROBE_MULTI` links: no perf-event layer per hit (Linux ≥ 6.6).
    Multi,
    /// Perf-event uprobes, as every other probe.
    PerfEvent,
}

impl LinkKind {
    /// What this kernel gets unless `--classic-uprobes` (or a refusal) says otherwise.
    pub fn preferred() -> Self {
        if super::multi::supported() {
            LinkKind::Multi
        } else {
            LinkKind::PerfEvent
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Multi => "uprobe_multi",
            LinkKind::PerfEvent => "perf_event",
        }
    }
}

/// One attached probe: a link aya keeps (by program and id) or a multi-uprobe link's fd.
enum Attached {
    Classic(&'static str, UProbeLinkId),
    Multi(OwnedFd),
}

/// Where every probe's link is kept, from its attach to its detach. Classic links are
/// aya's, held in their programs: attaching and detaching them takes the object
/// (`ebpf`), which its owner passes in.
pub(in crate::calls::probes) struct Links {
    /// The call programs loaded for multi-uprobe links, where the call probes use them.
    multi: Option<MultiPrograms>,
    links: Vec<Attached>,
    /// Links of temporary probes, detached on their own.
    temporary: Vec<Attached>,
    /// Library probes attach to every process mapping the file (children are followed),
    /// not to one pid.
    file_wide: bool,
}

/// A position in both lists of links, to detach what was added since ([`Links::rollback`]).
#[derive(Clone, Copy)]
pub(in crate::calls::probes) struct Undo(usize, usize);

impl Links {
    pub(in crate::calls::probes) fn new(multi: Option<MultiPrograms>) -> Self {
        Self {
            multi,
            links: Vec::new(),
            temporary: Vec::new(),
            file_wide: false,
        }
    }

    /// From here on, library probes attach to every process mapping the file.
    pub(in crate::calls::probes) fn set_file_wide(&mut self) {
        self.file_wide = true;
    }

    /// Whether library probes are attached file-wide.
    pub(in crate::calls::probes) fn file_wide(&self) -> bool {
        self.file_wide
    }

    /// Attaches one program at one point and keeps the link.
    pub(in crate::calls::probes) fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        prog: &'static str,
        point: UProbeAttachPoint<'_>,
        path: &Path,
        pid: Option<u32>,
        names: &[&str],
    ) -> Result<()> {
        let link = self.classic(ebpf, prog, point, path, pid);
        self.keep_attached(link, path, names, false)
    }

    /// Attaches a call program at `(offset, at its return)` in `(path, for pid)`, through
    /// a multi-uprobe link where the kernel has them.
    pub(in crate::calls::probes) fn attach_call(
        &mut self,
        ebpf: &mut Ebpf,
        prog: &'static str,
        (offset, ret): (u64, bool),
        (path, pid): (&Path, Option<u32>),
        names: &[&str],
        temporary: bool,
    ) -> Result<()> {
        let link = match &self.multi {
            Some(multi) => multi
                .attach(prog, path, offset, ret, self.scoped(pid))
                .map(Attached::Multi),
            None => {
                let point = UProbeAttachPoint {
                    location: offset.into(),
                    cookie: None,
                };
                self.classic(ebpf, prog, point, path, pid)
            }
        };
        self.keep_attached(link, path, names, temporary)
    }

    /// The pid a probe is scoped to: none for file-wide probes.
    fn scoped(&self, pid: Option<u32>) -> Option<u32> {
        pid.filter(|_| !self.file_wide)
    }

    fn classic(
        &self,
        ebpf: &mut Ebpf,
        prog: &'static str,
        point: UProbeAttachPoint<'_>,
        path: &Path,
        pid: Option<u32>,
    ) -> Result<Attached> {
        let scope = scope(self.scoped(pid));
        let link = uprobe(ebpf, prog)?.attach(point, path, scope)?;
        Ok(Attached::Classic(prog, link))
    }

    /// Keeps a link just made, or says where it failed.
    fn keep_attached(
        &mut self,
        link: Result<Attached>,
        path: &Path,
        names: &[&str],
        temporary: bool,
    ) -> Result<()> {
        let link = link
            .with_context(|| format!("attaching to {} in {}", names.join("/"), path.display()))?;
        if temporary {
            self.temporary.push(link);
        } else {
            self.links.push(link);
        }
        Ok(())
    }

    /// Where the links attached from now on will start: see [`Self::take`].
    pub(in crate::calls::probes) fn mark(&self) -> LinkMark {
        LinkMark(self.links.len())
    }

    /// The (non-temporary) links attached since `mark`, handed to the caller, who
    /// releases them with [`Self::release`] when their file is no longer mapped.
    pub(in crate::calls::probes) fn take(&mut self, mark: LinkMark) -> LinkGroup {
        LinkGroup(self.links.split_off(mark.0.min(self.links.len())))
    }

    /// Detaches groups of links on one background thread (however many files a prune
    /// releases at once).
    pub(in crate::calls::probes) fn release(
        ebpf: &mut Ebpf,
        groups: Vec<LinkGroup>,
    ) -> JoinHandle<()> {
        detach(ebpf, groups.into_iter().flat_map(|g| g.0).collect())
    }

    /// Detaches `group` in the background once `before` has finished and `grace` more has
    /// passed: the returns of calls whose entries `before` detaches (a call entered before
    /// has returned by then, so none is left with an entry and no return).
    pub(in crate::calls::probes) fn release_after(
        ebpf: &mut Ebpf,
        group: LinkGroup,
        before: JoinHandle<()>,
        grace: std::time::Duration,
    ) -> JoinHandle<()> {
        let each = links_to_drop(ebpf, group.0);
        std::thread::spawn(move || {
            let _ = before.join();
            std::thread::sleep(grace);
            drop_together(each);
        })
    }

    /// Detaches `group` in the background, then runs `after` (no probe of it fires then).
    pub(in crate::calls::probes) fn release_then(
        ebpf: &mut Ebpf,
        group: LinkGroup,
        after: impl FnOnce() + Send + 'static,
    ) -> JoinHandle<()> {
        let detaching = detach(ebpf, group.0);
        std::thread::spawn(move || {
            let _ = detaching.join();
            after();
        })
    }

    /// How the call probes are attached.
    pub(in crate::calls::probes) fn kind(&self) -> LinkKind {
        match self.multi {
            Some(_) => LinkKind::Multi,
            None => LinkKind::PerfEvent,
        }
    }

    /// Where both lists stand now: see [`Self::rollback`].
    pub(in crate::calls::probes) fn undo_mark(&self) -> Undo {
        Undo(self.links.len(), self.temporary.len())
    }

    /// Detaches what one library's attachment added since `undo` before it failed, so a
    /// later rescan attaches it whole, never twice.
    pub(in crate::calls::probes) fn rollback(&mut self, ebpf: &mut Ebpf, undo: Undo) {
        let mut added = self.links.split_off(undo.0);
        added.append(&mut self.temporary.split_off(undo.1));
        let _ = detach(ebpf, added).join();
    }

    /// Whether temporary probes are attached.
    pub(in crate::calls::probes) fn has_temporary(&self) -> bool {
        !self.temporary.is_empty()
    }

    /// Detaches the temporary probes in the background.
    pub(in crate::calls::probes) fn detach_temporary(&mut self, ebpf: &mut Ebpf) -> JoinHandle<()> {
        let links = std::mem::take(&mut self.temporary);
        detach(ebpf, links)
    }

    /// Detaches every probe on a background thread, returned to be joined.
    ///
    /// Each uprobe unregistration waits for RCU grace periods (about 0.05 s each; shared
    /// by unregistrations at the same time), so a capture's outputs are written while
    /// this runs.
    /// Callers deactivate the targets first: a probe still attached meanwhile records
    /// nothing.
    pub(in crate::calls::probes) fn detach_all(&mut self, ebpf: &mut Ebpf) -> JoinHandle<()> {
        let mut all = std::mem::take(&mut self.links);
        all.append(&mut self.temporary);
        detach(ebpf, all)
    }
}

/// A program of the object, as a uprobe.
pub(in crate::calls::probes) fn uprobe<'a>(
    ebpf: &'a mut Ebpf,
    name: &str,
) -> Result<&'a mut UProbe> {
    let prog = ebpf
        .program_mut(name)
        .with_context(|| format!("program {name} missing from the eBPF object"))?;
    Ok(prog.try_into()?)
}

fn detach(ebpf: &mut Ebpf, attached: Vec<Attached>) -> JoinHandle<()> {
    let each = links_to_drop(ebpf, attached);
    std::thread::spawn(move || drop_together(each))
}

/// The links of `attached`, taken from their programs, to be dropped (detached).
fn links_to_drop(ebpf: &mut Ebpf, attached: Vec<Attached>) -> Vec<Box<dyn Send>> {
    let (mut links, mut fds) = (Vec::new(), Vec::new());
    for a in attached {
        match a {
            // A link that cannot be taken is released with the object in any case.
            Attached::Classic(prog, id) => {
                if let Ok(link) = uprobe(ebpf, prog).and_then(|p| Ok(p.take_link(id)?)) {
                    links.push(link);
                }
            }
            // Closing a multi-uprobe link's last descriptor detaches it.
            Attached::Multi(fd) => fds.push(fd),
        }
    }
    let mut each: Vec<Box<dyn Send>> = Vec::new();
    each.extend(links.into_iter().map(|l| Box::new(l) as Box<dyn Send>));
    each.extend(fds.into_iter().map(|f| Box::new(f) as Box<dyn Send>));
    each
}

/// Most threads one detach runs on.
const DETACHERS: usize = 16;

/// Drops `links` on threads of their own: each unregistration waits for kernel grace
/// periods, which waiters at the same time share (a file's 25 links: 1.3 s one after
/// the other, 70 ms together).
fn drop_together(links: Vec<Box<dyn Send>>) {
    let mut shares: Vec<Vec<Box<dyn Send>>> = Vec::new();
    shares.resize_with(links.len().min(DETACHERS), Vec::new);
    for (i, l) in links.into_iter().enumerate() {
        let n = shares.len();
        shares[i % n].push(l);
    }
    // A share no thread could be had for (a pids limit) is dropped here, with `shares`.
    let shares: Vec<std::sync::Mutex<Vec<Box<dyn Send>>>> =
        shares.into_iter().map(std::sync::Mutex::new).collect();
    std::thread::scope(|s| {
        for share in &shares {
            let _ = std::thread::Builder::new().spawn_scoped(s, move || {
                drop(std::mem::take(
                    &mut *share.lock().unwrap_or_else(|e| e.into_inner()),
                ))
            });
        }
    });
}

fn scope(pid: Option<u32>) -> aya::programs::uprobe::UProbeScope {
    use aya::programs::uprobe::UProbeScope;
    match pid.and_then(NonZeroU32::new) {
        Some(pid) => UProbeScope::OneProcess(pid),
        None => UProbeScope::AllProcesses,
    }
}
