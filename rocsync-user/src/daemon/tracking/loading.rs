//! Processes looked at while their loader maps a runtime: a mapping read from
//! `/proc/PID/maps` was gone when opened (`OpenedLibrary::moved`). They are tracked at
//! the look after the load — announced by their loader when it is done, or, should that
//! announcement not come (the ring full, no loader hooked), at one of the next ticks.

use std::collections::BTreeMap;

use crate::calls::probes::{maps, maps::Mapping};

/// Looks a process is left untracked for while its runtime mappings keep moving; then
/// it is tracked as it is (its files probed when they settle, at a later look).
const MOST_LOOKS: u8 = 20;

#[derive(Default)]
pub(crate) struct Loading {
    /// Each process mid-load, and how many looks found it so.
    looks: BTreeMap<u32, u8>,
}

impl Loading {
    /// A look at `pid` begins: how many before it found it mid-load.
    pub(crate) fn take(&mut self, pid: u32) -> u8 {
        self.looks.remove(&pid).unwrap_or(0)
    }

    /// `pid` was found mid-load again after `looks` looks: whether to leave it untracked
    /// for now (looked at again at the next tick).
    pub(crate) fn wait(&mut self, pid: u32, looks: u8) -> bool {
        if looks >= MOST_LOOKS {
            return false;
        }
        self.looks.insert(pid, looks + 1);
        true
    }

    /// The processes to look at again.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.looks.keys().copied().collect()
    }
}

/// Whether `m`, which could not be opened as read, has really moved: its range no longer
/// maps that file. One still mapped as read is another failure (a device number the
/// file system reports otherwise, say), which waiting would not cure.
pub(crate) fn has_moved(pid: u32, m: &Mapping) -> bool {
    let Ok(text) = crate::os::procfs::maps(pid) else {
        return true; // gone: nothing to track either way
    };
    !maps::parse(&text)
        .iter()
        .any(|now| (now.start, now.end, now.inode) == (m.start, m.end, m.inode))
}
