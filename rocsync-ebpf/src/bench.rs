//! Benchmark baselines (feature `bench`): the cheapest possible probes, to measure the
//! trap alone, and probes doing one part of a capture's work each, to measure the parts
//! (`bench/overhead-breakdown.md`). Not part of a capture.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, generated::bpf_get_smp_processor_id},
    macros::{map, uprobe, uretprobe},
    maps::Array,
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{
    Api, Cookie, EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT, TargetState,
};

use crate::{BPF_RB_NO_WAKEUP, EVENTS, dependency, fetch_add, nccl, target_cache};

#[uprobe]
pub(crate) fn empty_enter(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub(crate) fn empty_exit(_ctx: RetProbeContext) -> u32 {
    0
}

/// What file-wide probes ask of the target table at entry and exit, alone: the target
/// cache's answer (for a process not in the table, as the bench's driver is).
#[inline(always)]
fn lookup() -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    u32::from(target_cache::state(tgid) == TargetState::Capturing)
}

#[uprobe]
pub(crate) fn lookup_enter(_ctx: ProbeContext) -> u32 {
    lookup()
}

#[uretprobe]
pub(crate) fn lookup_exit(_ctx: RetProbeContext) -> u32 {
    lookup()
}

/// One ring record written at entry and one at exit, nothing else (the bench drains the
/// ring as a capture does).
#[uprobe]
pub(crate) fn ring_enter(_ctx: ProbeContext) -> u32 {
    if let Some(mut r) = EVENTS.reserve::<EntryRecord>(0) {
        r.write(EntryRecord {
            kind: RECORD_ENTRY,
            ..Default::default()
        });
        r.submit(BPF_RB_NO_WAKEUP);
    }
    0
}

#[uretprobe]
pub(crate) fn ring_exit(_ctx: RetProbeContext) -> u32 {
    if let Some(mut r) = EVENTS.reserve::<ExitRecord>(0) {
        r.write(ExitRecord {
            kind: RECORD_EXIT,
            ..Default::default()
        });
        r.submit(BPF_RB_NO_WAKEUP);
    }
    0
}

/// The least any two-record capture writes: who and when at entry, who, when and the
/// return value at exit; no identity of the call, no correlation, no filtering.
#[uprobe]
pub(crate) fn records_enter(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if let Some(mut r) = EVENTS.reserve::<EntryRecord>(0) {
        r.write(EntryRecord {
            kind: RECORD_ENTRY,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            // SAFETY: helper without preconditions.
            enter_ns: unsafe { bpf_ktime_get_ns() },
            ..Default::default()
        });
        r.submit(BPF_RB_NO_WAKEUP);
    }
    0
}

#[uretprobe]
pub(crate) fn records_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if let Some(mut r) = EVENTS.reserve::<ExitRecord>(0) {
        r.write(ExitRecord {
            kind: RECORD_EXIT,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            // SAFETY: helper without preconditions.
            exit_ns: unsafe { bpf_ktime_get_ns() },
            ret: ctx.ret::<i32>() as i64,
            ..Default::default()
        });
        r.submit(BPF_RB_NO_WAKEUP);
    }
    0
}

/// Per-CPU slot rings in memory-mapped arrays: what `records_*` write, with no helper call
/// for the transport (the ring's reserve and submit are two each). Per CPU, it would lose
/// one order across CPUs: captures use the call ring (`call_ring.rs`), one shared head
/// for all CPUs. Slot
/// `cpu * SLOTS_PER_CPU + pos` holds the record at `pos`; its `seq` is set to `pos + 1`
/// last, so the reader (`rocsync-bench`'s `slots.rs`) knows it complete. CPUs beyond
/// `SLOT_CPUS` share a ring (the add keeps positions unique).
const SLOT_CPUS: u32 = 4;
const SLOTS_PER_CPU: u32 = 32768;
/// Free slots a reservation needs: writers preempted between the check and the add can
/// overshoot by as many as are preempted there.
const SLOT_MARGIN: u32 = 64;
const BPF_F_MMAPABLE: u32 = 1 << 10;

#[repr(C)]
#[derive(Clone, Copy)]
struct Slot {
    seq: u64,
    rec: [u64; 8],
}

/// `head` written by the probes, `tail` by the reader: one cache line each.
#[repr(C)]
#[derive(Clone, Copy)]
struct Cursor {
    head: u64,
    _pad: [u64; 7],
    tail: u64,
    _pad2: [u64; 7],
}

#[map]
static SLOTS: Array<Slot> = Array::with_max_entries(SLOT_CPUS * SLOTS_PER_CPU, BPF_F_MMAPABLE);
#[map]
static CURSORS: Array<Cursor> = Array::with_max_entries(SLOT_CPUS, BPF_F_MMAPABLE);

#[inline(always)]
fn slot_write(rec: [u64; 8]) {
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() } % SLOT_CPUS;
    let Some(c) = CURSORS.get_ptr_mut(cpu) else {
        return;
    };
    // SAFETY: `c` is a valid map value; the reader only writes `tail`.
    let (head, tail) = unsafe {
        (
            core::ptr::read_volatile(&(*c).head),
            core::ptr::read_volatile(&(*c).tail),
        )
    };
    if head.wrapping_sub(tail) >= u64::from(SLOTS_PER_CPU - SLOT_MARGIN) {
        return; // the bench fails on fewer than two records per call
    }
    // SAFETY: as above; one atomic add reserves the position.
    let pos = unsafe { fetch_add(&raw mut (*c).head) };
    let index = cpu * SLOTS_PER_CPU + (pos as u32 & (SLOTS_PER_CPU - 1));
    let Some(s) = SLOTS.get_ptr_mut(index) else {
        return;
    };
    // SAFETY: a valid map value; the reader reads it only once `seq` says so.
    unsafe {
        (*s).rec = rec;
        core::ptr::write_volatile(&mut (*s).seq, pos + 1);
    }
}

#[uprobe]
pub(crate) fn slots_enter(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    slot_write([u64::from(RECORD_ENTRY), pid_tgid, now, 0, 0, 0, 0, 0]);
    0
}

#[uretprobe]
pub(crate) fn slots_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let ret = ctx.ret::<i32>() as i64 as u64;
    slot_write([u64::from(RECORD_EXIT), pid_tgid, now, ret, 0, 0, 0, 0]);
    0
}

/// One timestamp at entry and one at exit, alone (the result is compared so that the
/// program returns 0: a non-zero return sends the kernel down its perf-sample path).
#[uprobe]
pub(crate) fn clock_enter(_ctx: ProbeContext) -> u32 {
    // SAFETY: helper without preconditions.
    u32::from(unsafe { bpf_ktime_get_ns() } == 0)
}

#[uretprobe]
pub(crate) fn clock_exit(_ctx: RetProbeContext) -> u32 {
    // SAFETY: helper without preconditions.
    u32::from(unsafe { bpf_ktime_get_ns() } == 0)
}

/// The calling thread's id at entry and at exit, alone: one trivial helper call each.
#[uprobe]
pub(crate) fn who_enter(_ctx: ProbeContext) -> u32 {
    u32::from(bpf_get_current_pid_tgid() == 0)
}

#[uretprobe]
pub(crate) fn who_exit(_ctx: RetProbeContext) -> u32 {
    u32::from(bpf_get_current_pid_tgid() == 0)
}

/// (Program names stay under 16 bytes: the kernel keeps 15, and the bench finds a
/// program's statistics by its name.)
/// The daemon's dependency state as a stream wait updates it at entry (the stream's last
/// wait rewritten in place, its event's last record looked up), alone; the exit empty.
#[uprobe]
pub(crate) fn dep_enter(ctx: ProbeContext) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let arg = |i| ctx.arg::<u64>(i).unwrap_or(0);
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    u32::from(dependency::waited(&[arg(0), arg(1), arg(2)], tgid, ns))
}

/// A collective's bookkeeping at its entry (its communicator's number, its stream's last
/// collective), as `ncclAllReduce`'s probe does it, alone; the exit empty.
#[uprobe]
pub(crate) fn coll_enter(ctx: ProbeContext) -> u32 {
    let tgid = bpf_get_current_pid_tgid() >> 32;
    let arg = |i| ctx.arg::<u64>(i).unwrap_or(0);
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    let cookie = const { Cookie::of(Api::NcclAllReduce) };
    let word = nccl::collective(&ctx, cookie, &[arg(0), arg(1), arg(2)], tgid, ns);
    u32::from(word == 0)
}
