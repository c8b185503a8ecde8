//! The Kineto reader against rows written out by hand.
use super::*;
use serde_json::Value;

fn trace(events: Value) -> Capture {
    let t = serde_json::json!({
        "traceEvents": events,
        "rocsync": {"drops": {"lost_ids": 2, "entry_records": 0}},
    });
    read(t.to_string().as_bytes()).unwrap()
}

fn runtime(name: &str, corr: u64, tid: u64, ts: f64, args: Value) -> Value {
    let mut a = serde_json::json!({"correlation": corr});
    a.as_object_mut()
        .unwrap()
        .extend(args.as_object().unwrap().clone());
    serde_json::json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 7,
        "tid": tid, "ts": ts, "dur": 2.0, "args": a})
}

fn sync(name: &str, corr: u64) -> Value {
    serde_json::json!({"ph": "X", "cat": "cuda_sync", "name": name, "pid": 1, "tid": 2,
        "ts": 0.0, "dur": 1.0, "args": {"correlation": corr}})
}

#[test]
fn rows_past_the_bound_in_bytes_are_counted_not_kept() {
    let events: Vec<Value> = (0..5)
        .map(|i| {
            runtime(
                "hipEventRecord",
                i,
                3,
                i as f64 * 10.0,
                serde_json::json!({}),
            )
        })
        .collect();
    let t = serde_json::json!({"traceEvents": events, "rocsync": {"drops": {}}});
    // Three rows and their one name.
    let max = 3 * RUNTIME_COST + "hipEventRecord".len() + 64;
    let capture = read_within(t.to_string().as_bytes(), max as u64).unwrap();
    assert_eq!(capture.calls.len(), 3);
    let why = format!("cuda_runtime rows past the report's bound of {max} bytes held");
    assert_eq!(capture.cut, BTreeMap::from([(why, 2)]));
    assert!(capture.unusable.is_empty(), "{:?}", capture.unusable);
}

/// Names and handles of 20 KB are read as their first KiB: the calls are reported,
/// their names held once, and the cut said.
#[test]
fn long_strings_are_cut_and_names_held_once() {
    let long = "x".repeat(20_000);
    let events: Vec<Value> = (0..3)
        .map(|i| {
            let args = serde_json::json!({"hip_stream": format!("0x{long}")});
            runtime(&format!("hipStreamSynchronize{long}"), i, 3, 0.0, args)
        })
        .collect();
    let c = trace(Value::Array(events));
    assert_eq!(c.calls.len(), 3);
    assert_eq!(c.calls[0].api.len(), crate::read::input::MAX_STRING);
    assert!(Rc::ptr_eq(&c.calls[0].api, &c.calls[2].api), "held once");
    assert_eq!(c.calls[0].stream, None, "no handle is 20 KB");
    assert_eq!(c.cut[&stream::cut_reason()], 6);
}

#[test]
fn a_wait_gets_its_producer_from_the_record_row() {
    let c = trace(serde_json::json!([
        runtime(
            "hipEventRecord",
            1,
            10,
            100.0,
            serde_json::json!({"hip_stream": "0xa"})
        ),
        runtime(
            "hipStreamWaitEvent",
            2,
            11,
            110.0,
            serde_json::json!({
            "hip_stream": "0xb", "wait_on_stream": "0xa",
            "wait_on_hip_event_record_corr_id": 1})
        ),
        sync("Stream Wait Event", 2),
    ]));
    assert!(c.unusable.is_empty(), "{:?}", c.unusable);
    let w = &c.calls[1];
    assert_eq!((w.device, w.stream), (Some(1), Some(0xb)));
    assert_eq!(w.start_ns, 10_000, "since the first call");
    let p = w.producer.unwrap();
    assert_eq!((p.correlation, p.stream, p.tid), (1, 0xa, 10));
    assert_eq!(p.record_ns, 1000, "the middle of the record call");
    assert_eq!(c.losses["lost_ids"], 2);
}

#[test]
fn what_cannot_be_used_is_counted_not_dropped() {
    let c = trace(serde_json::json!([
        // No dur.
        {"ph": "X", "cat": "cuda_runtime", "name": "hipEventRecord", "pid": 7, "tid": 1,
         "ts": 1.0, "args": {"correlation": 1}},
        // Its producer's row is not in the trace.
        runtime("hipEventSynchronize", 2, 1, 5.0, serde_json::json!({
            "wait_on_stream": "0xa", "wait_on_hip_event_record_corr_id": 9})),
        sync("Event Sync", 2),
        // Unresolved, with the writer's reason.
        runtime("hipEventSynchronize", 3, 1, 9.0, serde_json::json!({
            "wait_on_hip_event_record_corr_id": -1,
            "wait_on_unknown_reason": "never_recorded"})),
        sync("Event Sync", 3),
        runtime("hipStreamSynchronize", 4, 1, 12.0, serde_json::json!({"in_flight": true})),
    ]));
    let want: BTreeMap<String, u64> = [
        ("call still in flight at the end (no duration)", 1),
        (
            "cuda_runtime row without name, correlation, pid, tid, ts or dur",
            1,
        ),
        ("producer record row missing from the trace", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(c.unusable, want);
    assert_eq!(c.calls.len(), 2);
    assert_eq!(c.calls[0].producer, None);
    assert_eq!(c.calls[0].unresolved, None, "resolved, its row missing");
    assert_eq!(c.calls[1].unresolved.as_deref(), Some("never_recorded"));
}
