//! Hang detection: a synchronisation still blocked past `--hang-after` is found while it
//! blocks — within the threshold and a tick of the daemon of its start as the scenario
//! logged it —, its age rises in `rocsync_calls_in_flight_seconds`, and its trace ends
//! when the call returns, when its process exits (killed while blocked), or at
//! `--hang-bound` while the call still blocks: `rocsync.parameters.hang.ended` says which.
//! A daemon with no settings traces hangs. Needs root.

use std::{path::Path, process::Command, time::Duration};

use rocsync_tests::{LoggedCall, driver::mono_ns, read_log};
use serde_json::Value;

use crate::{
    common::{daemon::*, *},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

const S: u64 = 1_000_000_000;
/// The daemon reads the calls in flight once a second (`daemon/hangs.rs`).
const TICK: u64 = S;
/// A loaded machine (tests and builds side by side on two cores) may run the daemon's
/// tick, and the test's reading of its log line, this much late.
const SLACK: u64 = S;
const IN_FLIGHT: &str = "rocsync_calls_in_flight_seconds{api=\"hipStreamSynchronize\"}";

/// A scenario blocked once in `hipStreamSynchronize` for `us`, let go once tracked;
/// its log is `dir/<log>`.
fn blocked(dir: &TempDir, exe: &Path, lines: &mut Lines, us: &str, log: &str) -> Gated {
    let mut target = Gated::start(
        Command::new(exe)
            .args(["gated", "stall", "1", us])
            .env("SCENARIO_LOG", dir.path(log)),
    );
    target.open_when_tracked(lines);
    target
}

/// The hang trace of `pid` among those `rocsync status` lists.
fn hang_trace(listed: &[std::path::PathBuf], pid: u32) -> Value {
    listed_trace(listed, "hang", pid)
}

fn the_sync(logged: &[LoggedCall]) -> &LoggedCall {
    logged
        .iter()
        .find(|c| c.api == "hipStreamSynchronize")
        .unwrap()
}

/// A daemon's flags for a hang test: a flight recorder, stall traces of calls over
/// 50 ms (300 ms windows, one a second), and `hang`.
fn hang_daemon<'a>(hang: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--flight-recorder",
        "10s",
        "--capture-on-stall",
        "50ms",
        "--stall-window-after",
        "300ms",
        "--stall-interval",
        "1s",
    ];
    args.extend(hang);
    args
}

#[test]
fn calls_still_blocked_past_the_threshold_are_traced_while_they_block_until_they_return_or_exit() {
    let name = "calls_still_blocked_past_the_threshold_are_traced_while_they_block_until_they_return_or_exit";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // A threshold other than the tick, so that finding the call early shows too; one
    // trace a second, so the second hang may have one 1 s after the first.
    let after = 2 * S;
    let (daemon, mut lines) = start_daemon(&dir, &exe, &hang_daemon(&["--hang-after", "2s"]));
    let addr = metrics_addr(&lines);

    // Blocked for a minute, killed while blocked: its trace ends as it exits, and its
    // call, in flight until the process is forgotten, is not traced again.
    let mut killed = blocked(&dir, &exe, &mut lines, "60000000", "killed.log");
    let killed_pid = killed.child.id();
    lines.wait_for(&format!("hang: pid {killed_pid}'s hipStreamSynchronize"));
    assert!(killed.child.try_wait().unwrap().is_none());
    killed.child.kill().unwrap();
    let status = killed.child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    lines.wait_for(&format!("hang of pid {killed_pid}: the call exited"));

    // Blocked 10 s: found while it blocks, its age rising from one reading to the next.
    let mut long = blocked(&dir, &exe, &mut lines, "10000000", "long.log");
    let pid = long.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    // The test sees the daemon's line after it found the call: an upper bound.
    let seen_ns = mono_ns();
    let mut readings = Vec::new();
    for _ in 0..2 {
        let before = mono_ns();
        let v = metric(&addr, IN_FLIGHT);
        readings.push((before, v, mono_ns()));
        std::thread::sleep(Duration::from_millis(1200));
    }
    assert!(
        readings[1].1 > readings[0].1,
        "the oldest call's age did not rise: {readings:?}"
    );
    assert!(
        long.child.try_wait().unwrap().is_none(),
        "read after the call returned"
    );

    assert!(long.child.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    let logged = read_log(&dir.path("long.log"));
    let sync = the_sync(&logged);
    assert!(sync.after_ns - sync.before_ns >= 10 * S);

    // Found within the threshold and a tick of the call's start as the scenario logged
    // it: by when the test saw the daemon say so, and by the trace's own account.
    let found_by = seen_ns - sync.before_ns;
    assert!(
        (after..=after + TICK + SLACK).contains(&found_by),
        "found {found_by} ns after the call began"
    );
    let t = hang_trace(&listed, pid);
    let hang = &t["rocsync"]["parameters"]["hang"];
    assert_eq!(hang["ended"], "returned", "{hang}");
    let offset = t["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    let entry = hang["entry_unix_us"].as_i64().unwrap() * 1000 - offset;
    // Microseconds, and two readings of the wall clock's offset: 1 ms apart at most.
    let ms = 1_000_000;
    assert!(
        sync.before_ns as i64 - ms <= entry && entry <= sync.after_ns as i64 + ms,
        "the hang's entry {entry} is not the logged call's {sync:?}"
    );
    let found = entry + (hang["blocked_ms_when_found"].as_f64().unwrap() * 1e6) as i64;
    let found_after = (found - sync.before_ns as i64) as u64;
    assert!(
        (after - ms as u64..=after + TICK + SLACK).contains(&found_after),
        "the trace says found {found_after} ns after the call began"
    );
    assert!(found <= seen_ns as i64 + ms, "found after the test saw it");
    // The gauge was the call's age at the daemon's last tick before each reading.
    for (before, v, read) in &readings {
        let age = |at: u64| (at - sync.before_ns) as f64 / 1e9;
        assert!(
            age(*before) - (TICK + SLACK) as f64 / 1e9 <= *v && *v <= age(*read),
            "in flight {v} s read between ages {} and {}",
            age(*before),
            age(*read)
        );
    }
    let window = assert_window_of_log(&t, pid, &logged);
    assert!(
        window.seqs.contains(&sync.seq),
        "the blocked call is not in it"
    );

    let t = hang_trace(&listed, killed_pid);
    assert_eq!(t["rocsync"]["parameters"]["hang"]["ended"], "exited");
    // Killed, it never wrote its log: the kernel timed only the long call's return.
    assert!(!dir.path("killed.log").exists());
    assert_eq!(metric(&addr, "rocsync_hang_traces_total"), 2.0);
    assert_eq!(
        metric(&addr, "rocsync_stalls_total{api=\"hipStreamSynchronize\""),
        1.0
    );
    // Its return was a stall too: held by the hang trace recording it.
    assert_eq!(
        metric(
            &addr,
            "rocsync_stall_traces_skipped_total{reason=\"hang_trace\"}"
        ),
        1.0
    );
    stop(daemon);
}

#[test]
fn a_hang_trace_ends_at_its_bound_while_the_call_still_blocks() {
    let name = "a_hang_trace_ends_at_its_bound_while_the_call_still_blocks";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let flags = hang_daemon(&["--hang-after", "1s", "--hang-bound", "1s"]);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let addr = metrics_addr(&lines);
    // Blocked 6 s: found after 1-2 s (the threshold and a tick), bound 1 s later.
    let mut target = blocked(&dir, &exe, &mut lines, "6000000", "stall.log");
    let pid = target.child.id();
    let prefix = format!("hang-hipStreamSynchronize-{pid}-");
    let traces = dir.path("state/traces");
    let mut written = None;
    until(20, "the hang trace on disk", || {
        written = std::fs::read_dir(&traces).unwrap().flatten().find(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with(&prefix) && n.ends_with(".json")
        });
        written.is_some()
    });
    let on_disk_ns = mono_ns();
    assert!(
        target.child.try_wait().unwrap().is_none(),
        "the trace was written only after the call returned"
    );
    assert!(target.child.wait().unwrap().success());
    let logged = read_log(&dir.path("stall.log"));
    let sync = the_sync(&logged);
    assert!(
        sync.after_ns > on_disk_ns,
        "the call returned before its trace was on disk"
    );
    let t = read_json(&written.unwrap().path());
    assert_eq!(t["rocsync"]["parameters"]["hang"]["ended"], "bound");
    // The hang trace was written: the return is a stall of its own, traced as one.
    until(10, "the return's own stall trace", || {
        metric(&addr, "rocsync_stall_traces_total") == 1.0
    });
    assert_eq!(
        metric(&addr, "rocsync_stalls_total{api=\"hipStreamSynchronize\""),
        1.0
    );
    assert_eq!(
        metric(
            &addr,
            "rocsync_stall_traces_skipped_total{reason=\"hang_trace\"}"
        ),
        0.0
    );
    stop(daemon);
}

/// A daemon as a fleet's DaemonSet starts it — no flag, no configuration file — traces a
/// hang: found past the default threshold (5 s) and a tick, while the call blocks, its
/// trace ended by the return (the kernel times returns past the hang threshold, and
/// counts them as stalls); stall capture stays off (no stall trace).
#[test]
fn a_daemon_with_no_settings_traces_a_hang() {
    let name = "a_daemon_with_no_settings_traces_a_hang";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    // Blocked 8 s: past the default, a tick and a loaded machine's slack.
    let after = 5 * S;
    let mut target = blocked(&dir, &exe, &mut lines, "8000000", "default.log");
    let pid = target.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    let seen_ns = mono_ns();
    // `status` names it for what it is, not "trace 1".
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(
        target.child.try_wait().unwrap().is_none(),
        "said after the call returned"
    );
    let of_pid = format!(" of pid(s) [{pid}]");
    assert!(
        (status.lines()).any(|l| l.starts_with("  hang trace ") && l.ends_with(&of_pid)),
        "{status}"
    );
    assert!(target.child.wait().unwrap().success());
    let logged = read_log(&dir.path("default.log"));
    let sync = the_sync(&logged);
    let found_by = seen_ns - sync.before_ns;
    assert!(
        (after..=after + TICK + SLACK).contains(&found_by),
        "found {found_by} ns after the call began"
    );
    let listed = stall_traces(&dir.path("rocsync.sock"), 1);
    let hang = &hang_trace(&listed, pid)["rocsync"]["parameters"]["hang"];
    assert_eq!(hang["ended"], "returned", "{hang}");
    let ms = hang["blocked_ms_when_found"].as_f64().unwrap();
    let limit = (after + TICK + SLACK) as f64 / 1e6;
    assert!((after as f64 / 1e6..limit).contains(&ms), "{hang}");
    assert_eq!(metric(&addr, "rocsync_hang_traces_total"), 1.0);
    assert_eq!(metric(&addr, "rocsync_stall_traces_total"), 0.0);
    assert_eq!(
        metric(&addr, "rocsync_stalls_total{api=\"hipStreamSynchronize\""),
        1.0
    );
    stop(daemon);
}
