//! The HSA queue write path: queues as they are created and destroyed, agents as the
//! runtime enumerates them, and every AQL packet published at a doorbell.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::{map, uprobe, uretprobe},
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{
    AgentQuery, HandleKey, HsaQueue, MAX_PACKETS_PER_DOORBELL, PacketRecord, QUEUE_CREATED,
    QUEUE_DESTROYED, QUEUE_DISCOVERED, QueueCreate, QueueInfo, QueueRecord, RECORD_PACKET,
    RECORD_QUEUE, UNKNOWN_AGENT, drop_index,
};

use aya_log_ebpf::warn;

use crate::{BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, EVENTS, capturing, count_drops};

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
    if attribute != HSA_AGENT_INFO_DEVICE || capturing((pid_tgid >> 32) as u32).is_none() {
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

/// `hsa_queue_create(agent, size, type, callback, data, private, group, hsa_queue_t** out)`:
/// the out-parameter is the 8th argument, on the stack at `[rsp+16]`.
#[uprobe]
pub fn queue_create_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if capturing((pid_tgid >> 32) as u32).is_none() {
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
        warn!(
            &ctx,
            "hsa_queue_create: queue pointer at 0x{:x} unreadable", c.out
        );
        count_drops(drop_index::QUEUE, 1);
        return 0;
    };
    let Ok(q) = (unsafe { bpf_probe_read_user(queue as *const HsaQueue) }) else {
        warn!(&ctx, "hsa_queue_create: queue 0x{:x} unreadable", queue);
        count_drops(drop_index::QUEUE, 1);
        return 0;
    };
    // Numbered as the process's HIP device when its visible devices reorder agents.
    let ordinal = agent_ordinal(pid_tgid >> 32, c.agent);
    let ordinal =
        capturing((pid_tgid >> 32) as u32).map_or(ordinal, |cfg| cfg.device_of_agent(ordinal));
    let info = QueueInfo {
        queue,
        agent: c.agent,
        ordinal: ordinal as u64,
        base: q.base_address,
        size: q.size as u64,
        last: u64::MAX,
        rung: u64::MAX,
        stalled: u64::MAX,
    };
    let tgid = pid_tgid >> 32;
    let doorbell = HandleKey {
        tgid,
        handle: q.doorbell_signal,
    };
    if DOORBELLS.insert(doorbell, info, 0).is_err() {
        warn!(
            &ctx,
            "queue 0x{:x} not traced: the doorbell map is full", queue
        );
        count_drops(drop_index::QUEUE, 1);
        return 0;
    }
    emit_queue(pid_tgid, &info, q.doorbell_signal, q.id, QUEUE_CREATED);
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
    emit_queue(pid_tgid, &info, q.doorbell_signal, q.id, QUEUE_DESTROYED);
    0
}

#[inline(always)]
fn emit_queue(pid_tgid: u64, info: &QueueInfo, doorbell: u64, id: u64, created: u32) {
    let Some(mut slot) = EVENTS.reserve::<QueueRecord>(0) else {
        count_drops(drop_index::QUEUE, 1);
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

/// `amd_signal_t` (amd_hsa_signal.h): `kind` at 0 (doorbells are -1, legacy ones -2),
/// `queue_ptr` at 48.
const AMD_SIGNAL_QUEUE_PTR: u64 = 48;
const AMD_SIGNAL_KIND_DOORBELL: i64 = -1;
const AMD_SIGNAL_KIND_LEGACY_DOORBELL: i64 = -2;

/// A store to a signal not known as a doorbell, in a traced process: if the signal is a
/// hardware queue's doorbell (a queue created before the capture), learn the queue there,
/// once, reading from the oldest packet not yet consumed.
#[inline(always)]
fn discover(
    ctx: &ProbeContext,
    pid_tgid: u64,
    key: HandleKey,
    value: u64,
) -> Option<*mut QueueInfo> {
    capturing((pid_tgid >> 32) as u32)?;
    // SAFETY: target memory through the checked helper.
    let kind = unsafe { bpf_probe_read_user(key.handle as *const i64) }.ok()?;
    if kind != AMD_SIGNAL_KIND_DOORBELL && kind != AMD_SIGNAL_KIND_LEGACY_DOORBELL {
        return None;
    }
    let at = key.handle + AMD_SIGNAL_QUEUE_PTR;
    // SAFETY: as above.
    let queue = unsafe { bpf_probe_read_user(at as *const u64) }.ok()?;
    let q = unsafe { bpf_probe_read_user(queue as *const HsaQueue) }.ok()?;
    if q.doorbell_signal != key.handle {
        return None; // not the queue this doorbell rings
    }
    let read_at = queue + AMD_QUEUE_READ_INDEX;
    // SAFETY: as above.
    let last = match unsafe { bpf_probe_read_user(read_at as *const u64) } {
        Ok(read) if read <= value => read.wrapping_sub(1),
        _ => value.wrapping_sub(1),
    };
    let info = QueueInfo {
        queue,
        agent: 0,
        ordinal: UNKNOWN_AGENT as u64,
        base: q.base_address,
        size: q.size as u64,
        last,
        rung: u64::MAX,
        stalled: u64::MAX,
    };
    if DOORBELLS.insert(key, info, 0).is_err() {
        warn!(
            ctx,
            "queue 0x{:x} not traced: the doorbell map is full", queue
        );
        count_drops(drop_index::QUEUE, 1);
        return None;
    }
    emit_queue(pid_tgid, &info, key.handle, q.id, QUEUE_DISCOVERED);
    DOORBELLS.get_ptr_mut(key)
}

/// `amd_queue_t.read_dispatch_id`: the packet processor's read index, beside the
/// `hsa_queue_t` ROCr hands out (amd_hsa_queue.h).
const AMD_QUEUE_READ_INDEX: u64 = 128;
/// `HSA_PACKET_TYPE_INVALID`: a slot not yet written, or already consumed.
const PACKET_TYPE_INVALID: u8 = 1;

/// `hsa_signal_store_*(signal, value)`: on a known doorbell, `value` is the write index of
/// the last packet published. Every packet since the last one read is read from the ring
/// (bounded; the excess is counted as truncated), up to the highest index any doorbell
/// announced: with several producers, doorbells may ring out of order.
#[uprobe]
pub fn doorbell(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let signal = ctx.arg::<u64>(0).unwrap_or(0);
    let key = HandleKey {
        tgid: pid_tgid >> 32,
        handle: signal,
    };
    // Most signal stores are not doorbells: one lookup and out.
    let info = match DOORBELLS.get_ptr_mut(key) {
        Some(info) => info,
        None => match discover(&ctx, pid_tgid, key, ctx.arg::<u64>(1).unwrap_or(0)) {
            Some(info) => info,
            None => return 0,
        },
    };
    let Some(cfg) = capturing((pid_tgid >> 32) as u32) else {
        return 0;
    };
    let agents = cfg.agents;
    let value = ctx.arg::<u64>(1).unwrap_or(0);
    // SAFETY: the map value stays valid for the program's run.
    let q = unsafe { *info };
    let rung = if q.rung == u64::MAX || value > q.rung {
        value
    } else {
        q.rung
    };
    // SAFETY: as above.
    unsafe { (*info).rung = rung };
    // Nothing new when every announced packet was read (a store nested in another, or a
    // repeated ring). `last` starts at -1: the queue was seen created, so every packet
    // from index 0 on is the target's.
    if q.last != u64::MAX && rung <= q.last {
        return 0;
    }
    let first = q.last.wrapping_add(1);
    // A filtered agent's packets cost the lookup and nothing more.
    if agents != 0 && (q.ordinal >= 64 || agents & (1u64 << q.ordinal) == 0) {
        // SAFETY: as above.
        unsafe { (*info).last = rung };
        return 0;
    }
    if q.size == 0 || q.size & (q.size - 1) != 0 {
        warn!(
            &ctx,
            "queue 0x{:x}: ring size {} is not a power of two", q.queue, q.size
        );
        // SAFETY: as above.
        unsafe { (*info).last = rung };
        return 0;
    }
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    let (last, stalled) = read_packets(&ctx, pid_tgid, &q, first, rung, ns);
    // SAFETY: as above.
    unsafe {
        (*info).last = last;
        (*info).stalled = stalled;
    }
    0
}

/// Reads packets `first..=rung` (at most [`MAX_PACKETS_PER_DOORBELL`]); returns the index
/// up to which every packet was read or counted. A slot still INVALID was not written yet
/// (another producer's reservation): reading stops before it, and the next doorbell
/// resumes there — unless the packet processor is already past it, in which case it was
/// consumed before it could be read, and is counted. Also returns the unwritten slot it
/// stopped at, if any.
#[inline(always)]
fn read_packets(
    ctx: &ProbeContext,
    pid_tgid: u64,
    q: &QueueInfo,
    first: u64,
    rung: u64,
    ns: u64,
) -> (u64, u64) {
    for i in 0..MAX_PACKETS_PER_DOORBELL {
        let index = first + i;
        if index > rung {
            return (rung, u64::MAX);
        }
        let at = q.base + (index & (q.size - 1)) * 64;
        // SAFETY: target memory through the checked helper.
        let Ok(packet) = (unsafe { bpf_probe_read_user(at as *const [u8; 64]) }) else {
            warn!(
                ctx,
                "queue 0x{:x}: ring slot 0x{:x} unreadable", q.queue, at
            );
            return (rung, u64::MAX);
        };
        if packet[0] == PACKET_TYPE_INVALID {
            let read_at = q.queue + AMD_QUEUE_READ_INDEX;
            // SAFETY: as above.
            let read = unsafe { bpf_probe_read_user(read_at as *const u64) }.unwrap_or(0);
            if read <= index {
                if q.stalled != index {
                    warn!(
                        ctx,
                        "queue 0x{:x}: packet {} not written when the doorbell rang {}",
                        q.queue,
                        index,
                        rung
                    );
                }
                return (index.wrapping_sub(1), index);
            }
            count_drops(drop_index::PACKET_UNREAD, 1);
            continue;
        }
        let Some(mut slot) = EVENTS.reserve::<PacketRecord>(0) else {
            count_drops(drop_index::PACKET, 1);
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
    let published = rung - first + 1;
    if published > MAX_PACKETS_PER_DOORBELL {
        count_drops(drop_index::TRUNCATED, published - MAX_PACKETS_PER_DOORBELL);
    }
    (rung, u64::MAX)
}
