//! The capture's calls against the scenario's log: the same calls, or (a lossy capture)
//! some of them, each thread's in order.

use std::{collections::BTreeMap, path::Path};

use rocsync_tests::LoggedCall;

use super::{apis::traced_by_default, raw::RawCall};

/// A call reduced to what the scenario can know: thread, API, arguments (integers as the
/// C `int`/`unsigned` they are), return code.
pub(crate) fn key(c: &RawCall) -> (u32, String, [u64; 3], i64) {
    (c.tid, c.api.clone(), c.args, c.ret.expect("call returned"))
}

pub(crate) fn logged_key(l: &LoggedCall) -> (u32, String, [u64; 3], i64) {
    (l.tid, l.api.clone(), l.args, l.ret)
}

/// Per thread, in call order.
pub(crate) fn by_thread<T, K: Ord>(
    items: impl IntoIterator<Item = T>,
    tid: impl Fn(&T) -> K,
) -> BTreeMap<K, Vec<T>> {
    let mut m: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for i in items {
        m.entry(tid(&i)).or_default().push(i);
    }
    m
}

/// The probed logged calls and the captured ones, each thread's in order (log seq,
/// correlation id).
type Threads = (BTreeMap<u32, Vec<LoggedCall>>, BTreeMap<u32, Vec<RawCall>>);

fn threads(logged: &[LoggedCall], mut captured: Vec<RawCall>) -> Threads {
    captured.sort_by_key(|c| c.correlation);
    let mut logged = probed(logged);
    logged.sort_by_key(|l| l.seq);
    (by_thread(logged, |l| l.tid), by_thread(captured, |c| c.tid))
}

/// Asserts the capture holds exactly the scenario's calls, each once, in each thread's
/// order.
pub(crate) fn assert_same_calls(logged: &[LoggedCall], captured: Vec<RawCall>) {
    let (want, got) = threads(logged, captured);
    let want: BTreeMap<_, Vec<_>> = want
        .into_iter()
        .map(|(t, ls)| (t, ls.iter().map(logged_key).collect()))
        .collect();
    let got: BTreeMap<_, Vec<_>> = got
        .into_iter()
        .map(|(t, cs)| (t, cs.iter().map(key).collect()))
        .collect();
    assert_eq!(got.len(), want.len(), "threads differ");
    for (tid, w) in &want {
        let g = got
            .get(tid)
            .unwrap_or_else(|| panic!("thread {tid} missing from the capture"));
        assert_eq!(
            g.len(),
            w.len(),
            "thread {tid}: {} captured, {} made",
            g.len(),
            w.len()
        );
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert_eq!(a, b, "thread {tid}, call {i}");
        }
    }
}

/// Asserts each thread's captured calls are its logged calls in order with some left
/// out (what a lossy capture may hold, never a call not made or out of order), each
/// within its logged call's span (never an entry paired with a later call's return); a
/// call whose return was lost is matched without it, and without what its return would
/// have read (a created handle: 0). Returns how many were captured.
pub(crate) fn assert_calls_within(logged: &[LoggedCall], captured: Vec<RawCall>) -> usize {
    let (want, got) = threads(logged, captured);
    for (tid, g) in &got {
        let mut w = want
            .get(tid)
            .unwrap_or_else(|| panic!("thread {tid} captured, not logged"))
            .iter();
        for (i, c) in g.iter().enumerate() {
            assert!(
                w.by_ref().any(|l| l.api == c.api
                    && args_match(&l.args, &c.args, c.ret.is_none())
                    && c.ret.is_none_or(|r| r == l.ret)
                    && within(l, c)),
                "thread {tid}, captured call {i} ({} {:?}, {} to {:?} ns) is no later logged call",
                c.api,
                c.args,
                c.enter_ns,
                c.exit_ns,
            );
        }
    }
    got.values().map(Vec::len).sum()
}

/// The captured call lies within the logged call's clock readings around it (both
/// CLOCK_MONOTONIC; a microsecond for the two readers of it), where the log has them.
fn within(l: &LoggedCall, c: &RawCall) -> bool {
    const US: u64 = 1000;
    l.after_ns == 0
        || (c.enter_ns + US >= l.before_ns && c.exit_ns.is_none_or(|x| x <= l.after_ns + US))
}

/// A captured call's arguments are the logged ones; `unreturned`, those its return would
/// have read (out-parameters) are 0 and match any.
fn args_match(logged: &[u64], captured: &[u64], unreturned: bool) -> bool {
    logged.len() == captured.len()
        && (logged.iter().zip(captured)).all(|(l, c)| l == c || (unreturned && *c == 0))
}

/// The logged calls of functions rocsync probes by default (`*GetDevice` is not).
pub(crate) fn probed(logged: &[LoggedCall]) -> Vec<LoggedCall> {
    logged
        .iter()
        .filter(|l| traced_by_default(&l.api))
        .cloned()
        .collect()
}

/// Correlation ids a raw capture declares lost.
pub(crate) fn raw_lost_ids(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| l.starts_with("{\"lost\":"))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["count"].as_u64().unwrap_or(1)
        })
        .sum()
}

/// Maps each logged call (by seq) to the captured call's correlation, aligning each
/// thread's calls in order (assert_same_calls checks they agree).
pub(crate) fn seq_to_correlation(
    logged: &[LoggedCall],
    captured: &[RawCall],
) -> BTreeMap<u64, u64> {
    let (want, got) = threads(logged, captured.to_vec());
    let mut m = BTreeMap::new();
    for (tid, ls) in want {
        for (l, c) in ls.iter().zip(&got[&tid]) {
            m.insert(l.seq, c.correlation);
        }
    }
    m
}
