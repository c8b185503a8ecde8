//! The target is never left stopped: not by a failed attach, not by a signal before the
//! event loop runs, not by rocsync dying by SIGKILL while a stop is pending (its exit
//! program, or the watchdog, continues it), not by a stderr nobody reads. The target
//! loads and unloads a library in a loop, so rocsync's loader probe stops it hundreds of
//! times a second (`job_control.rs`: what a terminal's job control does; `cgroup_kill.rs`:
//! a SIGKILL of rocsync's whole cgroup). Needs root (eBPF).

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::Stdio,
    time::{Duration, Instant},
};

use crate::common::*;

#[test]
fn a_failed_attach_leaves_the_target_running() {
    if !can_trace("a_failed_attach_leaves_the_target_running") {
        return;
    }
    let target = Target::start();
    for _ in 0..5 {
        let out = rocsync()
            .args(["attach", "--pid", &target.pid().to_string()])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(stderr_of(&out).contains("--wait"));
        assert_never_stopped(target.pid(), Duration::from_millis(200));
    }
}

#[test]
fn sigkill_of_rocsync_with_a_stop_pending_never_leaves_the_target_stopped() {
    if !can_trace("sigkill_of_rocsync_with_a_stop_pending_never_leaves_the_target_stopped") {
        return;
    }
    let target = Target::start();
    for i in 0..12u64 {
        // Every other time through the watchdog, the path of kernels without the release
        // at rocsync's exit (`probes::release`).
        let mut cmd = attach_command(target.pid());
        if i % 2 == 1 {
            cmd.env("ROCSYNC_WATCHDOG", "1");
        }
        let mut tracer = spawn_piped(&mut cmd);
        let lines = wait_for_line(&mut tracer, "waiting for process", Duration::from_secs(20));
        drop(lines);
        // Let it answer stops for a while, then kill it at a varying point.
        std::thread::sleep(Duration::from_millis(20 + (i * 37) % 90));
        tracer.end();
        // The kernel (or the watchdog) continues it within moments of rocsync's death.
        assert_continued(target.pid(), "pid left stopped");
    }
}

#[test]
fn a_signal_before_the_event_loop_stops_cleanly() {
    if !can_trace("a_signal_before_the_event_loop_stops_cleanly") {
        return;
    }
    let target = Target::start();
    for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGTERM] {
        let mut tracer = attach_waiting(target.pid());
        // Once its handlers are installed (first thing in main, before any probe is
        // loaded), the signal must end rocsync cleanly, however early.
        let start = Instant::now();
        // Once its handler is installed (SigCgt): a handshake instead of a sleep that
        // races its start.
        while !process_signal_mask(tracer.id(), "SigCgt:").contains(&sig) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "handlers never installed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: signals the rocsync this test started.
        unsafe { libc::kill(tracer.id() as i32, sig) };
        let status = wait_within(&mut tracer, Duration::from_secs(20), "rocsync");
        assert!(
            status.code().is_some(),
            "signal {sig}: rocsync died by it: {status}"
        );
        assert_never_stopped(target.pid(), Duration::from_millis(300));
    }
    // A signal at once, before rocsync has even started: it may die of it, having loaded
    // nothing (its SIGINT is at the default, see `rocsync()`); the target still never
    // stays stopped.
    let mut tracer = attach_waiting(target.pid());
    // SAFETY: as above.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    wait_within(&mut tracer, Duration::from_secs(20), "rocsync");
    assert_never_stopped(target.pid(), Duration::from_millis(300));
}

/// A stderr nobody reads (a pipe whose reader is busy, a terminal paused with Ctrl-S)
/// blocks its writer. rocsync says it attached to a library while the target is stopped
/// at that library's load: were it to block there, the target would stay stopped until
/// stderr moved. Messages are queued instead; once stderr is read, every one arrives.
#[test]
fn a_stderr_nobody_reads_never_holds_the_target() {
    if !can_trace("a_stderr_nobody_reads_never_holds_the_target") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &rocsync_tests::scenario_dlopen(), &["basic"]);
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let raw = dir.path("calls.jsonl");
    let mut tracer = rocsync()
        .args(["attach", "--wait", "--no-status", "--raw"])
        .arg(&raw)
        .args(["--pid", &target.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::from(write.try_clone().unwrap()))
        .spawn()
        .unwrap();
    let mut said = BufReader::new(std::fs::File::from(read.try_clone().unwrap()));
    // What it says before the load (then nothing until it probes the runtime).
    let mut line = String::new();
    while !line.contains("tracing pid") {
        line.clear();
        assert!(
            said.read_line(&mut line).unwrap() > 0,
            "rocsync said nothing"
        );
    }
    // Fill the pipe (blocking writes: the descriptor's flags are rocsync's too); the
    // filler stays blocked until the pipe is drained.
    let filler = std::thread::spawn(move || {
        let mut w = std::fs::File::from(write);
        let _ = w.write_all(&vec![0u8; 1 << 20]);
    });
    let size = rustix::pipe::fcntl_getpipe_size(&read).unwrap();
    let start = Instant::now();
    loop {
        let held = rustix::io::ioctl_fionread(&read).unwrap();
        if held >= size as u64 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "pipe never full: {held} of {size} bytes"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The target loads the runtime: stopped at the load until rocsync has probed it.
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let start = Instant::now();
    let exited = loop {
        if let Some(status) = target.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(30) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Now read stderr (so that rocsync, and the target, go on in any case).
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut said, &mut all);
        all
    });
    let exited =
        exited.unwrap_or_else(|| panic!("the target was held while rocsync's stderr was full"));
    assert!(exited.success());
    assert!(wait_within(&mut tracer, Duration::from_secs(30), "rocsync").success());
    filler.join().unwrap();
    let all = reader.join().unwrap();
    let text = String::from_utf8_lossy(&all).replace('\0', "");
    assert!(text.contains("rocsync: attached to"), "{text}");
    assert!(
        text.contains("captured"),
        "the summary is written too: {text}"
    );
    let (_, mut calls) = read_raw(&raw);
    calls.retain(|c| c.api != "hipGetDevice");
    assert_same_calls(&rocsync_tests::read_log(&dir.path("scenario.log")), calls);
}
