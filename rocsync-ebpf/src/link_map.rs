//! The dynamic loader's link-map hook: `_dl_debug_state` runs after every change to a
//! process's link map, so a runtime library mapped by `dlopen` is seen before its first
//! call.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, generated::bpf_send_signal},
    macros::uprobe,
    programs::ProbeContext,
};
use rocsync_common::{LinkMapRecord, RECORD_LINK_MAP, drop_index};

use crate::{BPF_RB_FORCE_WAKEUP, EVENTS, TARGETS, count_drops};

const SIGSTOP: u32 = 19;

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
        count_drops(drop_index::LINK_MAP, 1);
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
