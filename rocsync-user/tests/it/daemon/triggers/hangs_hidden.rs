//! Hangs are never hidden: not by a stall of their own process just before (which used
//! the process's stall interval), not by another user's storm of stalls (which kept the
//! node's), not by another trace recording the process; and a hang trace refuses no
//! one's trace. Each checked against the scenarios' own logs. Needs root.

use std::{os::unix::fs::PermissionsExt as _, path::Path, process::Command};

use rocsync_tests::read_log;
use serde_json::Value;

use crate::{
    common::{daemon::*, *},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

const S: u64 = 1_000_000_000;

/// The daemon as an operator starts it for stalls and hangs: stalls over 50 ms traced,
/// hangs past 1 s (the default before hangs were on by default: the blocks here are
/// 4-8 s), the default interval (60 s).
const FLAGS: [&str; 4] = ["--capture-on-stall", "50ms", "--hang-after", "1s"];

/// The hang's entry, on the log's clock: within the logged call `before..after`.
fn assert_hang_of(t: &Value, (before, after): (u64, u64)) {
    let hang = &t["rocsync"]["parameters"]["hang"];
    assert_eq!(hang["ended"], "returned", "{hang}");
    let offset = t["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    let entry = hang["entry_unix_us"].as_i64().unwrap() * 1000 - offset;
    let ms = 1_000_000;
    assert!(
        before as i64 - ms <= entry && entry <= after as i64 + ms,
        "the hang's entry {entry} is not the logged call's ({before}..{after})"
    );
}

/// The logged synchronisations' spans, in order.
fn syncs(log: &Path) -> Vec<(u64, u64)> {
    read_log(log)
        .iter()
        .filter(|c| c.api == "hipStreamSynchronize")
        .map(|c| (c.before_ns, c.after_ns))
        .collect()
}

fn untraced(addr: &str) -> f64 {
    ["interval", "user_limit", "node_limit", "not_started"]
        .iter()
        .map(|r| {
            metric(
                addr,
                &format!("rocsync_hangs_untraced_total{{reason=\"{r}\"}}"),
            )
        })
        .sum()
}

#[test]
fn a_stall_then_a_hang_in_one_process_are_both_traced() {
    let name = "a_stall_then_a_hang_in_one_process_are_both_traced";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &FLAGS);
    let addr = metrics_addr(&lines);
    // An 80 ms stall, 2 s on the host, then a 5 s block.
    let log = dir.path("job.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stalls", "80000", "-2000000", "5000000"])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    let pid = target.child.id();
    lines.wait_for(&format!("stall: pid {pid}'s hipStreamSynchronize"));
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    assert!(target.child.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    let spans = syncs(&log);
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert!(spans[1].1 - spans[1].0 >= 5 * S);
    let stall = listed_trace(&listed, "stall", pid);
    let ms = stall["rocsync"]["parameters"]["stall"]["duration_ms"]
        .as_f64()
        .unwrap();
    assert!(
        (50.0..1000.0).contains(&ms),
        "the stall traced took {ms} ms"
    );
    assert_hang_of(&listed_trace(&listed, "hang", pid), spans[1]);
    assert_eq!(metric(&addr, "rocsync_stall_traces_total"), 1.0);
    assert_eq!(metric(&addr, "rocsync_hang_traces_total"), 1.0);
    assert_eq!(untraced(&addr), 0.0);
    stop(daemon);
}

#[test]
fn another_users_storm_of_stalls_hides_no_hang() {
    let name = "another_users_storm_of_stalls_hides_no_hang";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &FLAGS);
    let addr = metrics_addr(&lines);
    // The neighbour runs the test's scenario copy and logs into a folder of its own.
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path("nobody")).unwrap();
    std::fs::set_permissions(dir.path("nobody"), std::fs::Permissions::from_mode(0o777)).unwrap();
    // Stalls of 300 ms, one after another for 18 s.
    let mut storm = Gated::start(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(&exe)
            .args(["gated", "stall", "60", "300000"])
            .env("SCENARIO_LOG", dir.path("nobody/storm.log")),
    );
    storm.open_when_tracked(&mut lines);
    let storm_pid = storm.child.id();
    lines.wait_for(&format!("stall: pid {storm_pid}'s hipStreamSynchronize"));
    // Root's process blocks 4 s while the storm goes on.
    let log = dir.path("victim.log");
    let mut victim = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", "1", "4000000"])
            .env("SCENARIO_LOG", &log),
    );
    victim.open_when_tracked(&mut lines);
    let pid = victim.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    assert!(victim.child.wait().unwrap().success());
    assert!(
        storm.child.try_wait().unwrap().is_none(),
        "the storm ended before the hang was traced"
    );
    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    assert_hang_of(&listed_trace(&listed, "hang", pid), syncs(&log)[0]);
    assert_eq!(untraced(&addr), 0.0);
    // The storm's later stalls were counted, not traced.
    let skipped = "rocsync_stall_traces_skipped_total{reason=\"interval\"}";
    assert!(metric(&addr, skipped) >= 1.0);
    assert_eq!(metric(&addr, "rocsync_stall_traces_total"), 1.0);
    storm.child.kill().unwrap();
    let _ = storm.child.wait();
    stop(daemon);
}

#[test]
fn a_hang_is_traced_beside_an_asked_trace_and_refuses_none() {
    let name = "a_hang_is_traced_beside_an_asked_trace_and_refuses_none";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &FLAGS);
    let addr = metrics_addr(&lines);
    let sock = dir.path("rocsync.sock");
    // 2 s on the host, an 8 s block, 2 s more on the host; an asked trace of every agent
    // records from the start for 5 s. (Margins for a loaded machine: the second trace is
    // asked once the first is written, while the call still blocks.)
    let log = dir.path("job.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stalls", "-2000000", "8000000", "-2000000"])
            .env("SCENARIO_LOG", &log),
    );
    let pid = target.child.id();
    lines.wait_for(&format!("tracking pid {pid}"));
    let trace = |out: &Path, secs: &str| {
        rocsync()
            .args(["trace", "--pid", &pid.to_string(), "--duration", secs, "-o"])
            .arg(out)
            .arg("--socket")
            .arg(&sock)
            .spawn()
            .unwrap()
    };
    let mut asked = trace(&dir.path("asked.json"), "5s");
    // The process goes on once the asked trace records it: all its calls are the trace's.
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    target.open();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    assert!(
        asked.wait().unwrap().success(),
        "the trace asked before the hang"
    );
    // Asked while the hang trace records (its call blocks until 10 s): not refused.
    let mut during = trace(&dir.path("during.json"), "1s");
    assert!(
        during.wait().unwrap().success(),
        "the trace asked during the hang"
    );
    assert!(
        target.child.try_wait().unwrap().is_none(),
        "the call returned before the second trace ended"
    );
    assert!(target.child.wait().unwrap().success());
    let listed = stall_traces(&sock, 1);
    let span = syncs(&log)[0];
    assert_hang_of(&listed_trace(&listed, "hang", pid), span);
    // The first holds the blocked call (begun while it recorded, in flight at its end);
    // the second is the process's trace, as asked.
    let rows = |file: &str| read_json(&dir.path(file))["traceEvents"].clone();
    let asked_rows = rows("asked.json");
    assert!(
        asked_rows
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "hipStreamSynchronize" && r["pid"] == pid),
        "the asked trace holds no hipStreamSynchronize of pid {pid}"
    );
    let during = read_json(&dir.path("during.json"));
    assert_eq!(
        during["rocsync"]["parameters"]["pids"],
        serde_json::json!([pid])
    );
    assert_eq!(untraced(&addr), 0.0);
    stop(daemon);
}

/// Another user's thread churn hides no hang: a thread's call start goes at its exit and
/// a user's live threads hold a share of the kernel's map at most. (An LRU over every
/// thread gave up the blocked call's start, the one touched least recently: no hang
/// trace, or one that said "returned" while the call still blocked.)
#[test]
fn another_users_thread_churn_hides_no_hang() {
    let name = "another_users_thread_churn_hides_no_hang";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &FLAGS);
    let addr = metrics_addr(&lines);
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Short-lived threads for 14 s, one synchronize each, started first.
    let mut churn = Gated::start(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(&exe)
            .args(["gated", "churn", "14000"]),
    );
    churn.open_when_tracked(&mut lines);
    std::thread::sleep(std::time::Duration::from_secs(1));
    // Root's process blocks 6 s while the churn goes on.
    let log = dir.path("victim.log");
    let mut victim = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", "1", "6000000"])
            .env("SCENARIO_LOG", &log),
    );
    victim.open_when_tracked(&mut lines);
    let pid = victim.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    assert!(victim.child.wait().unwrap().success());
    assert!(
        churn.child.try_wait().unwrap().is_none(),
        "the churn ended before the call returned"
    );
    let listed = stall_traces(&dir.path("rocsync.sock"), 1);
    let span = syncs(&log)[0];
    assert!(span.1 - span.0 >= 5 * S, "{span:?}");
    let t = listed_trace(&listed, "hang", pid);
    assert_hang_of(&t, span);
    // Traced until the call returned, not ended early as if it had.
    let sync = call_rows(&t)
        .into_iter()
        .find(|r| r.pid == u64::from(pid) && r.name == "hipStreamSynchronize")
        .expect("the blocked call's row");
    assert_eq!(sync.ret, Some(0), "{sync:?}");
    // Its return was timed (its start kept): a stall, the node's only one.
    let stalls = "rocsync_stalls_total{api=\"hipStreamSynchronize\"";
    assert_eq!(metric(&addr, stalls), 1.0);
    assert_eq!(metric(&addr, "rocsync_calls_untimed_total"), 0.0);
    assert!(churn.child.wait().unwrap().success());
    churn.said.wait_for("threads ");
    let made: u64 = churn.said.1.last().unwrap()["threads ".len()..]
        .trim()
        .parse()
        .unwrap();
    // More threads than the old map held, twice over: the churn could push anything out.
    assert!(made >= 2 * 16384, "the churn made only {made} threads");
    stop(daemon);
}
