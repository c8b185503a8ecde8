//! The probes number the calls of every process the daemon records, in one sequence; a
//! daemon trace holds some of them. The ids of the others' calls are not its losses: a
//! trace of one process while the flight recorder records two, a second trace after a
//! first, and the flight recorder's own dump count nothing lost and leave no wait
//! unresolved for a lost producer; a dump of a polling loop whose polls the budget takes
//! off and puts back holds only whole calls. Needs root.

use std::process::Command;

use crate::common::{daemon::*, *};
use rocsync_tests::read_log;

/// What a trace says it lost, and its waits unresolved for a lost producer. (It also
/// says how the daemon's call probes attach: through multi-uprobe links where the kernel
/// has them.)
fn losses(file: &str) -> (u64, u64, u64) {
    let t = read_json(std::path::Path::new(file.trim()));
    let r = &t["rocsync"];
    let links = apis::expected_call_probe_links();
    assert_eq!(r["parameters"]["call_probe_links"], links, "{file}");
    (
        r["drops"]["lost_ids"].as_u64().unwrap(),
        r["unresolved_reasons"]["producer_lost"].as_u64().unwrap(),
        r["waits_resolved"].as_u64().unwrap(),
    )
}

#[test]
fn a_daemon_trace_is_not_charged_with_other_processes_calls() {
    let name = "a_daemon_trace_is_not_charged_with_other_processes_calls";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--flight-recorder", "30s"]);
    // Two processes recorded by the flight recorder: their calls' ids interleave.
    let loops: Vec<Reaped> = ["0", "1"]
        .iter()
        .map(|r| tracked_loop_with(&dir, &exe, &mut lines, 5000, &[("RANK", r)]))
        .collect();
    let sock = dir.path("rocsync.sock");
    let pid = loops[0].id().to_string();
    let mut files = Vec::new();
    for round in ["first", "second"] {
        let file = ask_daemon(&sock, &["trace", "--pid", &pid, "--duration", "400ms"]);
        let (lost, producer_lost, _) = losses(&file);
        assert_eq!(
            lost, 0,
            "{round} trace: the other process's ids are not lost"
        );
        assert_eq!(producer_lost, 0, "{round} trace");
        files.push((file.trim().to_string(), loops[0].id()));
    }
    let file = ask_daemon(&sock, &["trace", "--flight"]);
    for f in file.lines() {
        let (lost, producer_lost, _) = losses(f);
        assert_eq!(
            lost, 0,
            "{f}: calls before the recorder's span are not lost"
        );
        assert_eq!(producer_lost, 0, "{f}");
        let pid = read_json(std::path::Path::new(f))["rocsync"]["pid"]
            .as_u64()
            .unwrap();
        files.push((f.to_string(), pid as u32));
    }
    let pids: Vec<u32> = loops.iter().map(|l| l.id()).collect();
    for mut l in loops {
        assert!(l.wait().unwrap().success());
    }
    stop(daemon);
    // Nothing lost by the processes' own logs: each trace an unbroken run of its calls,
    // each wait resolved as the log says.
    for (f, pid) in files {
        let rank = pids.iter().position(|&p| p == pid).expect("a loop's trace");
        let log = rocsync_tests::read_log(&dir.path(&format!("loop-RANK{rank}.log")));
        let window = assert_window_of_log(&read_json(std::path::Path::new(&f)), pid, &log);
        assert!(window.seqs.len() >= 3, "{f}: not one iteration");
    }
}

#[test]
fn a_flight_dump_of_a_polling_loop_under_the_budget_holds_only_whole_calls() {
    let name = "a_flight_dump_of_a_polling_loop_under_the_budget_holds_only_whole_calls";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // The budget takes the polling probe off and puts it back while the flight recorder
    // records every call: a poll entered while its entry probe was off and returning once
    // its return probe was back was an exit with no entry (44 338 in one dump).
    let flags = ["--budget", "1%", "--flight-recorder", "10s"];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let log = dir.path("poll.log");
    let mut target = Gated::start(Command::new(&exe).arg("poll").env("SCENARIO_LOG", &log));
    target.open_when_tracked(&mut lines);
    target.said.wait_for("polling from ");
    // Shed, then put back 2 s later: both transitions inside the recorder's span.
    lines.wait_for("hipEventQuery not probed in");
    lines.wait_for("hipEventQuery probed again in");
    let sock = dir.path("rocsync.sock");
    let dumped = ask_daemon(&sock, &["trace", "--flight"]);
    target.open(); // stop polling
    target.open(); // end
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
    let t = read_json(std::path::Path::new(dumped.lines().next().unwrap()));
    let drops = &t["rocsync"]["drops"];
    assert_eq!(drops["unpaired_exits"].as_u64(), Some(0), "{drops}");
    assert_eq!(drops["unpaired_entries"].as_u64(), Some(0), "{drops}");
    let rows = runtime_rows(&t);
    let polls = rows.iter().filter(|r| r["name"] == "hipEventQuery").count();
    assert!(polls > 1000, "{polls} polls recorded");
    // The recorder thread's records and waits: each a row, as its log says.
    let logged = read_log(&log);
    let records = logged.iter().filter(|l| l.api == "hipEventRecord").count();
    let recorded = rows
        .iter()
        .filter(|r| r["name"] == "hipEventRecord")
        .count();
    assert!(
        recorded > 0 && recorded <= records,
        "{recorded} of {records}"
    );
}

/// A trace switched on while a synchronize blocks records its return and not its entry:
/// a call begun before the trace, counted as such, not an entry lost (it was counted as
/// an unpaired exit; a flight recorder's span cut through a call the same way).
#[test]
fn a_call_in_flight_when_a_trace_begins_is_not_a_loss() {
    let name = "a_call_in_flight_when_a_trace_begins_is_not_a_loss";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let log = dir.path("stall.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", "1", "4000000"])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    // In its 4 s synchronize by now (with seconds to spare on a loaded machine); the
    // trace outlasts it.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let sock = dir.path("rocsync.sock");
    let pid = target.child.id().to_string();
    let file = ask_daemon(&sock, &["trace", "--pid", &pid, "--duration", "6000ms"]);
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
    let t = read_json(std::path::Path::new(file.trim()));
    let r = &t["rocsync"];
    assert_eq!(r["drops"]["unpaired_exits"].as_u64(), Some(0), "{r}");
    assert_eq!(r["drops"]["unpaired_entries"].as_u64(), Some(0), "{r}");
    assert_eq!(r["calls_begun_before"].as_u64(), Some(1), "{r}");
    // Its one synchronize began before the trace, so it has no row; the destroys after
    // it have theirs.
    let logged = read_log(&log);
    let syncs = logged.iter().filter(|l| l.api == "hipStreamSynchronize");
    assert_eq!(syncs.count(), 1);
    let rows = runtime_rows(&t);
    let named = |n: &str| rows.iter().filter(|r| r["name"] == n).count();
    assert_eq!(named("hipStreamSynchronize"), 0);
    assert_eq!(named("hipEventDestroy"), 1);
    assert_eq!(named("hipStreamDestroy"), 2);
}
