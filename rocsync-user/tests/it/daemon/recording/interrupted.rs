//! A trace whose client goes away ends then (issue 64): Ctrl-C on `rocsync trace` left the
//! daemon recording for the rest of `--duration`, every agent claimed (a second request
//! refused meanwhile), and wrote nothing the user could find. Now the trace is written as
//! far as it went, marked so, and the client prints where; one killed outright ends it
//! too. Needs root.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::{daemon::*, *};

/// `rocsync trace -p PID -d 60s` at the daemon's socket, its output piped; SIGINT at its
/// default whatever the harness inherited (rocsync keeps an inherited SIG_IGN, so under a
/// backgrounded `cargo xtask test` the Ctrl-C below was ignored).
fn long_trace(sock: &std::path::Path, pid: u32) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocsync"));
    with_signals(&mut cmd, &[]);
    cmd.args(["trace", "-d", "60s", "-p", &pid.to_string(), "--socket"])
        .arg(sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_trace_interrupted_or_left_by_its_client_ends_written_and_named() {
    let name = "a_trace_interrupted_or_left_by_its_client_ends_written_and_named";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let target = tracked_loop(&dir, &exe, &mut lines, 60_000);
    let sock = dir.path("rocsync.sock");

    // Ctrl-C: the client says so, and prints the trace written as far as it went.
    let mut client = long_trace(&sock, target.id());
    lines.wait_for("trace 1: recording");
    // SAFETY: signals the client this test started.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    wait_within(
        &mut client,
        Duration::from_secs(30),
        "rocsync trace after Ctrl-C",
    );
    let out = client.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("interrupted"), "{said}");
    let file = String::from_utf8(out.stdout).unwrap();
    let t = read_json(std::path::Path::new(file.trim()));
    let cut = &t["rocsync"]["parameters"]["truncated"];
    assert_eq!(cut["reason"], "client_gone", "{cut}");
    lines.wait_for("ends early: its client went away");

    // Its agents are free at once; a client killed outright ends its trace too.
    let client = long_trace(&sock, target.id());
    lines.wait_for("trace 2: recording");
    Reaped(client).end();
    lines.wait_for("ends early: its client went away");
    let again = ask_daemon(
        &sock,
        &["trace", "-d", "200ms", "-p", &target.id().to_string()],
    );
    assert!(again.trim().ends_with(".json"), "{again}");
    stop(daemon);
}
