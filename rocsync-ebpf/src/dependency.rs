//! The daemon's dependency state of every counted process, kept at the calls' entry:
//! the stream each event was last recorded on, the event each stream last waited on
//! (`rocsync_common::Dependency`). From it a blocked synchronisation is followed back to
//! what it waits on (`daemon/triggers/chain.rs`). Kept per user, in lanes
//! (`rocsync_common::DEPENDENCY_LANES`): an LRU over all users let one user's flood of
//! distinct events push out the record another's blocked call waited on.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_get_current_uid_gid,
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray},
};
use rocsync_common::{
    DEPENDENCY_LANE_ENTRIES, DEPENDENCY_LANES, DEPENDENCY_MADE_SLOTS, Dependency, HandleKey,
};

use crate::fetch_add_by;

type Lane = LruHashMap<HandleKey, Dependency>;

/// One lane's two maps: the stream each event was last recorded on (and when), to count
/// cross-stream waits and follow a blocked wait back to its record; the event each
/// stream last waited on (and when). The daemon reads `EVENT_STREAM_<lane>` and
/// `STREAM_WAIT_<lane>`.
macro_rules! lanes {
    ($($lane:literal $events:ident $streams:ident),*) => {
        $(
            #[map]
            static $events: Lane = Lane::with_max_entries(DEPENDENCY_LANE_ENTRIES, 0);
            #[map]
            static $streams: Lane = Lane::with_max_entries(DEPENDENCY_LANE_ENTRIES, 0);
        )*
        /// `f` of lane `lane`'s maps (events, streams). Each lane's call apart, with its
        /// own maps (a map pointer picked from a table would not pass the verifier).
        #[inline(always)]
        fn with_lane<R>(lane: u32, f: impl FnOnce(&Lane, &Lane) -> R) -> R {
            match lane {
                $($lane => f(&$events, &$streams),)*
                _ => f(&EVENT_STREAM_7, &STREAM_WAIT_7),
            }
        }
    };
}

lanes!(
    0 EVENT_STREAM_0 STREAM_WAIT_0, 1 EVENT_STREAM_1 STREAM_WAIT_1,
    2 EVENT_STREAM_2 STREAM_WAIT_2, 3 EVENT_STREAM_3 STREAM_WAIT_3,
    4 EVENT_STREAM_4 STREAM_WAIT_4, 5 EVENT_STREAM_5 STREAM_WAIT_5,
    6 EVENT_STREAM_6 STREAM_WAIT_6, 7 EVENT_STREAM_7 STREAM_WAIT_7
);

/// Each user's lane.
#[map]
static LANE_OF: HashMap<u32, u32> = HashMap::with_max_entries(1024, 0);
/// Lanes given to users other than root so far.
#[map]
static LANES_GIVEN: Array<u64> = Array::with_max_entries(1, 0);
/// Handles made in each lane's maps (`DEPENDENCY_MADE_SLOTS`).
#[map]
static DEPENDENCY_MADE: PerCpuArray<u64> = PerCpuArray::with_max_entries(DEPENDENCY_MADE_SLOTS, 0);

/// The calling user's lane: root's 0, another's given at its first use (the last lane
/// shared once all are given).
#[inline(always)]
fn lane() -> u32 {
    let uid = bpf_get_current_uid_gid() as u32;
    if uid == 0 {
        return 0;
    }
    // SAFETY: plain map lookup, copied out.
    if let Some(&lane) = unsafe { LANE_OF.get(uid) } {
        return lane;
    }
    let Some(given) = LANES_GIVEN.get_ptr_mut(0) else {
        return DEPENDENCY_LANES - 1;
    };
    let lane = (1 + fetch_add_by(given, 1)).min(u64::from(DEPENDENCY_LANES - 1)) as u32;
    // Another CPU may give the user one meanwhile: theirs stays, this one is unused.
    let _ = LANE_OF.insert(uid, lane, BPF_NOEXIST as u64);
    // SAFETY: plain map lookup, copied out.
    unsafe { LANE_OF.get(uid) }.copied().unwrap_or(lane)
}

#[inline(always)]
fn key(tgid: u32, handle: u64) -> HandleKey {
    HandleKey {
        tgid: tgid as u64,
        handle,
    }
}

/// `map[key] = value`, in place when the entry exists (the common case: nothing
/// allocated); a new one is counted at `slot` of `DEPENDENCY_MADE`.
#[inline(always)]
fn remember(map: &Lane, key: HandleKey, value: Dependency, slot: u32) {
    match map.get_ptr_mut(key) {
        // SAFETY: the handle's own entry, valid for the program's run.
        Some(d) => unsafe { *d = value },
        None => {
            if map.insert(key, value, 0).is_ok()
                && let Some(n) = DEPENDENCY_MADE.get_ptr_mut(slot)
            {
                // SAFETY: per-CPU slot, no concurrent writer on this CPU while the
                // program runs.
                unsafe { *n += 1 };
            }
        }
    }
}

/// `record(event = args[0], stream = args[1])` at `ns`.
#[inline(always)]
pub(crate) fn recorded(args: &[u64; 3], tgid: u32, ns: u64) {
    let on = Dependency {
        handle: args[1],
        ns,
    };
    let lane = lane();
    with_lane(lane, |events, _| {
        remember(events, key(tgid, args[0]), on, lane)
    });
}

/// `wait(stream = args[0], event = args[1])` at `ns`; whether its event was last
/// recorded on another stream.
#[inline(always)]
pub(crate) fn waited(args: &[u64; 3], tgid: u32, ns: u64) -> bool {
    let on = Dependency {
        handle: args[1],
        ns,
    };
    let lane = lane();
    with_lane(lane, |events, streams| {
        remember(streams, key(tgid, args[0]), on, DEPENDENCY_LANES + lane);
        // SAFETY: plain map lookup.
        unsafe { events.get(key(tgid, args[1])) }.is_some_and(|r| r.handle != args[0])
    })
}
