//! GPU runtime calls: what every API's entry and exit programs do (`call_programs` has
//! one pair per API, its [`Cookie`] a constant). Entry and exit each write one record to
//! the call ring; userspace pairs them per thread, so the common path updates no map.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::map,
    maps::{Array, LruHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use aya_log_ebpf::warn;
use rocsync_common::{
    Api, Cookie, ENTRY_FILTERED, EXIT_ENTRY_ONLY, EXIT_OUT_READ, EntryRecord, ExitRecord,
    GetDeviceMode, HandleKey, NO_DEVICE, OutSlot, RECORD_EXIT, Switch, TargetState, drop_index,
};

use crate::{
    SWITCH, call_ring, count_drops,
    device::{EVENT_DEVICE, device_of, read_out, track_devices},
    fetch_add, metrics, nccl, target_cache,
};

/// The one correlation counter, so ids order calls across threads.
#[map]
static CORRELATION: Array<u64> = Array::with_max_entries(1, 0);

/// Out-parameter calls in flight (stream creation, `*GetDevice`; `*SetDevice` in
/// restricted captures), by `pid_tgid`. LRU so that threads dying inside a call cannot
/// fill it.
#[map]
static OUT_SLOTS: LruHashMap<u64, OutSlot> = LruHashMap::with_max_entries(16384, 0);

/// Atomically increments the shared counter and returns the new value.
#[inline(always)]
fn next_correlation(counter: *mut u64) -> u64 {
    fetch_add(counter) + 1
}

#[inline(always)]
fn needs_slot(kind: u64, restricted: bool) -> bool {
    kind == Cookie::KIND_GET_DEVICE
        || kind == Cookie::KIND_STREAM_CREATE
        || (restricted && kind == Cookie::KIND_SET_DEVICE)
}

/// The first three arguments of a call; for a launch or a copy, its first and its
/// stream, from where the ABI put it; an NCCL call's as its layout says
/// ([`Cookie::stream_source`], a constant of each program: the other branches fold
/// away, default probes are unchanged).
#[inline(always)]
fn args_of(ctx: &ProbeContext, cookie: Cookie, tgid: u32) -> [u64; 3] {
    let first = ctx.arg::<u64>(0).unwrap_or(0);
    match cookie.stream_source() {
        s if s > Cookie::STREAM_STACK_2 => nccl::args(ctx, s, tgid),
        Cookie::STREAM_R8 => [first, ctx.arg::<u64>(4).unwrap_or(0), 0],
        Cookie::STREAM_STACK_2 => {
            // SAFETY: the probe's pt_regs; the stack slot through the checked helper. The
            // probe point is the entry or past instructions that leave rsp alone
            // (placement), so [rsp] is the return address and [rsp+16] the 2nd stack
            // argument.
            let sp = unsafe { (*ctx.regs).rsp };
            // SAFETY: the target's stack through the checked helper; a fault yields an error.
            let stream = unsafe { bpf_probe_read_user((sp + 16) as *const u64) }.unwrap_or(0);
            [first, stream, 0]
        }
        _ => [
            first,
            ctx.arg::<u64>(1).unwrap_or(0),
            ctx.arg::<u64>(2).unwrap_or(0),
        ],
    }
}

/// Threads whose device a temporary `*GetDevice` probe has learned (a successful call
/// recorded): their later calls are not recorded while it learns. LRU: a thread forgotten
/// only has its next call recorded again.
#[map]
static LEARNED: LruHashMap<u64, u8> = LruHashMap::with_max_entries(16384, 0);

/// Whether this `*GetDevice` call is recorded ([`GetDeviceMode`]). Always, for other APIs:
/// the check folds away in their entry programs, and lies in the out-parameter block
/// their exits skip.
#[inline(always)]
fn get_device_recorded(cookie: Cookie, pid_tgid: u64) -> bool {
    if cookie.kind() != Cookie::KIND_GET_DEVICE {
        return true;
    }
    match get_device_mode(cookie) {
        // SAFETY: plain map lookup.
        m if m == GetDeviceMode::Learning as u16 => unsafe { LEARNED.get(pid_tgid) }.is_none(),
        m => m != GetDeviceMode::Off as u16,
    }
}

/// How the switch says `cookie`'s API (a `*GetDevice`) is recorded now.
#[inline(always)]
fn get_device_mode(cookie: Cookie) -> u16 {
    let api = cookie.api();
    SWITCH
        .get(0)
        .map_or(GetDeviceMode::Every as u16, move |s| s.get_device(api))
}

/// The capture switch, if the calls of this process are to be recorded now. Asked on
/// every call: the target cache answers, not `TARGETS`.
#[inline(always)]
fn switched_on(tgid: u32) -> Option<Switch> {
    let s = *SWITCH.get(0)?;
    if s.capture == 0 || (s.by_process != 0 && target_cache::state(tgid) != TargetState::Capturing)
    {
        return None;
    }
    Some(s)
}

/// A call of `cookie`'s API entered.
#[inline(always)]
pub(crate) fn enter(ctx: &ProbeContext, cookie: Cookie) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // A process not traced returns here, having read nothing of the call.
    let (cfg, args, word) = match switched_on(tgid) {
        Some(cfg) => {
            let args = args_of(ctx, cookie, tgid);
            (cfg, args, nccl_state(ctx, cookie, &args, pid_tgid))
        }
        // Not capturing: the daemon's always-on mode counts, and records the calls of a
        // process a trace on demand is recording.
        None if SWITCH.get(0).is_some_and(|s| s.metrics != 0) => {
            let args = args_of(ctx, cookie, tgid);
            let mut word = 0;
            // `move`: the closure holds its own copy of the cookie. Borrowing it would take
            // the cookie's address, and LLVM then folds none of the other APIs' branches
            // away: every program carried all of them (BLAKE2b four times, 183 KB each).
            let out = &mut word;
            let nccl = move |args: &[u64; 3]| *out = nccl_state(ctx, cookie, args, pid_tgid);
            match metrics::entered(cookie, &args, nccl) {
                Some(cfg) => (cfg, args, word),
                None => return 0,
            }
        }
        None => return 0,
    };
    if !get_device_recorded(cookie, pid_tgid) {
        count_drops(drop_index::GET_DEVICE_UNRECORDED, 1);
        return 0;
    }
    let kind = cookie.kind();
    let restricted = cfg.agents != 0;
    let mut device = NO_DEVICE;
    let mut flags = 0;
    if restricted {
        // Attribute the call; a filtered one still writes its entry (so its exit pairs,
        // and a re-recorded event is known), but nothing else.
        device = device_of(&args, cookie, pid_tgid);
        let recorded = (0..64).contains(&device) && cfg.agents & (1u64 << device) != 0;
        if (kind == Cookie::KIND_SYNC || kind == Cookie::KIND_RECORD) && !recorded {
            flags = ENTRY_FILTERED;
        }
        if kind == Cookie::KIND_RECORD {
            let key = HandleKey {
                tgid: pid_tgid >> 32,
                handle: args[0],
            };
            let _ = EVENT_DEVICE.insert(key, device, 0);
        }
    }
    if needs_slot(kind, restricted) {
        let slot = OutSlot {
            pointer: args[0],
            api: cookie.api(),
            device,
        };
        let _ = OUT_SLOTS.insert(pid_tgid, slot, 0);
    }
    let Some(counter) = CORRELATION.get_ptr_mut(0) else {
        return 0;
    };
    let correlation = next_correlation(counter);
    // SAFETY: helper without preconditions.
    let enter_ns = unsafe { bpf_ktime_get_ns() };
    let losses = call_ring::losses(pid_tgid as u32);
    let written = call_ring::write(
        EntryRecord {
            kind: EntryRecord::kind_at(losses),
            pid: tgid,
            tid: pid_tgid as u32,
            api: cookie.api() as u16,
            correlation,
            enter_ns,
            args,
            flags,
            device: EntryRecord::agent(device),
        },
        pid_tgid as u32,
    );
    if !written {
        count_drops(drop_index::ENTRY, 1);
    }
    if cookie.entry_only() {
        // No return probe: its exit written now, its number in it.
        let exit = ExitRecord {
            kind: RECORD_EXIT,
            pid: tgid,
            tid: pid_tgid as u32,
            api: cookie.api(),
            exit_ns: enter_ns,
            ret: word,
            out: 0,
            flags: EXIT_ENTRY_ONLY,
            // Its entry's: nothing lies between them.
            losses: losses as u32,
        };
        if !call_ring::write(exit, pid_tgid as u32) {
            count_drops(drop_index::EXIT, 1);
        }
    }
    0
}

/// An NCCL call's communicator state (`nccl`), kept for every tracked process whether a
/// trace records it or not; a collective's [`rocsync_common::Numbered`] word. Nothing for
/// the runtimes' calls (a constant of their programs).
#[inline(always)]
fn nccl_state(ctx: &ProbeContext, cookie: Cookie, args: &[u64; 3], pid_tgid: u64) -> i64 {
    match cookie.kind() {
        Cookie::KIND_COMM_SETUP | Cookie::KIND_COLLECTIVE | Cookie::KIND_ENTRY_ONLY => {
            nccl::entered(ctx, cookie, args, pid_tgid)
        }
        _ => 0,
    }
}

/// A temporary `*GetDevice` probe read the thread's device: its later calls need not be
/// recorded.
#[inline(always)]
fn learned(cookie: Cookie, pid_tgid: u64) {
    if get_device_mode(cookie) == GetDeviceMode::Learning as u16 {
        let _ = LEARNED.insert(pid_tgid, 1, 0);
    }
}

/// A call of `cookie`'s API returned.
#[inline(always)]
pub(crate) fn exit(ctx: &RetProbeContext, cookie: Cookie) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // A communicator's handle, read from its own slot: the set-up makes runtime calls
    // with out-parameters of their own (stream creations) that take the thread's
    // `OUT_SLOTS` entry.
    let comm = match cookie.kind() {
        Cookie::KIND_COMM_SETUP => nccl::set_up(ctx, pid_tgid),
        _ => None,
    };
    // Enter = active, exit = registered: a call entered while capturing is completed
    // even after the capture was switched off. File-wide probes register the targets'.
    let counting = match SWITCH.get(0) {
        Some(s) if s.metrics != 0 => true,
        Some(s)
            if s.by_process != 0
                && target_cache::state((pid_tgid >> 32) as u32) == TargetState::Absent =>
        {
            return 0;
        }
        _ => false,
    };
    let ret = ctx.ret::<i32>() as i64;
    if counting {
        let (recorded, paired) = metrics::returned(cookie, ret);
        // A poll's return is recorded only with its entry. The budget takes the polling
        // probes off and puts them back (`polling.rs`): a call entered while its entry
        // probe was off returned while its return probe was on, an exit with no entry (a
        // dense loop's flight recorder dump counted 44 338). The poll test is a constant
        // of each program.
        if !recorded || (Api::id_is_polling(cookie.api()) && !paired) {
            return 0;
        }
    }
    let (mut out, mut flags) = (0u64, 0u32);
    let kind = cookie.kind();
    if needs_slot(kind, true) {
        // SAFETY: copied out before removal.
        match unsafe { OUT_SLOTS.get(pid_tgid) }.copied() {
            Some(slot) if slot.api == cookie.api() => {
                let _ = OUT_SLOTS.remove(pid_tgid);
                match read_out(cookie, slot.pointer) {
                    Some(value) => {
                        out = value;
                        flags = EXIT_OUT_READ;
                        if slot.device != NO_DEVICE && ret == 0 {
                            track_devices(pid_tgid, kind, out);
                        }
                        if kind == Cookie::KIND_GET_DEVICE && ret == 0 {
                            learned(cookie, pid_tgid);
                        }
                    }
                    // A failed call may not have written it; a successful one did.
                    None if ret == 0 => {
                        warn!(
                            ctx,
                            "api {}: out-parameter at 0x{:x} unreadable at return",
                            cookie.api(),
                            slot.pointer
                        );
                        count_drops(drop_index::OUT_PARAM, 1);
                    }
                    None => {}
                }
            }
            // `*SetDevice` has a slot only in restricted captures.
            _ if kind == Cookie::KIND_SET_DEVICE => {}
            // Not recorded at entry (counted there), so not lost.
            _ if !get_device_recorded(cookie, pid_tgid) => return 0,
            _ => count_drops(drop_index::OUT_PARAM, 1),
        }
    }
    if let Some(handle) = comm {
        (out, flags) = (handle, EXIT_OUT_READ);
    }
    let written = call_ring::write(
        ExitRecord {
            kind: RECORD_EXIT,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            api: cookie.api(),
            // SAFETY: helper without preconditions.
            exit_ns: unsafe { bpf_ktime_get_ns() },
            ret,
            out,
            flags,
            losses: call_ring::losses(pid_tgid as u32) as u32,
        },
        pid_tgid as u32,
    );
    if !written {
        count_drops(drop_index::EXIT, 1);
    }
    0
}
