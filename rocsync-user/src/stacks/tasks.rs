//! A process's threads as the kernel lists them (`/proc/PID/task`): their names, the
//! tid each has inside the process's own PID namespace (`NSpid:`), and where a thread
//! in a system call is (`syscall`: its user stack and instruction pointers).

use std::collections::HashMap;

use crate::os::procfs;

/// The host tids of `pid`'s threads, `blocked` first, then the others by tid.
pub(super) fn ordered(pid: u32, blocked: u32) -> Vec<u32> {
    let mut tids = procfs::threads(pid);
    tids.sort_unstable();
    if let Some(i) = tids.iter().position(|&t| t == blocked) {
        tids.remove(i);
    }
    // Listed even if gone (or never one of pid's): the trace is for it, and says so.
    tids.insert(0, blocked);
    tids
}

pub(super) fn name(pid: u32, tid: u32) -> String {
    procfs::thread_name(pid, tid).unwrap_or_default()
}

/// Each thread's tid in the process's own (innermost) PID namespace → its host tid.
/// Python knows its threads by the former (`PyThreadState.native_thread_id`).
pub(super) fn namespace_tids(pid: u32) -> HashMap<u64, u32> {
    procfs::threads(pid)
        .into_iter()
        .filter_map(|tid| {
            let status = procfs::read(pid, &format!("task/{tid}/status")).ok()?;
            Some((innermost(&status)?, tid))
        })
        .collect()
}

/// The last id of a status file's `NSpid:` line (the only one outside a namespace).
fn innermost(status: &str) -> Option<u64> {
    let ids = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    ids.split_whitespace().last()?.parse().ok()
}

/// Where a thread blocked in a system call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InSyscall {
    pub number: i64,
    pub sp: u64,
    pub ip: u64,
}

/// What a thread on a CPU is said to be doing.
pub(super) const RUNNING: &str = "running on a CPU";

/// `/proc/PID/task/TID/syscall`: the call, its six arguments, then the user stack and
/// instruction pointers. The kernel reads them while the thread is off its CPU and never
/// stops it; a running thread reads `running`.
pub(super) fn syscall(pid: u32, tid: u32) -> Result<InSyscall, String> {
    let file = format!("task/{tid}/syscall");
    let text =
        procfs::read(pid, &file).map_err(|e| format!("cannot read /proc/{pid}/{file}: {e}"))?;
    parse_syscall(&text)
}

fn parse_syscall(text: &str) -> Result<InSyscall, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    match fields.as_slice() {
        ["running"] => Err(format!("{RUNNING}, not blocked in a system call")),
        // `-1 sp ip`: stopped outside a system call (a fault, a signal).
        [nr, rest @ ..] if rest.len() == 8 || rest.len() == 2 => {
            let number: i64 = nr
                .parse()
                .map_err(|_| format!("unexpected syscall file {text:?}"))?;
            let (sp, ip) = (hex(rest[rest.len() - 2]), hex(rest[rest.len() - 1]));
            match (sp, ip) {
                (Some(sp), Some(ip)) if number >= 0 => Ok(InSyscall { number, sp, ip }),
                (Some(_), Some(_)) => Err("not in a system call".into()),
                _ => Err(format!("unexpected syscall file {text:?}")),
            }
        }
        _ => Err(format!("unexpected syscall file {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_threads_pointers() {
        let text =
            "230 0x0 0x0 0x7ffd7c4e0e00 0x7ffd7c4e0e00 0x0 0x0 0x7ffd7c4e0dd8 0x7f3a12e9b7fa\n";
        assert_eq!(
            parse_syscall(text),
            Ok(InSyscall {
                number: 230,
                sp: 0x7ffd7c4e0dd8,
                ip: 0x7f3a12e9b7fa
            })
        );
        assert!(parse_syscall("running\n").unwrap_err().contains("running"));
        assert!(
            parse_syscall("-1 0x7ffd 0x7f3a\n")
                .unwrap_err()
                .contains("not in")
        );
        assert!(parse_syscall("garbage").is_err());
    }

    #[test]
    fn the_innermost_namespace_id() {
        let status = "Name:\tpython3\nNSpid:\t4242\t17\nPPid:\t1\n";
        assert_eq!(innermost(status), Some(17));
        assert_eq!(innermost("NSpid:\t99\n"), Some(99));
        assert_eq!(innermost("Name:\tx\n"), None);
    }

    #[test]
    fn own_threads_map_to_themselves_outside_a_namespace() {
        let me = std::process::id();
        assert_eq!(namespace_tids(me).get(&u64::from(me)), Some(&me));
        assert_eq!(ordered(me, me)[0], me);
    }
}
