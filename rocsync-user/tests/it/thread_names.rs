//! Threads are named as the kernel has them (`/proc/PID/task/TID/comm`), read when their
//! calls are first seen: in the trace's `thread_name` rows, the raw capture's trailer,
//! its conversion, and the report. The scenario's workers name themselves `worker-N` and
//! exit before the process does (the trace is written after): their names stay.

use std::collections::BTreeMap;

use crate::common::*;

/// `thread_name` rows of a trace's CPU threads (not its GPU tracks): tid → name.
fn thread_names(trace: &serde_json::Value) -> BTreeMap<u64, String> {
    let events = trace["traceEvents"].as_array().unwrap();
    let pids: Vec<&serde_json::Value> = (events.iter())
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| &e["pid"])
        .collect();
    (events.iter())
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && pids.contains(&&e["pid"]))
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn threads_are_named_as_the_kernel_named_them_when_first_seen() {
    if !can_trace("threads_are_named_as_the_kernel_named_them_when_first_seen") {
        return;
    }
    let dir = TempDir::new();
    let (out, raw) = (dir.path("t.json"), dir.path("calls.jsonl"));
    run_ok(
        rocsync_run_raw(&out, &raw, &rocsync_tests::scenario())
            .args(["threads", "3", "4"])
            .env("SCENARIO_LOG", dir.path("scenario.log"))
            .env("SCENARIO_HIP", rocsync_tests::sim_hip())
            // Alive a second after its first call: rocsync reads it within 10 ms.
            .env("SCENARIO_LINGER_MS", "1000"),
    );
    let mut names: Vec<String> = thread_names(&read_json(&out)).into_values().collect();
    names.sort();
    assert_eq!(names, ["worker-0", "worker-1", "worker-2"], "{names:?}");
    // The raw capture carries them: its conversion and its report name them too.
    let converted = dir.path("c.json");
    run_ok(rocsync().arg("convert").arg(&raw).arg("-o").arg(&converted));
    let mut again: Vec<String> = thread_names(&read_json(&converted)).into_values().collect();
    again.sort();
    assert_eq!(again, names);
    for input in [&out, &raw] {
        let report = run_ok(rocsync().arg("report").arg(input).arg("--json"));
        let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
        let waits = report["longest_waits"].as_array().unwrap();
        assert!(!waits.is_empty(), "{report}");
        for w in waits {
            let name = w["thread_name"].as_str().unwrap_or_default();
            assert!(name.starts_with("worker-"), "{}: {w}", input.display());
        }
    }
}

/// Workers that make their calls and exit at once, gone before rocsync reads their calls
/// (procfs has no name for them then): named as they left, by the kernel's exit
/// tracepoint.
#[test]
fn threads_that_exit_before_their_calls_are_read_are_named() {
    if !can_trace("threads_that_exit_before_their_calls_are_read_are_named") {
        return;
    }
    let dir = TempDir::new();
    let (out, raw) = (dir.path("t.json"), dir.path("calls.jsonl"));
    run_ok(
        rocsync_run_raw(&out, &raw, &rocsync_tests::scenario())
            .args(["threads", "8", "2"])
            .env("SCENARIO_LOG", dir.path("scenario.log"))
            .env("SCENARIO_HIP", rocsync_tests::sim_hip()),
    );
    let want: Vec<String> = (0..8).map(|i| format!("worker-{i}")).collect();
    for trace in [read_json(&out), {
        let converted = dir.path("c.json");
        run_ok(rocsync().arg("convert").arg(&raw).arg("-o").arg(&converted));
        read_json(&converted)
    }] {
        let mut names: Vec<String> = thread_names(&trace).into_values().collect();
        names.sort();
        assert_eq!(names, want, "{names:?}");
    }
}

/// An exiting thread's name that the probes' event ring has no room for is counted
/// (`drops.thread_names`, and the summary's `lost:`), not lost without a word: rocsync is
/// stopped (SIGSTOP, never its target) while a process makes and ends threads, so its
/// 4 KiB ring fills.
#[test]
fn exiting_threads_names_lost_to_a_full_ring_are_counted() {
    if !can_trace("exiting_threads_names_lost_to_a_full_ring_are_counted") {
        return;
    }
    let dir = TempDir::new();
    let out = dir.path("t.json");
    let mut tracer = rocsync()
        .args(["run", "--no-status", "--ring-size", "4K", "-o"])
        .arg(&out)
        .arg("--")
        .arg(rocsync_tests::scenario())
        .args(["churn", "6000"])
        .env("SCENARIO_LOG", dir.path("scenario.log"))
        .env("SCENARIO_HIP", rocsync_tests::sim_hip())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::of(tracer.stderr.take().unwrap());
    lines.wait_for("rocsync: attached to");
    // The target runs on its own once its runtime is probed; rocsync, stopped, reads
    // nothing meanwhile.
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_secs(1));
    // SAFETY: as above.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGCONT) };
    assert!(tracer.wait().unwrap().success());
    let said = lines.all().join("\n");
    let drops = &read_json(&out)["rocsync"]["drops"];
    let lost = drops["thread_names"].as_u64().unwrap_or(0);
    assert!(lost > 0, "{drops}");
    assert!(said.contains("thread_names"), "{said}");
}
