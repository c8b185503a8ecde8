//! Continuing a process a probe held at a library load without undoing its job control:
//! a SIGCONT discards the stop signals pending for a process, so a Ctrl-Z that reached a
//! held target would be lost with it.

use crate::os::{procfs, procfs::Stat};

/// Continues `pid`, which a probe of rocsync stopped — unless a job-control stop (Ctrl-Z's
/// SIGTSTP, SIGTTIN, SIGTTOU) reached it meanwhile and its process group is a live job:
/// then it stays stopped, as its user asked, and `fg` (SIGCONT) continues it. In an
/// orphaned process group the kernel discards such a stop, and so does this.
pub fn continue_process(pid: u32) {
    if job_stop_pending(pid) && in_a_live_job(pid) {
        return;
    }
    // SAFETY: kill(2) on a process rocsync's probe stopped.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
}

/// Whether a job-control stop is pending for the whole process (`ShdPnd` in
/// /proc/PID/status).
fn job_stop_pending(pid: u32) -> bool {
    let mask = crate::os::procfs::status_field(Some(pid), "ShdPnd")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .unwrap_or(0);
    [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU]
        .into_iter()
        .any(|s| mask & (1 << (s - 1)) != 0)
}

/// Whether `pid`'s process group is not orphaned (the kernel's test: some member's parent
/// is in another group of the same session), so a shell can continue it. Scans /proc:
/// only when a job-control stop is pending.
fn in_a_live_job(pid: u32) -> bool {
    let Some(own) = Stat::of(pid) else {
        return false;
    };
    procfs::pids()
        .into_iter()
        .filter_map(Stat::of)
        .filter(|s| s.pgrp == own.pgrp)
        .any(|s| Stat::of(s.ppid).is_some_and(|p| p.pgrp != own.pgrp && p.session == own.session))
}
