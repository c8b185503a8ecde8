//! A signal rocsync was started with ignored (`nohup`, a background job of a shell
//! without job control) stays ignored: for the command `run` launches, whose `exec` would
//! otherwise reset it to the default, and for rocsync, which says so. Needs root (eBPF).

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::*;

/// What `rocsync run -- sh -c 'grep Sig… /proc/self/status'` prints of the command's
/// dispositions when rocsync starts with `ignored` ignored, and what rocsync says.
fn run_reporting_dispositions(ignored: &'static [i32]) -> (String, String) {
    let dir = TempDir::new();
    let mut cmd = rocsync();
    cmd.args(["run", "--no-status", "-o"])
        .arg(dir.path("trace.json"))
        .args([
            "--",
            "/bin/sh",
            "-c",
            "grep -E '^Sig(Ign|Cgt):' /proc/self/status",
        ]);
    with_signals(&mut cmd, ignored);
    let out = run_ok(&mut cmd);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr_of(&out),
    )
}

#[test]
fn run_launches_its_command_with_what_rocsync_was_started_ignoring() {
    if !can_trace("run_launches_its_command_with_what_rocsync_was_started_ignoring") {
        return;
    }
    let (status, said) = run_reporting_dispositions(&[libc::SIGHUP, libc::SIGINT]);
    let ignored = signal_mask(&status, "SigIgn:");
    assert!(ignored.contains(&libc::SIGHUP), "{status}");
    assert!(ignored.contains(&libc::SIGINT), "{status}");
    // The ones rocsync caught reach the command at their default, as without rocsync.
    assert!(!ignored.contains(&libc::SIGTERM), "{status}");
    assert!(!ignored.contains(&libc::SIGQUIT), "{status}");
    assert!(
        said.contains("SIGINT, SIGHUP were ignored when rocsync started"),
        "{said}"
    );
    assert!(
        said.contains("SIGTERM or SIGQUIT stops the capture"),
        "{said}"
    );

    // Started with nothing ignored, nothing is ignored and nothing is said of it.
    let (status, said) = run_reporting_dispositions(&[]);
    let ignored = signal_mask(&status, "SigIgn:");
    assert!(!ignored.iter().any(|s| ENDING.contains(s)), "{status}");
    assert!(!said.contains("ignored when rocsync started"), "{said}");
}

#[test]
fn an_ignored_sighup_does_not_end_an_attach_and_sigterm_still_does() {
    if !can_trace("an_ignored_sighup_does_not_end_an_attach_and_sigterm_still_does") {
        return;
    }
    let mut sleeper = Command::new("sleep")
        .arg("120")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let dir = TempDir::new();
    let mut cmd = rocsync();
    cmd.args(["attach", "--wait", "--no-status", "-o"])
        .arg(dir.path("trace.json"))
        .args(["--pid", &sleeper.id().to_string()]);
    with_signals(&mut cmd, &[libc::SIGHUP]);
    let mut tracer = spawn_piped(&mut cmd);
    let said = wait_for_line(&mut tracer, "waiting for process", Duration::from_secs(20));
    assert!(
        said.iter()
            .any(|l| l.contains("SIGHUP was ignored when rocsync started")),
        "{said:#?}"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", tracer.id())).unwrap();
    assert!(
        signal_mask(&status, "SigIgn:").contains(&libc::SIGHUP),
        "{status}"
    );
    assert!(
        signal_mask(&status, "SigCgt:").contains(&libc::SIGTERM),
        "{status}"
    );
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGHUP) };
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        assert!(
            tracer.try_wait().unwrap().is_none(),
            "an ignored SIGHUP ended rocsync"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGTERM) };
    let ended = wait_within(
        &mut tracer,
        Duration::from_secs(20),
        "rocsync after SIGTERM",
    );
    assert!(ended.success(), "{ended}");
    sleeper.end();
}
