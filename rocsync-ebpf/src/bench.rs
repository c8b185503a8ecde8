//! Benchmark baselines (feature `bench`): the cheapest possible probes, to measure the
//! trap alone, and probes doing one part of a capture's work each, to measure the parts
//! (`bench/overhead-breakdown.md`). Not part of a capture.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT};

use crate::{BPF_RB_NO_WAKEUP, EVENTS, TARGETS};

#[uprobe]
pub fn empty_enter(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn empty_exit(_ctx: RetProbeContext) -> u32 {
    0
}

/// The target-table lookup file-wide probes make at entry and exit, alone.
#[inline(always)]
fn lookup() -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: plain map lookup; the result only decides the (ignored) return value.
    let _ = unsafe { TARGETS.get(tgid) }.is_some();
    0
}

#[uprobe]
pub fn lookup_enter(_ctx: ProbeContext) -> u32 {
    lookup()
}

#[uretprobe]
pub fn lookup_exit(_ctx: RetProbeContext) -> u32 {
    lookup()
}

/// One ring record written at entry and one at exit, nothing else (the bench drains the
/// ring as a capture does).
#[uprobe]
pub fn ring_enter(_ctx: ProbeContext) -> u32 {
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
pub fn ring_exit(_ctx: RetProbeContext) -> u32 {
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
pub fn records_enter(_ctx: ProbeContext) -> u32 {
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
pub fn records_exit(ctx: RetProbeContext) -> u32 {
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
