//! The stack reader against targets that lie, and what a read costs the target: a fake
//! Python whose runtime is cycles, huge lengths and unmapped pointers ends in a bounded
//! time with "unreadable", the daemon's side unharmed and the target running; no read
//! ever stops a thread of the target. Needs root (`map_files`).

use std::{
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::{common::*, stacks::script};

fn a_lying_python_is_unreadable_and_left_running(mode: &str) {
    let fake = rocsync_tests::fake_python();
    let target = Reaped(spawn_ready(Command::new(&fake).arg(mode)));
    let pid = target.id();
    wait_in_syscall(pid, pid);
    // The daemon's own bounds (2 s, 1 GiB, 2 s of CPU).
    let stacks = read_stacks_with(&reader(), pid, pid);
    assert_eq!(stacks.error, None, "{stacks:#?}");
    let blocked = stacks.blocked().unwrap();
    assert_eq!(blocked.python_stack, None);
    let why = blocked.python_error.as_deref().unwrap_or_default();
    assert!(why.starts_with("unreadable: "), "{mode}: {why}");
    assert!(
        matches!(state(pid), 'S' | 'R' | 'D'),
        "{mode}: the target is left {}",
        state(pid)
    );
}

#[test]
fn a_python_whose_lists_are_cycles_is_unreadable() {
    if !can_read_stacks("a_python_whose_lists_are_cycles_is_unreadable") {
        return;
    }
    a_lying_python_is_unreadable_and_left_running("cycles");
}

#[test]
fn a_python_of_huge_lengths_and_unmapped_pointers_is_unreadable() {
    if !can_read_stacks("a_python_of_huge_lengths_and_unmapped_pointers_is_unreadable") {
        return;
    }
    a_lying_python_is_unreadable_and_left_running("mixed");
}

/// A thread's context switches so far: a thread asleep in a system call has none until it
/// wakes, and any stop (ptrace, SIGSTOP) wakes it.
fn switches(pid: u32, tid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    status
        .lines()
        .filter(|l| l.contains("ctxt_switches:"))
        .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn reading_stacks_never_stops_nor_wakes_the_target() {
    if !can_read_stacks("reading_stacks_never_stops_nor_wakes_the_target") {
        return;
    }
    let dir = TempDir::new();
    let target = Reaped(spawn_ready(Command::new("python3").arg(script(&dir))));
    let pid = target.id();
    let threads = tids(pid);
    assert_eq!(threads.len(), 2);
    threads.iter().for_each(|&tid| wait_in_syscall(pid, tid));
    let before: Vec<u64> = threads.iter().map(|&t| switches(pid, t)).collect();
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut seen = std::collections::BTreeSet::new();
            while !done.load(Ordering::Relaxed) {
                for &tid in &threads {
                    seen.insert(state(tid));
                }
            }
            seen
        });
        for _ in 0..5 {
            let stacks = read_stacks(pid, pid);
            assert!(
                stacks.threads.iter().all(|t| t.python_stack.is_some()),
                "{stacks:#?}"
            );
        }
        done.store(true, Ordering::Relaxed);
        watcher.join().unwrap()
    });
    assert!(
        !seen.contains(&'t') && !seen.contains(&'T'),
        "states seen: {seen:?}"
    );
    let after: Vec<u64> = threads.iter().map(|&t| switches(pid, t)).collect();
    assert_eq!(before, after, "the sleeping threads were woken");
}

#[test]
fn a_python_whose_library_path_is_a_fifo_in_its_root_times_out() {
    if !can_read_stacks("a_python_whose_library_path_is_a_fifo_in_its_root_times_out") {
        return;
    }
    // The interpreter's library as mapped, and what /proc/PID/root shows at its path once
    // the process has chrooted: a FIFO nobody writes (py-spy opens it, and would wait).
    let dir = TempDir::new();
    let lib = dir.path("libpython3.11.so");
    std::fs::write(&lib, [0u8; 4096]).unwrap();
    let jailed = dir.path(&format!("jail/{}", lib.display()));
    std::fs::create_dir_all(jailed.parent().unwrap()).unwrap();
    let fifo = std::ffi::CString::new(jailed.to_str().unwrap()).unwrap();
    // SAFETY: a C string that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let fake = rocsync_tests::fake_python();
    let mut cmd = Command::new(&fake);
    cmd.arg("jail").arg(dir.0.path());
    let target = Reaped(spawn_ready(&mut cmd));
    let pid = target.id();
    wait_in_syscall(pid, pid);
    let stacks = read_stacks_with(&reader(), pid, pid);
    let blocked = stacks.blocked().unwrap();
    assert_eq!(
        blocked.python_error.as_deref(),
        Some("unreadable: the reader timed out after 2 s while reading Python stacks"),
        "{stacks:#?}"
    );
    assert!(
        matches!(state(pid), 'S' | 'R'),
        "the target is left {}",
        state(pid)
    );
    // The reader was killed, not left blocked on the FIFO.
    let pattern = format!("read-stacks\0--pid\0{pid}\0");
    let readers: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p: &u32| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&pattern)
        })
        .collect();
    assert!(readers.is_empty(), "readers left: {readers:?}");
}
