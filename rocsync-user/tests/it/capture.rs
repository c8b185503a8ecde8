//! End-to-end capture on the simulated HIP runtime (the real ones: `real_runtimes`):
//! every call a program makes appears exactly once, with its thread, arguments and
//! return code. Needs root (eBPF); skips with a reason otherwise.

use std::{io::Write as _, time::Duration};

use crate::common::*;
use rocsync_tests::{read_log, scenario, scenario_dlopen, sim_hip};

#[test]
fn run_traces_a_linked_runtime_exactly() {
    if !can_trace("run_traces_a_linked_runtime_exactly") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, _) = run_scenario(&dir, &scenario(), &["basic"]);
    assert!(logged.len() >= 25, "scenario made {} calls", logged.len());
    // The error paths are in the log and must come back with their codes.
    assert!(logged.iter().any(|l| l.ret == 400) && logged.iter().any(|l| l.ret == 101));
    assert_same_calls(&logged, calls);
}

#[test]
fn run_traces_a_runtime_loaded_with_dlopen() {
    if !can_trace("run_traces_a_runtime_loaded_with_dlopen") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, stderr) = run_scenario(&dir, &scenario_dlopen(), &["basic"]);
    assert!(stderr.contains("attached to"), "{stderr}");
    assert_same_calls(&logged, calls);
}

#[test]
fn many_threads_lose_nothing_or_report_drops_exactly() {
    if !can_trace("many_threads_lose_nothing_or_report_drops_exactly") {
        return;
    }
    let dir = TempDir::new();
    let raw = dir.path("calls.jsonl");
    let log = dir.path("scenario.log");
    run_ok(
        rocsync()
            .args(["run", "--raw"])
            .arg(&raw)
            .arg("--")
            .arg(scenario())
            .args(["threads", "8", "3200"])
            .env("SCENARIO_LOG", &log),
    );
    let logged = read_log(&log);
    assert!(logged.len() >= 100_000, "{} calls", logged.len());
    let (_, calls) = read_raw(&raw);
    let lost = raw_lost_ids(&raw);
    if lost == 0 {
        assert_same_calls(&logged, calls);
    } else {
        assert_eq!(
            assert_calls_within(&logged, calls) as u64 + lost,
            probed(&logged).len() as u64,
            "every call is captured or counted lost"
        );
    }
}

#[test]
fn run_exits_with_the_commands_status() {
    if !can_trace("run_exits_with_the_commands_status") {
        return;
    }
    let out = rocsync()
        .args(["run", "--"])
        .arg(scenario())
        .arg("basic")
        .env("SCENARIO_EXIT", "7")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", stderr_of(&out));
}

#[test]
fn attach_captures_a_running_process_until_it_exits() {
    if !can_trace("attach_captures_a_running_process_until_it_exits") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["cross", "50"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = attach_and_start(&mut target, &raw);
    assert!(target.wait().unwrap().success());
    // The target's exit ends the capture.
    let status = tracer.wait().unwrap();
    assert!(status.success());
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&read_log(&dir.path("scenario.log")), calls);
}

#[test]
fn attach_wait_catches_a_library_loaded_later() {
    if !can_trace("attach_wait_catches_a_library_loaded_later") {
        return;
    }
    let dir = TempDir::new();
    let log = dir.path("scenario.log");
    // The scenario loads the runtime with dlopen only once the gate opens: after rocsync
    // says it is waiting (a handshake, not a head start).
    let mut target = start_gated(&dir, &scenario_dlopen(), &["basic"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--wait", "--no-status", "--raw"])
            .arg(&raw)
            .arg("--pid")
            .arg(target.id().to_string()),
    );
    wait_for_line(&mut tracer, "waiting for process", Duration::from_secs(20));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success());
    let (_, mut calls) = read_raw(&raw);
    // attach probes hipGetDevice for a while to learn devices; the default set does not.
    calls.retain(|c| c.api != "hipGetDevice");
    assert_same_calls(&read_log(&log), calls);
}

#[test]
fn run_through_the_system_loader_traces_the_program_it_loads() {
    if !can_trace("run_through_the_system_loader_traces_the_program_it_loads") {
        return;
    }
    let dir = TempDir::new();
    let loader = std::path::Path::new("/lib64/ld-linux-x86-64.so.2");
    let program = scenario();
    let args = [program.to_str().unwrap(), "basic"];
    let (logged, calls, _) = traced_run(&dir, &[], loader, &args);
    assert!(logged.len() >= 25, "scenario made {} calls", logged.len());
    assert_same_calls(&logged, calls);
}

#[test]
fn every_copy_of_the_runtime_in_a_process_is_traced() {
    if !can_trace("every_copy_of_the_runtime_in_a_process_is_traced") {
        return;
    }
    let dir = TempDir::new();
    // A second copy under another name, as a wheel that bundles its own runtime has.
    let copy = dir.path("libamdhip64.so.6");
    std::fs::copy(sim_hip(), &copy).unwrap();
    let log = dir.path("scenario.log");
    let raw = dir.path("calls.jsonl");
    let out = run_ok(
        rocsync()
            .args(["run", "--raw"])
            .arg(&raw)
            .arg("--")
            .arg(scenario_dlopen())
            .arg("basic")
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", sim_hip())
            .env("SCENARIO_HIP2", &copy),
    );
    let stderr = stderr_of(&out);
    assert_eq!(stderr.matches("attached to").count(), 2, "{stderr}");
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&read_log(&log), calls);
}

#[test]
fn skipped_functions_are_not_probed() {
    if !can_trace("skipped_functions_are_not_probed") {
        return;
    }
    let dir = TempDir::new();
    let flags = ["--skip", "hipGetDevice,hipSetDevice"];
    let (logged, calls, _) = traced_run(&dir, &flags, &scenario(), &["basic"]);
    let logged: Vec<_> = logged
        .into_iter()
        .filter(|l| !l.api.ends_with("etDevice"))
        .collect();
    assert_same_calls(&logged, calls);
}

#[test]
fn a_cuda_runtime_is_found_and_traced_like_hip() {
    if !can_trace("a_cuda_runtime_is_found_and_traced_like_hip") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, stderr) = run_scenario(&dir, &rocsync_tests::scenario_cuda(), &["basic"]);
    assert!(stderr.contains("libcudart.so.13"), "{stderr}");
    assert!(logged.iter().any(|l| l.api == "cudaStreamWaitEvent_ptsz"));
    assert_same_calls(&logged, calls);
    // Forcing the other backend finds nothing to probe in this process.
    let out = run_ok(
        rocsync()
            .args(["run", "--backend", "hip", "--"])
            .arg(rocsync_tests::scenario_cuda())
            .arg("basic"),
    );
    assert!(stderr_of(&out).contains("captured 0 calls"));
}

#[test]
fn cuda_cross_thread_waits_resolve_exactly() {
    if !can_trace("cuda_cross_thread_waits_resolve_exactly") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("cuda.json");
    let flags = ["-o", trace.to_str().unwrap()];
    let (logged, calls, _) = traced_run(
        &dir,
        &flags,
        &rocsync_tests::scenario_cuda(),
        &["cross", "30"],
    );
    assert_same_calls(&logged, calls.clone());
    let corr = seq_to_correlation(&logged, &calls);
    let want: std::collections::BTreeMap<u64, i64> = expected_edges(&logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    assert!(want.len() >= 30 && want.values().all(|&r| r >= 0));
    let t = read_json(&trace);
    assert_eq!(trace_edges(&t), want);
    // CUDA's own names and fields, as Kineto writes them.
    let waits: Vec<&serde_json::Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" && e["name"] == "cudaStreamWaitEvent")
        .collect();
    assert!(!waits.is_empty());
    assert!(
        waits
            .iter()
            .all(|e| e["args"]["cuda_sync_kind"] == "Stream Wait Event")
    );
}

#[test]
fn event_queries_and_nested_runtime_calls_are_traced_end_to_end() {
    if !can_trace("event_queries_and_nested_runtime_calls_are_traced_end_to_end") {
        return;
    }
    let dir = TempDir::new();
    let (log, raw, trace) = (dir.path("s.log"), dir.path("r.jsonl"), dir.path("t.json"));
    run_ok(
        rocsync()
            .args(["run", "-o"])
            .arg(&trace)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario())
            .arg("query")
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", sim_hip())
            // The runtime's hipStreamSynchronize_spt calls its exported hipStreamSynchronize.
            .env("HIP_SIM_SPT_CALLS_PLAIN", "1"),
    );
    let logged = read_log(&log);
    let (_, calls) = read_raw(&raw);
    // The scenario logs the call it made; the runtime made the inner one itself.
    let (inner, made): (Vec<_>, Vec<_>) = calls
        .into_iter()
        .partition(|c| c.api == "hipStreamSynchronize");
    assert_same_calls(&logged, made.clone());
    let outer = made
        .iter()
        .find(|c| c.api == "hipStreamSynchronize_spt")
        .expect("the outer call");
    assert_eq!(inner.len(), 1, "{inner:?}");
    let inner = &inner[0];
    assert_eq!(
        (inner.tid, inner.correlation),
        (outer.tid, outer.correlation + 1)
    );
    assert!(outer.enter_ns < inner.enter_ns && inner.exit_ns < outer.exit_ns);
    // Every query resolves like an event synchronize, by the scenario's own log.
    let t = read_json(&trace);
    let edges = trace_edges(&t);
    let seqs = seq_to_correlation(&logged, &made);
    let queries: Vec<&rocsync_tests::LoggedCall> =
        logged.iter().filter(|l| l.api == "hipEventQuery").collect();
    assert_eq!(queries.len(), 3);
    assert_eq!(
        queries[1].ret, 600,
        "the middle query found the work running"
    );
    for (wait, record) in expected_edges(&logged) {
        let want = record.map_or(-1, |r| seqs[&r] as i64);
        assert_eq!(edges[&seqs[&wait]], want, "wait seq {wait}");
    }
    let reasons: Vec<&str> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "hipEventQuery")
        .filter_map(|e| e["args"]["wait_on_unknown_reason"].as_str())
        .collect();
    assert_eq!(reasons, ["never_recorded"]);
}

#[test]
fn timestamps_fall_within_the_scenarios_own_clock_readings() {
    if !can_trace("timestamps_fall_within_the_scenarios_own_clock_readings") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    let flags = ["-o", trace.to_str().unwrap()];
    let (logged, calls, _) = traced_run(&dir, &flags, &scenario(), &["basic"]);
    let by_corr: std::collections::BTreeMap<u64, &RawCall> =
        calls.iter().map(|c| (c.correlation, c)).collect();
    let corr = seq_to_correlation(&logged, &calls);
    let t = read_json(&trace);
    let base = t["baseTimeNanoseconds"].as_i64().unwrap();
    let offset = t["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    let rows: std::collections::BTreeMap<u64, f64> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| {
            (
                e["args"]["correlation"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut checked = 0;
    for l in probed(&logged) {
        let c = by_corr[&corr[&l.seq]];
        // The probes' CLOCK_MONOTONIC times lie between the scenario's own readings.
        let exit = c.exit_ns.expect("returned");
        assert!(
            l.before_ns <= c.enter_ns && c.enter_ns <= exit && exit <= l.after_ns,
            "{} seq {}: {}..{} outside {}..{}",
            l.api,
            l.seq,
            c.enter_ns,
            exit,
            l.before_ns,
            l.after_ns
        );
        // And the trace's ts is that time on the wall clock, in µs from the base.
        if let Some(ts) = rows.get(&c.correlation) {
            let wall = c.enter_ns as i64 + offset;
            assert!(
                ((base as f64 + ts * 1000.0) - wall as f64).abs() < 2.0,
                "{}",
                l.api
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} rows checked");
}
