//! The flight recorder held to the budget (issue 63): a process whose records and waits
//! alone cost more than the budget is duty-cycled though the flight recorder records it
//! (it was left over the budget, "every probe stays on"); the recorder's dump holds the
//! periods on and says, per API, the periods off and the calls estimated in them, and
//! `/metrics` counts those calls; a hang of such a process still gets its whole trace.
//! Needs root.

use rocsync_tests::read_log;
use serde_json::Value;

use crate::{
    common::{daemon::*, *},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

const UNRECORDED: &str = "rocsync_flight_recorder_unrecorded_calls_total";
/// The daemon's flags: the flight recorder on, a budget the dense loop is over.
const CYCLED_RECORDER: [&str; 6] = [
    "--budget",
    "1%",
    "--budget-mode",
    "cycle",
    "--flight-recorder",
    "10s",
];

/// The budget's spans of `api` in a trace's `not_recorded` that the duty cycle made.
fn cycled_spans<'a>(t: &'a Value, api: &str) -> Vec<&'a Value> {
    let spans = t["rocsync"]["parameters"]["not_recorded"].as_array();
    (spans.into_iter().flatten())
        .filter(|s| s["reason"] == "duty_cycle" && s["api"] == api)
        .collect()
}

fn rows_of(t: &Value, api: &str) -> usize {
    runtime_rows(t).iter().filter(|r| r["name"] == api).count()
}

#[test]
fn a_process_the_flight_recorder_records_is_duty_cycled_and_its_dump_says_the_periods_off() {
    let name =
        "a_process_the_flight_recorder_records_is_duty_cycled_and_its_dump_says_the_periods_off";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &CYCLED_RECORDER);
    let addr = metrics_addr(&lines);
    // Record, wait and synchronize between 50 µs steps of work on the host: their
    // probes, returns and all, cost the loop far more than 1 % of its CPU.
    let log = dir.path("loop.log");
    let (mut target, said) = until_duty_cycled(&exe, &["dense", "8000", "50"], &log, &mut lines);
    assert!(
        said.contains("the flight recorder records them while on"),
        "{said}"
    );
    // Off for a while: estimated, and counted as what the recorder did not record.
    until(10, "no period off", || {
        metric(&addr, "rocsync_probes_duty_cycle") < 1.0
            && metric(&addr, &format!("{UNRECORDED}{{api=\"hipEventRecord\"}}")) > 0.0
    });
    // Not left over the budget for the recorder (its synchronizes alone, which stay
    // probed, may be over it: counted so, as for a counted process).
    let recording = r#"rocsync_over_budget_processes{reason="recording"}"#;
    assert_eq!(metric(&addr, recording), 0.0);
    assert!(!lines.1.iter().any(|l| l.contains("every probe stays on")));

    let dumped = ask_daemon(&dir.path("rocsync.sock"), &["trace", "--flight"]);
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
    let t = read_json(std::path::Path::new(dumped.lines().next().unwrap()));
    // The periods off, per API, each with the calls estimated in it.
    for api in ["hipEventRecord", "hipStreamWaitEvent"] {
        let spans = cycled_spans(&t, api);
        assert!(!spans.is_empty(), "{api}: {}", t["rocsync"]["parameters"]);
        let estimated: u64 = spans
            .iter()
            .filter_map(|s| s["estimated_calls"].as_u64())
            .sum();
        assert!(estimated > 0, "{api}: {spans:?}");
        assert!(
            spans.iter().all(|s| s["from_unix_us"].is_u64()),
            "{spans:?}"
        );
    }
    let drops = &t["rocsync"]["drops"];
    assert!(drops["duty_cycled_calls"].as_u64() > Some(0), "{drops}");
    // Whole calls only: the returns cycled with their entries.
    assert_eq!(drops["unpaired_exits"].as_u64(), Some(0), "{drops}");
    assert_eq!(drops["unpaired_entries"].as_u64(), Some(0), "{drops}");
    // The periods on are held; synchronizes stay probed through the periods off, so
    // the dump holds more of them than of the records (one each an iteration).
    let (records, syncs) = (
        rows_of(&t, "hipEventRecord"),
        rows_of(&t, "hipStreamSynchronize"),
    );
    assert!(records > 100, "{records} records held");
    assert!(syncs > records, "{syncs} synchronizes, {records} records");
    let logged = read_log(&log);
    let made = logged.iter().filter(|l| l.api == "hipEventRecord").count();
    assert!(records < made, "{records} of {made}: nothing off?");
}

/// A hang of a duty-cycled process that the flight recorder records: caught, and its
/// trace whole from when it began (a trace holds every probe on) until the call
/// returned; what the recorder held before it says its periods off.
#[test]
fn a_hang_of_a_duty_cycled_process_still_gets_its_whole_trace() {
    let name = "a_hang_of_a_duty_cycled_process_still_gets_its_whole_trace";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let flags = [&CYCLED_RECORDER[..], &["--hang-after", "2s"]].concat();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let log = dir.path("loop.log");
    // 6 s of the dense loop, then one synchronize blocked 5 s.
    let args = ["dense_stall", "6000", "50", "5000000"];
    let (mut target, _) = until_duty_cycled(&exe, &args, &log, &mut lines);
    let pid = target.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    assert!(target.child.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 1);
    stop(daemon);
    let t = listed_trace(&listed, "hang", pid);
    let hang = &t["rocsync"]["parameters"]["hang"];
    assert_eq!(hang["ended"], "returned", "{hang}");
    // The blocked call is in it with its return, and so is every call after it.
    let logged = read_log(&log);
    let last = (logged.iter())
        .filter(|l| l.api == "hipStreamSynchronize")
        .max_by_key(|l| l.after_ns - l.before_ns)
        .unwrap();
    let rows = runtime_rows(&t);
    let blocked = rows
        .iter()
        .filter(|r| r["name"] == "hipStreamSynchronize")
        .filter_map(|r| r["dur"].as_f64())
        .fold(0.0, f64::max);
    let logged_us = (last.after_ns - last.before_ns) as f64 / 1e3;
    assert!(
        blocked >= logged_us * 0.9,
        "{blocked} µs in the trace, {logged_us} logged"
    );
    let drops = &t["rocsync"]["drops"];
    assert_eq!(drops["lost_ids"].as_u64(), Some(0), "{drops}");
    // What the recorder held before: the periods off said, their calls estimated.
    assert!(
        !cycled_spans(&t, "hipEventRecord").is_empty(),
        "{}",
        t["rocsync"]["parameters"]
    );
    assert!(drops["duty_cycled_calls"].as_u64() > Some(0), "{drops}");
}
