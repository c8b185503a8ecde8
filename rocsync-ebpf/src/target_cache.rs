//! The call probes' view of `TARGETS` without a hash lookup per call
//! (`rocsync_common::target_cache` says how it works).

use aya_ebpf::{macros::map, maps::Array};
use rocsync_common::{CachedTarget, MMAPABLE, TARGET_CACHE_SLOTS, TargetState};

use crate::{TARGETS, fetch_add};

#[map]
static TARGET_CACHE: Array<u64> = Array::with_max_entries(TARGET_CACHE_SLOTS, 0);

/// Stepped after every change to `TARGETS`: by userspace (which maps it) and at a fork.
#[map]
static TARGETS_GENERATION: Array<u64> = Array::with_max_entries(1, MMAPABLE);

/// What `TARGETS` says of `tgid` now.
#[inline(always)]
pub(crate) fn state(tgid: u32) -> TargetState {
    let Some(generation) = TARGETS_GENERATION.get_ptr(0) else {
        return lookup(tgid);
    };
    // Read before the table: an entry filled from a table older than a change carries
    // the generation before that change's step, and is never used after it.
    // SAFETY: the map's value, an aligned u64.
    let generation = unsafe { core::ptr::read_volatile(generation) };
    let Some(entry) = TARGET_CACHE.get_ptr_mut(CachedTarget::slot(tgid)) else {
        return lookup(tgid);
    };
    // SAFETY: as above; one 8-byte load, whole.
    let cached = CachedTarget(unsafe { core::ptr::read_volatile(entry) });
    if let Some(state) = cached.state(tgid, generation) {
        return state;
    }
    let state = lookup(tgid);
    if let Some(fresh) = CachedTarget::new(tgid, generation, state) {
        // SAFETY: as above; one 8-byte store.
        unsafe { core::ptr::write_volatile(entry, fresh.0) };
    }
    state
}

/// After a change to `TARGETS` made here (a fork).
#[inline(always)]
pub(crate) fn changed() {
    if let Some(generation) = TARGETS_GENERATION.get_ptr_mut(0) {
        fetch_add(generation);
    }
}

#[inline(always)]
fn lookup(tgid: u32) -> TargetState {
    // SAFETY: plain map lookup.
    match unsafe { TARGETS.get(tgid) } {
        None => TargetState::Absent,
        Some(cfg) if cfg.capture == 0 => TargetState::Registered,
        Some(_) => TargetState::Capturing,
    }
}
