//! The target cache: what the call probes ask of `TARGETS` on every call — is this
//! process registered, is it capturing — remembered per process in an array the verifier
//! inlines, so that a captured call makes no hash-map lookup (one at entry and one at exit
//! were a twentieth of the trap's cost, `bench/overhead-breakdown.md`). `TARGETS` stays
//! the truth; every change to it is followed by a step of the generation counter, and an
//! entry of an older generation is looked up again.
//!
//! An entry is one u64, written and read whole (no torn entry): the tgid (below
//! 2^22, the kernel's `PID_MAX_LIMIT`), the state, and the low 40 bits of the generation
//! it was read in. It lives at `tgid % TARGET_CACHE_SLOTS`; two processes on one slot
//! take turns, each then paying the lookup as before.

/// Entries of the cache, a power of two.
pub const TARGET_CACHE_SLOTS: u32 = 1 << 15;

const TGID_BITS: u32 = 22;
const STATE_SHIFT: u32 = TGID_BITS;
const GENERATION_SHIFT: u32 = TGID_BITS + 2;

/// What `TARGETS` says of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetState {
    /// Not in `TARGETS`: file-wide probes ignore its calls.
    Absent = 1,
    /// Registered, `capture` off: calls it entered while capturing still complete.
    Registered = 2,
    /// Registered with `capture` on.
    Capturing = 3,
}

/// One cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedTarget(pub u64);

impl CachedTarget {
    /// `None` for a tgid the cache cannot hold (none can exceed the kernel's limit).
    #[inline(always)]
    pub fn new(tgid: u32, generation: u64, state: TargetState) -> Option<Self> {
        (tgid >> TGID_BITS == 0).then_some(Self(
            (generation << GENERATION_SHIFT) | ((state as u64) << STATE_SHIFT) | u64::from(tgid),
        ))
    }

    /// The state, if this entry is `tgid`'s and of `generation` (an empty entry is no one's:
    /// its state bits are 0).
    #[inline(always)]
    pub fn state(self, tgid: u32, generation: u64) -> Option<TargetState> {
        let want = Self::new(tgid, generation, TargetState::Absent)?.0;
        let mask = !(3u64 << STATE_SHIFT);
        if self.0 & mask != want & mask {
            return None;
        }
        match (self.0 >> STATE_SHIFT) & 3 {
            1 => Some(TargetState::Absent),
            2 => Some(TargetState::Registered),
            3 => Some(TargetState::Capturing),
            _ => None,
        }
    }

    /// Where `tgid`'s entry lives.
    #[inline(always)]
    pub fn slot(tgid: u32) -> u32 {
        tgid & (TARGET_CACHE_SLOTS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_answers_only_for_its_process_and_generation() {
        let e = CachedTarget::new(4_194_303, 7, TargetState::Capturing).unwrap();
        assert_eq!(e.state(4_194_303, 7), Some(TargetState::Capturing));
        assert_eq!(e.state(4_194_303, 8), None);
        assert_eq!(e.state(4_194_302, 7), None);
        // Same slot, other process.
        assert_eq!(e.state(4_194_303 - TARGET_CACHE_SLOTS, 7), None);
        let r = CachedTarget::new(12, 1 << 39, TargetState::Registered).unwrap();
        assert_eq!(r.state(12, 1 << 39), Some(TargetState::Registered));
        assert_eq!(r.state(12, 0), None);
    }

    #[test]
    fn an_empty_entry_is_no_ones() {
        assert_eq!(CachedTarget(0).state(0, 0), None);
        assert_eq!(CachedTarget(0).state(1, 0), None);
    }

    #[test]
    fn a_tgid_past_the_kernels_limit_is_not_cached() {
        assert_eq!(CachedTarget::new(1 << 22, 0, TargetState::Absent), None);
        assert_eq!(CachedTarget(0).state(1 << 22, 0), None);
    }
}
