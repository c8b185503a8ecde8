//! A file's release: its probes let go of once no process it was probed for lives, its
//! links detached in the background, its user's count kept until the kernel has let go.

use std::thread::JoinHandle;

use crate::calls::probes::{LinkGroup, elf::library::OpenedLibrary};
use crate::daemon::tracking::{
    apart::{cycled::Cycled, polling::Polling, returns::FileReturns},
    files::{Files, Part, Releasing},
};

impl Files {
    /// Forgets the processes `alive` says are gone; the links of the files none of whose
    /// processes lives are handed to `release`, and their users keep them counted until
    /// the detach it returns has finished.
    pub(crate) fn unmapped(
        &mut self,
        alive: impl Fn(u32) -> bool,
        release: impl FnOnce(Vec<LinkGroup>) -> JoinHandle<()>,
    ) {
        let mut gone = Vec::new();
        for (key, p) in &mut self.probed {
            p.pids.retain(|&pid| alive(pid));
            if p.pids.is_empty() {
                gone.push(*key);
            }
        }
        let (mut uids, mut links, mut files) = (Vec::new(), Vec::new(), Vec::new());
        let mut detach = Vec::new();
        for (key, p) in gone
            .iter()
            .filter_map(|key| Some((*key, self.probed.remove(key)?)))
        {
            files.push(key);
            crate::say!(
                "rocsync daemon: no longer probing {}: no process it was probed for lives",
                p.shown
            );
            uids.push(p.uid);
            links.push(p.links);
            links.extend(p.polling.and_then(Polling::release));
            for (l, d) in [
                p.returns.map(FileReturns::release),
                p.cycled.map(Cycled::release),
            ]
            .into_iter()
            .flatten()
            {
                links.extend(l);
                detach.extend(d);
            }
        }
        if !links.is_empty() || !detach.is_empty() {
            detach.push(release(links));
            self.releasing.push(Releasing {
                uids,
                files,
                detach,
            });
        }
        self.reap();
    }

    /// Waits until the links `lib` had before its release are detached, if they are not
    /// yet (a process maps it again meanwhile): attached again while they are, each call
    /// would be recorded twice. A detach takes a few kernel grace periods (~0.1 s).
    pub(crate) fn await_release(&mut self, lib: &OpenedLibrary, part: Part) {
        let key = (lib.dev, lib.ino, part);
        let (waited, pending) = std::mem::take(&mut self.releasing)
            .into_iter()
            .partition(|r| r.files.contains(&key));
        self.releasing = pending;
        self.uncount(waited.into_iter().map(|r| {
            for d in r.detach {
                let _ = d.join();
            }
            r.uids
        }));
    }

    /// Uncounts the files whose links the kernel has let go of.
    pub(super) fn reap(&mut self) {
        let (done, pending) = std::mem::take(&mut self.releasing)
            .into_iter()
            .partition(|r| r.detach.iter().all(JoinHandle::is_finished));
        self.releasing = pending;
        self.uncount(done.into_iter().map(|r| r.uids));
    }

    /// Each user's files whose detach is done, uncounted.
    fn uncount(&mut self, done: impl Iterator<Item = Vec<u32>>) {
        for uids in done {
            for uid in uids {
                if let Some(n) = self.per_uid.get_mut(&uid) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        self.per_uid.retain(|_, n| *n > 0);
    }
}
