//! Flush-time resolution, asserted on the emitted Kineto JSON. No kernel needed.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rocsync::calls::ingest::Call;
use rocsync_common::Api;
use serde_json::Value;

use crate::common::pipeline::{call_in, rows_in_any_order, trace};

const PID: u32 = 4242;
const E: u64 = 0x5000;
const S_A: u64 = 0xa000;
const S_B: u64 = 0xb000;

fn call(correlation: u64, api: Api, args: [u64; 3]) -> Call {
    call_in(PID, PID, correlation, api, args, 0)
}

fn record(corr: u64, event: u64, stream: u64) -> Call {
    call(corr, Api::HipEventRecord, [event, stream, 0])
}
fn wait(corr: u64, stream: u64, event: u64) -> Call {
    call(corr, Api::HipStreamWaitEvent, [stream, event, 0])
}
fn destroy(corr: u64, event: u64) -> Call {
    call(corr, Api::HipEventDestroy, [event, 0, 0])
}

fn events(t: &Value) -> &Vec<Value> {
    t["traceEvents"].as_array().unwrap()
}

/// The device-side sync row of the call with this correlation.
fn sync_row(t: &Value, corr: u64) -> Value {
    events(t)
        .iter()
        .find(|e| e["cat"] == "cuda_sync" && e["args"]["correlation"] == corr)
        .unwrap_or_else(|| panic!("no sync row for correlation {corr}"))
        .clone()
}

fn runtime_row(t: &Value, corr: u64) -> Value {
    events(t)
        .iter()
        .find(|e| e["cat"] == "cuda_runtime" && e["args"]["correlation"] == corr)
        .unwrap_or_else(|| panic!("no runtime row for correlation {corr}"))
        .clone()
}

/// (wait_on_cuda_event_record_corr_id, wait_on_hip_event_record_corr_id), which must agree.
fn producer_of(t: &Value, corr: u64) -> i64 {
    let s = sync_row(t, corr)["args"]["wait_on_cuda_event_record_corr_id"]
        .as_i64()
        .unwrap();
    let r = runtime_row(t, corr)["args"]["wait_on_hip_event_record_corr_id"]
        .as_i64()
        .unwrap();
    assert_eq!(s, r, "device and runtime rows disagree for {corr}");
    s
}

#[test]
fn happy_path_record_then_wait() {
    let t = trace(&[record(1, E, S_A), wait(2, S_B, E)]);
    assert_eq!(producer_of(&t, 2), 1);
    let row = sync_row(&t, 2);
    assert_eq!(row["name"], "Stream Wait Event");
    assert_eq!(
        row["args"]["wait_on_stream"], 1,
        "stream A is the first stream seen"
    );
    assert_eq!(row["args"]["stream"], 2);
    assert!(
        row["args"].get("hip_event").is_none(),
        "the device row keeps to CUPTI's layout"
    );
    let rt = runtime_row(&t, 2);
    assert_eq!(rt["args"]["hip_sync_kind"], "stream_wait_event");
    assert_eq!(rt["args"]["hip_event"], "0x5000");
    assert_eq!(rt["args"]["hip_stream"], "0xb000");
    assert_eq!(rt["args"]["wait_on_hip_event_id"], "0x5000");
    // The runtime row names the producer's stream by its handle, as the record row does.
    assert_eq!(rt["args"]["wait_on_stream"], "0xa000");
    assert_eq!(
        runtime_row(&t, 1)["args"]["hip_stream"],
        rt["args"]["wait_on_stream"]
    );
}

#[test]
fn a_wait_never_resolves_to_a_future_record() {
    let t = trace(&[record(1, E, S_A), wait(2, S_B, E), record(3, E, S_A)]);
    assert_eq!(producer_of(&t, 2), 1);
}

#[test]
fn arrival_order_does_not_matter() {
    // The wait is delivered before its record (another CPU's ring position).
    let t = trace(&[wait(2, S_B, E), record(1, E, S_A)]);
    assert_eq!(producer_of(&t, 2), 1);
}

#[test]
fn each_capture_starts_empty() {
    let first = trace(&[record(1, E, S_A), wait(2, S_B, E)]);
    assert_eq!(producer_of(&first, 2), 1);
    // A second capture that begins with a wait on the same handle knows no record.
    let second = trace(&[wait(1, S_B, E)]);
    assert_eq!(producer_of(&second, 1), -1);
}

#[test]
fn event_synchronize_has_a_producer_and_always_the_event_id() {
    let t = trace(&[
        record(1, E, S_A),
        call(2, Api::HipEventSynchronize, [E, 0, 0]),
    ]);
    let row = sync_row(&t, 2);
    assert_eq!(row["name"], "Event Sync");
    assert_eq!(row["args"]["stream"], -1);
    assert_eq!(producer_of(&t, 2), 1);
    assert_eq!(runtime_row(&t, 2)["args"]["wait_on_hip_event_id"], "0x5000");
    assert!(row["args"]["wait_on_cuda_event_id"].as_u64().unwrap() > 0);
}

#[test]
fn an_unresolved_wait_keeps_its_event_and_says_minus_one() {
    let t = trace(&[wait(1, S_B, E)]);
    let row = sync_row(&t, 1);
    assert_eq!(row["args"]["wait_on_stream"], -1);
    assert_eq!(row["args"]["wait_on_cuda_event_record_corr_id"], -1);
    let rt = runtime_row(&t, 1);
    assert_eq!(rt["args"]["wait_on_hip_event_id"], "0x5000");
    assert_eq!(rt["args"]["wait_on_stream"], -1);
    assert_eq!(rt["args"]["wait_on_hip_event_record_corr_id"], -1);
    // Traced from the start: the event was never recorded, and the trace says so.
    assert_eq!(rt["args"]["wait_on_unknown_reason"], "never_recorded");
    assert_eq!(row["args"]["wait_on_unknown_reason"], "never_recorded");
}

#[test]
fn destroy_evicts_and_a_reused_handle_starts_without_a_record() {
    let t = trace(&[
        record(1, E, S_A),
        wait(2, S_B, E),
        destroy(3, E),
        wait(4, S_B, E),
        record(5, E, S_A),
        wait(6, S_B, E),
    ]);
    assert_eq!(producer_of(&t, 2), 1);
    assert_eq!(producer_of(&t, 4), -1);
    assert_eq!(producer_of(&t, 6), 5);
    // The reused handle is a new event: a new event id, kept for its lifetime.
    let id = |corr| sync_row(&t, corr)["args"]["wait_on_cuda_event_id"].clone();
    assert_ne!(id(2), id(4));
    assert_eq!(id(4), id(6));
}

#[test]
fn a_failed_record_is_no_producer_and_a_failed_wait_keeps_its_code() {
    let failed = call_in(PID, PID, 2, Api::HipEventRecord, [E, S_A, 0], 400);
    let failed_wait = call_in(PID, PID, 3, Api::HipStreamWaitEvent, [S_B, E, 0], 1);
    let t = trace(&[record(1, E, S_A), failed, failed_wait, wait(4, S_B, E)]);
    assert_eq!(producer_of(&t, 4), 1, "the failed record at 2 is skipped");
    // The failed wait waited on nothing: its code, no dependency, no sync row.
    let rt = runtime_row(&t, 3);
    assert_eq!(rt["args"]["ret"], 1);
    assert!(
        rt["args"].get("wait_on_hip_event_record_corr_id").is_none(),
        "{rt}"
    );
    let sync_rows = events(&t)
        .iter()
        .filter(|e| e["cat"] == "cuda_sync" && e["args"]["correlation"] == 3)
        .count();
    assert_eq!(sync_rows, 0);
}

#[test]
fn a_wait_after_only_failed_records_says_they_failed() {
    const F: u64 = E + 7;
    let failed = call_in(PID, PID, 1, Api::HipEventRecord, [F, S_A, 0], 400);
    let t = trace(&[failed, wait(2, S_B, F)]);
    let rt = runtime_row(&t, 2);
    assert_eq!(rt["args"]["wait_on_hip_event_record_corr_id"], -1);
    assert_eq!(rt["args"]["wait_on_unknown_reason"], "record_failed");
}

#[test]
fn processes_never_share_handles() {
    let t = trace(&[
        call_in(1, 1, 1, Api::HipEventRecord, [E, S_A, 0], 0),
        call_in(2, 2, 2, Api::HipStreamWaitEvent, [S_B, E, 0], 0),
        call_in(1, 1, 3, Api::HipStreamWaitEvent, [S_B, E, 0], 0),
    ]);
    let by_pid = |pid: u32| {
        events(&t)
            .iter()
            .find(|e| {
                e["cat"] == "cuda_runtime" && e["pid"] == pid && e["name"] == "hipStreamWaitEvent"
            })
            .unwrap()["args"]["wait_on_hip_event_record_corr_id"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(by_pid(2), -1);
    assert_eq!(by_pid(1), 1);
}

#[test]
fn streams_belong_to_the_device_current_when_they_were_created() {
    let t = trace(&[
        call(1, Api::HipSetDevice, [1, 0, 0]),
        call(2, Api::HipStreamCreate, [S_B, 0, 0]),
        call(3, Api::HipSetDevice, [0, 0, 0]),
        call(4, Api::HipStreamSynchronize, [S_B, 0, 0]),
        call(5, Api::HipDeviceSynchronize, [0, 0, 0]),
    ]);
    let s = sync_row(&t, 4);
    assert_eq!(
        (s["name"].as_str(), s["pid"].as_i64()),
        (Some("Stream Sync"), Some(1))
    );
    assert_eq!(s["args"]["device"], 1);
    assert_eq!(s["tid"], 1_000_001, "Stream Sync has its own track");
    let d = sync_row(&t, 5);
    assert_eq!(
        (d["name"].as_str(), d["pid"].as_i64()),
        (Some("Context Sync"), Some(0))
    );
}

#[test]
fn flows_are_well_formed() {
    let t = trace(&[
        record(1, E, S_A),
        wait(2, S_B, E),
        call(3, Api::HipEventSynchronize, [E, 0, 0]),
    ]);
    let mut starts: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut ends: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for e in events(&t) {
        let key = || {
            (
                e["cat"].as_str().unwrap().to_string(),
                e["id"].as_u64().unwrap(),
            )
        };
        match e["ph"].as_str() {
            Some("s") => *starts.entry(key()).or_default() += 1,
            Some("f") => {
                assert_eq!(e["bp"], "e");
                *ends.entry(key()).or_default() += 1
            }
            _ => {}
        }
        if let Some(tid) = e["tid"].as_i64() {
            assert!(
                (0..1 << 32).contains(&tid),
                "tid {tid} out of Perfetto's range"
            );
        }
    }
    // One start and one end per arrow; two record→wait arrows leave record 1.
    assert!(starts.values().all(|&n| n == 1) && ends.values().all(|&n| n == 1));
    assert_eq!(
        starts.keys().collect::<Vec<_>>(),
        ends.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        starts.keys().filter(|(c, _)| c == "hip_sync_dep").count(),
        2
    );
    assert_eq!(starts.keys().filter(|(c, _)| c == "ac2g").count(), 2);
}

// ---- property: the resolver against a straightforward model ----
//
// The model knows each API by its name and where its event argument is, written out here
// rather than taken from the implementation's tables.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Record,
    StreamWait,
    EventWait,
    Destroy,
}

/// (API, what it does, position of its event argument), as the runtimes define them.
const APIS: &[(Api, Kind, usize)] = &[
    (Api::HipEventRecord, Kind::Record, 0),
    (Api::HipEventRecordSpt, Kind::Record, 0),
    (Api::HipEventRecordWithFlags, Kind::Record, 0),
    (Api::CudaEventRecord, Kind::Record, 0),
    (Api::CudaEventRecordWithFlagsPtsz, Kind::Record, 0),
    (Api::HipStreamWaitEvent, Kind::StreamWait, 1),
    (Api::HipStreamWaitEventSpt, Kind::StreamWait, 1),
    (Api::CudaStreamWaitEventPtsz, Kind::StreamWait, 1),
    (Api::HipEventSynchronize, Kind::EventWait, 0),
    (Api::HipEventQuery, Kind::EventWait, 0),
    (Api::CudaEventSynchronize, Kind::EventWait, 0),
    (Api::CudaEventQuery, Kind::EventWait, 0),
    (Api::HipEventDestroy, Kind::Destroy, 0),
    (Api::CudaEventDestroy, Kind::Destroy, 0),
];

/// (pid, thread, API index, event, succeeded)
fn op() -> impl Strategy<Value = (u32, u32, usize, u64, bool)> {
    (1..3u32, 0..3u32, 0..APIS.len(), 0..3u64, any::<bool>())
}

fn event_of(c: &Call) -> (Kind, u64) {
    let (_, kind, at) = APIS.iter().find(|(a, _, _)| *a == c.api).unwrap();
    (*kind, c.args[*at])
}

/// For each wait: the record it must resolve to, by the rule as written.
fn model(calls: &[Call]) -> BTreeMap<(u32, u64), i64> {
    let mut order = calls.to_vec();
    order.sort_by_key(|c| c.correlation);
    let mut latest: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for c in &order {
        let (kind, event) = event_of(c);
        let key = (c.pid, event);
        match kind {
            Kind::Record if c.ret == Some(0) => {
                latest.insert(key, c.correlation);
            }
            Kind::Destroy if c.ret == Some(0) => {
                latest.remove(&key);
            }
            // A failed wait waited on nothing: no dependency.
            Kind::StreamWait | Kind::EventWait if c.ret == Some(0) => {
                out.insert(
                    (c.pid, c.correlation),
                    latest.get(&key).map_or(-1, |&r| r as i64),
                );
            }
            _ => {}
        }
    }
    out
}

proptest! {
    #[test]
    fn resolution_matches_the_model(ops in prop::collection::vec(op(), 1..60), seed in any::<u64>()) {
        let mut calls: Vec<Call> = ops
            .iter()
            .enumerate()
            .map(|(i, &(pid, thread, api, event, ok))| {
                let (api, kind, at) = APIS[api];
                let mut args = [S_A, S_B, 0];
                args[at] = E + event;
                // Records succeed more often than not; waits and destroys fail sometimes.
                let ret = match (kind, ok || event == 0) {
                    (_, true) => 0,
                    (Kind::Record, false) => 400,
                    (_, false) => 1,
                };
                call_in(pid, pid * 100 + thread, i as u64 + 1, api, args, ret)
            })
            .collect();
        // Deliver in a random order, as per-CPU rings do.
        let mut rng = seed;
        for i in (1..calls.len()).rev() {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            calls.swap(i, (rng >> 33) as usize % (i + 1));
        }
        let want = model(&calls);
        let got: BTreeMap<(u32, u64), i64> = rows_in_any_order(&calls)
            .iter()
            .filter(|r| r.sync.is_some_and(|k| k.waits_on_event()))
            .map(|r| ((r.call.pid, r.call.correlation), r.producer.map_or(-1, |p| p.correlation as i64)))
            .collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn cuda_calls_resolve_the_same_way_and_use_kineto_cuda_names() {
    let t = trace(&[
        call(1, Api::CudaEventRecordWithFlags, [E, S_A, 0]),
        call(2, Api::CudaStreamWaitEventPtsz, [S_B, E, 0]),
        call(3, Api::CudaEventSynchronize, [E, 0, 0]),
    ]);
    let rt = runtime_row(&t, 2);
    assert_eq!(rt["name"], "cudaStreamWaitEvent_ptsz");
    assert_eq!(rt["args"]["cuda_sync_kind"], "Stream Wait Event");
    assert_eq!(rt["args"]["cuda_stream"], "0xb000");
    assert_eq!(rt["args"]["wait_on_cuda_event_record_corr_id"], 1);
    assert!(
        rt["args"]["wait_on_cuda_event_id"].is_u64(),
        "CUDA names events by id"
    );
    assert!(rt["args"].get("hip_event").is_none());
    let row = sync_row(&t, 3);
    assert_eq!(row["name"], "Event Sync");
    assert_eq!(row["args"]["wait_on_cuda_event_record_corr_id"], 1);
    assert_eq!(runtime_row(&t, 3)["args"]["cuda_event"], "0x5000");
}
