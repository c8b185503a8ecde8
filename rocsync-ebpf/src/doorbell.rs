//! The doorbell probe: every AQL packet published since the last one read, read from the
//! ring at `hsa_signal_store_*`, with queues created before the capture learnt at their
//! first doorbell.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user},
    macros::uprobe,
    programs::ProbeContext,
};
use aya_log_ebpf::warn;
use rocsync_common::{
    HandleKey, HsaQueue, MAX_PACKETS_PER_DOORBELL, PacketRecord, QUEUE_DISCOVERED, QueueInfo,
    RECORD_PACKET, UNKNOWN_AGENT, drop_index,
};

use crate::{
    BPF_RB_NO_WAKEUP, EVENTS, count_drops,
    hsa::{DOORBELLS, emit_queue},
    metrics::count_packet,
    observed,
};

/// `amd_signal_t` (amd_hsa_signal.h): `kind` at 0 (doorbells are -1, legacy ones -2),
/// `queue_ptr` at 48.
const AMD_SIGNAL_QUEUE_PTR: u64 = 48;
const AMD_SIGNAL_KIND_DOORBELL: i64 = -1;
const AMD_SIGNAL_KIND_LEGACY_DOORBELL: i64 = -2;

/// A store to a signal not known as a doorbell, in a traced or counted process: if the signal is a
/// hardware queue's doorbell (a queue created before the capture), learn the queue there,
/// once, reading from the oldest packet not yet consumed.
#[inline(always)]
fn discover(
    ctx: &ProbeContext,
    pid_tgid: u64,
    key: HandleKey,
    value: u64,
) -> Option<*mut QueueInfo> {
    observed((pid_tgid >> 32) as u32)?;
    // SAFETY: target memory through the checked helper.
    let kind = unsafe { bpf_probe_read_user(key.handle as *const i64) }.ok()?;
    if kind != AMD_SIGNAL_KIND_DOORBELL && kind != AMD_SIGNAL_KIND_LEGACY_DOORBELL {
        return None;
    }
    let at = key.handle + AMD_SIGNAL_QUEUE_PTR;
    // SAFETY: as above.
    let queue = unsafe { bpf_probe_read_user(at as *const u64) }.ok()?;
    // SAFETY: as above.
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
/// announced: with several producers, doorbells may ring out of order. Where nothing
/// records them (the daemon counting, an agent filtered out), their types are counted
/// when the process is counted, and nothing else is read.
#[uprobe]
pub(crate) fn doorbell(ctx: ProbeContext) -> u32 {
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
    let Some(cfg) = observed((pid_tgid >> 32) as u32) else {
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
    if q.size == 0 || q.size & (q.size - 1) != 0 {
        warn!(
            &ctx,
            "queue 0x{:x}: ring size {} is not a power of two", q.queue, q.size
        );
        // SAFETY: as above.
        unsafe { (*info).last = rung };
        return 0;
    }
    let counted = cfg.metrics != 0;
    // A filtered agent's packets cost the lookup (and their count) and nothing more.
    let filtered = agents != 0 && (q.ordinal >= 64 || agents & (1u64 << q.ordinal) == 0);
    if cfg.capture == 0 || filtered {
        let (last, stalled) = if counted {
            count_packets(&q, first, rung)
        } else {
            (rung, u64::MAX)
        };
        // SAFETY: as above.
        unsafe {
            (*info).last = last;
            (*info).stalled = stalled;
        }
        return 0;
    }
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    let (last, stalled) = read_packets(&ctx, pid_tgid, &q, first, rung, ns, counted);
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
    counted: bool,
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
        if counted {
            count_packet(q.ordinal, packet[0]);
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

/// Counts the types of packets `first..=rung` (at most [`MAX_PACKETS_PER_DOORBELL`]),
/// reading each one's header only; stops, as [`read_packets`] does, at a slot not yet
/// written. Returns the index up to which every packet was counted, and the unwritten
/// slot it stopped at, if any.
#[inline(always)]
fn count_packets(q: &QueueInfo, first: u64, rung: u64) -> (u64, u64) {
    for i in 0..MAX_PACKETS_PER_DOORBELL {
        let index = first + i;
        if index > rung {
            return (rung, u64::MAX);
        }
        let at = q.base + (index & (q.size - 1)) * 64;
        // SAFETY: target memory through the checked helper.
        let Ok(header) = (unsafe { bpf_probe_read_user(at as *const u8) }) else {
            return (rung, u64::MAX);
        };
        if header == PACKET_TYPE_INVALID {
            let read_at = q.queue + AMD_QUEUE_READ_INDEX;
            // SAFETY: as above.
            let read = unsafe { bpf_probe_read_user(read_at as *const u64) }.unwrap_or(0);
            if read <= index {
                return (index.wrapping_sub(1), index);
            }
            count_drops(drop_index::PACKET_UNREAD, 1);
            continue;
        }
        count_packet(q.ordinal, header);
    }
    let published = rung - first + 1;
    if published > MAX_PACKETS_PER_DOORBELL {
        count_drops(drop_index::TRUNCATED, published - MAX_PACKETS_PER_DOORBELL);
    }
    (rung, u64::MAX)
}
