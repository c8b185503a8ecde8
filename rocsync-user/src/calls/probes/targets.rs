//! The target table (`TARGETS`): which processes the probes record, and how. Every change
//! made here is followed by a step of the table's generation, which the call probes'
//! cache of it reads (`rocsync_common::target_cache`).

use std::{os::fd::OwnedFd, sync::atomic::Ordering};

use anyhow::{Context as _, Result};
use aya::maps::{HashMap, MapData};
use rocsync_common::Config;

use super::{Probes, mapped::Mapping};

/// `TARGETS_GENERATION`, mapped.
pub(super) struct Generation(Mapping);

impl Generation {
    pub(super) fn new(map: OwnedFd) -> Result<Self> {
        Ok(Self(Mapping::of(map, size_of::<u64>())?))
    }

    /// After a change to the table: the probes' cached answers from before are stale.
    fn step(&self) {
        // SeqCst: the table's change is complete before the step (the probes read the
        // generation before the table).
        self.0.word(0).fetch_add(1, Ordering::SeqCst);
    }
}

impl Probes {
    fn targets(&mut self) -> Result<HashMap<&mut MapData, u32, Config>> {
        Ok(HashMap::try_from(
            self.ebpf
                .map_mut("TARGETS")
                .context("TARGETS map missing")?,
        )?)
    }

    pub fn set_target(&mut self, pid: u32, mut config: Config) -> Result<()> {
        let mut targets = self.targets()?;
        // The count of calls goes on (the probes add to it; what they add between this
        // read and the insert is missed, which a rate over a second does not feel).
        if let Ok(old) = targets.get(&pid, 0) {
            (config.calls, config.polls, config.alone) = (old.calls, old.polls, old.alone);
        }
        targets.insert(pid, config, 0).context("updating TARGETS")?;
        self.generation.step();
        Ok(())
    }

    /// The calls the probes counted of a tracked process (wrapping), if it is one.
    pub fn target_calls(&mut self, pid: u32) -> Option<CallCounts> {
        let c = self.targets().ok()?.get(&pid, 0).ok()?;
        Some(CallCounts {
            calls: c.calls,
            polls: c.polls,
            alone: c.alone,
        })
    }

    /// Removes a process from the traced set (it is gone).
    pub fn forget_target(&mut self, pid: u32) -> Result<()> {
        let _ = self.targets()?.remove(&pid);
        self.generation.step();
        Ok(())
    }

    /// Turns every target's capture and stops off (rocsync is ending).
    pub(super) fn clear_targets(&mut self) {
        if let Ok(mut targets) = self.targets() {
            let pids: Vec<u32> = targets.keys().filter_map(Result::ok).collect();
            for pid in pids {
                let _ = targets.insert(pid, Config::default(), 0);
            }
        }
        self.generation.step();
    }
}

/// A tracked process's calls the probes counted (each wrapping): all of them, and of them
/// the polls and those whose return was not probed (one trap each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub calls: u32,
    pub polls: u32,
    pub alone: u32,
}

impl CallCounts {
    /// The calls counted from `before` to these.
    pub fn since(self, before: CallCounts) -> CallCounts {
        CallCounts {
            calls: self.calls.wrapping_sub(before.calls),
            polls: self.polls.wrapping_sub(before.polls),
            alone: self.alone.wrapping_sub(before.alone),
        }
    }
}
