//! `rocsync annotate` on profiler traces of a simulated process: one capture of
//! `scenario cross` (`rocsync run --raw`), and the traces Kineto would have written of the
//! same run in its CUDA and ROCm formats (`common::kineto`, with their own clock,
//! correlation ids and stream numbers). Every wait the scenario's log resolves must come
//! out with the profiler's own correlation of its record and stream id.

use std::{collections::BTreeMap, path::PathBuf};

use serde_json::Value;

use crate::common::{kineto::*, *};
use rocsync_tests::{LoggedCall, read_log, scenario};

pub(crate) struct Run {
    pub dir: TempDir,
    pub raw: PathBuf,
    pub log: Vec<LoggedCall>,
    pub pid: u32,
    pub realtime_offset_ns: i64,
}

impl Run {
    /// A finished capture in `dir`: its raw file and the scenario's log.
    pub(crate) fn read(dir: TempDir, raw: PathBuf, log: &std::path::Path) -> Run {
        let (header, calls) = read_raw(&raw);
        Run {
            pid: calls[0].pid,
            realtime_offset_ns: header["clock_offset_ns"].as_i64().unwrap(),
            log: read_log(log),
            raw,
            dir,
        }
    }
}

/// The profiler's rows start at the log's time before each call, and annotate pairs a row
/// with a call probed within 100 µs of it (`FINE_NS`): a call that returns at once (any
/// but a synchronization) and whose logged span is longer was descheduled inside it, and
/// its row may lie too far from its probe to be paired.
const PAIRABLE_SPAN_NS: u64 = 100_000;

/// Captures `scenario cross 24` with its log: again (at most 5 times) when a call was
/// descheduled inside its span, which only a busy machine does, so that every row can be
/// judged exactly.
pub(crate) fn capture_cross(test: &str) -> Option<Run> {
    if !can_trace(test) {
        return None;
    }
    for attempt in 1.. {
        let dir = TempDir::new();
        let raw = dir.path("calls.jsonl");
        let log = dir.path("scenario.log");
        run_ok(
            rocsync()
                .args(["run", "-o"])
                .arg(dir.path("rocsync.json"))
                .arg("--raw")
                .arg(&raw)
                .arg("--")
                .arg(scenario())
                .args(["cross", "24"])
                .env("SCENARIO_LOG", &log),
        );
        let run = Run::read(dir, raw, &log);
        let long = run
            .log
            .iter()
            .filter(|l| !l.api.contains("Synchronize"))
            .filter(|l| l.after_ns - l.before_ns > PAIRABLE_SPAN_NS)
            .count();
        if long == 0 || attempt == 5 {
            return Some(run);
        }
        eprintln!("{test}: {long} call(s) descheduled inside their span; captured again");
    }
    unreachable!()
}

/// Wait seq → (record seq, the record's stream handle), for every wait the log resolves.
pub(crate) fn resolved_waits(log: &[LoggedCall]) -> BTreeMap<u64, (u64, u64)> {
    let by_seq: BTreeMap<u64, &LoggedCall> = log.iter().map(|l| (l.seq, l)).collect();
    expected_edges(log)
        .into_iter()
        .filter_map(|(w, r)| r.map(|r| (w, (r, by_seq[&r].args[1]))))
        .collect()
}

/// Writes the fixture, annotates it; (summary, annotated trace).
pub(crate) fn annotate(run: &Run, name: &str, o: &Options) -> (Written, Value, Value) {
    let written = write(&run.log, run.pid, run.realtime_offset_ns, o);
    let trace = run.dir.path(&format!("{name}.json"));
    let text = to_text(&written.trace);
    std::fs::write(&trace, &text).unwrap();
    let out = run_ok(
        rocsync()
            .arg("annotate")
            .arg(&trace)
            .arg("--capture")
            .arg(&run.raw)
            .arg("--json"),
    );
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        text,
        "the input is never modified"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("a JSON summary");
    let annotated = run.dir.path(&format!("{name}.annotated.json"));
    let annotated: Value =
        serde_json::from_str(&std::fs::read_to_string(annotated).unwrap()).unwrap();
    (written, summary[0].clone(), annotated)
}

fn sync_rows(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_sync")
        .collect()
}

fn seq_of(w: &Written) -> BTreeMap<i64, u64> {
    w.correlation.iter().map(|(s, c)| (*c, *s)).collect()
}

#[test]
fn annotate_fills_the_waits_cupti_left_unresolved() {
    let Some(run) = capture_cross("annotate_fills_the_waits_cupti_left_unresolved") else {
        return;
    };
    let waits = resolved_waits(&run.log);
    let stream_waits: Vec<u64> = run
        .log
        .iter()
        .filter(|l| l.api == "hipStreamWaitEvent")
        .map(|l| l.seq)
        .collect();
    assert!(stream_waits.len() >= 24);
    assert!(stream_waits.iter().all(|s| waits.contains_key(s)));
    // A first pass learns the fixture's numbers, to make CUPTI "resolve" two waits itself:
    // the first rightly, the second wrongly.
    let plain = Options {
        format: Format::Cuda,
        clock_error_ns: 3_217_000,
        cuda_events: true,
        cupti_resolved: BTreeMap::new(),
    };
    let probe = write(&run.log, run.pid, run.realtime_offset_ns, &plain);
    let answer = |w: &Written, seq: u64| {
        let (r, stream) = waits[&seq];
        (w.streams[&stream], w.correlation[&r])
    };
    let (right, wrong) = (stream_waits[0], stream_waits[1]);
    let o = Options {
        cupti_resolved: BTreeMap::from([(right, answer(&probe, right)), (wrong, (99, 1))]),
        ..plain
    };
    let (w, summary, trace) = annotate(&run, "cuda", &o);
    let seqs = seq_of(&w);
    let mut filled = 0;
    for row in sync_rows(&trace) {
        if row["name"] != "Stream Wait Event" && row["name"] != "Event Sync" {
            continue;
        }
        let seq = seqs[&row["args"]["correlation"].as_i64().unwrap()];
        let got = (
            row["args"]["wait_on_stream"].as_i64().unwrap(),
            row["args"]["wait_on_cuda_event_record_corr_id"]
                .as_i64()
                .unwrap(),
        );
        let want = if seq == wrong {
            (99, 1)
        } else {
            answer(&w, seq)
        };
        assert_eq!(got, want, "wait seq {seq} ({}); {summary:#}", row["name"]);
        filled += usize::from(seq != right && seq != wrong);
    }
    assert_eq!(filled, waits.len() - 2, "every wait the log resolves");
    let s = &summary["waits"];
    assert_eq!(s["filled"], filled);
    assert_eq!(s["agreed"], 1);
    assert_eq!(s["disagreed"], 1);
    assert_eq!(s["resolved_before"], 2);
    assert_eq!(s["left"], serde_json::json!({}), "{summary:#}");
    assert_eq!(summary["disagreements"].as_array().unwrap().len(), 1);
    // The fixture's clock is 3.217 ms off rocsync's: alignment finds it (to the µs the
    // scenario's own timing around each call adds).
    let offset = summary["clock"]["offset_ns"].as_i64().unwrap();
    assert!((offset - 3_217_000).abs() < 1_000_000, "{offset}");
    assert_eq!(summary["calls"]["rows_unmatched"], 0, "{summary:#}");
    assert_eq!(summary["calls"]["calls_unmatched"], 0, "{summary:#}");

    // As on the H200 (no `cuda_event` rows): the recording stream is never waited on nor
    // synchronized, so nothing names it in CUPTI's numbering; every wait is left, counted.
    let bare = Options {
        cuda_events: false,
        ..o
    };
    let (_, summary, _) = annotate(&run, "bare", &bare);
    assert_eq!(summary["waits"]["filled"], 0);
    assert_eq!(
        summary["waits"]["left"]["producer_stream_unknown"],
        waits.len() - 2,
        "{summary:#}"
    );
}

#[test]
fn annotate_adds_the_sync_rows_kineto_rocm_never_writes() {
    let Some(run) = capture_cross("annotate_adds_the_sync_rows_kineto_rocm_never_writes") else {
        return;
    };
    let waits = resolved_waits(&run.log);
    let o = Options {
        format: Format::Rocm,
        clock_error_ns: -41_500_000,
        cuda_events: false,
        cupti_resolved: BTreeMap::new(),
    };
    let (w, summary, trace) = annotate(&run, "rocm", &o);
    let seqs = seq_of(&w);
    let by_seq: BTreeMap<u64, &LoggedCall> = run.log.iter().map(|l| (l.seq, l)).collect();
    let rows = sync_rows(&trace);
    // The profiler numbered no stream (no kernel rows): annotate numbers them, one id per
    // stream, the same wherever the stream appears.
    let mut ids: BTreeMap<u64, i64> = BTreeMap::new();
    let mut same = |handle: u64, id: i64| {
        assert!(id >= 1);
        assert_eq!(*ids.entry(handle).or_insert(id), id, "stream {handle:#x}");
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for row in &rows {
        let a = &row["args"];
        let seq = seqs[&a["correlation"].as_i64().unwrap()];
        let call = by_seq[&seq];
        let name = row["name"].as_str().unwrap();
        *counts.entry(name.into()).or_default() += 1;
        let want = match call.api.as_str() {
            "hipStreamWaitEvent" => "Stream Wait Event",
            "hipEventSynchronize" | "hipEventQuery" => "Event Sync",
            "hipStreamSynchronize" => "Stream Sync",
            "hipDeviceSynchronize" => "Context Sync",
            other => panic!("a sync row for {other}"),
        };
        assert_eq!(name, want);
        assert_eq!(a["External id"], a["correlation"]);
        if matches!(name, "Stream Wait Event" | "Stream Sync") {
            same(call.args[0], a["stream"].as_i64().unwrap());
        }
        if let Some(&(record, stream)) = waits.get(&seq) {
            assert_eq!(
                a["wait_on_cuda_event_record_corr_id"], w.correlation[&record],
                "wait seq {seq}; {summary:#}"
            );
            same(stream, a["wait_on_stream"].as_i64().unwrap());
        }
    }
    assert_eq!(
        ids.len(),
        2,
        "the recording and the waiting stream: {ids:?}"
    );
    let logged = |api: &str| run.log.iter().filter(|l| l.api == api).count();
    assert_eq!(counts["Stream Wait Event"], logged("hipStreamWaitEvent"));
    assert_eq!(
        counts["Event Sync"],
        logged("hipEventSynchronize") + logged("hipEventQuery")
    );
    assert_eq!(counts["Stream Sync"], logged("hipStreamSynchronize"));
    assert_eq!(counts["Context Sync"], logged("hipDeviceSynchronize"));
    assert_eq!(
        summary["waits"]["left"],
        serde_json::json!({}),
        "{summary:#}"
    );
    assert_eq!(
        summary["waits"]["added_without_producer"],
        serde_json::json!({})
    );
    assert_eq!(summary["streams"]["numbered_new"], 2);
}
