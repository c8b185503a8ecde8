//! `rocsync report TRACE` says everything the trace holds (issue 64): its losses at the
//! top with the figures they touch, the daemon's word (the slow call, its chain, its
//! collective, the ranks behind, where the program was, every thread's stack), the
//! collectives per communicator, the HSA packets, every event it did not use counted;
//! streams as Perfetto numbers them, threads by their names, durations that read.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{job_traces, *};

/// A runtime row of pid 7 as rocsync writes it (`emit/kineto/calls.rs`).
pub(crate) fn runtime(name: &str, corr: u64, tid: u64, ts: f64, dur: f64, args: Value) -> Value {
    let mut a = json!({"cid": 1, "correlation": corr, "ret": 0});
    a.as_object_mut()
        .unwrap()
        .extend(args.as_object().unwrap().clone());
    json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 7, "tid": tid, "ts": ts,
        "dur": dur, "args": a})
}

/// The device row of a synchronisation on stream number `stream` of GPU 0.
pub(crate) fn sync(kind: &str, corr: u64, stream: i64, producer: i64) -> Value {
    json!({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": 2, "ts": 0.0,
        "dur": 1.0, "args": {"External id": corr, "cuda_sync_kind": kind,
        "wait_on_stream": producer, "stream": stream, "correlation": corr, "device": 0}})
}

fn trace(events: Vec<Value>, drops: Value, parameters: Value) -> Value {
    json!({"schemaVersion": 1, "traceEvents": events,
        "rocsync": {"drops": drops, "parameters": parameters}})
}

pub(crate) fn report(path: &Path) -> (String, Value) {
    let text = run_ok(rocsync().arg("report").arg(path));
    let json = run_ok(rocsync().args(["report", "--json"]).arg(path));
    let json = serde_json::from_slice(&json.stdout).expect("one JSON document");
    (String::from_utf8(text.stdout).unwrap(), json)
}

/// A synchronize of 8 s on stream 2 of a thread named `python3`, with records lost.
fn long_wait() -> Vec<Value> {
    vec![
        runtime(
            "hipStreamSynchronize",
            1,
            8,
            100.0,
            8_000_117.421,
            json!({"hip_stream": "0x5600"}),
        ),
        sync("Stream Sync", 1, 2, -1),
        json!({"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "python3"}}),
    ]
}

#[test]
fn losses_are_said_at_the_top_with_the_figures_they_touch_and_no_row_of_zeros() {
    let dir = TempDir::new();
    let path = dir.path("t.json");
    let drops = json!({"entry_records": 12, "lost_ids": 0, "packets_unread": 3});
    let params = json!({"mode": "attach", "truncated": null});
    std::fs::write(&path, trace(long_wait(), drops, params).to_string()).unwrap();
    let (text, json) = report(&path);
    let top: Vec<&str> = text.lines().take(3).collect();
    assert!(top[0].starts_with("LOSSES:"), "{text}");
    assert!(
        top[1].starts_with("  entry_records") && top[1].contains("longest waits"),
        "{text}"
    );
    assert!(
        top[2].starts_with("  packets_unread") && top[2].ends_with("HSA packets"),
        "{text}"
    );
    let losses = text.split("\nLosses\n").nth(1).unwrap();
    assert!(
        !losses.split("\n\n").next().unwrap().contains("lost_ids"),
        "a row of zeros: {losses}"
    );
    assert_eq!(json["lost"][0]["what"], "entry_records");
    assert_eq!(json["lost"][0]["count"], 12);
    assert_eq!(json["lost"][1]["touches"], json!(["packets"]));
    // The 8 s synchronize reads as 8.0 s, on stream 2 as Perfetto shows it, by python3.
    assert!(
        text.contains("      8.0 s  hipStreamSynchronize (Stream Sync) corr 1 thread 8 (python3) stream 2 (0x5600)"),
        "{text}"
    );
    let w = &json["longest_waits"][0];
    assert_eq!(w["stream"], json!({"handle": "0x5600", "index": 2}));
    assert_eq!(w["thread_name"], "python3");
    // A trace without losses says none, and has no top section.
    std::fs::write(
        &path,
        trace(long_wait(), json!({"entry_records": 0}), json!({})).to_string(),
    )
    .unwrap();
    let (text, _) = report(&path);
    assert!(text.starts_with("1 runtime call (1 API)\n"), "{text}");
    assert!(
        text.contains("Losses\n  (nothing lost: 1 counter, all 0)"),
        "{text}"
    );
}

#[test]
fn a_hang_trace_says_its_call_chain_collective_ranks_behind_and_stacks_at_the_top() {
    let dir = TempDir::new();
    let path = dir.path("hang.json");
    let frames = [
        ("step", "/job/train.py", 142),
        ("<module>", "/job/train.py", 200),
    ];
    let mut word = job_traces::hang(7, 0, 21, &[(9, 1, 20)], &frames);
    word["tid"] = 8.into();
    let mut rows = long_wait();
    rows.extend(job_traces::collectives(7, 0, 21));
    let mut t = job_traces::daemon_trace(rows, "hang", word);
    t["rocsync"]["parameters"]["not_recorded"] = json!([{"api": "hipEventQuery", "library": "x",
        "reason": "budget", "shed_unix_us": 1, "from_unix_us": 1, "until_unix_us": 2}]);
    std::fs::write(&path, t.to_string()).unwrap();
    let (text, json) = report(&path);
    let want = [
        "LOSSES: this trace lost records; the figures each touches undercount:",
        "  spans of hipEventQuery not recorded (budget)          1  calls, time blocked per API, longest waits, who waits on whom, unresolved waits, collectives",
        "",
        "Traced for a hang: pid 7 thread 8 blocked in hipStreamSynchronize 6.0 s when found; the trace ended: bound",
        "  where: step (train.py:142)",
        "  waits on:",
        &format!(
            "    stream 0x2: ncclAllReduce #21 of comm {}",
            job_traces::COMM
        ),
        &format!(
            "  collective: in ncclAllReduce #21 of comm {} (rank 0 of 2)",
            job_traces::COMM
        ),
        "  ranks behind: rank 1 (pid 9) at #20",
        "  stacks (read in 9.8 ms, Python 3.11.7):",
        "    thread 7 (python3), blocked:",
        "      step (train.py:142)",
        "      <module> (train.py:200)",
        "      clock_nanosleep (libc.so.6+0x1234)",
        "    thread 8 (pt_autograd_0):",
        "      (python: unreadable: no thread state)",
    ];
    let got: Vec<&str> = text.lines().take(want.len()).collect();
    assert_eq!(got, want, "{text}");
    let w = &json["trigger"];
    assert_eq!(
        (w["kind"].as_str(), w["where"].as_str()),
        (Some("hang"), Some("step (train.py:142)"))
    );
    assert_eq!(w["collective"]["seq"], 21);
    assert_eq!(w["waits_on"][0]["stream"], "0x2", "fields, not a line");
    assert_eq!(w["waits_on"][0]["collective"]["seq"], 21);
    assert_eq!(w["behind"][0], json!({"pid": 9, "rank": 1, "seq": 20}));
    assert_eq!(
        w["stacks"]["threads"][0]["python_stack"][0],
        "step (train.py:142)"
    );
    // Its collectives: per communicator, the numbers, the time blocked after them.
    let c = &json["collectives"]["communicators"][0];
    assert_eq!(
        (
            c["collectives"].as_u64(),
            c["first_seq"].as_u64(),
            c["last_seq"].as_u64()
        ),
        (Some(21), Some(1), Some(21))
    );
    assert_eq!(c["hash"], job_traces::COMM);
    assert_eq!(c["collective_counts"], json!({"AllReduce": 21}));
    assert!(text.contains("21 collectives in 1 communicator"), "{text}");
}

/// A stall's object as the daemon writes it (`daemon/triggers/stalls.rs`: the call, its
/// duration, its chain; `collective`, `behind`, `where`, `stacks` added as for a hang).
fn stall(duration_ms: f64, frames: &[(&str, &str, u64)]) -> Value {
    let mut hang = job_traces::hang(7, 0, 21, &[(9, 1, 20)], frames);
    let chain = json!([
        {"stream": "0x2", "waited_on_event": "0xe1", "at_unix_us": 1_733_549_993_000_000u64},
        {"event": "0xe1", "recorded_on_stream": "0x3", "at_unix_us": 1_733_549_992_900_000u64},
        {"stream": "0x3", "collective": hang["collective"].clone(),
            "at_unix_us": 1_733_549_992_800_000u64},
    ]);
    json!({"api": "hipStreamSynchronize", "pid": 7, "tid": 8, "device": 0, "arg0": "0x2",
        "ret": 0, "entry_unix_us": 1_733_549_994_000_000u64,
        "exit_unix_us": 1_733_549_994_000_000u64 + (duration_ms * 1e3) as u64,
        "duration_ms": duration_ms, "threshold_ms": 50.0, "waits_on": chain,
        "collective": hang["collective"].take(), "behind": hang["behind"].take(),
        "where": hang["where"].take(), "stacks": hang["stacks"].take()})
}

#[test]
fn a_stall_trace_says_its_slow_call_and_chain_at_the_top() {
    let dir = TempDir::new();
    let path = dir.path("stall.json");
    let frames = [("step", "/job/train.py", 142)];
    let duration_ms = 212.5;
    // Its slow call's row, as the daemon writes it into the trace, and another wait.
    let rows = vec![
        runtime(
            "hipStreamSynchronize",
            1,
            8,
            100.0,
            duration_ms * 1e3,
            json!({"hip_stream": "0x2"}),
        ),
        sync("Stream Sync", 1, 1, -1),
        runtime(
            "hipStreamSynchronize",
            2,
            8,
            300_000.0,
            90.0,
            json!({"hip_stream": "0x2"}),
        ),
        sync("Stream Sync", 2, 1, -1),
    ];
    let t = job_traces::daemon_trace(rows, "stall", stall(duration_ms, &frames));
    std::fs::write(&path, t.to_string()).unwrap();
    let (text, json) = report(&path);
    let comm = job_traces::COMM;
    let want = [
        format!(
            "Traced for a stall: pid 7 thread 8 blocked {duration_ms:.1} ms in hipStreamSynchronize"
        ),
        format!("  where: {}", job_traces::place(frames[0])),
        "  waits on:".into(),
        "    stream 0x2: waited on event 0xe1".into(),
        "    event 0xe1: recorded on stream 0x3".into(),
        format!("    stream 0x3: ncclAllReduce #21 of comm {comm}"),
        format!("  collective: in ncclAllReduce #21 of comm {comm} (rank 0 of 2)"),
        "  ranks behind: rank 1 (pid 9) at #20".into(),
    ];
    let got: Vec<&str> = text.lines().take(want.len()).collect();
    assert_eq!(got, want, "{text}");
    let w = &json["trigger"];
    assert_eq!(
        (
            w["kind"].as_str(),
            w["api"].as_str(),
            w["pid"].as_u64(),
            w["tid"].as_u64()
        ),
        (
            Some("stall"),
            Some("hipStreamSynchronize"),
            Some(7),
            Some(8)
        ),
        "{w}"
    );
    assert_eq!(w["blocked_ms"].as_f64(), Some(duration_ms));
    assert_eq!(
        (
            &w["waits_on"][0]["waited_on_event"],
            &w["waits_on"][1]["recorded_on_stream"]
        ),
        (&json!("0xe1"), &json!("0x3"))
    );
    assert_eq!(w["waits_on"][2]["collective"]["seq"], 21);
    assert_eq!(w["collective"]["comm"], comm);
    assert_eq!(w["behind"][0], json!({"pid": 9, "rank": 1, "seq": 20}));
    assert_eq!(w["where"], job_traces::place(frames[0]));
    // Its slow call leads the longest waits, as long as the daemon said it was.
    let slow = &json["longest_waits"][0];
    assert_eq!(
        (slow["api"].as_str(), slow["correlation"].as_u64()),
        (Some("hipStreamSynchronize"), Some(1))
    );
    assert_eq!(slow["blocked_us"].as_f64(), Some(duration_ms * 1e3));
    let longest = text.split("\nLongest waits\n").nth(1).unwrap();
    assert!(
        longest.starts_with(&format!(
            "  {:>10}  hipStreamSynchronize (Stream Sync) corr 1 thread 8",
            format!("{duration_ms:.1} ms")
        )),
        "{longest}"
    );
}

/// Every event of a real trace of a job is used or counted: its rows of runtime calls
/// (and their device rows), its collectives and set-up calls, its arrows and metadata
/// (a rank's 84 rows once reported as "62 calls", "Not used by this report (nothing)").
#[test]
fn every_event_of_a_ranks_trace_is_reported_or_counted() {
    if !can_trace("every_event_of_a_ranks_trace_is_reported_or_counted") {
        return;
    }
    let dir = TempDir::new();
    run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(dir.path("t.json"))
            .arg(rocsync_tests::nccl_ranks())
            .args(["2", "5", "0", "0", "0", "50"])
            .env("TMPDIR", dir.path("")),
    );
    let rank0 = std::fs::read_dir(dir.path("")).unwrap().filter_map(|e| {
        let p = e.unwrap().path();
        p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("t_")
            .then_some(p)
    });
    for path in rank0 {
        let t = read_json(&path);
        let events = t["traceEvents"].as_array().unwrap();
        let count = |f: &dyn Fn(&Value) -> bool| events.iter().filter(|e| f(e)).count() as u64;
        let (_, r) = report(&path);
        let syncs: u64 = (r["per_api"].as_array().unwrap().iter())
            .filter(|a| !a["device"].is_null())
            .map(|a| a["calls"].as_u64().unwrap())
            .sum();
        let c = &r["collectives"];
        let collectives: u64 = (c["communicators"].as_array().unwrap().iter())
            .map(|m| m["collectives"].as_u64().unwrap())
            .sum();
        let other: u64 = c["other_calls"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let not_used: u64 = r["not_used"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let names = count(&|e| e["ph"] == "M" && e["name"] == "thread_name");
        assert_eq!(collectives, 5, "{r}");
        assert_eq!(
            (other, count(&|e| e["cat"] == "cpu_op")),
            (2, 7),
            "set-up and destroy: {r}"
        );
        let reported =
            r["calls"].as_u64().unwrap() + syncs + collectives + other + names + not_used;
        assert_eq!(reported, events.len() as u64, "{}: {r}", path.display());
    }
}
