//! A trace of part of a process's life (a daemon's window, a flight recorder dump) against
//! the process's log: each runtime row is the logged call whose clock readings bracket
//! its start, with its name, handles and return code; each thread's rows are an unbroken
//! run of its logged calls (a lost iteration of a loop shows, though every iteration
//! makes the same calls); and each wait resolves to the record the log says, or is
//! unresolved when that record came before the window.

use std::collections::{BTreeMap, BTreeSet};

use rocsync_tests::LoggedCall;
use serde_json::Value;

use super::{
    apis::{has_runtime_row, traced_by_default},
    by_thread, expected_edges,
    rows::call_rows,
    rows::expected,
    trace_edges,
};

/// What the window held: the seqs of the logged calls in it.
pub(crate) struct Window {
    pub seqs: BTreeSet<u64>,
}

/// Asserts the trace's rows of process `pid` are a window of `logged` (see the module);
/// returns the window.
pub(crate) fn assert_window_of_log(trace: &Value, pid: u32, logged: &[LoggedCall]) -> Window {
    let base = trace["baseTimeNanoseconds"].as_i64().unwrap();
    let offset = trace["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    let mut logged: Vec<&LoggedCall> = logged
        .iter()
        .filter(|l| traced_by_default(&l.api) && has_runtime_row(&l.api))
        .collect();
    logged.sort_by_key(|l| l.seq);
    assert!(
        logged.iter().all(|l| l.after_ns > 0),
        "the log has clock readings"
    );
    let threads = by_thread(logged.iter().copied(), |l| u64::from(l.tid));
    let rows: Vec<_> = call_rows(trace)
        .into_iter()
        .filter(|r| r.pid == u64::from(pid))
        .collect();
    assert!(!rows.is_empty(), "no rows of process {pid}");
    let mut at: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut corr = BTreeMap::new();
    for r in &rows {
        let log = threads
            .get(&r.tid)
            .unwrap_or_else(|| panic!("row of thread {} the log never saw: {r:?}", r.tid));
        // The call's entry on CLOCK_MONOTONIC, as the scenario read it around the call.
        let enter = base + (r.ts_us * 1000.0).round() as i64 - offset;
        let i = log
            .iter()
            .position(|l| l.before_ns as i64 - 1 <= enter && enter <= l.after_ns as i64 + 1)
            .unwrap_or_else(|| panic!("no logged call at {enter} ns for {r:?}"));
        let l = log[i];
        // A call in flight when the window closed has no return code yet.
        let ret = r.ret.or(Some(l.ret));
        let row = (r.tid, r.name.clone(), ret, r.handles.clone());
        assert_eq!(row, expected(l), "row {r:?} against seq {}", l.seq);
        at.entry(r.tid).or_default().push(i);
        corr.insert(l.seq, r.correlation);
    }
    for (tid, idx) in &at {
        if let Some(w) = idx.windows(2).find(|w| w[1] != w[0] + 1) {
            let seq = |i: usize| threads[tid][i].seq;
            panic!(
                "thread {tid}: the row after the log's seq {} is seq {}: calls skipped or reordered",
                seq(w[0]),
                seq(w[1])
            );
        }
    }
    let seqs: BTreeSet<u64> = corr.keys().copied().collect();
    let want: BTreeMap<u64, i64> = expected_edges(&logged.into_iter().cloned().collect::<Vec<_>>())
        .into_iter()
        .filter(|(w, _)| seqs.contains(w))
        .map(|(w, r)| {
            (
                corr[&w],
                r.and_then(|r| corr.get(&r)).map_or(-1, |&c| c as i64),
            )
        })
        .collect();
    assert_eq!(trace_edges(trace), want, "waits against the log's records");
    Window { seqs }
}
