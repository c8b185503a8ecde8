//! The reader of the bench's per-CPU slot rings (`slots_*` probes): both arrays are
//! memory-mapped; a slot whose `seq` is its position + 1 is complete.

use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    ptr::NonNull,
};

use anyhow::{Context as _, Result, bail};
use aya::maps::{Map, MapData};

/// As in the probes (`rocsync-ebpf/src/bench.rs`).
const SLOT_CPUS: usize = 4;
const SLOTS_PER_CPU: usize = 32768;
const SLOT_WORDS: usize = 9;
const CURSOR_WORDS: usize = 16;

struct Mapping {
    base: NonNull<u64>,
    len: usize,
}

// SAFETY: the mapping is only read and written through volatile accesses of u64s.
unsafe impl Send for Mapping {}

impl Mapping {
    fn of(map: &Map, words: usize) -> Result<Self> {
        let Map::Array(data) = map else {
            bail!("not an array map");
        };
        let fd = MapData::fd(data).as_fd().as_raw_fd();
        let len = (words * 8).next_multiple_of(4096);
        // SAFETY: a shared mapping of the map's fd; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mmap of a slot array");
        }
        Ok(Self {
            base: NonNull::new(p.cast()).context("null mapping")?,
            len,
        })
    }

    fn word(&self, i: usize) -> *mut u64 {
        assert!(i * 8 < self.len);
        // SAFETY: within the mapping (checked above).
        unsafe { self.base.as_ptr().add(i) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

pub struct SlotReader {
    slots: Mapping,
    cursors: Mapping,
}

impl SlotReader {
    pub fn new(slots: &Map, cursors: &Map) -> Result<Self> {
        Ok(Self {
            slots: Mapping::of(slots, SLOT_CPUS * SLOTS_PER_CPU * SLOT_WORDS)?,
            cursors: Mapping::of(cursors, SLOT_CPUS * CURSOR_WORDS)?,
        })
    }

    /// Reads every complete record; returns how many.
    pub fn drain(&mut self) -> u64 {
        let mut n = 0;
        for cpu in 0..SLOT_CPUS {
            let tail_at = self.cursors.word(cpu * CURSOR_WORDS + 8);
            // SAFETY: words of the mappings, accessed as volatile u64s.
            unsafe {
                let mut tail = tail_at.read_volatile();
                loop {
                    let slot = cpu * SLOTS_PER_CPU + (tail as usize & (SLOTS_PER_CPU - 1));
                    if self.slots.word(slot * SLOT_WORDS).read_volatile() != tail + 1 {
                        break;
                    }
                    tail += 1;
                    n += 1;
                }
                tail_at.write_volatile(tail);
            }
        }
        n
    }
}
