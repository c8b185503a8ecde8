//! Concurrent rocsync processes: captures of different processes run side by side, each
//! reporting only its own process's calls; a second capture of one process is refused,
//! naming the first. Needs root (eBPF).

use std::{
    io::Write as _,
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::common::*;
use rocsync_tests::{read_log, scenario, sim_hip};

/// A scenario waiting at its gate (it prints "ready", then waits for a line).
fn gated(dir: &TempDir, name: &str) -> Child {
    spawn_ready(
        Command::new(scenario())
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", dir.path(&format!("{name}.log")))
            .env("SCENARIO_HIP", sim_hip())
            .stdin(Stdio::piped()),
    )
}

fn attach(dir: &TempDir, name: &str, pid: u32) -> Child {
    spawn_piped(
        rocsync()
            .args(["attach", "--wait", "--no-status", "--raw"])
            .arg(dir.path(&format!("{name}.jsonl")))
            .arg("-o")
            .arg(dir.path(&format!("{name}.json")))
            .args(["--pid", &pid.to_string()]),
    )
}

#[test]
fn two_captures_of_two_processes_each_see_only_their_own() {
    if !can_trace("two_captures_of_two_processes_each_see_only_their_own") {
        return;
    }
    let dir = TempDir::new();
    let (mut a, mut b) = (gated(&dir, "a"), gated(&dir, "b"));
    let mut ta = attach(&dir, "ta", a.id());
    wait_for_line(&mut ta, "tracing pid", Duration::from_secs(20));
    let mut tb = attach(&dir, "tb", b.id());
    wait_for_line(&mut tb, "tracing pid", Duration::from_secs(20));
    // A second capture of `a` is refused, naming the first rocsync.
    let second = rocsync()
        .args(["attach", "--wait", "--pid", &a.id().to_string()])
        .output()
        .unwrap();
    let stderr = stderr_of(&second);
    assert!(!second.status.success());
    assert!(
        stderr.contains("already being traced") && stderr.contains(&ta.id().to_string()),
        "{stderr}"
    );
    for p in [&mut a, &mut b] {
        p.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(p.wait().unwrap().success());
    }
    assert!(ta.wait().unwrap().success() && tb.wait().unwrap().success());
    for (name, target) in [("a", &a), ("b", &b)] {
        let (_, mut calls) = read_raw(&dir.path(&format!("t{name}.jsonl")));
        assert!(
            calls.iter().all(|c| c.pid == target.id()),
            "{name}: another pid"
        );
        calls.retain(|c| c.api != "hipGetDevice");
        assert_same_calls(&read_log(&dir.path(&format!("{name}.log"))), calls);
    }
}

/// The processes `rocsync` started (its watchdog aside), from the kernel's list.
fn children_of(pid: u32) -> Vec<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    list.split_whitespace()
        .map(|p| p.parse().unwrap())
        .filter(|&p: &u32| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            !String::from_utf8_lossy(&cmdline).contains("__rocsync_watchdog")
        })
        .collect()
}

/// One rocsync per process however a capture reached it: `run`'s command, and what a
/// traced process forks, are refused to an `attach` as its own target is.
#[test]
fn a_process_run_or_followed_is_refused_to_a_second_capture() {
    if !can_trace("a_process_run_or_followed_is_refused_to_a_second_capture") {
        return;
    }
    let dir = TempDir::new();
    // A shell that forks the gated scenario: `run` launches the shell and follows it.
    let script = format!("{} gated basic; echo done", scenario().to_str().unwrap());
    let mut run = spawn_piped(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(dir.path("run.json"))
            .args(["--", "sh", "-c", &script])
            .env("SCENARIO_LOG", dir.path("run.log"))
            .env("SCENARIO_HIP", sim_hip())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    let mut out = std::io::BufReader::new(run.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let shell = children_of(run.id())[0];
    let gated = children_of(shell)[0];
    for target in [shell, gated] {
        let second = rocsync()
            // Bounded: a second capture that wrongly starts ends by itself.
            .args(["attach", "--duration", "1", "--pid", &target.to_string()])
            .output()
            .unwrap();
        let stderr = stderr_of(&second);
        assert!(!second.status.success(), "pid {target}: {stderr}");
        assert!(
            stderr.contains("already being traced") && stderr.contains(&run.id().to_string()),
            "pid {target}: {stderr}"
        );
    }
    run.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(run.wait().unwrap().success());
}
