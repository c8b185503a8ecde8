//! Which profiler runtime row is which rocsync call. Both sides see the same calls of a
//! thread in the same order; once the clocks are aligned, a row and a call of the same
//! thread and API (HIP and CUDA names alike, per-thread variants folded) are one when
//! they start within [`FINE_NS`] of each other, paired in order: the k-th row of a
//! thread and API with the (k + shift)-th call, the shift most rows agree on.

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
        // Both sides hold the same calls in the same order: the index shift most rows'
        // nearest call agrees on pairs them, even where calls are closer together than
        // the two clocks' jitter.
        let mut votes: HashMap<isize, usize> = HashMap::new();
        for (i, &(p, _)) in ps.iter().enumerate() {
            let j = cs.partition_point(|c| c.0 < p);
            for j in [j.wrapping_sub(1), j] {
                if let Some(c) = cs.get(j)
                    && (c.0 - p).abs() <= FINE_NS
                {
                    *votes.entry(j as isize - i as isize).or_default() += 1;
                }
            }
        }
        let shift = votes
            .into_iter()
            .max_by_key(|&(k, n)| (n, -k.abs()))
            .map_or(0, |(k, _)| k);
        let mut used = vec![false; cs.len()];
        for (i, &(p, pc)) in ps.iter().enumerate() {
            let j = i as isize + shift;
            match usize::try_from(j).ok().and_then(|j| Some((j, cs.get(j)?))) {
                Some((j, &(t, rc))) if (t - p).abs() <= FINE_NS => {
                    used[j] = true;
                    m.to_rocsync.insert(pc, rc);
                    m.to_profiler.insert(rc, pc);
                    m.residuals.push((t - p).abs());
                }
                _ => m.rows_unmatched += 1,
            }
        }
        m.calls_unmatched += cs
            .iter()
            .zip(&used)
            .filter(|(c, u)| !**u && c.0 >= lo && c.0 <= hi)
            .count();
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
