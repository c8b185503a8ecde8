//! The reader of the bench's per-CPU slot rings (`slots_*` probes): both arrays are
//! memory-mapped; a slot whose `seq` is its position + 1 is complete.

use std::{os::fd::AsFd as _, sync::atomic::Ordering};

use anyhow::{Result, bail};
use aya::maps::{Map, MapData};
use rocsync::calls::probes::mapped::Mapping;

/// As in the probes (`rocsync-ebpf/src/bench.rs`).
const SLOT_CPUS: usize = 4;
const SLOTS_PER_CPU: usize = 32768;
const SLOT_WORDS: usize = 9;
const CURSOR_WORDS: usize = 16;

pub(crate) struct SlotReader {
    slots: Mapping,
    cursors: Mapping,
}

/// An array map's fd, for the mapping.
fn fd(map: &Map) -> Result<std::os::fd::OwnedFd> {
    let Map::Array(data) = map else {
        bail!("not an array map");
    };
    Ok(MapData::fd(data).as_fd().try_clone_to_owned()?)
}

impl SlotReader {
    pub(crate) fn new(slots: &Map, cursors: &Map) -> Result<Self> {
        Ok(Self {
            slots: Mapping::of(fd(slots)?, SLOT_CPUS * SLOTS_PER_CPU * SLOT_WORDS * 8)?,
            cursors: Mapping::of(fd(cursors)?, SLOT_CPUS * CURSOR_WORDS * 8)?,
        })
    }

    /// Reads every complete record; returns how many.
    pub(crate) fn drain(&mut self) -> u64 {
        let mut n = 0;
        for cpu in 0..SLOT_CPUS {
            let tail_at = self.cursors.word((cpu * CURSOR_WORDS + 8) * 8);
            let mut tail = tail_at.load(Ordering::Acquire);
            loop {
                let slot = cpu * SLOTS_PER_CPU + (tail as usize & (SLOTS_PER_CPU - 1));
                if self
                    .slots
                    .word(slot * SLOT_WORDS * 8)
                    .load(Ordering::Acquire)
                    != tail + 1
                {
                    break;
                }
                tail += 1;
                n += 1;
            }
            tail_at.store(tail, Ordering::Release);
        }
        n
    }
}
