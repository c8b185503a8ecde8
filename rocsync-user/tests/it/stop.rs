//! Stopping a capture keeps everything: Ctrl-C, --duration, a target killed mid-call, a
//! SIGTERM forwarded by run; the blocked call is written in flight. Needs root (eBPF).

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::Stdio,
    time::Duration,
};

use crate::common::*;
use rocsync_tests::{read_log, scenario};

#[test]
fn sigint_mid_capture_keeps_everything_captured() {
    if !can_trace("sigint_mid_capture_keeps_everything_captured") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["loop", "2500"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = attach_and_start(&mut target, &raw);
    // Handshake: the loop has begun (it runs 2.5 s from here); stop the capture now.
    let mut line = String::new();
    BufReader::new(target.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "looping");
    // SAFETY: signals the tracer this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    assert!(tracer.wait().unwrap().success());
    assert!(target.wait().unwrap().success());
    let (_, mut calls) = read_raw(&raw);
    let logged = read_log(&dir.path("scenario.log"));
    assert!(
        !calls.is_empty() && calls.len() < logged.len(),
        "{} of {}",
        calls.len(),
        logged.len()
    );
    // What was captured is the start of the run with no gap: the first N calls.
    calls.sort_by_key(|c| c.correlation);
    for (c, l) in calls.iter().zip(logged.iter()) {
        assert_eq!(key(c), logged_key(l));
    }
}

#[test]
fn target_killed_mid_call_reports_the_call_in_flight() {
    if !can_trace("target_killed_mid_call_reports_the_call_in_flight") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["hang"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = attach_and_start(&mut target, &raw);
    wait_until_blocked(&mut target);
    target.end();
    assert!(tracer.wait().unwrap().success());
    let (_, calls) = read_raw(&raw);
    let names: Vec<_> = calls.iter().map(|c| c.api.as_str()).collect();
    assert_eq!(names, ["hipStreamCreate", "hipStreamSynchronize"]);
    let (create, sync) = (&calls[0], &calls[1]);
    assert_eq!(create.ret, Some(0));
    assert_ne!(create.args[0], 0, "created stream handle read at return");
    assert_eq!(
        sync.args[0], create.args[0],
        "synchronizes the stream it created"
    );
    assert_eq!(
        (sync.exit_ns, sync.ret),
        (None, None),
        "still blocked when the process died"
    );
}

#[test]
fn a_duration_stop_keeps_the_blocked_call_in_flight() {
    if !can_trace("a_duration_stop_keeps_the_blocked_call_in_flight") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["hang"]);
    let raw = dir.path("calls.jsonl");
    let pid = target.id().to_string();
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "--duration", "3", "--raw"])
            .arg(&raw)
            .args(["--pid", &pid]),
    );
    wait_for_line(&mut tracer, "tracing pid", Duration::from_secs(20));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_until_blocked(&mut target);
    assert!(tracer.wait().unwrap().success());
    let (_, calls) = read_raw(&raw);
    let names: Vec<_> = calls.iter().map(|c| c.api.as_str()).collect();
    assert_eq!(names, ["hipStreamCreate", "hipStreamSynchronize"]);
    assert_eq!(
        (calls[1].exit_ns, calls[1].ret),
        (None, None),
        "in flight at stop"
    );
    target.end();
}

#[test]
fn run_forwards_sigterm_and_keeps_the_blocked_call() {
    if !can_trace("run_forwards_sigterm_and_keeps_the_blocked_call") {
        return;
    }
    let dir = TempDir::new();
    let raw = dir.path("calls.jsonl");
    let mut tracer = rocsync()
        .args(["run", "--no-status", "--raw"])
        .arg(&raw)
        .arg("--")
        .arg(scenario())
        .arg("hang")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command's stdout is rocsync's: the same handshake.
    wait_until_blocked_via(&mut tracer);
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGTERM) };
    let status = tracer.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the command died of the forwarded SIGTERM"
    );
    let (_, calls) = read_raw(&raw);
    let last = calls.last().expect("calls");
    assert_eq!(last.api, "hipStreamSynchronize");
    assert_eq!((last.exit_ns, last.ret), (None, None));
}
