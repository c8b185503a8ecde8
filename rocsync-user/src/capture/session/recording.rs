//! When a capture records. `run` records its command from its first call. `attach`
//! probes its running targets first — which takes seconds under load — and records them
//! only once its loop runs, which reads what the probes write: recording while nothing
//! read the ring filled it and lost calls, and `--duration` then counted from the end of
//! that set-up, so a 4 s attach recorded 9 s. Until then its targets are not in the
//! kernel's table, and the probes pass their calls over.

use std::time::Instant;

use anyhow::Result;

use super::Session;
use crate::os::procfs;

impl Session {
    /// Records the targets from now (`attach`: they go into the kernel's table, with the
    /// processes they started meanwhile when children are followed), unless it began
    /// already; returns when it began. Call once the loop that reads the ring is about to
    /// run ([`Session::run`] calls it).
    pub fn start_recording(&mut self) -> Result<Instant> {
        if let Some(since) = self.since {
            return Ok(since);
        }
        if !self.live {
            self.live = true;
            if self.follow {
                self.follow_children_started();
            }
            for pid in self.targets.clone() {
                self.probes.set_target(pid, self.config(pid))?;
            }
            self.probes.set_switch(self.switch())?;
        }
        self.recorded.0 = Some(crate::os::clock::unix_us());
        let since = Instant::now();
        self.since = Some(since);
        Ok(since)
    }

    /// The targets' settings into the kernel's table, once it holds them.
    pub(super) fn update_target(&mut self, pid: u32) -> Result<()> {
        match self.live {
            true => self.probes.set_target(pid, self.config(pid)),
            false => Ok(()),
        }
    }

    /// Children the targets started while they were probed, before the kernel followed
    /// them: targets too (claimed; one another rocsync holds is said and left alone).
    fn follow_children_started(&mut self) {
        for pid in self.targets.clone() {
            for child in procfs::descendants(pid) {
                if self.targets.contains(&child) {
                    continue;
                }
                match self.claim(child) {
                    Ok(()) => {
                        self.targets.push(child);
                        self.learn_process(child);
                    }
                    Err(e) => self.say(&format!("rocsync: warning: {e:#}")),
                }
            }
        }
    }
}
