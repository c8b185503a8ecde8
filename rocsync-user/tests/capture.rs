//! End-to-end capture on the simulated HIP runtime and on Debian's real libamdhip64:
//! every call a program makes appears exactly once, with its thread, arguments and
//! return code. Needs root (eBPF); skips with a reason otherwise.

mod common;

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use rocsync_tests::{read_log, real_hip_program, scenario, scenario_dlopen, sim_hip};

type Traced = (
    Vec<rocsync_tests::LoggedCall>,
    Vec<rocsync::ingest::Call>,
    String,
);

fn run_scenario(dir: &TempDir, program: &std::path::Path, args: &[&str]) -> Traced {
    traced_run(dir, &[], program, args)
}

/// `rocsync run [flags] --raw … -- program args`: the scenario's log, the captured calls,
/// rocsync's stderr.
fn traced_run(dir: &TempDir, flags: &[&str], program: &std::path::Path, args: &[&str]) -> Traced {
    let log = dir.path("scenario.log");
    let raw = dir.path("calls.jsonl");
    let out = run_ok(
        rocsync()
            .arg("run")
            .args(flags)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(program)
            .args(args)
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", sim_hip()),
    );
    let (_, calls) = read_raw(&raw);
    (
        read_log(&log),
        calls,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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
            calls.len() as u64 + lost,
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
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Attaches rocsync to a gated scenario, then lets the scenario start calling.
fn attach_and_start(
    target: &mut std::process::Child,
    raw: &std::path::Path,
) -> std::process::Child {
    let pid = target.id().to_string();
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--raw"])
            .arg(raw)
            .args(["--pid", &pid]),
    );
    wait_for_line(&mut tracer, "tracing pid", Duration::from_secs(20));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    tracer
}

/// Starts a gated scenario (it waits for a line on stdin before calling HIP).
fn start_gated(dir: &TempDir, program: &std::path::Path, args: &[&str]) -> std::process::Child {
    let mut child = Command::new(program)
        .arg("gated")
        .args(args)
        .env("SCENARIO_LOG", dir.path("scenario.log"))
        .env("SCENARIO_HIP", sim_hip())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
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
    let mut target = Command::new(scenario_dlopen())
        .arg("basic")
        .env("SCENARIO_LOG", &log)
        .env("SCENARIO_HIP", sim_hip())
        .env("SCENARIO_DELAY_MS", "1500")
        .spawn()
        .unwrap();
    let raw = dir.path("calls.jsonl");
    let out = run_ok(
        rocsync()
            .args(["attach", "--wait", "--raw"])
            .arg(&raw)
            .arg("--pid")
            .arg(target.id().to_string()),
    );
    assert!(target.wait().unwrap().success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("waiting for process"), "{stderr}");
    let (_, mut calls) = read_raw(&raw);
    // attach probes hipGetDevice for a while to learn devices; the default set does not.
    calls.retain(|c| c.api.symbol() != "hipGetDevice");
    assert_same_calls(&read_log(&log), calls);
}

#[test]
fn sigint_mid_capture_keeps_everything_captured() {
    if !can_trace("sigint_mid_capture_keeps_everything_captured") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["loop", "2500"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = attach_and_start(&mut target, &raw);
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: signals the tracer this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    assert!(tracer.wait().unwrap().success());
    assert!(target.wait().unwrap().success());
    let (_, mut calls) = read_raw(&raw);
    let logged = read_log(&dir.path("scenario.log"));
    assert!(
        !calls.is_empty() && calls.len() < logged.len(),
        "{} of {}",
        calls.len(),
        logged.len()
    );
    // What was captured is the start of the run with no gap: the first N calls.
    calls.sort_by_key(|c| c.correlation);
    for (c, l) in calls.iter().zip(logged.iter()) {
        assert_eq!(key(c), logged_key(l));
    }
}

#[test]
fn real_debian_runtime_is_traced_end_to_end() {
    if !can_trace("real_debian_runtime_is_traced_end_to_end") {
        return;
    }
    let Some(program) = real_hip_program() else {
        rocsync_tests::skip(
            "real_debian_runtime_is_traced_end_to_end",
            "libamdhip64-dev was not installed at build time (scripts/setup installs it)",
        );
        return;
    };
    let dir = TempDir::new();
    let (logged, calls, stderr) = run_scenario(&dir, &program, &[]);
    // Every hooked symbol the 5.2 library exports was called and must be in the trace.
    assert_eq!(logged.len(), 14);
    assert!(
        calls.iter().all(|c| c.ret == Some(101)),
        "no GPU: every call fails with 101"
    );
    assert!(
        stderr.contains("does not export hipEventRecord_spt, hipEventRecordWithFlags"),
        "{stderr}"
    );
    assert_same_calls(&logged, calls);
}

#[test]
fn target_killed_mid_call_reports_the_call_in_flight() {
    if !can_trace("target_killed_mid_call_reports_the_call_in_flight") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["hang"]);
    let raw = dir.path("calls.jsonl");
    let mut tracer = attach_and_start(&mut target, &raw);
    wait_until_blocked(&mut target);
    target.kill().unwrap();
    target.wait().unwrap();
    assert!(tracer.wait().unwrap().success());
    let (_, calls) = read_raw(&raw);
    let names: Vec<_> = calls.iter().map(|c| c.api.symbol()).collect();
    assert_eq!(names, ["hipStreamCreate", "hipStreamSynchronize"]);
    let (create, sync) = (&calls[0], &calls[1]);
    assert_eq!(create.ret, Some(0));
    assert_ne!(create.args[0], 0, "created stream handle read at return");
    assert_eq!(
        sync.args[0], create.args[0],
        "synchronizes the stream it created"
    );
    assert_eq!(
        (sync.exit_ns, sync.ret),
        (None, None),
        "still blocked when the process died"
    );
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
    let stderr = String::from_utf8_lossy(&out.stderr);
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
    let out = rocsync()
        .args(["run", "--backend", "hip", "--"])
        .arg(rocsync_tests::scenario_cuda())
        .arg("basic")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("captured 0 calls"));
}

#[test]
fn agents_filter_drops_other_devices_in_the_kernel() {
    if !can_trace("agents_filter_drops_other_devices_in_the_kernel") {
        return;
    }
    let dir = TempDir::new();
    let (logged, calls, _) = traced_run(
        &dir,
        &["--agents", "1"],
        &scenario(),
        &["threads", "4", "200"],
    );
    // Each worker thread sets its device first (worker i: device i % 2).
    let device: std::collections::BTreeMap<u32, u64> = logged
        .iter()
        .filter(|l| l.api == "hipSetDevice")
        .map(|l| (l.tid, l.args[0]))
        .collect();
    let filtered = |api: &str| {
        api.starts_with("hipEventRecord")
            || api.contains("Synchronize")
            || api.contains("WaitEvent")
    };
    let want: Vec<_> = logged
        .iter()
        .filter(|l| !filtered(&l.api) || device.get(&l.tid) == Some(&1))
        .cloned()
        .collect();
    assert!(
        want.len() < logged.len() / 2 + 50,
        "device 0's syncs are most of what is left out"
    );
    assert_same_calls(&want, calls);
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
        .partition(|c| c.api.symbol() == "hipStreamSynchronize");
    assert_same_calls(&logged, made.clone());
    let outer = made
        .iter()
        .find(|c| c.api.symbol() == "hipStreamSynchronize_spt")
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

/// The lines a child writes to a pipe, read on a thread, waited for one at a time.
struct Lines(std::sync::mpsc::Receiver<String>, Vec<String>);

impl Lines {
    fn of(pipe: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx, Vec::new())
    }

    fn wait_for(&mut self, needle: &str) {
        while !self.1.last().is_some_and(|l| l.contains(needle)) {
            let line = self
                .0
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no {needle:?}; saw {:#?}", self.1));
            self.1.push(line);
        }
    }
}

#[test]
fn attach_learns_devices_chosen_before_it_then_stops_probing_get_device() {
    if !can_trace("attach_learns_devices_chosen_before_it_then_stops_probing_get_device") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    let mut target = Command::new(scenario())
        .arg("gated_device")
        .env("SCENARIO_LOG", dir.path("s.log"))
        .env("SCENARIO_HIP", sim_hip())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = Lines::of(target.stdout.take().unwrap());
    out.wait_for("ready");
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "-o"])
            .arg(&trace)
            .args(["--pid", &target.id().to_string()]),
    );
    let mut err = Lines::of(tracer.stderr.take().unwrap());
    err.wait_for("tracing pid");
    let mut gate = target.stdin.take().unwrap();
    gate.write_all(b"go\n").unwrap();
    out.wait_for("called");
    err.wait_for("its probes are removed");
    gate.write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success(), "{:#?}", err.1);
    let t = read_json(&trace);
    let tid = rocsync_tests::read_log(&dir.path("s.log"))[0].tid;
    // The thread's device, chosen before the attach, came from its hipGetDevice...
    assert_eq!(
        t["rocsync"]["devices_learned_from_get_device"],
        serde_json::json!([{ "pid": target.id(), "tid": tid, "device": 1 }])
    );
    // ...and its synchronizations are attributed to it.
    let syncs: Vec<&serde_json::Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_sync")
        .collect();
    assert_eq!(syncs.len(), 3, "{syncs:#?}");
    assert!(syncs.iter().all(|e| e["args"]["device"] == 1), "{syncs:#?}");
    // The three hipGetDevice calls after the probes were removed cost no trap.
    assert_eq!(
        t["rocsync"]["calls_per_api"]["hipGetDevice"]["calls"], 1,
        "{}",
        t["rocsync"]["calls_per_api"]
    );
}

#[test]
fn agents_attributes_by_stream_recording_stream_and_thread() {
    if !can_trace("agents_attributes_by_stream_recording_stream_and_thread") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("agents.json");
    let flags = ["--agents", "1", "-o", trace.to_str().unwrap()];
    let (logged, calls, _) = traced_run(&dir, &flags, &scenario(), &["agents"]);
    let main_tid = logged[0].tid;
    let kept: Vec<(bool, String)> = calls
        .iter()
        .filter(|c| !matches!(c.api.symbol(), "hipSetDevice" | "hipStreamCreate"))
        .map(|c| (c.tid == main_tid, c.api.symbol().to_string()))
        .collect();
    // By the scenario's own layout (tests/c/scenario.c, `agents`): device 0's record and
    // the device-1 thread's calls on device 0's stream and event are dropped; its own
    // stream's wait, its device synchronize, its record and its event's synchronize stay.
    let want: Vec<(bool, String)> = [
        (false, "hipStreamWaitEvent"),
        (false, "hipDeviceSynchronize"),
        (false, "hipEventRecord"),
        (false, "hipEventSynchronize"),
    ]
    .iter()
    .map(|(m, a)| (*m, a.to_string()))
    .collect();
    assert_eq!(kept, want);
    // The kept wait names no producer: its event's only record was on a filtered agent.
    let t = read_json(&trace);
    let wait = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "cuda_runtime" && e["name"] == "hipStreamWaitEvent")
        .expect("the kept wait");
    assert_eq!(wait["args"]["wait_on_unknown_reason"], "producer_filtered");
    assert_eq!(
        t["rocsync"]["filtered_by_agents"],
        // ...and the main thread's device synchronize, on device 0.
        serde_json::json!({
            "hipEventRecord": 1, "hipStreamSynchronize": 1, "hipEventSynchronize": 1,
            "hipDeviceSynchronize": 1
        })
    );
}

/// The handshake with the `hang` scenario: it said "blocking", and its main thread is
/// asleep in the runtime's synchronize (no sleep that races the capture).
fn wait_until_blocked(target: &mut std::process::Child) {
    let mut line = String::new();
    BufReader::new(target.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "blocking");
    let syscall = format!("/proc/{}/syscall", target.id());
    let start = std::time::Instant::now();
    // clock_nanosleep (230) or nanosleep (35): inside hipStreamSynchronize.
    while !std::fs::read_to_string(&syscall)
        .is_ok_and(|s| s.starts_with("230 ") || s.starts_with("35 "))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never blocked");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_duration_stop_keeps_the_blocked_call_in_flight() {
    if !can_trace("a_duration_stop_keeps_the_blocked_call_in_flight") {
        return;
    }
    let dir = TempDir::new();
    let mut target = start_gated(&dir, &scenario(), &["hang"]);
    let raw = dir.path("calls.jsonl");
    let pid = target.id().to_string();
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "--duration", "3", "--raw"])
            .arg(&raw)
            .args(["--pid", &pid]),
    );
    wait_for_line(&mut tracer, "tracing pid", Duration::from_secs(20));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_until_blocked(&mut target);
    assert!(tracer.wait().unwrap().success());
    let (_, calls) = read_raw(&raw);
    let names: Vec<_> = calls.iter().map(|c| c.api.symbol()).collect();
    assert_eq!(names, ["hipStreamCreate", "hipStreamSynchronize"]);
    assert_eq!(
        (calls[1].exit_ns, calls[1].ret),
        (None, None),
        "in flight at stop"
    );
    target.kill().unwrap();
    target.wait().unwrap();
}

#[test]
fn run_forwards_sigterm_and_keeps_the_blocked_call() {
    if !can_trace("run_forwards_sigterm_and_keeps_the_blocked_call") {
        return;
    }
    let dir = TempDir::new();
    let raw = dir.path("calls.jsonl");
    let mut tracer = rocsync()
        .args(["run", "--no-status", "--raw"])
        .arg(&raw)
        .arg("--")
        .arg(scenario())
        .arg("hang")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command's stdout is rocsync's: the same handshake.
    wait_until_blocked_via(&mut tracer);
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGTERM) };
    let status = tracer.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "the command died of the forwarded SIGTERM"
    );
    let (_, calls) = read_raw(&raw);
    let last = calls.last().expect("calls");
    assert_eq!(last.api.symbol(), "hipStreamSynchronize");
    assert_eq!((last.exit_ns, last.ret), (None, None));
}

/// As [`wait_until_blocked`], for a command started by `rocsync run` (its child).
fn wait_until_blocked_via(tracer: &mut std::process::Child) {
    let mut line = String::new();
    BufReader::new(tracer.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "blocking");
    let children = format!("/proc/{0}/task/{0}/children", tracer.id());
    // rocsync's children: its watchdog and the command.
    let child = std::fs::read_to_string(&children)
        .unwrap()
        .split_whitespace()
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "scenario")
        })
        .expect("the command")
        .to_string();
    let syscall = format!("/proc/{child}/syscall");
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&syscall)
        .is_ok_and(|s| s.starts_with("230 ") || s.starts_with("35 "))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never blocked");
        std::thread::sleep(Duration::from_millis(2));
    }
}
