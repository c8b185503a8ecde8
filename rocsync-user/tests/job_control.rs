//! What a terminal's job control does to rocsync — Ctrl-C, a hangup, `kill -9 %1` —
//! never leaves a target held at a library load: the watchdog outlives rocsync's job.
//! Needs root (eBPF).

mod common;

use std::{
    os::unix::process::CommandExt as _,
    process::Child,
    time::{Duration, Instant},
};

use common::*;

/// rocsync's children (from every thread's /proc children list).
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `rocsync attach --wait` on the looping target, in a process group of its own (a
/// terminal's job), once it answers the target's stops.
fn attach_as_a_job(target: &Target) -> Child {
    let mut tracer = spawn_piped(attach_command(target.pid()).process_group(0));
    drop(wait_for_line(
        &mut tracer,
        "waiting for process",
        Duration::from_secs(20),
    ));
    tracer
}

/// What job control does to rocsync's job — Ctrl-C, Ctrl-\, Ctrl-Z, a hangup, then
/// `kill -9 %1` — and a service manager's SIGTERM to every process of its cgroup must not
/// end the watchdog: it continues what rocsync left stopped.
#[test]
fn the_watchdog_outlives_what_is_sent_to_the_job() {
    if !can_trace("the_watchdog_outlives_what_is_sent_to_the_job") {
        return;
    }
    let target = Target::start();
    let mut tracer = attach_as_a_job(&target);
    let rocsync = tracer.id() as i32;
    let watchdog = children(tracer.id());
    assert_eq!(watchdog.len(), 1, "one watchdog: {watchdog:?}");
    // Frozen, rocsync continues nothing: the target's next library load leaves it stopped.
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(rocsync, libc::SIGSTOP) };
    wait_until_stopped(target.pid(), "the target");
    for sig in ENDING.into_iter().chain([libc::SIGTSTP]) {
        // SAFETY: signals the job this test started, and rocsync's watchdog.
        unsafe {
            libc::kill(-rocsync, sig);
            libc::kill(watchdog[0] as i32, sig);
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: as above: the job, as `kill -9 %1` does.
    unsafe { libc::kill(-rocsync, libc::SIGKILL) };
    tracer.wait().unwrap();
    assert_continued(target.pid(), "pid left stopped: the watchdog was ended");
}

/// Waits until `pid` is stopped (`T`).
fn wait_until_stopped(pid: u32, what: &str) {
    let start = Instant::now();
    while state(pid) != 'T' {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} never stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
