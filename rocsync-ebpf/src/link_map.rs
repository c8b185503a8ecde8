//! The dynamic loader's link-map hook: `_dl_debug_state` runs after every change to a
//! process's link map, so a runtime library mapped by `dlopen` is seen before its first
//! call.

use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::{bpf_get_attach_cookie, bpf_send_signal},
    },
    macros::{map, uprobe},
    maps::HashMap,
    programs::ProbeContext,
};
use rocsync_common::{LinkMapRecord, NO_R_DEBUG, RECORD_LINK_MAP, drop_index};

use crate::{
    BPF_RB_FORCE_WAKEUP, EVENTS, SWITCH, TARGETS, count_drops,
    release::{CONTINUED, STOPPED, holder_gone},
};

const SIGSTOP: u32 = 19;
const SIGCONT: u32 = 18;
/// `r_debug.r_state` values (link.h).
const RT_CONSISTENT: u32 = 0;
const RT_DELETE: u32 = 2;
/// Offset of `r_state` in `struct r_debug` on x86-64.
const R_STATE_OFFSET: u64 = 24;

/// Each target's previous `r_state`, to tell a change that added objects from a dlclose.
#[map]
static LINK_STATE: HashMap<u32, u32> = HashMap::with_max_entries(1024, 0);

/// Whether this link-map change may have added objects: `RT_CONSISTENT` after anything
/// but `RT_DELETE`. The cookie is `_r_debug` minus `_dl_debug_state` in the loader, so
/// the probe finds `r_debug` from its own address.
#[inline(always)]
fn objects_added(ctx: &ProbeContext, tgid: u32) -> bool {
    // SAFETY: the context pointer is the program's own.
    let delta = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    if delta == NO_R_DEBUG {
        return true;
    }
    // SAFETY: the probe's registers; r_debug is read with the checked helper.
    let rip = unsafe { (*ctx.regs).rip };
    let at = rip.wrapping_add(delta).wrapping_add(R_STATE_OFFSET);
    // SAFETY: as above.
    let Ok(state) = (unsafe { bpf_probe_read_user(at as *const u32) }) else {
        return true;
    };
    // SAFETY: plain map lookup, copied out.
    let previous = unsafe { LINK_STATE.get(tgid) }.copied();
    let _ = LINK_STATE.insert(tgid, state, 0);
    state == RT_CONSISTENT && previous != Some(RT_DELETE) && previous != Some(RT_CONSISTENT)
}

/// On the dynamic loader's `_dl_debug_state`: the link map changed, so a HIP library may
/// just have been mapped. Stop the target and tell userspace, which attaches to new
/// libraries and continues the process before it can call into them.
#[uprobe]
pub(crate) fn link_map_changed(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: plain map lookup.
    match unsafe { TARGETS.get(tgid) } {
        Some(cfg) if cfg.stop_on_link_map != 0 => {}
        // The daemon's discovery: any process's library load is announced, never stopped.
        _ if SWITCH.get(0).is_some_and(|s| s.metrics != 0) => {
            announce(pid_tgid, 0, 0);
            return 0;
        }
        _ => return 0,
    }
    if !objects_added(&ctx, tgid) {
        return 0;
    }
    // rocsync is suspended (Ctrl-Z): held now, the target would wait for it; it scans
    // what this added once it resumes.
    // So is one whose rocsync is exiting (`release`).
    if SWITCH.get(0).is_some_and(|s| s.stops_off != 0) || holder_gone() {
        announce(pid_tgid, 0, 0);
        return 0;
    }
    // Reserve first: a target stopped without a notification would never be continued.
    let Some(mut slot) = EVENTS.reserve::<LinkMapRecord>(0) else {
        count_drops(drop_index::LINK_MAP, 1);
        return 0;
    };
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    // Listed before it stops, so no stop goes unlisted (a distinct time per stop: the
    // previous stop's is in CONTINUED once continued).
    // SAFETY: plain map lookup.
    let ns = match unsafe { CONTINUED.get(tgid) } {
        Some(&c) if c >= ns => c + 1,
        _ => ns,
    };
    let _ = STOPPED.insert(tgid, ns, 0);
    // SAFETY: signals the current process; SIGSTOP takes effect on return to user mode.
    let mut stopped = unsafe { bpf_send_signal(SIGSTOP) } == 0;
    // rocsync began to exit since the check above, and its exit may have read STOPPED
    // before this stop was listed: undo the stop (see `holder_gone`).
    if stopped && holder_gone() {
        // SAFETY: as above; a SIGCONT discards the SIGSTOP still pending.
        unsafe { bpf_send_signal(SIGCONT) };
        stopped = false;
    }
    if !stopped {
        // Not stopped: mark it continued.
        let _ = CONTINUED.insert(tgid, ns, 0);
    }
    slot.write(LinkMapRecord {
        kind: RECORD_LINK_MAP,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        stopped: stopped as u32,
        ns,
    });
    // The target is stopped until userspace reads this: wake it now.
    slot.submit(BPF_RB_FORCE_WAKEUP);
    0
}

/// A link-map change the daemon is told of (nobody stopped).
#[inline(always)]
fn announce(pid_tgid: u64, stopped: u32, ns: u64) {
    let Some(mut slot) = EVENTS.reserve::<LinkMapRecord>(0) else {
        count_drops(drop_index::LINK_MAP, 1);
        return;
    };
    slot.write(LinkMapRecord {
        kind: RECORD_LINK_MAP,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        stopped,
        ns,
    });
    slot.submit(BPF_RB_FORCE_WAKEUP);
}
