//! The daemon's dependency state of every counted process, kept at the calls' entry:
//! the stream each event was last recorded on, the event each stream last waited on
//! (`rocsync_common::Dependency`). From it a blocked synchronisation is followed back to
//! what it waits on (`daemon/triggers/chain.rs`).

use aya_ebpf::{macros::map, maps::LruHashMap};
use rocsync_common::{Dependency, HandleKey};

/// The stream each event was last recorded on (and when), to count cross-stream waits
/// and follow a blocked wait back to its record.
#[map]
static EVENT_STREAM: LruHashMap<HandleKey, Dependency> = LruHashMap::with_max_entries(65536, 0);
/// The event each stream last waited on (and when): a synchronised stream's wait.
#[map]
static STREAM_WAIT: LruHashMap<HandleKey, Dependency> = LruHashMap::with_max_entries(65536, 0);

#[inline(always)]
fn key(tgid: u32, handle: u64) -> HandleKey {
    HandleKey {
        tgid: tgid as u64,
        handle,
    }
}

/// `map[key] = value`, in place when the entry exists (the common case: nothing
/// allocated).
#[inline(always)]
fn remember(map: &LruHashMap<HandleKey, Dependency>, key: HandleKey, value: Dependency) {
    match map.get_ptr_mut(key) {
        // SAFETY: the handle's own entry, valid for the program's run.
        Some(d) => unsafe { *d = value },
        None => {
            let _ = map.insert(key, value, 0);
        }
    }
}

/// `record(event = args[0], stream = args[1])` at `ns`.
#[inline(always)]
pub fn recorded(args: &[u64; 3], tgid: u32, ns: u64) {
    let on = Dependency {
        handle: args[1],
        ns,
    };
    remember(&EVENT_STREAM, key(tgid, args[0]), on);
}

/// `wait(stream = args[0], event = args[1])` at `ns`; whether its event was last
/// recorded on another stream.
#[inline(always)]
pub fn waited(args: &[u64; 3], tgid: u32, ns: u64) -> bool {
    let on = Dependency {
        handle: args[1],
        ns,
    };
    remember(&STREAM_WAIT, key(tgid, args[0]), on);
    // SAFETY: plain map lookup.
    unsafe { EVENT_STREAM.get(key(tgid, args[1])) }.is_some_and(|r| r.handle != args[0])
}
