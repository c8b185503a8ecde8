//! Writing to the call ring (`rocsync_common::call_ring` says how it works): no helper
//! call, one compare-and-swap on the shared head.

use aya_ebpf::{macros::map, maps::Array};
use rocsync_common::{CallCursor, CallSlot, LOSS_SLOTS, MMAPABLE, RECORD_WAKE, WakeRecord};

use crate::{BPF_RB_FORCE_WAKEUP, EVENTS};

/// Sized at load from `--ring-size` (with [`CALL_SLOTS`]).
#[map]
static CALL_RING: Array<CallSlot> = Array::with_max_entries(1 << 17, MMAPABLE);
#[map]
static CALL_CURSOR: Array<CallCursor> = Array::with_max_entries(1, MMAPABLE);

/// Call records the ring could not take, by the writing thread (its id's slot, shared
/// with the threads whose ids share it), counted here as well as by kind. Entry and exit
/// records carry their thread's count (`rocsync_common::LOSS_MASK`): a return is paired
/// only with an entry no loss of its thread came between. Slots shared can only make a
/// pair look uncertain, never a wrong one sure. One atomic add per loss, a load per record.
#[map]
static CALL_LOSSES: Array<u64> = Array::with_max_entries(LOSS_SLOTS, 0);

/// The losses so far of thread `tid` (and those sharing its slot).
#[inline(always)]
pub(crate) fn losses(tid: u32) -> u64 {
    match CALL_LOSSES.get_ptr(tid & (LOSS_SLOTS - 1)) {
        // SAFETY: an aligned u64 of the map's value; added to atomically.
        Some(n) => unsafe { core::ptr::read_volatile(n) },
        None => 0,
    }
}

#[inline(always)]
fn lost(tid: u32) -> bool {
    if let Some(n) = CALL_LOSSES.get_ptr_mut(tid & (LOSS_SLOTS - 1)) {
        crate::fetch_add(n);
    }
    false
}

/// `CALL_RING`'s entries, a power of two; set at load.
#[unsafe(no_mangle)]
static CALL_SLOTS: u32 = 1 << 17;

/// Tries of the reservation when other CPUs take the position first.
const TRIES: usize = 8;
/// Every this many positions (at most), the writer looks how full the ring is: every
/// 512 woke the reader too late for eight threads on two cores (calls dropped that the
/// ring buffer, which wakes on every record past its threshold, kept).
const LOOK_EVERY: u64 = 64;
/// The reader drains on a short timer; past this share of the ring it is woken (through
/// the ring buffer: nothing else can wake it).
const WAKE_SHARE: u64 = 16;

/// Atomically replaces `*p` with `new` if it is `old`; returns what `*p` was. BPF's
/// compare-and-swap (ISA v3), in assembly as the correlation counter's add is.
#[cfg(target_arch = "bpf")]
#[inline(always)]
fn cmpxchg(p: *mut u64, old: u64, new: u64) -> u64 {
    let mut seen = old;
    // SAFETY: `p` is a valid, aligned u64 of a map value; one atomic instruction that
    // compares with r0 and leaves the old value there.
    unsafe {
        core::arch::asm!(
            "r0 = cmpxchg_64({p} + 0, r0, {new})",
            p = in(reg) p,
            new = in(reg) new,
            inout("r0") seen,
        );
    }
    seen
}

/// The host build (checks, unit tests) never runs a probe.
#[cfg(not(target_arch = "bpf"))]
fn cmpxchg(p: *mut u64, old: u64, new: u64) -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    // SAFETY: as above.
    let a = unsafe { AtomicU64::from_ptr(p) };
    a.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst)
        .unwrap_or_else(|seen| seen)
}

/// Writes `rec` (at most 56 bytes), a record of thread `tid`, as the ring's next record;
/// `false` when the ring is full (the caller counts the drop by kind; [`losses`] counts it
/// for the thread).
#[inline(always)]
pub(crate) fn write<T: Copy>(rec: T, tid: u32) -> bool {
    const { assert!(size_of::<T>() <= size_of::<[u64; 7]>()) };
    let Some(c) = CALL_CURSOR.get_ptr_mut(0) else {
        return lost(tid);
    };
    // SAFETY: a read-only global, fixed at load.
    let slots = u64::from(unsafe { core::ptr::read_volatile(&CALL_SLOTS) });
    // SAFETY: `c` is the cursor's map value; the reader writes only `tail`.
    let tail = unsafe { core::ptr::read_volatile(&raw const (*c).tail) };
    // SAFETY: as above; `head` is ours.
    let mut head = unsafe { core::ptr::read_volatile(&raw const (*c).head) };
    let mut pos = None;
    for _ in 0..TRIES {
        if head.wrapping_sub(tail) >= slots {
            return lost(tid);
        }
        // SAFETY: as above.
        let seen = cmpxchg(unsafe { &raw mut (*c).head }, head, head + 1);
        if seen == head {
            pos = Some(head);
            break;
        }
        head = seen;
    }
    let Some(pos) = pos else {
        return lost(tid);
    };
    // Never fails: the index is below the ring's entries, which equal `slots`. (Were it to,
    // the reader would wait at `pos` as at a preempted writer's.)
    let Some(slot) = CALL_RING.get_ptr_mut((pos & (slots - 1)) as u32) else {
        return lost(tid);
    };
    // SAFETY: the slot is this reservation's until `seq` says complete; volatile stores
    // keep the record's before `seq` (x86-64 keeps stores in order).
    unsafe {
        core::ptr::write_volatile((&raw mut (*slot).record).cast::<T>(), rec);
        core::ptr::write_volatile(&raw mut (*slot).seq, pos + 1);
    }
    // A small ring (`--ring-size 64K`) is looked at more often than every LOOK_EVERY.
    let share = slots / WAKE_SHARE;
    if pos & (share.min(LOOK_EVERY) - 1) == 0 && pos.wrapping_sub(tail) >= share {
        wake_once(c);
    }
    true
}

/// Wakes the reader unless a probe has since its last drain began: a reader woken is
/// reading, and a wake is an interrupt on this CPU (`irq_work`). Waking at every look
/// past the share, one call in 60 paid one while the reader caught up.
#[inline(always)]
fn wake_once(c: *mut CallCursor) {
    // SAFETY: `c` is the cursor's map value; `woken` is an aligned u64 of it. Read before
    // the compare-and-swap, which takes the line even when it fails.
    let woken = unsafe { &raw mut (*c).woken };
    // SAFETY: as above.
    if unsafe { core::ptr::read_volatile(woken) } == 0 && cmpxchg(woken, 0, 1) == 0 && !wake() {
        // Not sent: a later look tries again.
        // SAFETY: as above.
        unsafe { core::ptr::write_volatile(woken, 0) };
    }
}

/// Wakes the reader; `false` if the ring buffer had no room for the wake.
#[inline(always)]
fn wake() -> bool {
    let Some(mut r) = EVENTS.reserve::<WakeRecord>(0) else {
        return false;
    };
    r.write(WakeRecord {
        kind: RECORD_WAKE,
        pad: 0,
    });
    r.submit(BPF_RB_FORCE_WAKEUP);
    true
}
