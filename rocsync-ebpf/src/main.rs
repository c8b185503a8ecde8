//! rocsync's probes. One generic entry/exit pair serves every hooked function: the uprobe
//! cookie carries the API id, so adding an API needs no new program.
#![no_std]
#![no_main]
// The correlation counter needs BPF's atomic fetch-and-add (ISA v3, kernel 5.12). The
// code generator targets the generic ISA, which lacks it, so it is written in assembly.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_send_signal},
    },
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{
    CallRecord, Config, Cookie, Entry, HandleKey, LinkMapRecord, NO_DEVICE, OutParam, RECORD_CALL,
    RECORD_LINK_MAP,
};

/// Index into `DROPS`: a completed call found the ring full.
const DROP_CALL: u32 = 0;
/// Index into `DROPS`: a link-map change found the ring full (the target was not stopped).
const DROP_LINK_MAP: u32 = 1;
const SIGSTOP: u32 = 19;
/// `bpf_ringbuf_submit` flags and `bpf_ringbuf_query` selector.
const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_FORCE_WAKEUP: u64 = 2;
const BPF_RB_AVAIL_DATA: u64 = 0;
/// Wake the reader only once this much is waiting: a wakeup per record costs more than
/// the record itself (userspace also drains on a short timer).
const WAKEUP_BYTES: u64 = 512 << 10;

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// Processes to trace (tgid → settings). Everything else returns at the first lookup.
#[map]
static TARGETS: HashMap<u32, Config> = HashMap::with_max_entries(1024, 0);

/// Calls in flight, keyed by `pid_tgid` (threads call concurrently). LRU so that threads
/// that die inside a call cannot fill it.
#[map]
static STASH: LruHashMap<u64, Entry> = LruHashMap::with_max_entries(65536, 0);

/// The one correlation counter, so ids order calls across threads.
#[map]
static CORRELATION: Array<u64> = Array::with_max_entries(1, 0);

#[map]
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

/// For captures restricted to some agents: each thread's current device, and the device
/// of each stream (from its creation) and of each event (from its latest record).
#[map]
static THREAD_DEVICE: HashMap<u64, i32> = HashMap::with_max_entries(16384, 0);
#[map]
static STREAM_DEVICE: LruHashMap<HandleKey, i32> = LruHashMap::with_max_entries(65536, 0);
#[map]
static EVENT_DEVICE: LruHashMap<HandleKey, i32> = LruHashMap::with_max_entries(65536, 0);

#[inline(always)]
fn count_drop(index: u32) {
    if let Some(n) = DROPS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *n += 1 };
    }
}

/// Atomically increments the shared counter and returns the new value.
#[inline(always)]
fn next_correlation(counter: *mut u64) -> u64 {
    let mut value: u64 = 1;
    // SAFETY: `counter` is a valid, aligned u64 map slot; the instruction is one atomic
    // read-modify-write that returns the previous value in `value`.
    unsafe {
        core::arch::asm!(
            "{v} = atomic_fetch_add((u64 *)({p} + 0), {v})",
            p = in(reg) counter,
            v = inout(reg) value,
        );
    }
    value + 1
}

#[uprobe]
pub fn call_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: plain map lookup; the value is copied out at once.
    let agents = match unsafe { TARGETS.get((pid_tgid >> 32) as u32) } {
        Some(cfg) if cfg.capture != 0 => cfg.agents,
        _ => return 0,
    };
    // SAFETY: the context pointer is the program's own.
    let cookie = Cookie(unsafe { bpf_get_attach_cookie(ctx.as_ptr()) });
    let args = [
        ctx.arg::<u64>(0).unwrap_or(0),
        ctx.arg::<u64>(1).unwrap_or(0),
        ctx.arg::<u64>(2).unwrap_or(0),
    ];
    let mut device = NO_DEVICE;
    if agents != 0 {
        // Restricted to some agents: attribute the call and drop it here if filtered,
        // so it costs nothing beyond the trap.
        device = device_of(&args, cookie, pid_tgid);
        let kind = cookie.kind();
        if (kind == Cookie::KIND_SYNC || kind == Cookie::KIND_RECORD)
            && (!(0..64).contains(&device) || agents & (1u64 << device) == 0)
        {
            return 0;
        }
    }
    let Some(counter) = CORRELATION.get_ptr_mut(0) else {
        return 0;
    };
    let entry = Entry {
        correlation: next_correlation(counter),
        // SAFETY: helper without preconditions.
        enter_ns: unsafe { bpf_ktime_get_ns() },
        args,
        // The whole cookie: the exit probe needs its kind too.
        api: cookie.0 as u32,
        device,
    };
    let _ = STASH.insert(pid_tgid, entry, 0);
    0
}

/// The device a call applies to: its stream's, the recording stream's for an event, else
/// the calling thread's current device (HIP's default is 0).
#[inline(always)]
fn device_of(args: &[u64; 3], cookie: Cookie, pid_tgid: u64) -> i32 {
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
    unsafe { map.get(HandleKey { tgid, handle }) }
        .copied()
        .unwrap_or(thread)
}

#[uretprobe]
pub fn call_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: the value is copied out before the entry is removed.
    let Some(entry) = (unsafe { STASH.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = STASH.remove(pid_tgid);
    // SAFETY: helper without preconditions.
    let exit_ns = unsafe { bpf_ktime_get_ns() };
    let ret = ctx.ret::<i32>() as i64;
    let mut args = entry.args;
    let cookie = Cookie(entry.api as u64);
    match OutParam::of_api_id(cookie.api()) {
        // SAFETY: reads target memory through the checked helper; a fault yields an error.
        OutParam::Handle => {
            args[0] = unsafe { bpf_probe_read_user(args[0] as *const u64) }.unwrap_or(0)
        }
        OutParam::Int => {
            args[0] = unsafe { bpf_probe_read_user(args[0] as *const i32) }.unwrap_or(-1) as u64
        }
        OutParam::None => {}
    }
    if entry.device != NO_DEVICE && ret == 0 {
        track_devices(pid_tgid, cookie.kind(), entry.device, &args);
    }
    let Some(mut slot) = EVENTS.reserve::<CallRecord>(0) else {
        count_drop(DROP_CALL);
        return 0;
    };
    slot.write(CallRecord {
        kind: RECORD_CALL,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        api: cookie.api(),
        correlation: entry.correlation,
        enter_ns: entry.enter_ns,
        exit_ns,
        args,
        ret,
    });
    let flags = if EVENTS.query(BPF_RB_AVAIL_DATA) >= WAKEUP_BYTES {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    slot.submit(flags);
    0
}

/// Keeps the maps the agent filter attributes calls with (restricted captures only).
#[inline(always)]
fn track_devices(pid_tgid: u64, cookie_kind: u64, device: i32, args: &[u64; 3]) {
    let tgid = pid_tgid >> 32;
    if cookie_kind == Cookie::KIND_SET_DEVICE || cookie_kind == Cookie::KIND_GET_DEVICE {
        let _ = THREAD_DEVICE.insert(pid_tgid, args[0] as i32, 0);
    } else if cookie_kind == Cookie::KIND_STREAM_CREATE {
        // SAFETY: plain map lookup.
        let d = unsafe { THREAD_DEVICE.get(pid_tgid) }.copied().unwrap_or(0);
        let _ = STREAM_DEVICE.insert(
            HandleKey {
                tgid,
                handle: args[0],
            },
            d,
            0,
        );
    } else if cookie_kind == Cookie::KIND_RECORD {
        let _ = EVENT_DEVICE.insert(
            HandleKey {
                tgid,
                handle: args[0],
            },
            device,
            0,
        );
    }
}

/// On the dynamic loader's `_dl_debug_state`: the link map changed, so a HIP library may
/// just have been mapped. Stop the target and tell userspace, which attaches to new
/// libraries and continues the process before it can call into them.
#[uprobe]
pub fn link_map_changed(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: plain map lookup.
    match unsafe { TARGETS.get((pid_tgid >> 32) as u32) } {
        Some(cfg) if cfg.stop_on_link_map != 0 => {}
        _ => return 0,
    }
    // Reserve first: a target stopped without a notification would never be continued.
    let Some(mut slot) = EVENTS.reserve::<LinkMapRecord>(0) else {
        count_drop(DROP_LINK_MAP);
        return 0;
    };
    // SAFETY: signals the current process; SIGSTOP takes effect on return to user mode.
    let stopped = unsafe { bpf_send_signal(SIGSTOP) } == 0;
    slot.write(LinkMapRecord {
        kind: RECORD_LINK_MAP,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        stopped: stopped as u32,
        // SAFETY: helper without preconditions.
        ns: unsafe { bpf_ktime_get_ns() },
    });
    // The target is stopped until userspace reads this: wake it now.
    slot.submit(BPF_RB_FORCE_WAKEUP);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

/// Benchmark baseline: the cheapest possible uprobe, to measure the trap alone.
#[uprobe]
pub fn empty_enter(_ctx: ProbeContext) -> u32 {
    0
}

/// Benchmark baseline: the cheapest possible uretprobe.
#[uretprobe]
pub fn empty_exit(_ctx: RetProbeContext) -> u32 {
    0
}
