//! A Kineto trace's runtime rows against the scenario's log, field by field, with the
//! tests' own parsing: each thread's rows in correlation order are its logged calls in
//! order, by name, process, thread, handles and return code.

use std::collections::BTreeMap;

use rocsync_tests::LoggedCall;
use serde_json::Value;

use super::{
    apis::{field_prefix, has_runtime_row, is_handle, params, traced_by_default},
    by_thread,
    raw::handle,
};

/// One runtime row as the test reads it.
#[derive(Debug, PartialEq)]
pub(crate) struct Row {
    pub pid: u64,
    pub tid: u64,
    pub correlation: u64,
    /// Start, in µs from the trace's `baseTimeNanoseconds`.
    pub ts_us: f64,
    pub name: String,
    /// The return code; `None` when the row says the call was in flight.
    pub ret: Option<i64>,
    /// `(param, value)` of the handle fields the row carries (`hip_event`, `cuda_stream`).
    pub handles: Vec<(String, u64)>,
}

/// The trace's `cuda_runtime` rows (every traced call but device selection).
pub(crate) fn call_rows(trace: &Value) -> Vec<Row> {
    let mut rows: Vec<Row> = trace["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cuda_runtime")
        .map(|e| {
            let a = &e["args"];
            let name = e["name"].as_str().unwrap().to_string();
            let prefix = field_prefix(&name);
            // In name order, as `expected` sorts them.
            let handles = ["event", "stream"]
                .iter()
                .filter_map(|p| {
                    let v = a.get(format!("{prefix}_{p}"))?;
                    Some((p.to_string(), handle(v)))
                })
                .collect();
            Row {
                pid: e["pid"].as_u64().unwrap(),
                tid: e["tid"].as_u64().unwrap(),
                correlation: a["correlation"].as_u64().unwrap(),
                ts_us: e["ts"].as_f64().unwrap(),
                ret: a.get("ret").map(|r| r.as_i64().unwrap()),
                name,
                handles,
            }
        })
        .collect();
    rows.sort_by_key(|r| r.correlation);
    rows
}

/// The row a logged call must have: its name, thread and return code, and each handle
/// argument under its name.
pub(super) fn expected(l: &LoggedCall) -> (u64, String, Option<i64>, Vec<(String, u64)>) {
    let mut handles: Vec<(String, u64)> = params(&l.api)
        .iter()
        .enumerate()
        .filter(|(_, p)| is_handle(p))
        .map(|(i, p)| (p.to_string(), l.args[i]))
        .collect();
    handles.sort();
    (u64::from(l.tid), l.api.clone(), Some(l.ret), handles)
}

/// Asserts the trace's runtime rows (of process `pid`, if given) are exactly the logged
/// calls that have one, each thread's in order; returns each logged call's correlation,
/// by seq.
pub(crate) fn assert_rows_match_log(
    trace: &Value,
    pid: Option<u32>,
    logged: &[LoggedCall],
) -> BTreeMap<u64, u64> {
    let mut logged: Vec<&LoggedCall> = logged
        .iter()
        .filter(|l| traced_by_default(&l.api) && has_runtime_row(&l.api))
        .collect();
    logged.sort_by_key(|l| l.seq);
    let rows: Vec<Row> = call_rows(trace)
        .into_iter()
        .filter(|r| pid.is_none_or(|p| r.pid == u64::from(p)))
        .collect();
    assert!(!rows.is_empty(), "no runtime rows (process {pid:?})");
    let want = by_thread(logged, |l| u64::from(l.tid));
    let got = by_thread(rows, |r| r.tid);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the threads with rows"
    );
    let mut corr = BTreeMap::new();
    for (tid, w) in &want {
        let g = &got[tid];
        assert_eq!(
            g.len(),
            w.len(),
            "thread {tid}: {} rows, {} calls logged",
            g.len(),
            w.len()
        );
        for (i, (r, l)) in g.iter().zip(w).enumerate() {
            let row = (r.tid, r.name.clone(), r.ret, r.handles.clone());
            assert_eq!(row, expected(l), "thread {tid}, call {i} (seq {})", l.seq);
            corr.insert(l.seq, r.correlation);
        }
    }
    corr
}

/// Whether the trace's metadata names process `pid` `name` (how Perfetto labels it).
pub(crate) fn names_process(t: &Value, pid: &Value, name: &str) -> bool {
    t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["ph"] == "M" && e["pid"] == *pid && e["args"]["name"] == name)
}
