//! Scenarios written in Rust (tests/src/bin/scenario_driver.rs, the runtime loaded with
//! libloading) traced end to end: a fan-in of several producer threads into one consumer,
//! with events destroyed and re-created, resolves exactly as the driver's own log says, on
//! the HIP and the CUDA runtime. Needs root.

use std::{collections::BTreeMap, path::Path};

use crate::common::*;
use rocsync_tests::{read_log, scenario_driver, sim_hip};

fn fan_in(test: &str, lib: &Path, flags: &[&str]) {
    if !can_trace(test) {
        return;
    }
    let dir = TempDir::new();
    let (log, raw, out) = (
        dir.path("driver.log"),
        dir.path("calls.jsonl"),
        dir.path("trace.json"),
    );
    run_ok(
        rocsync()
            .arg("run")
            .args(flags)
            .args(["--no-status", "-o"])
            .arg(&out)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario_driver())
            .arg(lib)
            .args(["fan-in", "3", "25"])
            .env("SCENARIO_LOG", &log),
    );
    let logged = read_log(&log);
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&logged, calls.clone());
    let corr = seq_to_correlation(&logged, &calls);
    let want: BTreeMap<u64, i64> = expected_edges(&logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    // 3 waits per iteration, the never-recorded one, queries and synchronizes.
    assert!(want.len() > 3 * 25, "{} waits", want.len());
    assert_eq!(
        want.values().filter(|&&r| r < 0).count(),
        1,
        "only the wait on the never-recorded event is unresolved"
    );
    let trace = read_json(&out);
    assert_eq!(trace_edges(&trace), want);
    // The unresolved wait says why.
    let never = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "cuda_sync" && e["args"]["wait_on_cuda_event_record_corr_id"] == -1)
        .expect("the unresolved wait's sync row");
    assert_eq!(
        never["args"]["wait_on_unknown_reason"], "never_recorded",
        "{never}"
    );
}

#[test]
fn rust_fan_in_resolves_exactly_on_hip() {
    fan_in("rust_fan_in_resolves_exactly_on_hip", &sim_hip(), &[]);
}

#[test]
fn rust_fan_in_resolves_exactly_on_cuda() {
    let cudart = rocsync_tests::sim_cudart();
    fan_in(
        "rust_fan_in_resolves_exactly_on_cuda",
        &cudart,
        &["--backend", "cuda"],
    );
}
