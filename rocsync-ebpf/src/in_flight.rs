//! The call each counted thread is in (daemon mode): its start, for the wait histograms,
//! the stall and hang triggers. Bounded by user, not by recency: a blocked call's entry is
//! the one touched least recently, so an LRU gave it up first (one user's thread churn
//! pushed a root process's hang out). A thread's entry lives from its first counted call
//! to its exit (rewritten in place between calls: no allocation per call); a user's live
//! threads hold at most `IN_FLIGHT_PER_USER` entries; a start not kept is counted by why.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_uid_gid},
    macros::{map, raw_tracepoint},
    maps::{HashMap, PerCpuArray},
    programs::RawTracePointContext,
};
use rocsync_common::{
    IN_FLIGHT_FULL, IN_FLIGHT_PER_USER, IN_FLIGHT_THREADS, IN_FLIGHT_USER_SHARE, IN_FLIGHT_USERS,
    PendingCall,
};

use crate::fetch_add_by;

/// The call each thread is in (its start), by `pid_tgid`; a returned call's `api` is
/// `u32::MAX`.
#[map]
static PENDING: HashMap<u64, PendingCall> = HashMap::with_max_entries(IN_FLIGHT_THREADS, 0);
/// Entries each user's live threads hold in `PENDING`.
#[map]
static PENDING_PER_USER: HashMap<u32, u64> = HashMap::with_max_entries(IN_FLIGHT_USERS, 0);
/// Call starts not kept, by reason (`IN_FLIGHT_USER_SHARE`, `IN_FLIGHT_FULL`).
#[map]
static IN_FLIGHT_REFUSED: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

/// The thread's entry, if it has one.
#[inline(always)]
pub(crate) fn entry(pid_tgid: u64) -> Option<*mut PendingCall> {
    PENDING.get_ptr_mut(pid_tgid)
}

/// The thread `pid_tgid` entered `call`: rewritten in place, or its first entry, within
/// its user's share.
#[inline(always)]
pub(crate) fn begin(pid_tgid: u64, call: PendingCall) {
    if let Some(p) = PENDING.get_ptr_mut(pid_tgid) {
        // SAFETY: the thread's own entry, valid for the program's run. The user it is
        // counted against stays the one of its first call.
        unsafe {
            let uid = (*p).uid;
            *p = PendingCall { uid, ..call };
        }
        return;
    }
    let uid = bpf_get_current_uid_gid() as u32;
    let Some(held) = user_count(uid) else {
        refused(IN_FLIGHT_FULL);
        return;
    };
    // Taken before it is checked: CPUs racing for a user's last entry cannot pass its
    // share together.
    if fetch_add_by(held, 1) >= IN_FLIGHT_PER_USER as u64 {
        fetch_add_by(held, u64::MAX);
        refused(IN_FLIGHT_USER_SHARE);
        return;
    }
    if PENDING
        .insert(pid_tgid, PendingCall { uid, ..call }, BPF_NOEXIST as u64)
        .is_err()
    {
        fetch_add_by(held, u64::MAX);
        refused(IN_FLIGHT_FULL);
    }
}

/// `uid`'s count of entries, made at its first.
#[inline(always)]
fn user_count(uid: u32) -> Option<*mut u64> {
    if let Some(n) = PENDING_PER_USER.get_ptr_mut(uid) {
        return Some(n);
    }
    // Another CPU may make it meanwhile: either way there is one after.
    let _ = PENDING_PER_USER.insert(uid, 0, BPF_NOEXIST as u64);
    PENDING_PER_USER.get_ptr_mut(uid)
}

#[inline(always)]
fn refused(why: u32) {
    if let Some(n) = IN_FLIGHT_REFUSED.get_ptr_mut(why) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *n += 1 };
    }
}

/// `sched_process_exit(task)`, in every exiting thread: its entry goes, and its user's
/// share with it (a thread that made no counted call costs one lookup).
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub(crate) fn thread_exit(_ctx: RawTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: plain map lookup, copied out.
    let Some(uid) = (unsafe { PENDING.get(pid_tgid) }).map(|p| p.uid) else {
        return 0;
    };
    // Only the thread itself removes its entry: counted back once.
    if PENDING.remove(pid_tgid).is_ok()
        && let Some(n) = PENDING_PER_USER.get_ptr_mut(uid)
    {
        fetch_add_by(n, u64::MAX);
    }
    0
}
