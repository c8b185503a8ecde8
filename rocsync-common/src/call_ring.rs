//! The call ring: where call probes write their entry and exit records. An array the
//! kernel and the reader both map, not a BPF ring buffer: reserving and submitting a ring
//! buffer record are two helper calls, the largest part of a capture's cost per call
//! after the trap (`bench/overhead-breakdown.md`). One head for all CPUs keeps the ring
//! buffer's one order of records.
//!
//! A probe reserves position `pos` by a compare-and-swap of `head` (never beyond the free
//! room: `head - tail < slots`), writes its record into slot `pos % slots`, and then sets
//! the slot's `seq` to `pos + 1`; the reader reads slots in order while `seq` says they are
//! complete, then moves `tail`. A writer preempted between its reservation and its `seq`
//! holds the reader back, as a busy ring buffer record does.

/// One slot: the record's bytes, then `seq` (written last).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CallSlot {
    /// `pos + 1` once the record at `pos` is complete.
    pub seq: u64,
    /// An [`crate::EntryRecord`] (56 bytes) or an [`crate::ExitRecord`] (48): with
    /// `seq`, one cache line.
    pub record: [u64; 7],
}

/// `head` is written by the probes and `tail` by the reader: a cache line each.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CallCursor {
    pub head: u64,
    pub _pad: [u64; 7],
    pub tail: u64,
    /// Non-zero once a probe has woken the reader; the reader clears it as it starts a
    /// drain. Past the wake share, only the probe that sets it wakes the reader: a wake is
    /// an interrupt on the probe's CPU.
    pub woken: u64,
    pub _pad2: [u64; 6],
}

/// `BPF_F_MMAPABLE`: the arrays are mapped by the reader.
pub const MMAPABLE: u32 = 1 << 10;

/// Slots for a ring of `bytes`: at least as many records as `bytes` hold in the ring
/// buffer (64 bytes each there too, with its header), in a power of two (positions wrap
/// by mask), at least 16. Rounded down, the call ring held half what the ring buffer held, and an
/// oversubscribed capture dropped calls the ring buffer had kept.
pub const fn call_slots(bytes: u32) -> u32 {
    let n = bytes.div_ceil(size_of::<CallSlot>() as u32);
    if n < 16 { 16 } else { n.next_power_of_two() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_a_power_of_two_within_the_bytes() {
        assert_eq!(size_of::<CallSlot>(), 64);
        assert_eq!(size_of::<CallCursor>(), 128);
        assert_eq!(call_slots(8 << 20), 1 << 17);
        assert_eq!(call_slots(64 * 1024 + 1), 2048); // rounded up
        assert_eq!(call_slots(4096), 64);
        assert_eq!(call_slots(0), 16);
    }
}
