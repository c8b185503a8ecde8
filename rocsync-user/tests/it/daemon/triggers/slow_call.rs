//! A stall or hang trace holds the slow call itself, with the flight recorder on or off:
//! off, its row comes from what the daemon knew of it (the stall's return, the hang's
//! in-flight entry), id 0 (the probes gave it none), its times as the scenario logged
//! them, and its exit — for a hang — completes it (no unpaired exit); on, the recorder's
//! own entry is its row, once.

use std::{path::PathBuf, process::Command};

use rocsync_tests::{LoggedCall, read_log};
use serde_json::Value;

use crate::{
    common::{daemon::*, packets::monotonic_ns, *},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

/// Stall traces of calls over 50 ms (300 ms after), one a second, hangs past 1 s (the
/// blocks here are 3 s); `flight` or not.
fn daemon_args(flight: bool) -> Vec<&'static str> {
    let mut args = vec![
        "--capture-on-stall",
        "50ms",
        "--hang-after",
        "1s",
        "--stall-window-after",
        "300ms",
        "--stall-interval",
        "1s",
    ];
    if flight {
        args.extend(["--flight-recorder", "10s"]);
    }
    args
}

/// The scenario blocked once in `hipStreamSynchronize` for `us`, let go once tracked and
/// run to its end; its pid and logged calls.
fn stall_once(
    dir: &TempDir,
    exe: &std::path::Path,
    lines: &mut Lines,
    us: u64,
) -> (u32, Vec<LoggedCall>) {
    let us = us.to_string();
    let log = dir.path(&format!("stall-{us}.log"));
    let mut target = Gated::start(
        Command::new(exe)
            .args(["gated", "stall", "1", &us])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(lines);
    let pid = target.child.id();
    assert!(target.child.wait().unwrap().success());
    (pid, read_log(&log))
}

/// The trace's rows of the logged synchronisation's thread and API.
fn rows_of<'a>(t: &'a Value, sync: &LoggedCall) -> Vec<&'a Value> {
    t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["cat"] == "cuda_runtime"
                && e["name"] == "hipStreamSynchronize"
                && e["tid"].as_u64() == Some(u64::from(sync.tid))
        })
        .collect()
}

/// The row is the logged call: it lies within the log's span (the probes run inside it;
/// 50 µs for the clock offset's error) and lasts at least 9/10 of the `blocked_us` its
/// kernel ran (launched just before the call began), so no other call could pass. Its
/// stream and return code are the logged ones. Not "ends within 1 ms of the log": on a
/// loaded CI the scenario's own clock read after the return came 1.1 ms late.
fn assert_row_is(t: &Value, row: &Value, sync: &LoggedCall, blocked_us: u64) {
    let start = monotonic_ns(t, row["ts"].as_f64().unwrap());
    let dur = (row["dur"].as_f64().unwrap() * 1000.0) as i64;
    let end = start + dur;
    let slack = 50_000;
    let (before, after) = (sync.before_ns as i64, sync.after_ns as i64);
    assert!(
        before - slack <= start && end <= after + slack && dur >= blocked_us as i64 * 900,
        "row {start}..{end} ns, logged {before}..{after}, blocked {blocked_us} µs: {row}"
    );
    assert_eq!(row["args"]["ret"], sync.ret, "{row}");
    assert_eq!(
        row["args"]["hip_stream"],
        format!("{:#x}", sync.args[0]),
        "{row}"
    );
}

fn the_sync(logged: &[LoggedCall]) -> &LoggedCall {
    logged
        .iter()
        .find(|c| c.api == "hipStreamSynchronize")
        .unwrap()
}

fn trace_of(dir: &TempDir, kind: &str, pid: u32) -> Value {
    let listed: Vec<PathBuf> = stall_traces(&dir.path("rocsync.sock"), 1);
    listed_trace(&listed, kind, pid)
}

#[test]
fn a_hang_trace_holds_its_blocked_call_without_the_flight_recorder() {
    let name = "a_hang_trace_holds_its_blocked_call_without_the_flight_recorder";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (_daemon, mut lines) = start_daemon(&dir, &exe, &daemon_args(false));
    // Blocked 3 s: found after 1-2 s, long after it began.
    let (pid, logged) = stall_once(&dir, &exe, &mut lines, 3_000_000);
    let sync = the_sync(&logged);
    let t = trace_of(&dir, "hang", pid);
    assert_eq!(t["rocsync"]["parameters"]["hang"]["ended"], "returned");
    let rows = rows_of(&t, sync);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["args"]["correlation"], 0, "{}", rows[0]);
    assert_row_is(&t, rows[0], sync, 3_000_000);
    // Its exit, recorded, completed it.
    assert_eq!(t["rocsync"]["drops"]["unpaired_exits"], 0);
}

#[test]
fn a_stall_trace_holds_its_slow_call_without_the_flight_recorder() {
    let name = "a_stall_trace_holds_its_slow_call_without_the_flight_recorder";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (_daemon, mut lines) = start_daemon(&dir, &exe, &daemon_args(false));
    // 200 ms: a stall (over 50 ms), never a hang (under 1 s).
    let (pid, logged) = stall_once(&dir, &exe, &mut lines, 200_000);
    let sync = the_sync(&logged);
    let t = trace_of(&dir, "stall", pid);
    let rows = rows_of(&t, sync);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["args"]["correlation"], 0, "{}", rows[0]);
    assert_row_is(&t, rows[0], sync, 200_000);
}

#[test]
fn with_the_flight_recorder_a_hang_trace_holds_its_call_once_as_recorded() {
    let name = "with_the_flight_recorder_a_hang_trace_holds_its_call_once_as_recorded";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (_daemon, mut lines) = start_daemon(&dir, &exe, &daemon_args(true));
    let (pid, logged) = stall_once(&dir, &exe, &mut lines, 3_000_000);
    let sync = the_sync(&logged);
    let t = trace_of(&dir, "hang", pid);
    let rows = rows_of(&t, sync);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_ne!(rows[0]["args"]["correlation"], 0, "{}", rows[0]);
    assert_row_is(&t, rows[0], sync, 3_000_000);
}

/// The hang says what it waits on, from the probes' dependency state: the synchronised
/// stream's wait, the event's record on the other stream (handles and times as the
/// scenario logged them), and that stream's own state; in the trace and in the log.
#[test]
fn a_hang_names_the_event_it_waits_on_and_the_stream_that_recorded_it() {
    let name = "a_hang_names_the_event_it_waits_on_and_the_stream_that_recorded_it";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (_daemon, mut lines) = start_daemon(&dir, &exe, &daemon_args(false));
    let log = dir.path("hang.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", "1", "3000000"])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    let pid = target.child.id();
    lines.wait_for_all(&[&format!("hang: pid {pid}'s hipStreamSynchronize")]);
    // While it blocks, `rocsync status` says it and what it waits on.
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(status.contains("hangs traced now: 1\n"), "{status}");
    assert!(target.child.wait().unwrap().success());
    let logged = read_log(&log);
    let call = |api: &str| logged.iter().find(|c| c.api == api).unwrap();
    let (record, wait, sync) = (
        call("hipEventRecord"),
        call("hipStreamWaitEvent"),
        the_sync(&logged),
    );
    let (event, s1, s2) = (record.args[0], record.args[1], wait.args[0]);
    assert_eq!((wait.args[1], sync.args[0]), (event, s2));
    let t = trace_of(&dir, "hang", pid);
    let offset = t["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    let steps = t["rocsync"]["parameters"]["hang"]["waits_on"]
        .as_array()
        .unwrap()
        .clone();
    let hex = |h: u64| format!("{h:#x}");
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(steps[0]["stream"], hex(s2));
    assert_eq!(steps[0]["waited_on_event"], hex(event));
    assert_eq!(steps[1]["event"], hex(event));
    assert_eq!(steps[1]["recorded_on_stream"], hex(s1));
    assert_eq!(steps[2]["stream"], hex(s1));
    assert_eq!(steps[2]["waited"], "nothing the probes saw");
    // Each at its call, as logged (µs, and two readings of the wall clock's offset).
    for (step, logged) in [(&steps[0], wait), (&steps[1], record)] {
        let at = step["at_unix_us"].as_i64().unwrap() * 1000 - offset;
        let (before, after) = (logged.before_ns as i64, logged.after_ns as i64);
        assert!(
            (before - 1_000_000..=after + 1_000_000).contains(&at),
            "{step} at {at}, logged {before}..{after}"
        );
    }
    let waits = format!(
        "waits on event {} recorded on stream {}",
        hex(event),
        hex(s1)
    );
    lines.wait_for_all(&[&format!(
        "hang: pid {pid}'s hipStreamSynchronize (thread {}) still blocked, {waits}",
        sync.tid,
    )]);
    let line = format!(
        "  pid {pid} thread {} hipStreamSynchronize blocked ",
        sync.tid
    );
    let shown = status.lines().find(|l| l.starts_with(&line));
    assert!(shown.is_some_and(|l| l.contains(&waits)), "{status}");
}
