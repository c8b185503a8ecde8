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
    AgentQuery, CallRecord, Config, Cookie, Entry, HandleKey, HsaQueue, LinkMapRecord,
    MAX_PACKETS_PER_DOORBELL, NO_DEVICE, OutParam, PacketRecord, QueueCreate, QueueInfo,
    QueueRecord, RECORD_CALL, RECORD_LINK_MAP, RECORD_PACKET, RECORD_QUEUE,
};

/// Index into `DROPS`: a completed call found the ring full.
const DROP_CALL: u32 = 0;
/// Index into `DROPS`: a link-map change found the ring full (the target was not stopped).
const DROP_LINK_MAP: u32 = 1;
/// Index into `DROPS`: packets a doorbell published beyond what one probe run reads.
const DROP_TRUNCATED: u32 = 2;
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
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(3, 0);

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

// ---- HSA queue write path ----

/// `hsa_queue_create` calls in flight, by `pid_tgid`.
#[map]
static QUEUE_CREATES: HashMap<u64, QueueCreate> = HashMap::with_max_entries(4096, 0);

/// Agent ordinals per process: GPU agents numbered as the runtime enumerates them (HIP
/// asks `hsa_agent_get_info(DEVICE)` of every agent at start-up), else by first queue.
#[map]
static AGENT_ORDINALS: HashMap<HandleKey, u32> = HashMap::with_max_entries(4096, 0);
/// Next ordinal per process.
#[map]
static NEXT_ORDINAL: HashMap<u64, u32> = HashMap::with_max_entries(1024, 0);
/// `hsa_agent_get_info` calls in flight, by `pid_tgid`.
#[map]
static AGENT_QUERIES: HashMap<u64, AgentQuery> = HashMap::with_max_entries(4096, 0);

const HSA_AGENT_INFO_DEVICE: u64 = 17;
const HSA_DEVICE_TYPE_GPU: u32 = 1;

/// The agent's ordinal in this process, numbering it now if it is new.
#[inline(always)]
fn agent_ordinal(tgid: u64, agent: u64) -> u32 {
    let key = HandleKey {
        tgid,
        handle: agent,
    };
    // SAFETY: plain map lookups.
    if let Some(o) = unsafe { AGENT_ORDINALS.get(key) } {
        return *o;
    }
    let next = unsafe { NEXT_ORDINAL.get(tgid) }.copied().unwrap_or(0);
    let _ = NEXT_ORDINAL.insert(tgid, next + 1, 0);
    let _ = AGENT_ORDINALS.insert(key, next, 0);
    next
}

#[uprobe]
pub fn agent_info_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let attribute = ctx.arg::<u64>(1).unwrap_or(0) & 0xffff_ffff;
    if attribute != HSA_AGENT_INFO_DEVICE || !capturing(pid_tgid) {
        return 0;
    }
    let q = AgentQuery {
        agent: ctx.arg::<u64>(0).unwrap_or(0),
        attribute,
        value: ctx.arg::<u64>(2).unwrap_or(0),
    };
    let _ = AGENT_QUERIES.insert(pid_tgid, q, 0);
    0
}

#[uretprobe]
pub fn agent_info_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: copied out before removal.
    let Some(q) = (unsafe { AGENT_QUERIES.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = AGENT_QUERIES.remove(pid_tgid);
    // SAFETY: target memory through the checked helper.
    let device = unsafe { bpf_probe_read_user(q.value as *const u32) }.unwrap_or(0);
    if ctx.ret::<i32>() == 0 && device == HSA_DEVICE_TYPE_GPU {
        agent_ordinal(pid_tgid >> 32, q.agent);
    }
    0
}

/// Live queues of the targets, by (tgid, doorbell signal handle).
#[map]
static DOORBELLS: HashMap<HandleKey, QueueInfo> = HashMap::with_max_entries(4096, 0);

#[inline(always)]
fn capturing(pid_tgid: u64) -> bool {
    // SAFETY: plain map lookup.
    matches!(unsafe { TARGETS.get((pid_tgid >> 32) as u32) }, Some(cfg) if cfg.capture != 0)
}

/// `hsa_queue_create(agent, size, type, callback, data, private, group, hsa_queue_t** out)`:
/// the out-parameter is the 8th argument, on the stack at `[rsp+16]`.
#[uprobe]
pub fn queue_create_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !capturing(pid_tgid) {
        return 0;
    }
    // SAFETY: the context is the probe's pt_regs; the stack slot is read with the checked
    // helper.
    let sp = unsafe { (*ctx.regs).rsp };
    let out = unsafe { bpf_probe_read_user((sp + 16) as *const u64) }.unwrap_or(0);
    let agent = ctx.arg::<u64>(0).unwrap_or(0);
    let _ = QUEUE_CREATES.insert(pid_tgid, QueueCreate { agent, out }, 0);
    0
}

#[uretprobe]
pub fn queue_create_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: copied out before removal.
    let Some(c) = (unsafe { QUEUE_CREATES.get(pid_tgid) }).copied() else {
        return 0;
    };
    let _ = QUEUE_CREATES.remove(pid_tgid);
    if ctx.ret::<i32>() != 0 {
        return 0;
    }
    // SAFETY: target memory through the checked helper.
    let Ok(queue) = (unsafe { bpf_probe_read_user(c.out as *const u64) }) else {
        return 0;
    };
    let Ok(q) = (unsafe { bpf_probe_read_user(queue as *const HsaQueue) }) else {
        return 0;
    };
    let info = QueueInfo {
        queue,
        agent: c.agent,
        ordinal: agent_ordinal(pid_tgid >> 32, c.agent) as u64,
        base: q.base_address,
        size: q.size as u64,
        last: u64::MAX,
    };
    let tgid = pid_tgid >> 32;
    let _ = DOORBELLS.insert(
        HandleKey {
            tgid,
            handle: q.doorbell_signal,
        },
        info,
        0,
    );
    emit_queue(pid_tgid, &info, q.doorbell_signal, q.id, 1);
    0
}

/// `hsa_queue_destroy(queue)`: forget its doorbell.
#[uprobe]
pub fn queue_destroy(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let queue = ctx.arg::<u64>(0).unwrap_or(0);
    // SAFETY: target memory through the checked helper.
    let Ok(q) = (unsafe { bpf_probe_read_user(queue as *const HsaQueue) }) else {
        return 0;
    };
    let key = HandleKey {
        tgid: pid_tgid >> 32,
        handle: q.doorbell_signal,
    };
    // SAFETY: copied out before removal.
    let Some(info) = (unsafe { DOORBELLS.get(key) }).copied() else {
        return 0;
    };
    let _ = DOORBELLS.remove(key);
    emit_queue(pid_tgid, &info, q.doorbell_signal, q.id, 0);
    0
}

#[inline(always)]
fn emit_queue(pid_tgid: u64, info: &QueueInfo, doorbell: u64, id: u64, created: u32) {
    let Some(mut slot) = EVENTS.reserve::<QueueRecord>(0) else {
        count_drop(DROP_CALL);
        return;
    };
    slot.write(QueueRecord {
        kind: RECORD_QUEUE,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        created,
        queue: info.queue,
        agent: info.agent,
        base: info.base,
        doorbell,
        id,
        size: info.size as u32,
        ordinal: info.ordinal as u32,
        // SAFETY: helper without preconditions.
        ns: unsafe { bpf_ktime_get_ns() },
    });
    slot.submit(BPF_RB_FORCE_WAKEUP);
}

/// `hsa_signal_store_*(signal, value)`: on a known doorbell, `value` is the write index of
/// the last packet published. Every packet since the previous doorbell is read from the
/// ring (bounded; the excess is counted as truncated).
#[uprobe]
pub fn doorbell(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let signal = ctx.arg::<u64>(0).unwrap_or(0);
    let key = HandleKey {
        tgid: pid_tgid >> 32,
        handle: signal,
    };
    // Most signal stores are not doorbells: one lookup and out.
    let Some(info) = DOORBELLS.get_ptr_mut(key) else {
        return 0;
    };
    // SAFETY: plain map lookup.
    let agents = match unsafe { TARGETS.get((pid_tgid >> 32) as u32) } {
        Some(cfg) if cfg.capture != 0 => cfg.agents,
        _ => return 0,
    };
    let value = ctx.arg::<u64>(1).unwrap_or(0);
    // SAFETY: the map value stays valid for the program's run.
    let q = unsafe { *info };
    // Nothing new when the index was rung before (a store nested in another, or a
    // repeated ring). `last` starts at -1: the queue was seen created, so every packet
    // from index 0 on is the target's.
    if q.last != u64::MAX && value <= q.last {
        return 0;
    }
    let first = q.last.wrapping_add(1);
    // A filtered agent's packets cost the lookup and nothing more.
    if agents != 0 && (q.ordinal >= 64 || agents & (1u64 << q.ordinal) == 0) {
        return 0;
    }
    // SAFETY: as above.
    unsafe { (*info).last = value };
    if q.size == 0 || q.size & (q.size - 1) != 0 {
        return 0;
    }
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    for i in 0..MAX_PACKETS_PER_DOORBELL {
        let index = first + i;
        if index > value {
            return 0;
        }
        let at = q.base + (index & (q.size - 1)) * 64;
        // SAFETY: target memory through the checked helper.
        let Ok(packet) = (unsafe { bpf_probe_read_user(at as *const [u8; 64]) }) else {
            return 0;
        };
        let Some(mut slot) = EVENTS.reserve::<PacketRecord>(0) else {
            count_drop(DROP_CALL);
            continue;
        };
        slot.write(PacketRecord {
            kind: RECORD_PACKET,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            ordinal: q.ordinal as u32,
            queue: q.queue,
            agent: q.agent,
            index,
            // Packets of one doorbell 1 ns apart, in publication order: each its own
            // point on the queue's track.
            ns: ns + i,
            packet,
        });
        slot.submit(BPF_RB_NO_WAKEUP);
    }
    let published = value - first + 1;
    if published > MAX_PACKETS_PER_DOORBELL
        && let Some(n) = DROPS.get_ptr_mut(DROP_TRUNCATED)
    {
        // SAFETY: per-CPU slot.
        unsafe { *n += published - MAX_PACKETS_PER_DOORBELL };
    }
    0
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
