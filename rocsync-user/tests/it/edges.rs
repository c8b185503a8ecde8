//! End to end on the simulated runtime: `rocsync run` writes a Kineto trace whose waits
//! resolve to exactly the records the scenario's own log says they waited on. Needs root.

use std::{collections::BTreeMap, io::Read as _};

use crate::common::*;
use rocsync_tests::{read_log, scenario, sim_hip};

/// Runs a scenario, returns (log, raw calls, trace).
fn traced(
    dir: &TempDir,
    args: &[&str],
    output: &str,
) -> (
    Vec<rocsync_tests::LoggedCall>,
    Vec<RawCall>,
    std::path::PathBuf,
) {
    let log = dir.path("scenario.log");
    let raw = dir.path("calls.jsonl");
    let out = dir.path(output);
    run_ok(
        rocsync()
            .args(["run", "-o"])
            .arg(&out)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario())
            .args(args)
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", sim_hip()),
    );
    let (_, calls) = read_raw(&raw);
    (read_log(&log), calls, out)
}

fn assert_edges_match_log(
    logged: &[rocsync_tests::LoggedCall],
    calls: &[RawCall],
    trace: &serde_json::Value,
) {
    assert_same_calls(logged, calls.to_vec());
    let corr = assert_rows_match_log(trace, None, logged);
    let want: BTreeMap<u64, i64> = expected_edges(logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(trace_edges(trace), want);
}

#[test]
fn cross_thread_record_wait_pairs_resolve_exactly() {
    if !can_trace("cross_thread_record_wait_pairs_resolve_exactly") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, out) = traced(&dir, &["cross", "40"], "cross.json");
    let trace = read_json(&out);
    assert_edges_match_log(&logged, &calls, &trace);
    // Every wait in this scenario has a producer on the other thread's stream.
    let edges = trace_edges(&trace);
    assert!(edges.values().all(|&r| r >= 0), "{edges:?}");
    let rocsync = &trace["rocsync"];
    assert_eq!(rocsync["waits_unresolved"], 0);
    assert_eq!(
        rocsync["waits_resolved"].as_u64().unwrap() as usize,
        edges.len()
    );
}

#[test]
fn handle_reuse_spt_and_record_with_flags_resolve_exactly() {
    if !can_trace("handle_reuse_spt_and_record_with_flags_resolve_exactly") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, out) = traced(&dir, &["basic"], "basic.json.gz");
    // The trace is gzip-compressed because of its name.
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_edges_match_log(&logged, &calls, &trace);
    // The scenario reuses a destroyed event's memory for a new event: its first wait is
    // unresolved, even though the old event was recorded at the same address.
    let edges = trace_edges(&trace);
    assert!(edges.values().any(|&r| r == -1));
    let names: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for api in [
        "hipStreamWaitEvent_spt",
        "hipEventRecord_spt",
        "hipEventRecordWithFlags",
        "Stream Sync",
        "Context Sync",
        "Event Sync",
    ] {
        assert!(names.contains(&api), "{api} missing");
    }
}

#[test]
fn convert_reproduces_the_live_trace() {
    if !can_trace("convert_reproduces_the_live_trace") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, live) = traced(&dir, &["cross", "10"], "live.json");
    // Converted to a compressed trace: `.gz` output, read back through gzip.
    let converted = dir.path("converted.json.gz");
    run_ok(
        rocsync()
            .arg("convert")
            .arg(dir.path("calls.jsonl"))
            .arg("-o")
            .arg(&converted),
    );
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&converted).unwrap()),
        &mut text,
    )
    .unwrap();
    let b: serde_json::Value = serde_json::from_slice(&text).expect("gzip of a trace");
    // Not only equal to the live trace: right by the scenario's own log.
    assert_edges_match_log(&logged, &calls, &b);
    let a = read_json(&live);
    assert_eq!(a["traceEvents"], b["traceEvents"]);
    assert_eq!(a["baseTimeNanoseconds"], b["baseTimeNanoseconds"]);
}

#[test]
fn the_cet_build_and_hip_lib_are_traced_exactly() {
    if !can_trace("the_cet_build_and_hip_lib_are_traced_exactly") {
        return;
    }
    let dir = TempDir::new();
    let (log, raw) = (dir.path("s.log"), dir.path("r.jsonl"));
    let cet = rocsync_tests::sim_hip_cet();
    // The CET runtime, dlopen'ed by the scenario and named up front with --hip-lib.
    let out = run_ok(
        rocsync()
            .args(["run", "-v", "--hip-lib"])
            .arg(&cet)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(rocsync_tests::scenario_dlopen())
            .arg("basic")
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", &cet),
    );
    let stderr = stderr_of(&out);
    // Every probe sits after endbr64; most then on an emulated instruction (past a
    // `cmp`/`test` where provably safe). Those that stay single-stepped are named in -v.
    let placements: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(": probe on"))
        .collect();
    assert!(!placements.is_empty(), "{stderr}");
    assert!(
        placements.iter().all(|l| l.contains("after endbr64")),
        "{placements:#?}"
    );
    let emulated = placements
        .iter()
        .filter(|l| l.contains("(emulated)"))
        .count();
    assert!(emulated * 2 > placements.len(), "{placements:#?}");
    // One file, attached once (by --hip-lib, then found mapped: not twice).
    assert_eq!(stderr.matches("attached to").count(), 1, "{stderr}");
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&read_log(&log), calls);
}
