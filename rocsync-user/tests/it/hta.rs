//! HolisticTraceAnalysis as a real consumer: it parses a rocsync trace of a cross-stream
//! scenario and its model holds the record→wait edges the scenario made.
//!
//! Needs root (capture) and `ROCSYNC_HTA_PYTHON`, a Python with `holistictraceanalysis`
//! (`cargo xtask test` creates one); skips with a reason otherwise.

use std::{collections::BTreeMap, process::Command};

use crate::common::*;
use rocsync_tests::{hta_script, read_log, scenario};

#[test]
fn hta_finds_the_record_wait_edges() {
    if !can_trace("hta_finds_the_record_wait_edges") {
        return;
    }
    let Some(python) = std::env::var_os("ROCSYNC_HTA_PYTHON") else {
        rocsync_tests::skip(
            "hta_finds_the_record_wait_edges",
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
        return;
    };
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    let raw = dir.path("calls.jsonl");
    let log = dir.path("scenario.log");
    run_ok(
        rocsync()
            .args(["run", "-o"])
            .arg(traces.join("rank0.json"))
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario())
            .args(["cross", "30"])
            .env("SCENARIO_LOG", &log),
    );
    let out = run_ok(Command::new(python).arg(hta_script()).arg(&traces));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("HTA check prints JSON");
    let found: BTreeMap<u64, i64> = report["edges"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_i64().unwrap()))
        .collect();

    let logged = read_log(&log);
    let (_, calls) = read_raw(&raw);
    let corr = seq_to_correlation(&logged, &calls);
    let want: BTreeMap<u64, i64> = expected_edges(&logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    assert!(want.len() >= 30, "{} waits", want.len());
    assert!(want.values().all(|&r| r >= 0));
    assert_eq!(found, want, "HTA's view of the edges");

    // HTA's own CPU<->GPU join: every sync call the scenario made is one GPU row, under
    // CUPTI's name, joined to that call's runtime row and back; nothing else is joined.
    let cupti = |api: &str| match api {
        "hipStreamWaitEvent" => Some("Stream Wait Event"),
        "hipEventSynchronize" | "hipEventQuery" => Some("Event Sync"),
        "hipStreamSynchronize" => Some("Stream Sync"),
        "hipDeviceSynchronize" => Some("Context Sync"),
        _ => None,
    };
    let mut want_joins: Vec<serde_json::Value> = logged
        .iter()
        .filter_map(|l| {
            let c = corr[&l.seq];
            cupti(&l.api).map(|gpu| serde_json::json!([gpu, c, l.api, c, true]))
        })
        .collect();
    let mut joins = report["joins"].as_array().unwrap().clone();
    let key = |v: &serde_json::Value| v[1].as_u64().unwrap();
    want_joins.sort_by_key(key);
    joins.sort_by_key(key);
    assert!(
        want_joins.iter().any(|j| j[0] == "Stream Sync"),
        "the scenario synchronizes streams too"
    );
    assert_eq!(joins, want_joins, "HTA's CPU<->GPU join");
    assert_eq!(report["cpu_joined"], want_joins.len());
    assert_eq!(report["sync_rows"], want_joins.len());
}
