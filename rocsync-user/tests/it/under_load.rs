//! `run` and `attach` under a flat-out poller (issue 64, "never report what did not
//! happen"): an attach records from when its loop runs and its trace says over what span;
//! calls in flight when it begins are counted as the daemon counts them; what the ring
//! loses is said with its remedy, and returns written after the stop (of calls the
//! capture does not hold) are no loss; a trace ends at its size bound, saying so. How
//! long a capture lasts is measured in
//! `bench/load.md`, not here. Needs root.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;
use rocsync_tests::{bench_calls, sim_hip};

/// A process calling `hipEventQuery(NULL)` flat out on `threads` threads (for minutes:
/// the test kills it).
fn poller(threads: u32) -> Reaped {
    paced_poller(threads, None)
}

/// The poller, at most `rate` calls a second over all its threads when given.
fn paced_poller(threads: u32, rate: Option<u32>) -> Reaped {
    Reaped(
        Command::new(bench_calls())
            .arg(sim_hip())
            .args(["hipEventQuery", "1000000000000", &threads.to_string()])
            .args(rate.map(|r| r.to_string()))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A shell spinning on a CPU: a busy neighbour.
fn busy_loop() -> Reaped {
    Reaped(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    )
}

/// `rocsync attach -p PID -d DURATION FLAGS -o TRACE`: its trace and stderr.
fn attach(pid: u32, duration: &str, flags: &[&str]) -> (Value, String) {
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    let out = run_ok(
        rocsync()
            .args([
                "attach",
                "--no-status",
                "-p",
                &pid.to_string(),
                "-d",
                duration,
            ])
            .args(flags)
            .arg("-o")
            .arg(&trace),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (read_json(&trace), stderr)
}

/// The rows of calls, with their start (µs since the epoch).
fn call_starts(trace: &Value) -> Vec<f64> {
    let base = trace["baseTimeNanoseconds"].as_u64().unwrap() as f64 / 1e3;
    (trace["traceEvents"].as_array().unwrap().iter())
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| base + e["ts"].as_f64().unwrap())
        .collect()
}

#[test]
fn an_attach_says_the_span_it_recorded_and_its_calls_lie_within_it() {
    if !can_trace("an_attach_says_the_span_it_recorded_and_its_calls_lie_within_it") {
        return;
    }
    let target = poller(2);
    let (trace, stderr) = attach(target.id(), "1s", &[]);
    let p = &trace["rocsync"]["parameters"];
    let (from, until) = (
        p["recorded_from_unix_us"].as_u64().expect("recorded from"),
        p["recorded_until_unix_us"]
            .as_u64()
            .expect("recorded until"),
    );
    // The duration counts from the recording's start: never less, and the recording
    // ends within half a second of it.
    assert!((1_000_000..=1_500_000).contains(&(until - from)), "{p}");
    let starts = call_starts(&trace);
    assert!(!starts.is_empty(), "{stderr}");
    // Every call entered while recorded (a millisecond for the clocks' conversion).
    let (lo, hi) = (from as f64 - 1e3, until as f64 + 1e3);
    let outside: Vec<_> = starts.iter().filter(|&&t| t < lo || t > hi).collect();
    assert!(
        outside.is_empty(),
        "{} of {} outside",
        outside.len(),
        starts.len()
    );
    // The summary says it too.
    assert!(stderr.contains(" recorded over "), "{stderr}");
}

#[test]
fn calls_in_flight_when_an_attach_begins_are_begun_before_not_lost() {
    if !can_trace("calls_in_flight_when_an_attach_begins_are_begun_before_not_lost") {
        return;
    }
    // Four threads in hipEventQuery flat out: when the attach begins recording, some
    // are within a call its probes saw enter (their returns alone are recorded). Each
    // attach may find none so: up to five are made.
    let target = poller(4);
    for _ in 0..5 {
        let (trace, stderr) = attach(target.id(), "300ms", &[]);
        let r = &trace["rocsync"];
        let begun = r["calls_begun_before"].as_u64().unwrap();
        let unpaired = r["drops"]["unpaired_exits"].as_u64().unwrap();
        if begun + unpaired == 0 {
            continue;
        }
        // None lost in the ring: every return with no entry is a call begun before.
        assert_eq!(r["drops"]["entry_records"], 0, "{stderr}");
        assert_eq!((begun > 0, unpaired), (true, 0), "{stderr}");
        assert!(
            stderr.contains("calls begun before the recording"),
            "{stderr}"
        );
        return;
    }
    panic!("no attach of five found a call in flight as it began");
}

#[test]
fn records_lost_are_said_with_their_remedy_and_returns_after_the_stop_are_no_loss() {
    if !can_trace("records_lost_are_said_with_their_remedy_and_returns_after_the_stop_are_no_loss")
    {
        return;
    }
    let target = poller(2);
    // 64 slots: the poller overflows it, and goes on calling after the stop.
    let (trace, stderr) = attach(target.id(), "1s", &["--ring-size", "4K"]);
    let r = &trace["rocsync"];
    let lost = |k: &str| r["drops"][k].as_u64().unwrap();
    assert!(lost("entry_records") > 0, "{stderr}");
    assert!(
        stderr.contains("--ring-size 16K; it is 4K now") && stderr.contains("--skip hipEventQuery"),
        "{stderr}"
    );
    // A return lost while recording leaves its entry unpaired, in flight, or was lost
    // with it: the returns the targets' later calls wrote after the stop, which the
    // capture does not hold, are not counted lost.
    let in_flight: u64 = (r["calls_per_api"].as_object().unwrap().values())
        .map(|n| n["no_return"].as_u64().unwrap())
        .sum();
    assert!(
        lost("exit_records") <= lost("entry_records") + lost("unpaired_entries") + in_flight,
        "{}",
        r["drops"]
    );
    std::mem::drop(target);
}

#[test]
fn a_trace_ends_at_its_size_bound_and_says_truncated() {
    if !can_trace("a_trace_ends_at_its_size_bound_and_says_truncated") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    // 600 000 polls: a trace of a hundred megabytes, cut at 1 MiB; the command goes on
    // untraced.
    let out = run_ok(
        rocsync()
            .args(["run", "--no-status", "--trace-max-bytes", "1M", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(bench_calls())
            .arg(sim_hip())
            .args(["hipEventQuery", "600000", "1"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let t = read_json(&trace);
    let cut = &t["rocsync"]["parameters"]["truncated"];
    assert_eq!(
        (&cut["reason"], &cut["max_bytes"]),
        (&"size".into(), &(1 << 20).into())
    );
    assert!(cut["left_out"].as_u64().unwrap() > 0, "{cut}");
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size <= 1 << 20, "{size} bytes");
    assert!(
        stderr.contains("stopping (a trace file reached --trace-max-bytes)")
            && stderr.contains("the trace was cut short"),
        "{stderr}"
    );
}

#[test]
fn the_defaults_lose_at_most_one_percent_of_150_000_calls_a_second_beside_busy_neighbours() {
    if !can_trace(
        "the_defaults_lose_at_most_one_percent_of_150_000_calls_a_second_beside_busy_neighbours",
    ) {
        return;
    }
    // The load: 150 000 polls a second on four threads, two CPUs kept busy by
    // others. The old 8 MiB ring (0.9 s of it) overflowed while the attach set up.
    let (_a, _b) = (busy_loop(), busy_loop());
    let target = paced_poller(4, Some(150_000));
    let (trace, stderr) = attach(target.id(), "3s", &[]);
    let r = &trace["rocsync"];
    let calls = r["calls"].as_u64().unwrap();
    let lost = r["drops"]["entry_records"].as_u64().unwrap();
    assert!(calls > 0, "{stderr}");
    assert!(
        lost * 100 <= calls + lost,
        "{lost} of {} lost: {stderr}",
        calls + lost
    );
    // And the duration held under that load.
    let p = &r["parameters"];
    let span = p["recorded_until_unix_us"].as_u64().unwrap()
        - p["recorded_from_unix_us"].as_u64().unwrap();
    assert!((3_000_000..=3_500_000).contains(&span), "{p}");
}
