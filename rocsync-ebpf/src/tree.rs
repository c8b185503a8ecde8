//! The traced process tree, kept in the kernel: a child process forked by a followed
//! target enters `TARGETS` with its parent's settings before it runs a single instruction
//! (the fork tracepoint runs in the parent, before the child is woken), so its first call
//! is traced; an exec keeps the tgid, and the loader hook sees the new image's libraries.
//! Raw tracepoints need no tracefs; `task_struct` offsets come from the kernel's BTF.

use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel,
    },
    macros::{map, raw_tracepoint},
    maps::Array,
    programs::RawTracePointContext,
};
use rocsync_common::{
    PROCESS_EXEC, PROCESS_EXIT, PROCESS_FORK, ProcessRecord, RECORD_PROCESS, RECORD_THREAD,
    TaskLayout, ThreadRecord, drop_index,
};

use crate::{BPF_RB_FORCE_WAKEUP, EVENTS, SWITCH, TARGETS, count_drops, target_cache};

/// `task_struct`'s `pid` and `tgid` offsets (slot 0), set by userspace from BTF.
#[map]
static TASK_LAYOUT: Array<TaskLayout> = Array::with_max_entries(1, 0);

/// `sched_process_fork(parent, child)`: a followed parent's child process (not a thread)
/// is traced with the parent's settings.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub(crate) fn process_fork(ctx: RawTracePointContext) -> i32 {
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    // SAFETY: plain map lookup, copied out.
    let Some(cfg) = (unsafe { TARGETS.get(parent) }).copied() else {
        return 0;
    };
    if cfg.follow == 0 {
        return 0;
    }
    let Some(layout) = TASK_LAYOUT.get(0).copied() else {
        return 0;
    };
    if layout.pid == 0 {
        return 0;
    }
    let child: *const u8 = ctx.arg(1);
    // SAFETY: kernel memory of the tracepoint's own task argument, read with the checked
    // helper at offsets from the running kernel's BTF.
    let (Ok(pid), Ok(tgid)) = (unsafe {
        (
            bpf_probe_read_kernel(child.wrapping_add(layout.pid as usize) as *const i32),
            bpf_probe_read_kernel(child.wrapping_add(layout.tgid as usize) as *const i32),
        )
    }) else {
        return 0;
    };
    if pid != tgid {
        return 0; // a new thread of a traced process: already covered by its tgid
    }
    let _ = TARGETS.insert(tgid as u32, cfg, 0);
    target_cache::changed();
    notify(PROCESS_FORK, parent, tgid as u32);
    0
}

/// `sched_process_exit(task)`, in the exiting task: a traced process's main thread left,
/// or another of its threads, whose name goes with it (procfs has it no more by the time
/// its calls are read).
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub(crate) fn process_exit(_ctx: RawTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain map lookup.
    if unsafe { TARGETS.get(tgid) }.is_none() {
        return 0;
    }
    match pid_tgid as u32 == tgid {
        true => notify(PROCESS_EXIT, tgid, 0),
        false => thread_gone(tgid, pid_tgid as u32),
    }
    0
}

/// A thread's name as it leaves. Lost when the ring is full (counted): the thread is then
/// named `thread TID`, as before.
#[inline(always)]
fn thread_gone(pid: u32, tid: u32) {
    let Some(mut slot) = EVENTS.reserve::<ThreadRecord>(0) else {
        count_drops(drop_index::THREAD_NAME, 1);
        return;
    };
    slot.write(ThreadRecord {
        kind: RECORD_THREAD,
        pid,
        tid,
        pad: 0,
        comm: bpf_get_current_comm().unwrap_or_default(),
    });
    slot.submit(0);
}

/// `sched_process_exec`, in the process: the daemon looks at every new image (it may
/// link a GPU runtime) instead of polling every process.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub(crate) fn process_exec(_ctx: RawTracePointContext) -> i32 {
    if SWITCH.get(0).is_some_and(|s| s.metrics != 0) {
        notify(PROCESS_EXEC, (bpf_get_current_pid_tgid() >> 32) as u32, 0);
    }
    0
}

/// Tells userspace (which names the process's output and rescans its libraries). A lost
/// notice costs no call: the kernel already traces the child; a rescan finds it later.
#[inline(always)]
fn notify(event: u32, pid: u32, child: u32) {
    let Some(mut slot) = EVENTS.reserve::<ProcessRecord>(0) else {
        return;
    };
    slot.write(ProcessRecord {
        kind: RECORD_PROCESS,
        event,
        pid,
        child,
        // SAFETY: helper without preconditions.
        ns: unsafe { bpf_ktime_get_ns() },
    });
    slot.submit(BPF_RB_FORCE_WAKEUP);
}
