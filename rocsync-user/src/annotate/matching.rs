//! Which profiler runtime row is which rocsync call. Both sides see the same calls of a
//! thread in the same order; once the clocks are aligned, a row and a call of the same
//! thread and API (HIP and CUDA names alike, per-thread variants folded) are one when
//! they start within [`FINE_NS`] of each other. Matching walks each thread's sequence in
//! order, so a call is never paired twice nor out of order.

use std::collections::{HashMap, HashSet};

use rocsync_common::Op;

use super::{
    clock::{Alignment, FINE_NS},
    profile::RuntimeRow,
};
use crate::resolve::Row;

/// Profiler correlation ↔ rocsync correlation, both ways.
#[derive(Default)]
pub struct Matches {
    pub to_rocsync: HashMap<i64, u64>,
    pub to_profiler: HashMap<u64, i64>,
    /// Hooked-API rows of the profiler with no call (outside the capture, or lost).
    pub rows_unmatched: usize,
    /// Calls inside the profiler's time with no row.
    pub calls_unmatched: usize,
    /// |profiler start − aligned rocsync start| of the pairs, ns, sorted.
    pub residuals: Vec<i64>,
}

/// Pairs `rows` (one process's hooked-API rows) with `calls` (that process's resolved
/// rows) under `clock`.
pub fn pair(
    rows: &[&RuntimeRow],
    calls: &[Row],
    epoch: impl Fn(u64) -> i64,
    clock: &Alignment,
) -> Matches {
    let mut by_key: HashMap<(i64, Op), Vec<(i64, i64)>> = HashMap::new();
    for r in rows {
        if let Some(op) = r.op {
            by_key
                .entry((r.tid, op))
                .or_default()
                .push((r.start_ns, r.correlation));
        }
    }
    let mut calls_by_key: HashMap<(i64, Op), Vec<(i64, u64)>> = HashMap::new();
    for c in calls {
        let t = clock.to_profiler(epoch(c.call.enter_ns));
        calls_by_key
            .entry((c.call.tid as i64, c.call.api.op()))
            .or_default()
            .push((t, c.call.correlation));
    }
    let (lo, hi) = rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| {
        (lo.min(r.start_ns), hi.max(r.start_ns + r.dur_ns))
    });
    let ops: HashSet<Op> = by_key.keys().map(|k| k.1).collect();
    let mut m = Matches::default();
    for (key, mut ps) in by_key {
        ps.sort_unstable();
        let mut cs = calls_by_key.remove(&key).unwrap_or_default();
        cs.sort_unstable();
        let mut j = 0;
        for (p, pc) in ps {
            while j < cs.len() && cs[j].0 < p - FINE_NS {
                m.calls_unmatched += usize::from(cs[j].0 >= lo);
                j += 1;
            }
            // The nearer of this call and the next, when both are in reach.
            if j + 1 < cs.len() && (cs[j + 1].0 - p).abs() < (cs[j].0 - p).abs() {
                m.calls_unmatched += usize::from(cs[j].0 >= lo);
                j += 1;
            }
            match cs.get(j) {
                Some(&(t, rc)) if (t - p).abs() <= FINE_NS => {
                    m.to_rocsync.insert(pc, rc);
                    m.to_profiler.insert(rc, pc);
                    m.residuals.push((t - p).abs());
                    j += 1;
                }
                _ => m.rows_unmatched += 1,
            }
        }
        m.calls_unmatched += cs[j..].iter().filter(|c| c.0 <= hi).count();
    }
    // Calls of APIs the profiler writes rows for (CUPTI writes none for cudaEventDestroy).
    for ((_, op), cs) in &calls_by_key {
        if ops.contains(op) {
            m.calls_unmatched += cs.iter().filter(|c| c.0 >= lo && c.0 <= hi).count();
        }
    }
    m.residuals.sort_unstable();
    m
}
