//! rocsync's own exit, in the kernel: when the rocsync process that loaded these probes
//! exits — however: a SIGKILL of its whole cgroup leaves no helper process to do it —
//! every target its loader probe stopped and nothing continued is continued here, before
//! its descriptors (and so the probes) are closed; and the loader probe stops nothing
//! after. The kernel functions are called through placeholders (`rocsync_common::KFUNCS`).

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, generated::bpf_for_each_map_elem},
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap},
    programs::BtfTracePointContext,
};
use rocsync_common::{
    KFUNC_SEND_SIGNAL_TASK, KFUNC_TASK_FROM_PID, KFUNC_TASK_RELEASE, RELEASE_GONE, RELEASE_HOLDER,
    RELEASE_SLOTS,
};

use crate::fetch_add_by;

const SIGCONT: i32 = 18;

/// The latest stop of each process this capture stopped (tgid → stop time), written only
/// by the loader probe (`link_map.rs`). Userspace writes the stop time it continued into CONTINUED, only there; a process
/// whose latest stop is not the one continued is still stopped — so rocsync's exit paths,
/// its exit program (here) and its watchdog know what to continue whenever it dies.
#[map]
pub(crate) static STOPPED: HashMap<u32, u64> = HashMap::with_max_entries(1024, 0);
#[map]
pub(crate) static CONTINUED: HashMap<u32, u64> = HashMap::with_max_entries(1024, 0);

/// `enum pid_type`: the signal goes to the whole process.
const PIDTYPE_TGID: u32 = 1;

/// The holder's tgid (set by userspace at load) and whether it has begun to exit
/// (`rocsync_common::RELEASE_*`).
#[map]
static RELEASE: Array<u64> = Array::with_max_entries(RELEASE_SLOTS, 0);

/// Whether the holder has begun to exit, read with a full barrier: the loader probe asks
/// after listing and sending its stop, the exit program marks it before reading the list,
/// so one of the two always sees the other's stop.
#[inline(always)]
pub(crate) fn holder_gone() -> bool {
    match RELEASE.get_ptr_mut(RELEASE_GONE) {
        Some(gone) => fetch_add_by(gone, 0) != 0,
        None => false,
    }
}

/// `sched_process_exit`, in the exiting task (before its files are closed): the holder's
/// main thread leaving ends the holder (rocsync never ends its main thread alone).
#[btf_tracepoint(function = "sched_process_exit")]
pub(crate) fn holder_exit(_ctx: BtfTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = pid_tgid >> 32;
    if pid_tgid as u32 as u64 != tgid {
        return 0;
    }
    let (Some(holder), Some(gone)) = (
        RELEASE.get(RELEASE_HOLDER).copied(),
        RELEASE.get_ptr_mut(RELEASE_GONE),
    ) else {
        return 0;
    };
    if holder == 0 || holder != tgid {
        return 0;
    }
    fetch_add_by(gone, 1);
    // SAFETY: the map's own address, and a callback of the helper's signature.
    unsafe {
        bpf_for_each_map_elem(
            (&raw const STOPPED).cast_mut().cast(),
            continue_pending as *mut c_void,
            core::ptr::null_mut(),
            0,
        )
    };
    0
}

/// One entry of STOPPED: continues the process if its latest stop is not continued, and
/// records it continued. A job-control stop that reached the target meanwhile is lost with
/// it (userspace's `continue_process` keeps one), as the holder is gone.
#[inline(never)]
extern "C" fn continue_pending(
    _map: *mut c_void,
    pid: *const u32,
    stop: *const u64,
    _ctx: *mut c_void,
) -> i64 {
    // SAFETY: the helper's key and value pointers, valid for the call.
    let (pid, stop) = unsafe { (*pid, *stop) };
    // SAFETY: plain map lookup, copied out.
    if unsafe { CONTINUED.get(pid) }.copied() == Some(stop) {
        return 0;
    }
    // SAFETY: kfuncs through their placeholders (see `rocsync_common::KFUNCS`); the task
    // reference taken is released before returning.
    unsafe {
        let from_pid: unsafe extern "C" fn(i32) -> *mut c_void =
            core::mem::transmute(KFUNC_TASK_FROM_PID as usize);
        let task = from_pid(pid as i32);
        if task.is_null() {
            return 0;
        }
        let send: unsafe extern "C" fn(*mut c_void, i32, u32, u64) -> i32 =
            core::mem::transmute(KFUNC_SEND_SIGNAL_TASK as usize);
        send(task, SIGCONT, PIDTYPE_TGID, 0);
        let release: unsafe extern "C" fn(*mut c_void) =
            core::mem::transmute(KFUNC_TASK_RELEASE as usize);
        release(task);
    }
    let _ = CONTINUED.insert(pid, stop, 0);
    0
}
