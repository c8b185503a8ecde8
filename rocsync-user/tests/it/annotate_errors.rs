//! `rocsync annotate` on the H200 run kept in bench/gpu-validation (torch.profiler with
//! sync events, CUDA 13, and rocsync's raw capture of the same process at the same time),
//! and what it refuses: another process, another time, an existing output (unless --force). No root
//! needed: nothing is captured.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::*;

fn bench(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/gpu-validation")
        .join(name)
}

fn annotate(trace: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    rocsync()
        .arg("annotate")
        .arg(trace)
        .arg("--capture")
        .arg(bench("train.both.raw.jsonl.gz"))
        .arg("-o")
        .arg(out)
        .arg("--json")
        .output()
        .unwrap()
}

#[test]
fn annotate_fills_the_h200_event_syncs_cupti_left() {
    let dir = TempDir::new();
    let out = dir.path("train.annotated.json");
    let run = annotate(&bench("train.both.cupti.json.gz"), &out);
    assert_ok(&run);
    let summary: Value = serde_json::from_slice(&run.stdout).unwrap();
    let w = &summary[0]["waits"];
    // 100 Stream Wait Event + 100 Event Sync rows, none resolved by CUPTI.
    assert_eq!(w["rows"], 200);
    assert_eq!(w["resolved_before"], 0);
    // The event syncs wait on records on the legacy stream, which CUPTI names (7) on
    // the Stream Wait Event rows; the stream waits wait on the copy stream, seen only in
    // cudaMemcpyAsync rows, which rocsync does not probe.
    assert_eq!(w["filled"], 99, "{summary:#}");
    // The first Event Sync row's call (its cudaEventQuery) entered 2.6 ms before CUPTI's
    // row began, and returned 16 µs after: it is that row's call, in order with the
    // others, and the record it waited on came before the profiler's window.
    assert_eq!(
        w["left"],
        json!({"producer_not_in_profile": 1, "producer_stream_unknown": 100})
    );
    assert_eq!(summary[0]["streams"]["map"], json!(["0:1 -> 0:7"]));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let records: std::collections::HashMap<i64, String> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| {
            (
                e["args"]["correlation"].as_i64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let filled = filled_waits(&trace);
    assert_eq!(filled.len(), 99);
    for e in filled {
        assert_eq!(e["name"], "Event Sync");
        assert_eq!(e["args"]["wait_on_stream"], 7);
        let record = e["args"]["wait_on_cuda_event_record_corr_id"]
            .as_i64()
            .unwrap();
        assert_eq!(records[&record], "cudaEventRecord");
    }
}

/// The trace's sync rows that name the record they waited on.
fn filled_waits(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["cat"] == "cuda_sync"
                && e["args"]["wait_on_cuda_event_record_corr_id"]
                    .as_i64()
                    .is_some_and(|c| c >= 0)
        })
        .collect()
}

/// A Kineto trace of `pid` with one stream wait at `ts` µs after `base`.
fn tiny(pid: i64, base: i64) -> Value {
    json!({"schemaVersion": 1, "baseTimeNanoseconds": base, "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": pid, "tid": pid,
         "ts": 1000.0, "dur": 3.0, "args": {"cbid": 147, "correlation": 5}}]})
}

#[test]
fn annotate_refuses_another_process_another_time_and_an_existing_output() {
    let dir = TempDir::new();
    let refused = |trace: &Value, name: &str, want: &str| {
        let path = dir.path(&format!("{name}.json"));
        std::fs::write(&path, trace.to_string()).unwrap();
        let out = dir.path(&format!("{name}.out.json"));
        let run = annotate(&path, &out);
        let stderr = stderr_of(&run);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!out.exists());
    };
    refused(
        &tiny(4242, 1_790_857_026_000_000_000),
        "pid",
        "not the same process",
    );
    // The right pid, a day away from the capture.
    refused(
        &tiny(1475, 1_796_000_000_000_000_000),
        "time",
        "do not overlap in time",
    );
    refused(&json!({"traceEvents": 3}), "shape", "not a Kineto trace");
    std::fs::write(dir.path("garbage.json"), b"\x1f\x8b\x00garbage").unwrap();
    let run = annotate(&dir.path("garbage.json"), &dir.path("g.out.json"));
    assert_eq!(run.status.code(), Some(1));

    let out = dir.path("exists.json");
    std::fs::write(&out, "mine").unwrap();
    let run = annotate(&bench("train.both.cupti.json.gz"), &out);
    let stderr = stderr_of(&run);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exists"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
    // With --force, as every command's -o: replaced by the annotated trace.
    run_ok(
        rocsync()
            .arg("annotate")
            .arg(bench("train.both.cupti.json.gz"))
            .arg("--capture")
            .arg(bench("train.both.raw.jsonl.gz"))
            .arg("-fo")
            .arg(&out),
    );
    assert_eq!(
        filled_waits(&read_json(&out)).len(),
        99,
        "not the annotated trace"
    );
}

/// A directory of per-rank profiler traces and one of captures: each trace is annotated
/// from the capture of its own pid (two H200 runs of the training loop, pids 1475 and
/// 619), into the output directory.
#[test]
fn annotate_matches_a_directory_of_traces_to_captures_by_pid() {
    let dir = TempDir::new();
    let (traces, captures, out) = (dir.path("traces"), dir.path("captures"), dir.path("out"));
    for d in [&traces, &captures, &out] {
        std::fs::create_dir(d).unwrap();
    }
    let h200 = |name: &str| bench(&format!("../annotate-h200/{name}"));
    let copy = |from: std::path::PathBuf, to: std::path::PathBuf| std::fs::copy(from, to).unwrap();
    copy(
        bench("train.both.cupti.json.gz"),
        traces.join("rank0.json.gz"),
    );
    copy(h200("train1.cupti.json.gz"), traces.join("rank1.json.gz"));
    // Named so that no order of names pairs them.
    copy(
        bench("train.both.raw.jsonl.gz"),
        captures.join("b.jsonl.gz"),
    );
    copy(h200("train1.raw.jsonl.gz"), captures.join("a.jsonl.gz"));
    let run = rocsync()
        .arg("annotate")
        .arg(&traces)
        .arg("--capture")
        .arg(&captures)
        .arg("-o")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert_ok(&run);
    let summaries: Value = serde_json::from_slice(&run.stdout).unwrap();
    let by_pid: std::collections::BTreeMap<i64, &Value> = summaries
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["pid"].as_i64().unwrap(), s))
        .collect();
    assert_eq!(by_pid.keys().copied().collect::<Vec<_>>(), [619, 1475]);
    for (pid, capture) in [(619, "a.jsonl.gz"), (1475, "b.jsonl.gz")] {
        let s = by_pid[&pid];
        assert!(s["capture"].as_str().unwrap().ends_with(capture), "{s}");
        assert_eq!(s["waits"]["filled"], 99, "{s}");
    }
    // Each output is its own rank's trace, annotated from its own capture.
    for (rank, pid) in [("rank0", 1475), ("rank1", 619)] {
        let annotated = read_json(&out.join(format!("{rank}.annotated.json")));
        let records: std::collections::BTreeSet<i64> = annotated["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "cuda_runtime" && e["name"] == "cudaEventRecord")
            .inspect(|e| assert_eq!(e["pid"], pid, "{rank}: a row of another process"))
            .map(|e| e["args"]["correlation"].as_i64().unwrap())
            .collect();
        let filled = filled_waits(&annotated);
        assert_eq!(filled.len(), 99, "{rank}");
        for e in filled {
            let record = &e["args"]["wait_on_cuda_event_record_corr_id"];
            assert!(records.contains(&record.as_i64().unwrap()), "{rank}: {e}");
        }
    }
}

/// Given the wrong kind of file, annotate says which kind it got and what goes where,
/// exits 1, and writes nothing: rocsync's own trace as the profile (it once wrote 269
/// duplicated sync rows and exited 0), a trace as --capture, a raw capture as the profile.
#[test]
fn annotate_given_the_wrong_kind_of_file_says_which_kind_it_got() {
    let dir = TempDir::new();
    let ours = bench("train.both.rocsync.json.gz");
    let raw = bench("train.both.raw.jsonl.gz");
    let cupti = bench("train.both.cupti.json.gz");
    for (i, (trace, capture, says)) in [
        (&ours, &raw, "is rocsync's own trace, not a profiler's"),
        (&cupti, &ours, "is a Kineto trace, not a raw capture"),
        (
            &raw,
            &raw,
            "is rocsync's raw capture, not a profiler's trace",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let out = dir.path(&format!("out{i}.json"));
        let run = rocsync()
            .arg("annotate")
            .arg(trace)
            .arg("--capture")
            .arg(capture)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let err = stderr_of(&run);
        assert_eq!(run.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!out.exists(), "{} written", out.display());
    }
}
