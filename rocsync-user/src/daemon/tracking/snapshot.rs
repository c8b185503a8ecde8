//! What the daemon reads of a process it looks at, each file of `/proc/PID` at most
//! once, and only when asked: its maps (always), executable, uid, cgroup, environment
//! and mount table. One snapshot goes to discovery, the filters, the files' per-user limit,
//! pod identity and the environment's readers.

use std::cell::OnceCell;

use crate::{
    calls::probes::maps,
    os::{environ, procfs},
};

pub(crate) struct Snapshot {
    pub pid: u32,
    /// `/proc/PID/maps`, parsed.
    pub mappings: Vec<maps::Mapping>,
    maps: String,
    exe: OnceCell<String>,
    uid: OnceCell<Option<u32>>,
    cgroup: OnceCell<Option<String>>,
    identity: OnceCell<Option<environ::Identity>>,
    mountinfo: OnceCell<String>,
}

impl Snapshot {
    /// `None`: gone, or a kernel thread (no maps).
    pub(crate) fn of(pid: u32) -> Option<Self> {
        let maps = procfs::maps(pid).ok()?;
        Some(Self {
            pid,
            mappings: maps::parse(&maps),
            maps,
            exe: OnceCell::new(),
            uid: OnceCell::new(),
            cgroup: OnceCell::new(),
            identity: OnceCell::new(),
            mountinfo: OnceCell::new(),
        })
    }

    /// The executable's path as the process sees it (inside its container); empty when
    /// unreadable.
    pub(crate) fn exe(&self) -> &str {
        self.exe.get_or_init(|| {
            procfs::exe(self.pid).map_or_else(String::new, |p| p.display().to_string())
        })
    }

    /// Its real uid (`None`: it has just gone).
    pub(crate) fn uid(&self) -> Option<u32> {
        *self.uid.get_or_init(|| procfs::uid(self.pid))
    }

    /// `/proc/PID/cgroup` (`None`: gone).
    pub(crate) fn cgroup(&self) -> Option<&str> {
        (self.cgroup)
            .get_or_init(|| procfs::cgroup(self.pid))
            .as_deref()
    }

    /// The uid of the user's FUSE mount `m` is on, if it is on one, or of a mount no table
    /// lists (see `fuse.rs`). The mount table is read only for a file on an anonymous
    /// device (major 0: FUSE, and overlay, tmpfs…), once, and at most
    /// [`super::fuse::MAX_MOUNTINFO`] of it; the host's (init's) only when it lacks the
    /// device.
    pub(crate) fn on_user_fuse(&self, m: &maps::Mapping) -> Option<u32> {
        let dev = m.dev.filter(|&(major, _)| major == 0)?;
        let table = (self.mountinfo).get_or_init(|| super::fuse::mount_table(self.pid));
        super::fuse::owner(table, || super::fuse::mount_table(1), dev)
    }

    /// What it says of itself in its environment (name, rank, visible devices).
    pub(crate) fn identity(&self) -> Option<&environ::Identity> {
        (self.identity)
            .get_or_init(|| environ::read_with_maps(self.pid, &self.maps))
            .as_ref()
    }
}
