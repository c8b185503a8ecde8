//! Which device a call applies to, for the agent filter (`calls`) and the daemon's
//! metrics (`metrics`) alike: the maps that follow each thread's, stream's and event's
//! device, kept from the out-parameters read at return. Its own module so that neither
//! of its two users imports the other.

use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::map,
    maps::{HashMap, LruHashMap},
};
use rocsync_common::{Cookie, HandleKey, OutParam};

/// For captures restricted to some agents: each thread's current device, and the device
/// of each stream (from its creation) and of each event (from its latest record).
#[map]
static THREAD_DEVICE: HashMap<u64, i32> = HashMap::with_max_entries(16384, 0);
#[map]
static STREAM_DEVICE: LruHashMap<HandleKey, i32> = LruHashMap::with_max_entries(65536, 0);
#[map]
pub(crate) static EVENT_DEVICE: LruHashMap<HandleKey, i32> = LruHashMap::with_max_entries(65536, 0);

/// The device a call applies to: its stream's, the recording stream's for an event, else
/// the calling thread's current device (HIP's default is 0).
#[inline(always)]
pub(crate) fn device_of(args: &[u64; 3], cookie: Cookie, pid_tgid: u64) -> i32 {
    // SAFETY: plain map lookups, values copied out.
    let thread = unsafe { THREAD_DEVICE.get(pid_tgid) }.copied().unwrap_or(0);
    let tgid = pid_tgid >> 32;
    let (arg, map) = match (cookie.stream_arg(), cookie.event_arg()) {
        (s, _) if s > 0 => (s - 1, &STREAM_DEVICE),
        (_, e) if e > 0 => (e - 1, &EVENT_DEVICE),
        _ => return thread,
    };
    // Constant indices only: the verifier refuses a computed offset into the context.
    let handle = match arg {
        0 => args[0],
        1 => args[1],
        _ => args[2],
    };
    // The null, legacy and per-thread streams are the thread's device's.
    if handle <= 2 {
        return thread;
    }
    // SAFETY: a plain map lookup, its value copied out at once.
    unsafe { map.get(HandleKey { tgid, handle }) }
        .copied()
        .unwrap_or(thread)
}

/// The out-parameter's value at return; `*SetDevice`'s "pointer" is the device itself.
/// `None` when the target's memory could not be read.
#[inline(always)]
pub(crate) fn read_out(cookie: Cookie, pointer: u64) -> Option<u64> {
    // SAFETY: target memory through the checked helper; a fault yields an error.
    match OutParam::of_api_id(cookie.api()) {
        // SAFETY: as above.
        OutParam::Handle => unsafe { bpf_probe_read_user(pointer as *const u64) }.ok(),
        // SAFETY: as above.
        OutParam::Int => unsafe { bpf_probe_read_user(pointer as *const i32) }
            .ok()
            .map(|v| v as i64 as u64),
        OutParam::None => Some(pointer),
    }
}

/// Keeps the maps the agent filter attributes calls with (restricted captures only).
#[inline(always)]
pub(crate) fn track_devices(pid_tgid: u64, kind: u64, out: u64) {
    if kind == Cookie::KIND_SET_DEVICE || kind == Cookie::KIND_GET_DEVICE {
        let _ = THREAD_DEVICE.insert(pid_tgid, out as i32, 0);
    } else if kind == Cookie::KIND_STREAM_CREATE {
        // SAFETY: plain map lookup.
        let d = unsafe { THREAD_DEVICE.get(pid_tgid) }.copied().unwrap_or(0);
        let key = HandleKey {
            tgid: pid_tgid >> 32,
            handle: out,
        };
        let _ = STREAM_DEVICE.insert(key, d, 0);
    }
}
