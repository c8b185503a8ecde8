//! The runtime library files the daemon probes, each for the processes that map it.
//!
//! Any local user can map files named like a runtime. So a file's probes are released
//! once no process it was probed for lives (its copies would otherwise hold links and
//! descriptors for ever), each user (the real uid of the process a file was first probed
//! for) has a cap of its own (one user's files never push out another's; a released
//! file still counts until the kernel has let go of its links, so churning copies cannot
//! outrun the detach), and a file that could not be used is remembered by device,
//! inode, size and modification time, so that it is not read again at every library
//! load. A file mapped again while its links are being detached waits for the detach:
//! probed twice meanwhile, each call would be recorded twice.

mod release;

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    thread::JoinHandle,
};

use std::borrow::Cow;

use crate::calls::backend::RUNTIMES;
use crate::calls::probes::{LinkGroup, Stepped, elf::library::OpenedLibrary, maps};
use crate::daemon::{
    tracking::{
        apart::{Apart, cycled::Cycled, polling::Polling, returns::FileReturns},
        snapshot::Snapshot,
    },
    untrusted,
};

/// Files remembered as refused; past this the memory starts again (a user creating new
/// bad files costs one bounded read each in any case).
const MAX_REMEMBERED: usize = 4096;

/// What of a file is probed: one file may hold two runtimes (libnccl: its own exports
/// and the CUDA runtime it carries), each probed, counted and released apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    Runtime(rocsync_common::Backend),
    Hsa,
}

/// A file as it is now, and the part of it probed: a file rewritten in place is another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    part: Part,
}

impl FileId {
    pub(crate) fn of(lib: &OpenedLibrary, part: Part) -> Self {
        Self {
            dev: lib.dev,
            ino: lib.ino,
            size: lib.size,
            mtime_ns: lib.mtime_ns,
            part,
        }
    }
}

/// Files refused, by reason, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Not a usable runtime (not ELF, bounds exceeded, no hooked function).
    pub unusable: u64,
    /// Their user had as many files probed as allowed.
    pub per_user_limit: u64,
    /// On a user's FUSE mount: never read (`fuse.rs`).
    pub user_fuse: u64,
}

struct Probed {
    uid: u32,
    /// Its path, as the log shows it.
    shown: String,
    links: LinkGroup,
    /// Processes it was probed or seen for; released when none lives.
    pids: BTreeSet<u32>,
    /// Its polling probes, apart (a runtime that has them).
    polling: Option<Polling>,
    /// The returns counting does not need, apart (a runtime's).
    returns: Option<FileReturns>,
    /// Its records', waits' and destroys' probes, apart (a runtime's): the duty cycle's.
    cycled: Option<Cycled>,
    /// Which of its probes sit on instructions the kernel single-steps (most of its
    /// pairs; its entries alone): those calls cost the dearer price (`CallPrices`).
    stepped: Stepped,
}

/// Files released together, their links detached in the background.
struct Releasing {
    /// Their users, each counted until the detach is done.
    uids: Vec<u32>,
    files: Vec<(u64, u64, Part)>,
    /// The detach of their links, and those of their parts' earlier links still running.
    detach: Vec<JoinHandle<()>>,
}

#[derive(Default)]
pub(crate) struct Files {
    /// By (device, inode, part).
    probed: HashMap<(u64, u64, Part), Probed>,
    per_uid: HashMap<u32, usize>,
    unusable: HashSet<FileId>,
    /// Refused for their user's cap, so each is counted and said once (tried again at
    /// each look: the user's count may have dropped).
    over_cap: HashSet<FileId>,
    /// Released files whose links are still being detached.
    releasing: Vec<Releasing>,
    /// Runtimes refused on a user's FUSE mount, by (device, inode): said once each.
    on_fuse: HashSet<(Option<(u32, u32)>, u64)>,
    /// Runtimes that could not be opened as mapped (not a regular file, past the size a
    /// runtime can be), by (device, inode): counted unusable and said once each.
    unopened: HashSet<(Option<(u32, u32)>, u64)>,
    pub refused: Refused,
}

impl Files {
    /// Whether `lib` is probed already; if so `pid` is one more process it serves.
    pub(crate) fn serves(&mut self, lib: &OpenedLibrary, part: Part, pid: u32) -> bool {
        match self.probed.get_mut(&(lib.dev, lib.ino, part)) {
            Some(p) => {
                p.pids.insert(pid);
                true
            }
            None => false,
        }
    }

    /// A runtime on a user's FUSE mount, refused: whether it is the first time (counted).
    pub(crate) fn refuse_fuse(&mut self, m: &crate::calls::probes::maps::Mapping) -> bool {
        let first = remember(&mut self.on_fuse, (m.dev, m.inode));
        self.refused.user_fuse += u64::from(first);
        first
    }

    /// `pid`'s runtime mapping `m` could not be opened (`e`): refused as unusable,
    /// counted and said once (never a runtime left unprobed without a word).
    pub(crate) fn unopened(
        &mut self,
        m: &crate::calls::probes::maps::Mapping,
        pid: u32,
        e: &anyhow::Error,
    ) {
        if remember(&mut self.unopened, (m.dev, m.inode)) {
            self.refused.unusable += 1;
            let e = crate::daemon::untrusted::shown(&format!("{e:#}"));
            crate::say!("rocsync daemon: warning: pid {pid}: {e}");
        }
    }

    /// `p`'s mappings but the runtimes and loader on a user's FUSE mount, which are
    /// never read (`fuse.rs`): refused, counted and said once each. Borrowed unless one
    /// is (the common case copies nothing).
    pub(crate) fn readable<'a>(&mut self, p: &'a Snapshot) -> Cow<'a, [maps::Mapping]> {
        let name = |m: &maps::Mapping| -> String {
            m.path
                .file_name()
                .map_or(String::new(), |n| n.to_string_lossy().into())
        };
        let wanted = |n: &str| {
            maps::is_dynamic_loader(n)
                || maps::is_hsa_runtime(n)
                || RUNTIMES
                    .iter()
                    .filter(|r| r.probed_by_default())
                    .any(|r| r.matches_library(n) || r.carried_by(n))
        };
        let on_fuse: Vec<(usize, u32)> = (p.mappings.iter().enumerate())
            .filter(|(_, m)| wanted(&name(m)))
            .filter_map(|(i, m)| Some((i, p.on_user_fuse(m)?)))
            .collect();
        if on_fuse.is_empty() {
            return Cow::Borrowed(&p.mappings);
        }
        for &(i, uid) in &on_fuse {
            let m = &p.mappings[i];
            if self.refuse_fuse(m) {
                let mount = match uid {
                    super::fuse::UNKNOWN_OWNER => {
                        "a mount of no known owner (detached, or a FUSE mount that names none)"
                            .to_string()
                    }
                    uid => format!("a FUSE mount of uid {uid}"),
                };
                crate::say!(
                    "rocsync daemon: warning: {} (pid {}) is on {mount}: the daemon never \
                     reads a user's FUSE files (its server could hold it); not probed",
                    untrusted::shown(&m.path.to_string_lossy()),
                    p.pid
                );
            }
        }
        let refused = |i: usize| on_fuse.iter().any(|&(j, _)| j == i);
        (p.mappings.iter().enumerate())
            .filter(|&(i, _)| !refused(i))
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// Whether `id` was found unusable before.
    pub(crate) fn is_unusable(&self, id: &FileId) -> bool {
        self.unusable.contains(id)
    }

    /// Whether `uid` may have one more file probed; when not, the refusal is counted
    /// once per file and true is returned the first time in the second field.
    pub(crate) fn admit(&mut self, uid: u32, id: FileId, cap: usize) -> (bool, bool) {
        self.reap();
        if self.per_uid.get(&uid).copied().unwrap_or(0) < cap {
            return (true, false);
        }
        let first = remember(&mut self.over_cap, id);
        if first {
            self.refused.per_user_limit += 1;
        }
        (false, first)
    }

    /// A file that cannot be used: counted, and never read again while it is the same.
    pub(crate) fn unusable(&mut self, id: FileId) {
        if remember(&mut self.unusable, id) {
            self.refused.unusable += 1;
        }
    }

    pub(crate) fn add(
        &mut self,
        (lib, part): (&OpenedLibrary, Part),
        (uid, pid): (u32, u32),
        (links, stepped): (LinkGroup, Stepped),
        apart: Apart,
    ) {
        *self.per_uid.entry(uid).or_default() += 1;
        self.over_cap.remove(&FileId::of(lib, part));
        let pids = BTreeSet::from([pid]);
        let probed = Probed {
            uid,
            shown: untrusted::shown(&lib.shown.to_string_lossy()),
            links,
            pids,
            polling: apart.polling,
            returns: apart.returns,
            cycled: apart.cycled,
            stepped,
        };
        self.probed.insert((lib.dev, lib.ino, part), probed);
    }

    /// Each file's processes and its polling probes.
    /// Whether every file `pid` maps has its polling probes shed (or none to shed).
    pub(crate) fn nothing_to_shed(&mut self, pid: u32) -> bool {
        !self
            .polling()
            .any(|(pids, p)| pids.contains(&pid) && !p.is_shed())
    }

    /// Whether polls of a file `pid` maps are shed now.
    pub(crate) fn polls_shed(&self, pid: u32) -> bool {
        (self.probed.values())
            .any(|p| p.pids.contains(&pid) && p.polling.as_ref().is_some_and(|x| x.is_shed()))
    }

    /// Which probes the kernel single-steps in the files `pid` is probed for.
    pub(crate) fn single_stepped(&self, pid: u32) -> Stepped {
        let files = self.probed.values().filter(|p| p.pids.contains(&pid));
        files.fold(Stepped::default(), |s, p| Stepped {
            pairs: s.pairs || p.stepped.pairs,
            alone: s.alone || p.stepped.alone,
        })
    }

    /// Each runtime file's returns that counting does not need.
    pub(crate) fn returns(&mut self) -> impl Iterator<Item = &mut FileReturns> {
        self.probed.values_mut().filter_map(|p| p.returns.as_mut())
    }

    /// Each runtime file's cycled probes, with the processes it serves.
    pub(crate) fn cycled(&mut self) -> impl Iterator<Item = (&BTreeSet<u32>, &mut Cycled)> {
        self.probed
            .values_mut()
            .filter_map(|p| Some((&p.pids, p.cycled.as_mut()?)))
    }

    /// Each runtime file's cycled probes, with its returns where `returns` (they are
    /// attached now: the cycle takes them off and puts them back with the entries).
    pub(crate) fn cycled_returns(
        &mut self,
        returns: bool,
    ) -> impl Iterator<Item = (&mut Cycled, Option<&mut FileReturns>)> {
        self.probed.values_mut().filter_map(move |p| {
            let r = p.returns.as_mut().filter(|_| returns);
            Some((p.cycled.as_mut()?, r))
        })
    }

    pub(crate) fn polling(&mut self) -> impl Iterator<Item = (&BTreeSet<u32>, &mut Polling)> {
        self.probed
            .values_mut()
            .filter_map(|p| Some((&p.pids, p.polling.as_mut()?)))
    }

    /// Files probed now.
    pub(crate) fn count(&self) -> usize {
        self.probed.len()
    }
}

/// Inserts `id`, starting the set again when full; whether it was new.
fn remember<T: std::hash::Hash + Eq>(set: &mut HashSet<T>, id: T) -> bool {
    if set.len() >= MAX_REMEMBERED && !set.contains(&id) {
        set.clear();
    }
    set.insert(id)
}
