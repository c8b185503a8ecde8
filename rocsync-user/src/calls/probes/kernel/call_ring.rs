//! Reading the call ring (`rocsync_common::call_ring` says how it works): both arrays
//! are mapped into this process; a slot is read once its `seq` says it is complete, then
//! `tail` moves on.

use std::{os::fd::OwnedFd, sync::atomic::Ordering};

use anyhow::Result;
use rocsync_common::{CallCursor, CallSlot, EntryRecord, ExitRecord, RECORD_EXIT};

use super::mapped::Mapping;

pub(crate) struct CallRing {
    slots: Mapping,
    cursor: Mapping,
    count: u64,
    /// Drains so far: the probes wake this reader at most once per drain.
    drains: u64,
}

const SLOT: usize = size_of::<CallSlot>();
const HEAD: usize = std::mem::offset_of!(CallCursor, head);
const TAIL: usize = std::mem::offset_of!(CallCursor, tail);
const WOKEN: usize = std::mem::offset_of!(CallCursor, woken);
const RECORD: usize = std::mem::offset_of!(CallSlot, record);
/// How many slots are read between two moves of `tail`.
const FREE_EVERY: u64 = 64;

impl CallRing {
    /// The ring's arrays (`CALL_RING` of `slots` entries, a power of two, and
    /// `CALL_CURSOR`), as loaded.
    pub(crate) fn new(ring: OwnedFd, cursor: OwnedFd, slots: u32) -> Result<Self> {
        Ok(Self {
            slots: Mapping::of(ring, slots as usize * SLOT)?,
            cursor: Mapping::of(cursor, size_of::<CallCursor>())?,
            count: u64::from(slots),
            drains: 0,
        })
    }

    /// The positions reserved so far: [`Self::drain`] up to here reads only calls whose
    /// records were reserved before this moment.
    pub(crate) fn reserved(&self) -> u64 {
        self.cursor.word(HEAD).load(Ordering::Acquire)
    }

    /// The position read up to (the next record to read).
    pub(crate) fn read_up_to(&self) -> u64 {
        self.cursor.word(TAIL).load(Ordering::Relaxed)
    }

    /// How many drains have begun.
    pub(crate) fn drains(&self) -> u64 {
        self.drains
    }

    /// Hands every complete record before position `until`, in order, to `f` (at most one
    /// ring's worth, so that fast writers cannot keep the reader here); returns how many.
    pub(crate) fn drain(&mut self, until: u64, mut f: impl FnMut(&[u8])) -> usize {
        // The probes may wake this reader again: what they write from here on is read by
        // a later drain. (A probe that still saw it set looks again 64 records later.)
        self.drains += 1;
        let woken = self.cursor.word(WOKEN);
        if woken.load(Ordering::Relaxed) != 0 {
            woken.store(0, Ordering::SeqCst);
        }
        let tail_at = self.cursor.word(TAIL);
        let start = tail_at.load(Ordering::Relaxed);
        let mut tail = start;
        let mut record = [0u8; size_of::<EntryRecord>()];
        while tail < until && tail - start < self.count {
            let at = (tail & (self.count - 1)) as usize * SLOT;
            // Acquire: the record's bytes were written before its `seq`.
            if self.slots.word(at).load(Ordering::Acquire) != tail + 1 {
                break;
            }
            for (i, chunk) in record.chunks_exact_mut(8).enumerate() {
                let w = self.slots.word(at + RECORD + i * 8).load(Ordering::Relaxed);
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            let kind = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
            let len = if kind == RECORD_EXIT {
                size_of::<ExitRecord>()
            } else {
                size_of::<EntryRecord>()
            };
            f(&record[..len]);
            tail += 1;
            // Hand the slots back as they are read: `f` takes its time, and the probes
            // find the ring full until `tail` moves.
            if tail.is_multiple_of(FREE_EVERY) {
                tail_at.store(tail, Ordering::Release);
            }
        }
        // Release: the slots are read before the probes may write them again.
        tail_at.store(tail, Ordering::Release);
        (tail - start) as usize
    }
}

#[cfg(test)]
mod tests {
    use std::{os::fd::AsFd as _, sync::atomic::AtomicU64};

    use aya::maps::{Array, IterableMap as _, MapData};
    use rocsync_common::{MMAPABLE, RECORD_ENTRY};

    use super::*;

    /// A ring of `slots` in real mapped arrays (creating maps needs root), and a writer
    /// that follows the probes' protocol through the same mapping.
    struct Rig {
        ring: CallRing,
        // The arrays outlive the test's fds.
        _arrays: (Array<MapData, [u64; 8]>, Array<MapData, [u64; 16]>),
    }

    fn rig(name: &str, slots: u32) -> Option<Rig> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            rocsync_tests::skip(name, "creating BPF maps needs root");
            return None;
        }
        let slot_array = Array::<MapData, [u64; 8]>::create(slots, MMAPABLE).unwrap();
        let cursor_array = Array::<MapData, [u64; 16]>::create(1, MMAPABLE).unwrap();
        let fd = |m: &MapData| m.fd().as_fd().try_clone_to_owned().unwrap();
        let ring = CallRing::new(fd(slot_array.map()), fd(cursor_array.map()), slots).unwrap();
        Some(Rig {
            ring,
            _arrays: (slot_array, cursor_array),
        })
    }

    impl Rig {
        fn head(&self) -> &AtomicU64 {
            self.ring
                .cursor
                .word(std::mem::offset_of!(CallCursor, head))
        }

        /// Reserves the next position as a probe does; `None` when the ring is full.
        fn reserve(&self) -> Option<u64> {
            let tail = self.ring.cursor.word(TAIL).load(Ordering::Acquire);
            let head = self.head().load(Ordering::Relaxed);
            (head - tail < self.ring.count).then(|| self.head().fetch_add(1, Ordering::Relaxed))
        }

        /// Writes an entry record whose correlation is `pos` into its slot; `commit`
        /// sets its `seq` (else the writer is "preempted" before it).
        fn write(&self, pos: u64, commit: bool) {
            let at = (pos & (self.ring.count - 1)) as usize * SLOT;
            let rec = EntryRecord {
                kind: RECORD_ENTRY,
                api: rocsync_common::Api::HipStreamSynchronize as u16,
                correlation: pos,
                ..Default::default()
            };
            // SAFETY: reading the bytes of a plain record.
            let bytes: [u64; 7] = unsafe { std::mem::transmute(rec) };
            for (i, w) in bytes.iter().enumerate() {
                self.ring
                    .slots
                    .word(at + RECORD + i * 8)
                    .store(*w, Ordering::Relaxed);
            }
            if commit {
                self.ring.slots.word(at).store(pos + 1, Ordering::Release);
            }
        }

        fn read(&mut self) -> Vec<u64> {
            let mut seen = Vec::new();
            let until = self.ring.reserved();
            self.ring.drain(until, |b| match rocsync_common::decode(b) {
                Ok(rocsync_common::Decoded::Entry(e)) => seen.push(e.correlation),
                other => panic!("{other:?}"),
            });
            seen
        }
    }

    #[test]
    fn records_are_read_in_order_across_laps_and_a_full_ring_refuses() {
        let Some(mut r) = rig(
            "records_are_read_in_order_across_laps_and_a_full_ring_refuses",
            16,
        ) else {
            return;
        };
        // Three laps of 10: each read in order, the slots handed back for the next.
        for lap in 0..3u64 {
            for _ in 0..10 {
                let pos = r.reserve().unwrap();
                r.write(pos, true);
            }
            assert_eq!(r.read(), (lap * 10..lap * 10 + 10).collect::<Vec<_>>());
        }
        // Full: 16 reserved and unread, the 17th refused.
        for _ in 0..16 {
            let pos = r.reserve().unwrap();
            r.write(pos, true);
        }
        assert_eq!(r.reserve(), None);
        assert_eq!(r.read().len(), 16);
        assert!(r.reserve().is_some());
    }

    #[test]
    fn every_drain_lets_the_probes_wake_the_reader_again() {
        let Some(mut r) = rig("every_drain_lets_the_probes_wake_the_reader_again", 16) else {
            return;
        };
        let woken = |r: &Rig| r.ring.cursor.word(WOKEN).load(Ordering::Relaxed);
        // A probe woke the reader: until a drain begins, no other probe does.
        r.ring.cursor.word(WOKEN).store(1, Ordering::Relaxed);
        let pos = r.reserve().unwrap();
        r.write(pos, true);
        assert_eq!(r.read(), vec![pos]);
        assert_eq!((woken(&r), r.ring.drains()), (0, 1));
        // An empty drain counts, and leaves the flag clear.
        assert!(r.read().is_empty());
        assert_eq!((woken(&r), r.ring.drains()), (0, 2));
    }

    #[test]
    fn a_record_not_yet_complete_holds_back_the_ones_after_it() {
        let Some(mut r) = rig("a_record_not_yet_complete_holds_back_the_ones_after_it", 16) else {
            return;
        };
        let (a, b, c) = (
            r.reserve().unwrap(),
            r.reserve().unwrap(),
            r.reserve().unwrap(),
        );
        r.write(a, true);
        r.write(b, false); // reserved, its writer not done
        r.write(c, true);
        assert_eq!(r.read(), vec![a]);
        assert_eq!(r.read(), Vec::<u64>::new());
        r.write(b, true);
        assert_eq!(r.read(), vec![b, c]);
    }
}
