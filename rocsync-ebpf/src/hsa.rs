//! The HSA queue write path: queues as they are created and destroyed, and agents as the
//! runtime enumerates them (the packets published at doorbells: `doorbell`).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::{map, uprobe, uretprobe},
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use aya_log_ebpf::warn;
use rocsync_common::{
    AgentQuery, HandleKey, HsaQueue, QUEUE_CREATED, QUEUE_DESTROYED, QueueCreate, QueueInfo,
    QueueRecord, RECORD_QUEUE, drop_index,
};

use crate::{BPF_RB_FORCE_WAKEUP, EVENTS, count_drops, observed};

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

/// Threads inside an `hsa_iterate_agents` entered while their process was observed, by
/// `pid_tgid`: only an enumeration seen from its start numbers agents (one caught midway
/// would number its later GPUs from 0; its agents are numbered by first queue instead).
#[map]
static ITERATING: HashMap<u64, u8> = HashMap::with_max_entries(4096, 0);

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
    // SAFETY: as above.
    let next = unsafe { NEXT_ORDINAL.get(tgid) }.copied().unwrap_or(0);
    let _ = NEXT_ORDINAL.insert(tgid, next + 1, 0);
    let _ = AGENT_ORDINALS.insert(key, next, 0);
    next
}

#[uprobe]
pub(crate) fn iterate_agents_enter(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if observed((pid_tgid >> 32) as u32).is_some() {
        let _ = ITERATING.insert(pid_tgid, 1, 0);
    }
    0
}

#[uretprobe]
pub(crate) fn iterate_agents_exit(_ctx: RetProbeContext) -> u32 {
    let _ = ITERATING.remove(bpf_get_current_pid_tgid());
    0
}

#[uprobe]
pub(crate) fn agent_info_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let attribute = ctx.arg::<u64>(1).unwrap_or(0) & 0xffff_ffff;
    // SAFETY: a plain map lookup.
    let enumerating = unsafe { ITERATING.get(pid_tgid) }.is_some();
    if attribute != HSA_AGENT_INFO_DEVICE || !enumerating {
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
pub(crate) fn agent_info_exit(ctx: RetProbeContext) -> u32 {
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
pub(crate) static DOORBELLS: HashMap<HandleKey, QueueInfo> = HashMap::with_max_entries(4096, 0);

/// `hsa_queue_create(agent, size, type, callback, data, private, group, hsa_queue_t** out)`:
/// the out-parameter is the 8th argument, on the stack at `[rsp+16]`.
#[uprobe]
pub(crate) fn queue_create_enter(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if observed((pid_tgid >> 32) as u32).is_none() {
        return 0;
    }
    // SAFETY: the context is the probe's pt_regs; the stack slot is read with the checked
    // helper.
    let sp = unsafe { (*ctx.regs).rsp };
    // SAFETY: as above.
    let out = unsafe { bpf_probe_read_user((sp + 16) as *const u64) }.unwrap_or(0);
    let agent = ctx.arg::<u64>(0).unwrap_or(0);
    let _ = QUEUE_CREATES.insert(pid_tgid, QueueCreate { agent, out }, 0);
    0
}

#[uretprobe]
pub(crate) fn queue_create_exit(ctx: RetProbeContext) -> u32 {
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
    // SAFETY: target memory through the checked helper; a fault yields an error.
    let Ok(q) = (unsafe { bpf_probe_read_user(queue as *const HsaQueue) }) else {
        warn!(&ctx, "hsa_queue_create: queue 0x{:x} unreadable", queue);
        count_drops(drop_index::QUEUE, 1);
        return 0;
    };
    // Numbered as the process's HIP device when its visible devices reorder agents.
    let ordinal = agent_ordinal(pid_tgid >> 32, c.agent);
    let ordinal =
        observed((pid_tgid >> 32) as u32).map_or(ordinal, |cfg| cfg.device_of_agent(ordinal));
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
pub(crate) fn queue_destroy(ctx: ProbeContext) -> u32 {
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
pub(crate) fn emit_queue(pid_tgid: u64, info: &QueueInfo, doorbell: u64, id: u64, created: u32) {
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
