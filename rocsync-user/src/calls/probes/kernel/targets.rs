//! The target table (`TARGETS`): which processes the probes record, and how. Every change
//! made here is followed by a step of the table's generation, which the call probes'
//! cache of it reads (`rocsync_common::target_cache`).

use std::{os::fd::OwnedFd, sync::atomic::Ordering};

use anyhow::{Context as _, Result};
use aya::{
    Ebpf,
    maps::{HashMap, MapData},
};
use rocsync_common::Config;

use super::mapped::Mapping;

/// The table's side the probes do not hold: its generation, `TARGETS_GENERATION` mapped.
/// The table itself is the object's (`ebpf`), passed in by its owner.
pub(crate) struct Targets(Mapping);

impl Targets {
    pub(crate) fn new(generation: OwnedFd) -> Result<Self> {
        Ok(Self(Mapping::of(generation, size_of::<u64>())?))
    }

    /// After a change to the table: the probes' cached answers from before are stale.
    fn step(&self) {
        // SeqCst: the table's change is complete before the step (the probes read the
        // generation before the table).
        self.0.word(0).fetch_add(1, Ordering::SeqCst);
    }

    /// Records `pid` as `config` says.
    pub(crate) fn set(&self, ebpf: &mut Ebpf, pid: u32, mut config: Config) -> Result<()> {
        let mut targets = table(ebpf)?;
        // The count of calls goes on (the probes add to it; what they add between this
        // read and the insert is missed, which a rate over a second does not feel).
        if let Ok(old) = targets.get(&pid, 0) {
            (config.calls, config.polls, config.alone) = (old.calls, old.polls, old.alone);
        }
        targets.insert(pid, config, 0).context("updating TARGETS")?;
        self.step();
        Ok(())
    }

    /// Removes a process from the traced set (it is gone).
    pub(crate) fn forget(&self, ebpf: &mut Ebpf, pid: u32) -> Result<()> {
        let _ = table(ebpf)?.remove(&pid);
        self.step();
        Ok(())
    }

    /// Turns every target's capture and stops off (rocsync is ending).
    pub(crate) fn clear(&self, ebpf: &mut Ebpf) {
        if let Ok(mut targets) = table(ebpf) {
            let pids: Vec<u32> = targets.keys().filter_map(Result::ok).collect();
            for pid in pids {
                let _ = targets.insert(pid, Config::default(), 0);
            }
        }
        self.step();
    }
}

/// The calls the probes counted of a tracked process (wrapping), if it is one.
pub(crate) fn calls_of(ebpf: &mut Ebpf, pid: u32) -> Option<CallCounts> {
    let c = table(ebpf).ok()?.get(&pid, 0).ok()?;
    Some(CallCounts {
        calls: c.calls,
        polls: c.polls,
        alone: c.alone,
    })
}

fn table(ebpf: &mut Ebpf) -> Result<HashMap<&mut MapData, u32, Config>> {
    Ok(HashMap::try_from(
        ebpf.map_mut("TARGETS").context("TARGETS map missing")?,
    )?)
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
